#!/bin/sh
# The structure rules of docs/ARCHITECTURE.md ("Rules that keep it simple"), checked on src/:
# - layering: a folder includes its own layer and lower ones only. Layers, lowest first:
#   core → ir → ops → passes, plan → backends → frontend → runtime → api;
# - size: no source file over 600 lines.
# Prints each breach and fails if there is one.
src=${1:?usage: structure_check.sh SRC_DIR}
[ -d "$src" ] || { echo "structure_check.sh: $src is not a folder"; exit 2; }
max_lines=600

rank() {
  case $1 in
    core|portable) echo 0 ;;
    ir) echo 1 ;;
    ops) echo 2 ;;
    passes|plan) echo 3 ;;
    backends) echo 4 ;;
    frontend) echo 5 ;;
    runtime) echo 6 ;;
    api) echo 7 ;;
    *) echo "" ;;
  esac
}

bad=0
arrows=0
files=0
for file in $(cd "$src" && find . -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sed 's|^\./||' | sort); do
  files=$((files + 1))
  lines=$(wc -l < "$src/$file")
  if [ "$lines" -gt "$max_lines" ]; then
    echo "$file has $lines lines, more than $max_lines: split it by purpose"
    bad=$((bad + 1))
  fi
  from=${file%%/*}
  from_rank=$(rank "$from")
  if [ -z "$from_rank" ]; then
    echo "$file: folder '$from' has no layer in the rule (docs/ARCHITECTURE.md)"
    bad=$((bad + 1))
    continue
  fi
  for to in $(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)/.*|\1|p' "$src/$file" | sort -u); do
    to_rank=$(rank "$to")
    [ -n "$to_rank" ] || continue  # a header beside the file, or outside src/
    arrows=$((arrows + 1))
    if [ "$to_rank" -gt "$from_rank" ]; then
      echo "$file includes $to/, a higher layer than $from/"
      bad=$((bad + 1))
    fi
  done
done
echo "$files files and $arrows folder arrows checked: $bad breaches"
[ "$bad" -eq 0 ]
