#!/usr/bin/env bash
# trident alone on the GPU, for each case MODEL:MODE:BATCH: one JSON line with the defaults
# (cuDNN plans autotuned, each step replayed as a recorded CUDA graph), one with
# --no-cuda-graph and one with --no-autotune, each with the per-op profile of three more
# steps. Usage: bench/trident_profile.sh TRIDENT CASES [PRECISION]
set -euo pipefail
trident=${1:?trident binary}; cases=${2:?cases, e.g. resnet50:train:256}; precision=${3:-fp16}
for c in ${cases//,/ }; do
  IFS=: read -r model mode batch <<<"$c"
  for variant in "" --no-cuda-graph --no-autotune; do
    "$trident" bench --device cuda --precision "$precision" --model "$model" --mode "$mode" --batch "$batch" \
      --iterations 20 --warmup 5 --profile 3 --json $variant
  done
done
