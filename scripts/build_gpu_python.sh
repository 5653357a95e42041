#!/usr/bin/env bash
# Builds trident's Python module for the GPU machine's Python (docs/GPU.md), whose version this
# machine may not have: libtrident.so with the cuda backend and ONNX (no oneDNN), the pybind11
# module compiled against that Python's headers, and the libraries that machine lacks (protobuf,
# ONNX's classes, libgomp, libjpeg 62, libpng) copied beside them with a $ORIGIN run path, into
# build-gpu-python/package/trident/: put build-gpu-python/package on PYTHONPATH there.
#
#   scripts/build_gpu_python.sh PYTHON_INCLUDE_DIR
#
# PYTHON_INCLUDE_DIR is the target Python's include folder (named pythonX.Y, holding Python.h),
# e.g. copied from that machine: python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])".
# The C++ runtime is the machine's own libstdc++ (GCC 12's, GLIBCXX_3.4.30, on Ubuntu 22.04);
# every file shipped is checked to need no glibc newer than 2.35.
set -euo pipefail
cd "$(dirname "$0")/.."
include=${1:?usage: scripts/build_gpu_python.sh PYTHON_INCLUDE_DIR}
include=$(readlink -f "$include")
[ -f "$include/Python.h" ] || { echo "build_gpu_python: $include holds no Python.h" >&2; exit 1; }
abi=$(basename "$include" | sed -n 's/^python\([0-9]\)\.\([0-9][0-9]*\)$/\1\2/p')
[ -n "$abi" ] || { echo "build_gpu_python: $include is not named pythonX.Y" >&2; exit 1; }
build=${TRIDENT_GPU_PYTHON_BUILD_DIR:-build-gpu-python}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTRIDENT_WITH_CUDA=ON -DTRIDENT_WITH_ONEDNN=OFF \
  -DTRIDENT_WITH_ONNX=ON -DTRIDENT_WITH_MPI=OFF -DTRIDENT_NATIVE=OFF -DTRIDENT_PORTABLE_BINARY=OFF \
  -DTRIDENT_BUILD_BENCH=OFF -DTRIDENT_BUILD_TESTS=OFF -DTRIDENT_BUILD_PYTHON=OFF \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN' >/dev/null
cmake --build "$build" -j"$(nproc)" --target trident_library

# pybind11 from PyPI: Debian's 2.10 predates Python 3.12.
pybind11="$build/pybind11"
if [ ! -f "$pybind11/pybind11/include/pybind11/pybind11.h" ]; then
  python=python3
  [ -x .venv/bin/python ] && python=.venv/bin/python  # scripts/setup.sh's; Debian's python3 refuses pip
  "$python" -m pip install --quiet --no-deps --target "$pybind11" 'pybind11>=2.12' ||
    { echo "build_gpu_python: could not install pybind11 from PyPI into $pybind11" >&2; exit 1; }
fi

package="$build/package/trident"
rm -rf "$build/package"
mkdir -p "$package"
library=$(readlink -f "$build/libtrident.so")
soname=$(objdump -p "$library" | awk '/SONAME/ {print $2}')
cp "$library" "$package/$soname"
version=$(sed -n 's/^project(trident VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
g++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -DTRIDENT_VERSION="\"$version\"" -Iinclude -I"$include" \
  -I"$pybind11/pybind11/include" python/src/*.cpp "$package/$soname" -Wl,-rpath,'$ORIGIN' -o "$package/_trident.cpython-$abi-x86_64-linux-gnu.so"
cp python/trident/*.py "$package/"

# The libraries the GPU machine lacks or has under another soname, as this machine resolves them.
for name in libprotobuf.so.32 libonnx_proto.so.1 libgomp.so.1 libjpeg.so.62 libpng16.so.16; do
  path=$(ldd "$library" | awk -v n="$name" '$1 == n {print $3}')
  [ -n "$path" ] && cp -L "$path" "$package/$name"
done
strip --strip-unneeded "$package"/*.so*
scripts/check_glibc_2_35.sh "$package"/*.so*
du -sh "$package"
