#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for trident and builds it: installs the Debian packages
# the project needs (only those missing, so a second run is quick), then configures and
# builds into build/. Safe to run again at any time.
#
#   scripts/setup.sh           what training and inference need
#   scripts/setup.sh --tests   also PyTorch as a user installs it (PyPI's torch, torchvision and
#                              onnxscript, about 5.5 GB, in .venv-torch/), which the tests export
#                              models from and compare with
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
for arg in "$@"; do
  case $arg in
    --tests) with_tests=1 ;;
    *) echo "setup: unknown argument '$arg' (the only one is --tests)" >&2; exit 2 ;;
  esac
done

packages=(
  cmake g++ make pkg-config
  ccache                     # compiler cache: `pip install .` and a second setup reuse this build's objects
  libgtest-dev googletest    # tests
  libcli11-dev               # command line
  nlohmann-json3-dev         # JSON output
  zlib1g-dev                 # gzip-compressed IDX files
  libjpeg62-turbo-dev libpng-dev  # image folders: JPEG (libjpeg-turbo) and PNG decoding
  libdnnl-dev                # oneDNN: the fast CPU backend
  ocl-icd-opencl-dev         # dnnl-config.cmake requires OpenCL headers; libdnnl-dev only recommends them
  libonnx-dev libprotobuf-dev protobuf-compiler  # ONNX import
  libopenmpi-dev openmpi-bin # data-parallel training under mpirun (Open MPI; mpicxx is what CMake's FindMPI asks)
  python3 python3-venv       # .venv for the ONNX test models (onnx, onnxruntime)
  python3-dev pybind11-dev   # the Python module (python/)
  dataset-fashion-mnist      # the default training data, in /usr/share/datasets/fashion-mnist
)

# The libFuzzer build (fuzz/README.md) needs clang, its runtime and its OpenMP: installed only on request,
# with TRIDENT_FUZZ=1, which also builds the fuzz targets into build-fuzz/.
if [ "${TRIDENT_FUZZ:-0}" = 1 ]; then
  packages+=(clang libclang-rt-dev libomp-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Project-local Python for tests/onnx/make_models.py, bench/data_pipeline.sh and the Python
# module's tests: pinned onnx, onnxruntime, numpy and Pillow, and scikit-build-core (with the one
# dependency the others do not bring) so that the test of `pip install .` builds offline; from
# PyPI into .venv (git-ignored); skipped when those exact versions are already there.
py_pins=(onnx==1.17.0 onnxruntime==1.20.1 numpy==2.1.3 Pillow==11.0.0 scikit-build-core==1.1.2 pathspec==1.1.1)
if ! .venv/bin/python - "${py_pins[@]}" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version
sys.exit(any(version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))
PY
then
  echo "setup: creating .venv with ${py_pins[*]}"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check "${py_pins[@]}"
fi

# PyTorch as its users have it, for the tests that export torchvision's models with both of its
# ONNX exporters, fine-tune from its weights and load trident's back (tests/torch/,
# tests/python/test_from_torch.py): PyPI's wheels, pinned, in their own .venv-torch (git-ignored)
# so the pins of .venv stay as they are. PyPI's torch brings its CUDA libraries and runs on the CPU.
torch_pins=(torch==2.15.0 torchvision==0.29.2 onnxscript==0.7.2 onnx==1.23.2 numpy==2.4.6)
if [ "$with_tests" = 1 ] && ! .venv-torch/bin/python - "${torch_pins[@]}" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version
sys.exit(any(version(n).split("+")[0] != v for n, v in (p.split("==") for p in sys.argv[1:])))
PY
then
  echo "setup: creating .venv-torch with PyPI's ${torch_pins[*]}"
  python3 -m venv .venv-torch
  .venv-torch/bin/pip install -q --disable-pip-version-check --no-cache-dir "${torch_pins[@]}"
fi

# Headers the GPU backend builds against, from PyPI wheels into .deps/ (git-ignored; pinned;
# cmake/TridentCuda.cmake looks there). Only where a CUDA compiler is.
# headers_from_wheel PACKAGE==VERSION PLATFORM DEST WHEEL_INCLUDE_DIR: the wheel's include folder as DEST/include.
headers_from_wheel() {
  local tmp
  tmp=$(mktemp -d)
  .venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 --platform "$2" -d "$tmp" "$1"
  .venv/bin/python -m zipfile -e "$tmp"/*.whl "$tmp/wheel"
  mkdir -p "$3"
  rm -rf "$3/include" && cp -r "$tmp/wheel/$4" "$3/include"
  rm -rf "$tmp"
}
if { command -v nvcc || [ -x /usr/local/cuda/bin/nvcc ]; } >/dev/null 2>&1; then
  # cudnn-frontend: the fused convolution graphs.
  cfe_version=1.23.0
  cfe_dir=.deps/cudnn-frontend-$cfe_version
  if [ ! -f "$cfe_dir/include/cudnn_frontend.h" ]; then
    echo "setup: fetching cudnn-frontend $cfe_version headers into $cfe_dir"
    headers_from_wheel "nvidia-cudnn-frontend==$cfe_version" manylinux_2_28_x86_64 "$cfe_dir" include
  fi
  # nvJPEG: decoding training images on the GPU (the library is opened at run time, so a binary
  # starts where it is missing).
  nvjpeg_version=13.0.0.40
  nvjpeg_dir=.deps/nvjpeg-$nvjpeg_version
  if [ ! -f "$nvjpeg_dir/include/nvjpeg.h" ]; then
    echo "setup: fetching the nvJPEG $nvjpeg_version header into $nvjpeg_dir"
    headers_from_wheel "nvidia-nvjpeg==$nvjpeg_version" manylinux2014_x86_64 "$nvjpeg_dir" nvidia/cu13/include
  fi
fi

build_dir=${TRIDENT_BUILD_DIR:-build}
# Through ccache (before TRIDENT_CMAKE_ARGS, which may name another launcher): the Python
# package's build (`pip install .`, also a test) compiles the same sources with the same flags,
# and a second run of this script after an edit recompiles only what changed.
launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" ${TRIDENT_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
echo "setup: built $build_dir/trident"

if [ "${TRIDENT_FUZZ:-0}" = 1 ]; then
  CXX=clang++ cmake -S . -B build-fuzz -DTRIDENT_BUILD_FUZZERS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j"$(nproc)"
  echo "setup: built the fuzz targets in build-fuzz/fuzz"
fi
