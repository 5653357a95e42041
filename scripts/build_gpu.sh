#!/usr/bin/env bash
# Builds the GPU binaries into build-gpu/ so that they start on an H200 machine with an older C
# library and without oneDNN, protobuf or GoogleTest (docs/GPU.md): CUDA backend only, sm_90,
# C++ runtime and OpenMP linked statically, stripped. Run scripts/setup.sh once first (it
# fetches the cudnn-frontend and nvJPEG headers). Then send build-gpu/ and run build-gpu/tests/gpu_tests there.
# TRIDENT_GPU_MPI=ON links this machine's libmpi for data-parallel runs under mpirun there; the
# binaries then need an Open MPI with libmpi.so.40 on that machine's library path (docs/GPU.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TRIDENT_GPU_BUILD_DIR:-build-gpu}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DTRIDENT_WITH_CUDA=ON -DTRIDENT_WITH_ONEDNN=OFF \
  -DTRIDENT_WITH_ONNX=ON -DTRIDENT_WITH_MPI="${TRIDENT_GPU_MPI:-AUTO}" -DTRIDENT_NATIVE=OFF -DTRIDENT_PORTABLE_BINARY=ON -DTRIDENT_BUILD_BENCH=ON >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target trident gpu_tests trident_bench_data
# --preserve-dates: a stripped binary must not look newer than the libraries it was linked from.
strip --preserve-dates "$build_dir/trident" "$build_dir/tests/gpu_tests" "$build_dir/trident_bench_data"
# A symbol from glibc 2.36 or newer would stop the binary from starting on glibc 2.35.
scripts/check_glibc_2_35.sh "$build_dir/trident" "$build_dir/tests/gpu_tests" "$build_dir/trident_bench_data"
du -sh "$build_dir/trident" "$build_dir/tests/gpu_tests" "$build_dir/trident_bench_data"
