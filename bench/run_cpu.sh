#!/usr/bin/env bash
# Runs trident's CPU benchmarks and the PyTorch CPU baseline side by side in one run: the CBR
# layer (fused vs unfused, train and infer) and a Fashion-MNIST epoch, as JSON lines on stdout
# (and in $1 if given), then the ratios. Usage: bench/run_cpu.sh [results.jsonl]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"
backend="${BACKEND:-cpu}"
threads="${THREADS:-2}"
repeat="${REPEAT:-3}"          # Fashion-MNIST epochs per implementation and variant
iters="${ITERS:-20}"           # timed steps per CBR variant
shape="${CBR_SHAPE:-32,56,56,64,64}"  # N,H,W,C,K
train_limit="${TRAIN_LIMIT:-0}"  # 0: the full 60000 training images (smaller: a quick smoke run)
if [[ -n "${PYTHON:-}" ]]; then
  python="$PYTHON"
elif [[ -x /tmp/torchenv/bin/python ]]; then
  python=/tmp/torchenv/bin/python
else
  python=python3
fi
out="${1:-}"
results="$(mktemp)"
trap 'rm -f "$results"' EXIT

# Build what is missing or stale (only the two binaries used here); NO_BUILD=1 skips this
# when both binaries exist (e.g. to measure a build while the sources are being edited).
if [[ "${NO_BUILD:-0}" != 1 || ! -x "$build/trident" || ! -x "$build/trident_bench_cbr" ]]; then
  [[ -f "$build/CMakeCache.txt" ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$build" -j"${JOBS:-2}" --target trident trident_bench_cbr >&2
fi

emit() { tee -a "$results"; }

# Record how busy the machine was: other work on the same cores (a build, tests) makes OpenMP
# threads wait on each other and can slow a step down many times over.
THREADS="$threads" BACKEND="$backend" python3 -c '
import json, os
print(json.dumps({"bench": "machine", "nproc": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
                  "threads": int(os.environ["THREADS"]), "backend": os.environ["BACKEND"]}))
' | emit
if python3 -c 'import os, sys; sys.exit(os.getloadavg()[0] < 0.5 * os.cpu_count())'; then
  echo "# warning: the machine is busy (load average $(cut -d" " -f1 /proc/loadavg)); numbers will be noisy" >&2
fi

echo "# [1/4] trident CBR layer: backend $backend, shape $shape, $threads threads" >&2
"$build/trident_bench_cbr" --backend "$backend" --shape "$shape" --threads "$threads" \
  --iters "$iters" --warmup 3 | emit

IFS=, read -r n h w c k <<<"$shape"
torch_ok=1
echo "# [2/4] PyTorch CBR layer ($python)" >&2
if ! "$python" "$here/pytorch_cpu.py" --what cbr --threads "$threads" --n "$n" --h "$h" --w "$w" \
    --c "$c" --k "$k" --iters "$iters" --warmup 3 | emit; then
  torch_ok=0
  echo "# PyTorch baseline skipped (see the message above); set PYTHON to an interpreter with torch" >&2
fi

echo "# [3/4] trident Fashion-MNIST epoch x$repeat (fused, unfused)" >&2
BACKEND="$backend" THREADS="$threads" REPEAT="$repeat" TRAIN_LIMIT="$train_limit" "$here/bench_epoch.sh" "$build/trident" | emit

if [[ $torch_ok == 1 ]]; then
  echo "# [4/4] PyTorch Fashion-MNIST epoch x$repeat" >&2
  for ((r = 1; r <= repeat; ++r)); do
    "$python" "$here/pytorch_cpu.py" --what epoch --threads "$threads" --seed "$r" \
      --train-limit "$train_limit" | emit
  done
fi

summary="$(python3 - "$results" <<'PY'
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(xs):
    return statistics.median(xs) if xs else None
def ratio(a, b):
    return a / b if a and b else None

s = {"bench": "summary"}
ep = {}
for r in rows:
    if r["bench"] == "fmnist_epoch":
        ep.setdefault((r["impl"], r.get("variant", "eager")), []).append(r["seconds"])
for (impl, variant), secs in sorted(ep.items()):
    s[f"epoch_s_{impl}_{variant}"] = med(secs)
tf, tu, pt = (s.get("epoch_s_trident_fused"), s.get("epoch_s_trident_unfused"),
              s.get("epoch_s_pytorch_eager"))
s["epoch_trident_fused_over_pytorch"] = ratio(tf, pt)
s["epoch_trident_unfused_over_pytorch"] = ratio(tu, pt)
s["epoch_trident_unfused_over_fused"] = ratio(tu, tf)
cbr = {(r["impl"] if "impl" in r else "trident", r["mode"], r["variant"]): r
       for r in rows if r["bench"] == "cbr_layer"}
for r in rows:
    if r["bench"] == "cbr_layer_ratios":
        for key in ("train_step", "train_layer", "infer_step", "infer_layer"):
            if key in r:
                s[f"cbr_{key}_unfused_over_fused"] = r[key]
for mode in ("train", "infer"):
    f, p = cbr.get(("trident", mode, "fused")), cbr.get(("pytorch", mode, "eager"))
    if f and p:
        s[f"cbr_{mode}_trident_fused_over_pytorch"] = ratio(f["median_ms"], p["median_ms"])
print(json.dumps(s))
PY
)"
echo "$summary" | emit
[[ -n "$out" ]] && cp "$results" "$out"
python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
print("# --- ratios (> 1: the first is slower) ---")
for k, v in s.items():
    if k != "bench":
        print(f"# {k:45s} {v:.3f}" if isinstance(v, float) else f"# {k:45s} {v}")
' <<<"$summary"
