#!/bin/sh
# `mpirun -np 2 trident train` end to end (registered by tests/CMakeLists.txt, labels cpu and
# mpi). Usage: mpi_train.sh MODE TRIDENT MPIEXEC WORKDIR, MODE one of
#   run     two ranks train and save; rank 0 alone reports, logs and writes the checkpoint,
#           which one process then resumes (a world size of its own)
#   fails   rank 1 stops with an Error: both end within the time limit, non-zero, with its sentence
#   killed  rank 1 is killed by the kernel (CPU-time limit) mid-run: the job ends, non-zero
#   sync_bn two ranks train with --sync-bn and save; the checkpoint records it, so one process
#           resumes it with sync-BN (a no-op there, said in a notice) and refuses to resume a
#           checkpoint without it under --sync-bn;
#           --bn-group: groups of 1 train and are kept by a resume; without --sync-bn, or a
#           size that does not divide the processes, a sentence
#   bench   `mpirun -np 2 trident bench`: rank 0 alone reports, with the images/s per process and
#           the scaling efficiency against the same step without collectives, with --sync-bn too
#           (refused in one process); --mode infer is refused
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
sync_bn)
  timeout $limit "$mpiexec" -np 2 "$trident" $train --epochs 1 --sync-bn --save "$work/ck.safetensors" \
    >"$work/out.txt" 2>"$work/err.txt" || fail "two ranks with --sync-bn exited with $?"
  grep -q 'notice: --sync-bn' "$work/err.txt" && fail "two ranks must not call --sync-bn a no-op"
  timeout $limit "$trident" train --resume "$work/ck.safetensors" --epochs 2 --synthetic --train-limit 256 --test-limit 64 \
    --threads 1 >"$work/out.txt" 2>"$work/err.txt" || fail "one process did not resume the sync-BN checkpoint"
  grep -q 'notice: --sync-bn has no effect in one process' "$work/err.txt" || fail "the resumed run did not keep sync-BN"
  timeout $limit "$mpiexec" -np 2 "$trident" $train --epochs 1 --save "$work/plain.safetensors" \
    >"$work/out.txt" 2>"$work/err.txt" || fail "two ranks without --sync-bn exited with $?"
  timeout $limit "$trident" train --resume "$work/plain.safetensors" --sync-bn --epochs 2 --synthetic --train-limit 256 \
    --test-limit 64 --threads 1 >"$work/out.txt" 2>"$work/err.txt" && fail "--sync-bn resumed a checkpoint trained without it"
  grep -q 'trident: error: --sync-bn differs from the checkpoint' "$work/err.txt" || fail "no sentence for the --sync-bn mismatch"
  timeout $limit "$mpiexec" -np 2 "$trident" $train --epochs 1 --sync-bn --bn-group 1 --save "$work/group.safetensors" \
    >"$work/out.txt" 2>"$work/err.txt" || fail "two ranks with --bn-group 1 exited with $?"
  timeout $limit "$trident" train --resume "$work/group.safetensors" --bn-group 2 --epochs 2 --synthetic --train-limit 256 \
    --test-limit 64 --threads 1 >"$work/out.txt" 2>"$work/err.txt" && fail "--bn-group 2 resumed a run of groups of 1"
  grep -q 'trident: error: --bn-group differs from the checkpoint' "$work/err.txt" || fail "no sentence for the --bn-group mismatch"
  timeout $limit "$mpiexec" -np 2 "$trident" $train --epochs 1 --bn-group 2 >"$work/out.txt" 2>"$work/err.txt" \
    && fail "--bn-group was accepted without --sync-bn"
  grep -q 'it needs --sync-bn' "$work/err.txt" || fail "no sentence for --bn-group without --sync-bn"
  timeout $limit "$mpiexec" -np 2 "$trident" $train --epochs 1 --sync-bn --bn-group 3 >"$work/out.txt" 2>"$work/err.txt" \
    && fail "--bn-group 3 was accepted for 2 processes"
  grep -q 'does not divide the 2 processes' "$work/err.txt" || fail "no sentence for a group size that does not divide"
  ;;
bench)
  bench="bench --model fmnist_cnn --batch 8 --iterations 3 --warmup 1 --threads 1 --thread-policy fixed"
  timeout $limit "$mpiexec" -np 2 "$trident" $bench >"$work/out.txt" 2>"$work/err.txt" || fail "two ranks exited with $?"
  [ "$(grep -c 'images/s with the steps back to back' "$work/out.txt")" = 1 ] || fail "expected rank 0's report alone"
  grep -Eq '^data parallel over 2 ranks: [0-9.]+ images/s per process, [0-9.]+ in all; scaling efficiency [0-9.]+% against the same step without collectives \([0-9.]+ images/s\)$' \
    "$work/out.txt" || fail "no data-parallel line"
  timeout $limit "$mpiexec" -np 2 "$trident" $bench --json >"$work/out.txt" 2>"$work/err.txt" || fail "--json exited with $?"
  [ "$(wc -l <"$work/out.txt")" = 1 ] || fail "expected one JSON line"
  grep -q '"world_size":2' "$work/out.txt" && grep -q '"scaling_efficiency":' "$work/out.txt" || fail "the JSON lacks the world"
  timeout $limit "$mpiexec" -np 2 "$trident" $bench --sync-bn >"$work/out.txt" 2>"$work/err.txt" || fail "--sync-bn exited with $?"
  grep -Eq '^data parallel over 2 ranks: .*, batchnorm statistics over all ranks \(--sync-bn\)$' "$work/out.txt" \
    || fail "no data-parallel line with sync-BN"
  timeout $limit "$trident" $bench --sync-bn >"$work/out.txt" 2>"$work/err.txt" && fail "--sync-bn ran in one process"
  grep -q 'in one process it is plain batchnorm' "$work/err.txt" || fail "no sentence for --sync-bn in one process"
  timeout $limit "$mpiexec" -np 2 "$trident" $bench --mode infer >"$work/out.txt" 2>"$work/err.txt" && fail "infer ran under mpirun"
  grep -q 'under mpirun, bench times data-parallel training' "$work/err.txt" || fail "no sentence for --mode infer"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo "ok: $mode"
