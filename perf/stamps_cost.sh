#!/bin/bash
# stamps_cost.sh <build dir>: what the call stamps (ACCL_CHECK_MISMATCH=1, the default) cost
# against ACCL_CHECK_MISMATCH=0, one accl-run launch per (round, np, mode), on and off
# interleaved with the order flipping each round (ROUNDS, default 8): 8 B and 64 KiB all-reduce at
# np 2 and 4, 3000 iterations each. Prints min and median over the rounds (a shared machine only
# ever adds time, so the minima are the closer figure). A benchmark, not a test.
BUILD=$(cd "${1:?usage: stamps_cost.sh <build dir>}" && pwd)
cd "$BUILD" || exit 1
ROUNDS=${ROUNDS:-8}
declare -A T
for round in $(seq $ROUNDS); do
  for np in 2 4; do
    if [ $((round % 2)) = 1 ]; then modes="1 0"; else modes="0 1"; fi
    for mode in $modes; do
      out=$(ACCL_CHECK_MISMATCH=$mode timeout 120 ./perf/accl-run -np $np ./perf/all_reduce_perf -b 8 -e 64K -f 8192 -n 3000 -w 300 -c 0 2>&1)
      while read -r size oop ip; do T[$np.$size.$mode]+="$oop/$ip "; done < <(echo "$out" | awk '/^ +[0-9]+ +[0-9]+ +float/ {print $1, $6, $10}')
    done
  done
done
printf '%3s %6s %-6s %s\n' np bytes stamps "min / median out-of-place, min / median in-place (us)"
# min and median of a list of numbers (sort, not gawk's asort: Debian's awk is mawk)
stats() { sort -g | awk '{v[NR]=$1} END {printf "%.2f / %.2f", v[1], v[int((NR+1)/2)]}'; }
for np in 2 4; do for size in 8 65536; do for mode in 0 1; do
  runs=$(echo "${T[$np.$size.$mode]:-}" | tr ' ' '\n' | grep /)
  [ -n "$runs" ] || { printf '%3s %6s %-6s no run\n' $np $size $([ $mode = 1 ] && echo on || echo off); continue; }
  printf '%3s %6s %-6s %s   %s  (%d runs)\n' $np $size $([ $mode = 1 ] && echo on || echo off) \
    "$(echo "$runs" | cut -d/ -f1 | stats)" "$(echo "$runs" | cut -d/ -f2 | stats)" "$(echo "$runs" | wc -l)"
done; done; done
