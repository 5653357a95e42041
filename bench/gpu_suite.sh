#!/usr/bin/env bash
# Everything to run on the H200 test machine in one go, each step's log in OUT: the GPU tests,
# the round trip of weights with PyTorch, the Python module's cuda tests (where
# build-gpu-python/package was sent too), the default network trained on the GPU, and the
# side-by-side benchmarks against PyTorch.
# Usage (on the GPU machine, from the repository root, after scripts/build_gpu.sh here):
#   bench/gpu_suite.sh build-gpu OUT [FASHION_MNIST_DIR] [STEPS]
# STEPS (default "tests,train,bench") picks what runs; "finetune" adds a torchvision ResNet-18
# exported to ONNX and trained by trident and by PyTorch on one recipe (needs the Fashion-MNIST
# directory; bench/finetune_vs_pytorch.py); "profile" adds trident alone on each
# case with and without CUDA-graph replay and plan autotuning, and where the time goes per op. Every step runs even if one fails;
# the exit status says whether any failed.
set -uo pipefail
build=${1:?build dir}; out=${2:?output dir}; data=${3:-}; steps=${4:-tests,train,bench}
mkdir -p "$out"
# cuDNN 9.19 inside PyTorch's environment comes before the older system copy (docs/GPU.md).
for d in /opt/torch/.venv/lib/python3.*/site-packages/nvidia/cudnn/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
done
# NCCL for the data-parallel and sync-BN tests: PyTorch's copy (trident loads libnccl.so.2).
for d in /opt/torch/.venv/lib/python3.*/site-packages/nvidia/nccl/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
status=0
step() {  # step NAME TIMEOUT_S COMMAND...: runs it with a time limit, logs to OUT/NAME.log
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*" | tee -a "$out/summary.txt"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
  [ $rc -eq 0 ] || status=1
  tail -n 25 "$out/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/summary.txt" 2>&1
if [[ $steps == *tests* ]]; then
  # Strict fp32 in the tests (no TF32), so fp32 results are checked with the f32 row.
  export NVIDIA_TF32_OVERRIDE=0
  step gpu_tests 200 "$build/tests/gpu_tests" --gtest_output="xml:$out/gpu_tests.xml"
  # Weights to and from PyTorch itself, with the machine's torch and torchvision (fp32, no TF32).
  step torch_round_trip 300 python3 tests/torch/round_trip.py "$build/trident" "$out/torch_round_trip" --device cuda
  # The Python module built for this machine's Python (scripts/build_gpu_python.sh), where it was sent.
  package=${TRIDENT_GPU_PYTHON_PACKAGE:-build-gpu-python/package}
  if [ -f "$package/trident/__init__.py" ]; then
    package=$(readlink -f "$package")
    step python_cuda 200 env PYTHONPATH="$package" TRIDENT_BINARY="$build/trident" \
      TRIDENT_FASHION_MNIST="${data:-/usr/share/datasets/fashion-mnist}" python3 tests/python/test_cuda.py -v
    step python_from_torch 300 env PYTHONPATH="$package" TRIDENT_TEST_DEVICES=cpu_ref,cuda \
      python3 tests/torch/from_torch.py "$out/python_from_torch" -v
  fi
  unset NVIDIA_TF32_OVERRIDE
fi
if [[ $steps == *train* && -n $data ]]; then
  step train_cuda_fp32 120 "$build/trident" train --device cuda --data "$data" --json
  step train_cuda_fp16 120 "$build/trident" train --device cuda --precision fp16 --data "$data" --json
fi
if [[ $steps == *finetune* && -n $data ]]; then
  step finetune "${TRIDENT_FINETUNE_SECONDS:-400}" python3 bench/finetune_vs_pytorch.py --trident "$build/trident" \
    --idx "$data" --out "$out/finetune" --device cuda --precision fp16 --epochs 3 --batch 256 --seeds 1,2 --workers 15
fi
if [[ $steps == *profile* ]]; then
  step profile 400 bench/trident_profile.sh "$build/trident" \
    "${TRIDENT_BENCH_CASES:-cbr-layer:train:256,cbr-layer:infer:256,resnet50:train:256,vgg16_bn:train:128,resnet50:infer:256}"
fi
if [[ $steps == *bench* ]]; then
  step vs_pytorch "${TRIDENT_BENCH_SECONDS:-420}" python3 bench/vs_pytorch.py --trident "$build/trident" --unfused \
    --precision "${TRIDENT_BENCH_PRECISION:-fp16}" --iterations "${TRIDENT_BENCH_ITERATIONS:-20}" \
    --cases "${TRIDENT_BENCH_CASES:-cbr-layer:train:256,cbr-layer:infer:256,resnet50:train:256,vgg16_bn:train:128,resnet50:infer:256}" \
    --variants "${TRIDENT_BENCH_VARIANTS:-eager-amp,compile-amp,reduce-overhead-amp}"
fi
exit $status
