#!/usr/bin/env bash
# Throughput when other processes compete for the cores: a Fashion-MNIST training run and
# inference of the same network, for trident (cpu backend) and PyTorch CPU (bench/pytorch_cpu.py:
# the same network, batch and threads), alone and next to 1 and 2 busy-loop processes, in one
# run. Prints JSON lines, then each engine's throughput under load as a fraction of its own
# uncontended throughput. Usage: bench/contention.sh [results.jsonl]
#
# Knobs (environment): THREADS (2), BATCH (64), TRAIN_IMAGES (6400), INFER_ITERS (1000),
# REPEAT (2: runs per engine, mode and load; the median is used), BUSY ("0 1 2"),
# POLICY (trident's --thread-policy, adaptive), TRIDENT (build/trident), PYTHON (an interpreter
# with torch: default /tmp/torchenv/bin/python if present, else python3), DATA (Fashion-MNIST).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads="${THREADS:-2}"
batch="${BATCH:-64}"
train_images="${TRAIN_IMAGES:-6400}"
infer_iters="${INFER_ITERS:-1000}"
repeat="${REPEAT:-2}"
busy_levels="${BUSY:-0 1 2}"
policy="${POLICY:-adaptive}"
trident="${TRIDENT:-$root/build/trident}"
data="${DATA:-/usr/share/datasets/fashion-mnist}"
if [[ -n "${PYTHON:-}" ]]; then python="$PYTHON"
elif [[ -x /tmp/torchenv/bin/python ]]; then python=/tmp/torchenv/bin/python
else python=python3; fi
out="${1:-}"

[[ -x "$trident" ]] || { echo "contention.sh: $trident not found; build first (scripts/setup.sh)" >&2; exit 1; }
have_torch=1
"$python" -c 'import torch, numpy' 2>/dev/null || {
  have_torch=0
  echo "# contention.sh: torch is not importable with $python; measuring trident alone" >&2
}

results="$(mktemp)"
busy_pids=()
stop_busy() {
  for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${busy_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  busy_pids=()
}
trap 'stop_busy; rm -f "$results"' EXIT
start_busy() {  # start_busy N: N processes that spin on a core each
  for ((k = 0; k < $1; k++)); do
    bash -c 'while :; do :; done' &
    busy_pids+=($!)
  done
}

emit() { echo "$1" | tee -a "$results"; }
line() {  # line ENGINE MODE BUSY IMAGES_PER_S
  emit "{\"bench\":\"contention\",\"engine\":\"$1\",\"mode\":\"$2\",\"busy\":$3,\"threads\":$threads,\"batch\":$batch,\"images_per_s\":$4}"
}
field() { python3 -c 'import json,sys; k=sys.argv[1]
for l in sys.stdin:
    l=l.strip()
    if l.startswith("{"):
        d=json.loads(l)
        if k in d: print(d[k]); break' "$1"; }

trident_train() {
  "$trident" train --data "$data" --epochs 1 --batch "$batch" --train-limit "$train_images" \
    --test-limit "$batch" --threads "$threads" --thread-policy "$policy" --json 2>/dev/null |
    grep '"event":"epoch"' | field images_per_second
}
trident_infer() {
  "$trident" infer --model fmnist_cnn --batch "$batch" --iterations "$infer_iters" --warmup 10 \
    --threads "$threads" --thread-policy "$policy" --topk 0 --json 2>/dev/null | field throughput_images_per_s
}
torch_train() {
  "$python" "$root/bench/pytorch_cpu.py" --what epoch --data "$data" --batch "$batch" \
    --train-limit "$train_images" --threads "$threads" 2>/dev/null | field images_per_s
}
torch_infer() {
  "$python" "$root/bench/pytorch_cpu.py" --what infer --batch "$batch" --iters "$infer_iters" \
    --warmup 10 --threads "$threads" 2>/dev/null | field images_per_s
}

python3 -c "import json, os; print(json.dumps({'bench': 'machine', 'nproc': os.cpu_count(),
  'loadavg_1m': os.getloadavg()[0], 'threads': $threads, 'policy': '$policy'}))" | tee -a "$results"
engines=(trident)
((have_torch)) && engines+=(pytorch)
for busy in $busy_levels; do
  start_busy "$busy"
  for ((r = 0; r < repeat; r++)); do
    for mode in train infer; do
      for engine in "${engines[@]}"; do  # engines alternate, so both see the same machine
        case $engine in trident) fn=trident_$mode ;; pytorch) fn=torch_$mode ;; esac
        v="$($fn)"
        [[ -n "$v" ]] || { echo "contention.sh: $engine $mode printed no throughput" >&2; exit 1; }
        line "$engine" "$mode" "$busy" "$v"
      done
    done
  done
  stop_busy
done

# Medians per (engine, mode, busy); fractions of the same engine's busy=0 figure; trident's
# fraction over PyTorch's.
python3 - "$results" <<'PY' | tee -a "$results"
import json, statistics, sys
runs = {}
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d.get("bench") == "contention":
        runs.setdefault((d["engine"], d["mode"], d["busy"]), []).append(d["images_per_s"])
med = {k: statistics.median(v) for k, v in runs.items()}
for (engine, mode, busy), v in sorted(med.items()):
    alone = med.get((engine, mode, 0))
    if busy == 0 or not alone:
        continue
    frac = v / alone
    out = {"bench": "contention_fraction", "engine": engine, "mode": mode, "busy": busy,
           "images_per_s": round(v, 1), "alone_images_per_s": round(alone, 1), "fraction": round(frac, 3)}
    other = "pytorch" if engine == "trident" else None
    if other and (other, mode, busy) in med and (other, mode, 0) in med:
        out["fraction_over_pytorch"] = round(frac / (med[(other, mode, busy)] / med[(other, mode, 0)]), 2)
    print(json.dumps(out))
if ("trident", "train", 0) in med and ("pytorch", "train", 0) in med:
    print(json.dumps({"bench": "contention_uncontended", "mode": "train",
                      "trident_time_over_pytorch": round(med[("pytorch", "train", 0)] / med[("trident", "train", 0)], 3)}))
PY
[[ -z "$out" ]] || cp "$results" "$out"
