#!/bin/bash
# netns_rails.sh <build dir>: two rails against one on the same pods in one run. Two pods with
# two ranks each and two rails (hpn0, hpn1; tests/netns/pods.sh), every rail shaped to
# HPN_RATE (default 1gbit) so the links, not this machine's CPUs, are the bottleneck. Runs
# all_reduce_perf at 64 MiB with ACCL_SOCKET_RAILS=1 and =2, interleaved ROUNDS times (default
# 3), and prints the busbw of each and the ratio. Target: two rails >= 1.8x one rail.
# A benchmark, not a test (needs root).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: netns_rails.sh <build dir>}" && pwd)
HPN_RATE="${HPN_RATE:-1gbit}"
. "$HERE/../tests/netns/pods.sh"
. "$HERE/../tests/netns/run_world.sh"
why=$(pods_unavailable)
[ -z "$why" ] || { echo "cannot run: $why"; exit 77; }
LOGS=$(mktemp -d /tmp/accl-rails-bw.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
pods_up 2 && pods_add_rail || exit 1

busbw() {  # busbw (GB/s) of the 64 MiB row with $1 rails, best of out-of-place and in-place
  local dir="$LOGS/r$1.$2"
  run_world 2 "$dir" 300 ACCL_SOCKET_RAILS="$1" -- "$BUILD/perf/all_reduce_perf" -b 64M -e 64M -n "${ITERS:-4}" -w 1 -c 0
  wait_world || { echo "all-reduce failed" >&2; tail "$dir"/rank*.log >&2; exit 1; }
  awk '/^ +67108864/ {print ($8 > $12 ? $8 : $12)}' "$dir/rank0.log"
}

echo "2 pods x 2 ranks, every rail shaped to $HPN_RATE, all-reduce 64 MiB, busbw GB/s"
printf '| round | 1 rail | 2 rails | 2 rails / 1 rail |\n|---|---|---|---|\n'
for round in $(seq "${ROUNDS:-3}"); do
  one=$(busbw 1 "$round")
  two=$(busbw 2 "$round")
  printf '| %s | %s | %s | %s |\n' "$round" "$one" "$two" "$(awk -v a="$two" -v b="$one" 'BEGIN {printf "%.2fx", a / b}')"
done
