#!/usr/bin/env bash
# Builds bench/nvjpeg_stream_wait.cu with the CUDA toolkit's nvcc, nvJPEG and CUPTI and runs it on
# a GPU machine, once with the driver's default number of hardware queues and once with the 32
# that trident sets (backends/cuda/cuda_context.cpp). Needs a folder of JPEGs.
#   bench/nvjpeg_stream_wait.sh DIR [N=256] [VARIANTS]
set -euo pipefail
dir=${1:?usage: bench/nvjpeg_stream_wait.sh DIR [N] [VARIANTS]}
n=${2:-256}
variants=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN:-/tmp/nvjpeg_stream_wait}
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc -O2 -arch=sm_90 "$here/nvjpeg_stream_wait.cu" -o "$bin" -I"$cuda/include" -I"$cuda/extras/CUPTI/include" \
  -L"$cuda/lib64" -L"$cuda/extras/CUPTI/lib64" -lnvjpeg -lcupti
env -u CUDA_DEVICE_MAX_CONNECTIONS "$bin" "$dir" "$n" $variants
CUDA_DEVICE_MAX_CONNECTIONS=32 "$bin" "$dir" "$n" $variants
