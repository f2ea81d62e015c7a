#!/bin/bash
# netns_rails.sh <build dir>: two rails against one on the same pods in one run. Two pods with
# two ranks each and two rails (hpn0, hpn1; tests/netns/pods.sh), every rail shaped to
# HPN_RATE (default 1gbit) so the links, not this machine's CPUs, are the bottleneck. Runs
# all_reduce_perf at 64 MiB with ACCL_SOCKET_RAILS=1 and =2, interleaved ROUNDS times (default
# 3), and prints the busbw of each and the ratio. Target: two rails >= 1.8x one rail.
# Then one run with two rails in which hpn1 goes down in pod 1 after DOWN_AFTER rows and stays
# down (ACCL_RAIL_TIMEOUT=FO_TIMEOUT, default 1000 ms): -n 1, so every time column (out-of-place,
# then in-place, FO_ROWS rows) is one timed iteration, and -c 0, so no untimed checking
# iteration runs between them (exact results under failover: tests/netns/rail_failover_test.sh);
# the one that begins as the link goes
# down is the failover iteration (the slowest one after it is shown too), a normal one is the
# median of those before, and the ones after run on one rail and compare with the one-rail
# rate above. Targets: failover
# iteration <= 3x a normal one; after it >= 0.9x the one-rail rate. A benchmark, not a test
# (needs root).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: netns_rails.sh <build dir>}" && pwd)
HPN_RATE="${HPN_RATE:-1gbit}"
. "$HERE/../tests/netns/pods.sh"
. "$HERE/../tests/netns/run_world.sh"
why=$(pods_unavailable)
[ -z "$why" ] || { echo "cannot run: $why"; exit 77; }
LOGS=$(mktemp -d /tmp/accl-rails-bw.XXXXXX)
trap 'pods_down; [ -n "${KEEP_LOGS:-}" ] && echo "logs kept in $LOGS" || rm -rf "$LOGS"' EXIT
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
ONES=""
for round in $(seq "${ROUNDS:-3}"); do
  one=$(busbw 1 "$round")
  two=$(busbw 2 "$round")
  ONES="$ONES $one"
  printf '| %s | %s | %s | %s |\n' "$round" "$one" "$two" "$(awk -v a="$two" -v b="$one" 'BEGIN {printf "%.2fx", a / b}')"
done
one_rail=$(echo $ONES | awk '{for (i = 1; i <= NF; i++) s += $i; printf "%.3f", s / NF}')

# Failover: hpn1 down in pod 1 after DOWN_AFTER rows, for good.
dir="$LOGS/failover"
run_world 2 "$dir" 400 ACCL_SOCKET_RAILS=2 ACCL_RAIL_TIMEOUT="${FO_TIMEOUT:-1000}" ACCL_RAIL_RETRY_SEC=100000 \
  NCCL_DEBUG=WARN NCCL_DEBUG_FILE="$dir/warn.%h.%p" -- \
  "$BUILD/perf/all_reduce_perf" -b 64M -e 64M -n 1 -w 1 -c 0 -N "${FO_ROWS:-12}"
# Whole rows only: a row's out-of-place half is printed before its in-place iteration runs.
rows_now() { local n; n=$(awk '/^ +67108864/ && NF == 13' "$dir/rank0.log" 2>/dev/null | wc -l); echo "${n:-0}"; }
# The wall clock at which each row completes (WALL[row], ms), polled every 20 ms: the harness
# does untimed work between timed iterations, and a stall that falls there shows only here.
declare -A WALL
last=0
start_ms=$(date +%s%3N)
down_ms=""
while kill -0 "${WORLD_PIDS[0]}" 2>/dev/null; do
  now=$(rows_now)
  if [ "$now" != "$last" ]; then
    WALL[$now]=$(($(date +%s%3N) - start_ms))
    last=$now
    if [ -z "$down_ms" ] && [ "$now" -ge "${DOWN_AFTER:-4}" ]; then
      ip -n "$(pod 1)" link set hpn1 down
      down_ms=$(($(date +%s%3N) - start_ms))
    fi
  fi
  sleep 0.02
done
wait_world || { echo "failover run failed" >&2; tail "$dir"/rank*.log >&2; cat "$dir"/warn.* >&2; exit 1; }
echo
echo "hpn1 down in pod 1 after row ${DOWN_AFTER:-4} (ACCL_RAIL_TIMEOUT=${FO_TIMEOUT:-1000} ms); one iteration per column, rank 0"
printf '| row | out-of-place ms | in-place ms |\n|---|---|---|\n'
awk '/^ +67108864/ {n++; printf "| %d | %.0f | %.0f |\n", n, $6 / 1000, $10 / 1000}' "$dir/rank0.log"
awk -v one="$one_rail" -v down="${DOWN_AFTER:-4}" '
  /^ +67108864/ {t[++k] = $6; t[++k] = $10}
  END {
    # Iterations 1..2*down ran before the link went down (the first row warms up); the link
    # went down as iteration 2*down+1 began.
    for (i = 3; i <= 2 * down; i++) v[++cnt] = t[i]
    for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
    normal = cnt % 2 ? v[(cnt + 1) / 2] : (v[cnt / 2] + v[cnt / 2 + 1]) / 2
    fo = 2 * down + 1
    worst = fo
    for (i = fo; i <= k; i++) if (t[i] > t[worst]) worst = i
    for (i = fo + 1; i <= k; i++) { after += t[i]; na++ }
    after /= na
    # busbw of a 64 MiB all-reduce over 4 ranks: 2 * 3/4 * 64 MiB / time.
    bw = 2 * 0.75 * 67108864 / (after / 1e6) / 1e9
    printf "normal iteration %.0f ms; failover iteration (%d) %.0f ms = %.2fx normal; slowest after the link went down (%d) %.0f ms = %.2fx; after it %.0f ms = %.3f GB/s busbw = %.2fx the one-rail rate (%.3f)\n",
           normal / 1000, fo, t[fo] / 1000, t[fo] / normal, worst, t[worst] / 1000, t[worst] / normal, after / 1000, bw, bw / one, one
  }' "$dir/rank0.log"
rows=$last
down=${DOWN_AFTER:-4}
echo "wall clock per row (two timed iterations plus the harness's untimed work), hpn1 down at +${down_ms} ms:"
line=""
for r in $(seq 2 "$rows"); do line="$line $((WALL[$r] - WALL[$((r - 1))]))"; done
echo "  rows 2..$rows (ms):$line"
echo "$line" | awk -v down="$down" '{
  # Field i is row i+1. Rows 2..down: two rails; row down+1: the link went down as it began;
  # the rows after it: one rail.
  for (i = 1; i <= down - 1; i++) two[++n2] = $i
  fo = $(down)
  for (i = down + 1; i <= NF; i++) one[++n1] = $i
  for (i = 1; i <= n2; i++) for (j = i + 1; j <= n2; j++) if (two[j] < two[i]) { x = two[i]; two[i] = two[j]; two[j] = x }
  for (i = 1; i <= n1; i++) for (j = i + 1; j <= n1; j++) if (one[j] < one[i]) { x = one[i]; one[i] = one[j]; one[j] = x }
  t2 = two[int((n2 + 1) / 2)]; t1 = one[int((n1 + 1) / 2)]
  printf "  row with the failure %d ms; median two-rail row %d ms, one-rail row %d ms: the failure cost %d ms beyond a one-rail row\n", fo, t2, t1, fo - t1
}'

grep -h "lost:\|now on rail" "$dir"/warn.* | head -n 4 | sed 's/^/    /'
