#!/usr/bin/env bash
# Refuses (exit 1, naming the symbols) any of the given binaries or shared objects that needs a
# glibc newer than 2.35, the C library of the GPU machines (docs/GPU.md): such a file does not
# start there. Shared by scripts/build_gpu.sh and scripts/build_gpu_python.sh.
#   scripts/check_glibc_2_35.sh FILE...
set -uo pipefail
status=0
for f in "$@"; do
  # The whole symbol table read first: `objdump | grep -q` under pipefail fails when grep stops
  # early and objdump dies of SIGPIPE, which would let a bad binary through.
  symbols=$(objdump -T "$f") || { echo "$f: objdump cannot read it" >&2; status=1; continue; }
  newer=$(grep -E 'GLIBC_2\.(3[6-9]|[4-9][0-9])' <<<"$symbols")
  if [ -n "$newer" ]; then
    echo "$f needs a glibc newer than 2.35:" >&2
    echo "$newer" >&2
    status=1
  fi
done
exit $status
