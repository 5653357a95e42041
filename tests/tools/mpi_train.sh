#!/bin/sh
# `mpirun -np 2 trident train` end to end (registered by tests/CMakeLists.txt, labels cpu and
# mpi). Usage: mpi_train.sh MODE TRIDENT MPIEXEC WORKDIR, MODE one of
#   run     two ranks train and save; rank 0 alone reports, logs and writes the checkpoint,
#           which one process then resumes (a world size of its own)
#   fails   rank 1 stops with an Error: both end within the time limit, non-zero, with its sentence
#   killed  rank 1 is killed by the kernel (CPU-time limit) mid-run: the job ends, non-zero
set -u
mode=$1 trident=$2 mpiexec=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$work/out.txt"; echo "--- stderr"; cat "$work/err.txt"; exit 1; }
base="train --model fmnist_cnn --train-limit 256 --test-limit 64 --batch 16 --threads 1 --thread-policy fixed"
train="$base --synthetic"
limit=240  # seconds; a hang is a failure, not a stuck CI job

case $mode in
run)
  timeout $limit "$mpiexec" -np 2 "$trident" $train --epochs 1 --save "$work/ck.safetensors" --log "$work/log.jsonl" \
    >"$work/out.txt" 2>"$work/err.txt" || fail "two ranks exited with $?"
  [ "$(grep -c '^training ' "$work/err.txt")" = 1 ] || fail "expected one 'training' line (rank 0's)"
  grep -q '2 processes' "$work/err.txt" || fail "the start line does not say 2 processes"
  [ "$(grep -c 'accuracy' "$work/out.txt")" = 1 ] || fail "expected one result line (rank 0's)"
  grep -q 'on 64 images' "$work/out.txt" || fail "the evaluation did not count all 64 images over both ranks"
  [ "$(wc -l <"$work/log.jsonl")" = 1 ] || fail "expected one --log line"
  [ -s "$work/ck.safetensors" ] || fail "no checkpoint"
  timeout $limit "$trident" train --resume "$work/ck.safetensors" --epochs 2 --synthetic --train-limit 256 --test-limit 64 \
    --threads 1 >"$work/out.txt" 2>"$work/err.txt" || fail "one process did not resume the two ranks' checkpoint"
  grep -q 'batch 32' "$work/err.txt" || fail "one process should resume with the global batch of 32"
  grep -q 'resuming from' "$work/err.txt" || fail "no resume line"
  ;;
fails)
  timeout $limit "$mpiexec" -np 1 "$trident" $train --epochs 3 : -np 1 "$trident" $base --epochs 3 --data "$work/missing" \
    >"$work/out.txt" 2>"$work/err.txt"
  rc=$?
  [ $rc -ne 0 ] || fail "the job succeeded although rank 1 failed"
  [ $rc -ne 124 ] || fail "the job hung (killed after $limit s)"
  grep -q "trident: error: rank 1 of 2: .*missing" "$work/err.txt" || fail "rank 1's sentence is missing"
  ;;
killed)
  timeout $limit "$mpiexec" -np 1 "$trident" $train --epochs 1000 : -np 1 sh -c "ulimit -t 1; exec \"$trident\" $train --epochs 1000" \
    >"$work/out.txt" 2>"$work/err.txt"
  rc=$?
  [ $rc -ne 0 ] || fail "the job succeeded although rank 1 was killed"
  [ $rc -ne 124 ] || fail "the job hung (killed after $limit s)"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo "ok: $mode"
