#!/bin/bash
# net_plugin_pods.sh <build dir>: the net plugins across two pods (network namespaces, 1 rank
# each, so every byte crosses the pods' hpn0 link). For the built-in socket transport, our TCP
# test plugin built for ABI v6, v8 and v11, and libnccl-net-accl.so loaded through
# NCCL_NET_PLUGIN: every collective of the perf harness with data checks (-c 1, 8 B .. 4 MiB),
# a check that the plugin named in the log carried it over hpn0, and then all-reduce busbw at
# 64 MiB for each, interleaved over BW_ROUNDS rounds (default 1; the best round is what to
# compare, the machine is shared). Exit 77 (skipped) where pods cannot be built.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: net_plugin_pods.sh <build dir>}" && pwd)
. "$HERE/pods.sh"
. "$HERE/run_world.sh"

why=$(pods_unavailable)
if [ -n "$why" ]; then
  echo "SKIP: $why"
  exit 77
fi
for f in all_reduce_perf lib/libnccl-net-testtcp-v6.so lib/libnccl-net-accl.so; do
  [ -e "$BUILD/perf/$f" ] || [ -e "$BUILD/$f" ] || { echo "FAIL: $f not built"; exit 1; }
done
LOGS=$(mktemp -d /tmp/accl-netplugin.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
pods_up 2 || { echo "FAIL: could not build the pods"; exit 1; }

FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }

# module label -> environment (NCCL_NET makes a plugin that fails to load an error, not a fallback)
module_env() {
  case $1 in
    builtin) echo "NCCL_NET_PLUGIN=none" ;;
    testtcp-v6 | testtcp-v8 | testtcp-v11)
      echo "NCCL_NET_PLUGIN=$BUILD/lib/libnccl-net-$1.so NCCL_NET=TestTCP TCPNET_IFNAME=hpn0" ;;
    accl) echo "LD_LIBRARY_PATH=$BUILD/lib NCCL_NET_PLUGIN=accl NCCL_NET=Socket" ;;
  esac
}
expected_line() {
  case $1 in
    builtin) echo "NET/Socket: internal Socket" ;;
    testtcp-v6) echo "(ncclNetPlugin_v6), device 0 (hpn0" ;;
    testtcp-v8) echo "(ncclNetPlugin_v8), device 0 (hpn0" ;;
    testtcp-v11) echo "(ncclNetPlugin_v11), device 0 (hpn0" ;;
    accl) echo "libnccl-net-accl.so (ncclNetPlugin_v11), device 0 (hpn0" ;;
  esac
}
MODULES="builtin testtcp-v6 testtcp-v8 testtcp-v11 accl"
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv"

hpn_tx() { echo $(($(pod_tx_bytes 0 hpn0) + $(pod_tx_bytes 1 hpn0))); }

echo "== correctness: every collective, 8 B .. 4 MiB, data checked, 2 pods x 1 rank =="
printf '%-12s %-16s %-8s %s\n' module collective hpn0_MB result
for m in $MODULES; do
  for coll in $COLLS; do
    dir="$LOGS/$m.$coll"
    before=$(hpn_tx)
    # shellcheck disable=SC2046
    run_world 1 "$dir" 60 $(module_env "$m") NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET -- \
      "$BUILD/perf/${coll}_perf" -b 8 -e 4M -f 8 -n 2 -w 1 -c 1
    result=PASS
    if ! wait_world; then
      result=FAIL
    elif ! grep -q "Out of bounds values : 0 OK" "$dir/rank0.log"; then
      result=FAIL
    elif ! grep -qF "$(expected_line "$m")" "$dir/rank0.log"; then
      result="FAIL(module)"
    fi
    mb=$((($(hpn_tx) - before) / 1000000))
    [ "$result" = PASS ] && [ "$mb" -lt 20 ] && result="FAIL(not over hpn0)"
    printf '%-12s %-16s %-8s %s\n' "$m" "$coll" "$mb" "$result"
    if [ "$result" != PASS ]; then
      fail "$m $coll"
      grep -E "WARN|error|NET/" "$dir"/rank*.log | head -n 6 | sed 's/^/    /'
    fi
  done
done

BW_ROUNDS=${BW_ROUNDS:-1}
echo "== all-reduce busbw (GB/s) at 64 MiB over hpn0 (${HPN_RATE}), $BW_ROUNDS round(s) interleaved =="
declare -A BW
for round in $(seq "$BW_ROUNDS"); do
  for m in $MODULES; do
    dir="$LOGS/bw.$m.$round"
    # shellcheck disable=SC2046
    run_world 1 "$dir" 120 $(module_env "$m") -- "$BUILD/perf/all_reduce_perf" -b 64M -e 64M -n 5 -w 2 -c 0
    if wait_world; then
      BW[$m.$round]=$(sed -n 's/^# Avg bus bandwidth *: *//p' "$dir/rank0.log")
    else
      BW[$m.$round]=FAIL
      fail "busbw run $m round $round"
    fi
  done
done
printf '%-12s' module; for round in $(seq "$BW_ROUNDS"); do printf ' %10s' "round$round"; done; echo
for m in $MODULES; do
  printf '%-12s' "$m"
  for round in $(seq "$BW_ROUNDS"); do printf ' %10s' "${BW[$m.$round]}"; done
  echo
done

[ $FAILURES -eq 0 ] && echo "PASS" || echo "$FAILURES failure(s)"
[ $FAILURES -eq 0 ]
