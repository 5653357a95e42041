#!/usr/bin/env bash
# Builds bench/nvjpeg_stream_wait.cu with nvcc against nvJPEG and CUPTI and runs it on a GPU
# machine, once with the driver's default number of hardware queues and once with the 32 that
# trident sets (backends/cuda/cuda_context.cpp). Needs a folder of JPEGs. nvjpeg.h comes from the
# toolkit or from what scripts/setup.sh fetched into .deps/; the libraries (libnvjpeg.so.13,
# libcupti.so.13) from the toolkit, a Python's nvidia wheels, or NVJPEG_LIB / CUPTI_LIB folders.
#   bench/nvjpeg_stream_wait.sh DIR [N=256] [VARIANTS]
set -euo pipefail
dir=${1:?usage: bench/nvjpeg_stream_wait.sh DIR [N] [VARIANTS]}
n=${2:-256}
variants=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN:-/tmp/nvjpeg_stream_wait}
cuda=${CUDA_HOME:-/usr/local/cuda}

wheels=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
# The first folder of the candidates that holds library $1.
folder_of() {
  local name=$1
  shift
  for d in "$@"; do
    if [ -f "$d/$name" ]; then
      echo "$d"
      return 0
    fi
  done
  echo "no $name found (set NVJPEG_LIB or CUPTI_LIB to its folder)" >&2
  return 1
}
candidates() { for w in $wheels; do echo "$w/nvidia/cu13/lib $w/nvidia/$1/lib"; done; }
nvjpeg_lib=$(folder_of libnvjpeg.so.13 ${NVJPEG_LIB:-} "$cuda/lib64" $(candidates nvjpeg))
cupti_lib=$(folder_of libcupti.so.13 ${CUPTI_LIB:-} "$cuda/lib64" "$cuda/extras/CUPTI/lib64" $(candidates cuda_cupti))
includes=(-I"$cuda/include" -I"$cuda/extras/CUPTI/include")
for d in "$here"/../.deps/nvjpeg-*/include; do
  if [ -f "$d/nvjpeg.h" ]; then includes+=(-I"$d"); fi
done
nvcc -O2 -arch=sm_90 "$here/nvjpeg_stream_wait.cu" -o "$bin" "${includes[@]}" \
  -L"$nvjpeg_lib" -L"$cupti_lib" -l:libnvjpeg.so.13 -l:libcupti.so.13 \
  -Xlinker -rpath,"$nvjpeg_lib" -Xlinker -rpath,"$cupti_lib"
env -u CUDA_DEVICE_MAX_CONNECTIONS "$bin" "$dir" "$n" $variants
CUDA_DEVICE_MAX_CONNECTIONS=32 "$bin" "$dir" "$n" $variants
