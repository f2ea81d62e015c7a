#!/bin/sh
# Prints issue 14's table: elements of a 4-process float all-reduce whose bits differ from the
# sum in rank order, for default / NCCL_ALGO=Ring / NCCL_ALGO=Tree. Pass ACCL_DETERMINISTIC=1
# in the environment to check the deterministic mode (every cell must be 0).
#   scripts/determinism-table.sh [build-dir] [nranks] [count...]
set -eu
build=${1:-build}
np=${2:-4}
[ $# -ge 2 ] && shift 2 || shift $#
counts=${*:-1000 131101 4194304}
run() {  # $1 = NCCL_ALGO value or "" for the default
  if [ -n "$1" ]; then
    NCCL_ALGO=$1 "$build/perf/accl-run" -np "$np" "$build/tools/accl-determinism-check" $counts
  else
    env -u NCCL_ALGO "$build/perf/accl-run" -np "$np" "$build/tools/accl-determinism-check" $counts
  fi | sed -n 's/.*: \([0-9]*\) differ$/\1/p'
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run "" >"$tmp/default"
run Ring >"$tmp/ring"
run Tree >"$tmp/tree"
echo "ACCL_DETERMINISTIC=${ACCL_DETERMINISTIC:-0}, $np processes, float sum, elements differing from the rank-order sum"
echo
echo "| count | default | \`NCCL_ALGO=Ring\` | \`NCCL_ALGO=Tree\` |"
echo "|---|---|---|---|"
i=1
for c in $counts; do
  echo "| $c | $(sed -n ${i}p "$tmp/default") | $(sed -n ${i}p "$tmp/ring") | $(sed -n ${i}p "$tmp/tree") |"
  i=$((i + 1))
done
