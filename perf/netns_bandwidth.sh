#!/bin/bash
# netns_bandwidth.sh <build dir>: ACCL's socket transport against raw TCP on the same link in
# the same run. Two pods (tests/netns/pods.sh), hpn0 shaped to HPN_RATE (default 4gbit) so the
# link, not this machine's CPUs, is the bottleneck. Measures a plain one-stream TCP transfer
# pod0 -> pod1 over hpn0 (accl-tcp-stream), then all_reduce_perf at 64 MiB with one rank per
# pod, and prints busbw / raw. Target: >= 90%. A benchmark, not a test (needs root).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: netns_bandwidth.sh <build dir>}" && pwd)
. "$HERE/../tests/netns/pods.sh"
. "$HERE/../tests/netns/run_world.sh"
why=$(pods_unavailable)
[ -z "$why" ] || { echo "cannot run: $why"; exit 77; }
LOGS=$(mktemp -d /tmp/accl-netbw.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
pods_up 2 || exit 1

port=$((NEXT_PORT + 100))
in_pod 1 "$BUILD/tools/accl-tcp-stream" --listen "$(pod_hpn_ip 1):$port" >"$LOGS/raw.log" 2>&1 &
sleep 0.5
in_pod 0 "$BUILD/tools/accl-tcp-stream" --send "$(pod_hpn_ip 1):$port" --seconds "${RAW_SECONDS:-4}"
wait
raw=$(sed -n 's/.*= \([0-9.]*\) GB\/s.*/\1/p' "$LOGS/raw.log")
cat "$LOGS/raw.log"

run_world 1 "$LOGS/ar" 120 -- "$BUILD/perf/all_reduce_perf" -b 64M -e 64M -n "${ITERS:-10}" -w 2 -c 0
wait_world || { echo "all-reduce failed"; tail "$LOGS"/ar/rank*.log; exit 1; }
grep -E '^ +67108864' "$LOGS/ar/rank0.log"
# Columns: size count type redop root time algbw busbw #wrong (out-of-place), then in-place.
busbw=$(awk '/^ +67108864/ {print ($8 > $12 ? $8 : $12)}' "$LOGS/ar/rank0.log")
echo "link hpn0 shaped to ${HPN_RATE}: raw TCP ${raw} GB/s, ACCL all-reduce busbw ${busbw} GB/s at 64 MiB" \
     "= $(awk -v a="$busbw" -v r="$raw" 'BEGIN {printf "%.0f%%", 100 * a / r}') of raw"
