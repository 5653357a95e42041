#!/usr/bin/env bash
# Benchmark: one Fashion-MNIST training epoch with the trident CLI, fused and with the
# training fusion pass turned off (--disable-pass fuse_conv_bn_relu), as JSON lines on stdout.
# Usage: bench/bench_epoch.sh [path/to/trident]
#   env: BACKEND (cpu), THREADS (2), BATCH (64), REPEAT (1), TRAIN_LIMIT (0: all 60000 images)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
trident="${1:-$here/../build-bench/trident}"
backend="${BACKEND:-cpu}"
threads="${THREADS:-2}"
batch="${BATCH:-64}"
repeat="${REPEAT:-1}"
train_limit="${TRAIN_LIMIT:-0}"
data="${DATA:-/usr/share/datasets/fashion-mnist}"

if [[ ! -x "$trident" ]]; then
  echo "bench_epoch.sh: no trident binary at $trident (build it: cmake --build build-bench --target trident)" >&2
  exit 1
fi

# The CLI validates --backend against the backends it knows; if it does not accept ours yet,
# say so and run on its default (the JSON line records the backend that actually ran).
backend_args=(--backend "$backend")
if ! "$trident" train --backend "$backend" --help >/dev/null 2>&1; then
  echo "bench_epoch.sh: warning: this trident does not accept --backend $backend; using its default backend" >&2
  backend_args=()
fi

run_one() {  # $1 variant, $2 repeat index, rest: extra CLI flags
  local variant="$1" rep="$2"
  shift 2
  local out
  out="$("$trident" train --epochs 1 --batch "$batch" --threads "$threads" --json --data "$data" \
          --train-limit "$train_limit" --test-limit 1024 "${backend_args[@]}" "$@" 2>/dev/null)"
  VARIANT="$variant" REP="$rep" python3 -c '
import json, os, sys
start = epoch = None
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    ev = json.loads(line)
    if ev.get("event") == "start":
        start = ev
    elif ev.get("event") == "epoch":
        epoch = ev
if not start or not epoch:
    sys.exit("bench_epoch.sh: trident printed no start/epoch events")
print(json.dumps({"bench": "fmnist_epoch", "impl": "trident", "variant": os.environ["VARIANT"],
                  "backend": start["backend"], "threads": start["threads"], "batch": start["batch"],
                  "repeat": int(os.environ["REP"]), "images": start["train_images"],
                  "seconds": epoch["seconds"], "images_per_s": epoch["images_per_second"],
                  "loss": epoch["loss"], "accuracy": epoch["accuracy"]}))
' <<<"$out"
}

# Fused and unfused alternate, so slow drift on the machine hits both alike.
for ((r = 1; r <= repeat; ++r)); do
  run_one fused "$r"
  run_one unfused "$r" --disable-pass fuse_conv_bn_relu
done
