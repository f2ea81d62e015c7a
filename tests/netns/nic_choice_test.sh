#!/bin/bash
# nic_choice_test.sh <source dir> <build dir>: the socket transport takes the interface closest
# to the rank. In a private network namespace two interfaces match NCCL_SOCKET_IFNAME=ib: ib1
# (listed first) and ib0. The topology (NCCL_TOPO_FILE=tests/unit/data/two_numa_gpu_nic.xml)
# puts ib0 on NUMA node 0, whose CPUs are this machine's, and ib1 on node 1, so every rank
# must use ib0 and say why. Exit 77 (skipped) where a namespace cannot be created.
set -u
SRC=$(cd "${1:?usage: nic_choice_test.sh <source dir> <build dir>}" && pwd)
BUILD=$(cd "${2:?usage: nic_choice_test.sh <source dir> <build dir>}" && pwd)
if [ "${ACCL_NIC_TEST_INSIDE:-}" != 1 ]; then
  if ! unshare -n true 2>/dev/null; then
    echo "SKIP: cannot create a network namespace (needs root)"
    exit 77
  fi
  exec env ACCL_NIC_TEST_INSIDE=1 unshare -n bash "$0" "$SRC" "$BUILD"
fi
set -e
ip link set lo up
for pair in "ib1 10.66.1.1" "ib0 10.66.0.1"; do
  set -- $pair
  ip link add "$1" type veth peer name "x$1"
  ip link set "x$1" up
  ip addr add "$2/24" dev "$1"
  ip link set "$1" up
done
set +e
out=$(NCCL_SOCKET_IFNAME=ib NCCL_SHM_DISABLE=1 NCCL_NET_PLUGIN=none \
      NCCL_TOPO_FILE="$SRC/tests/unit/data/two_numa_gpu_nic.xml" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      timeout 60 "$BUILD/perf/all_reduce_perf" -g 2 -b 1M -e 1M -n 2 -w 1 2>&1)
rc=$?
echo "$out" | grep -E "NIC |data interface|Out of bounds|wrong"
[ $rc -eq 0 ] || { echo "FAIL: all_reduce_perf exited with $rc"; echo "$out" | tail -20; exit 1; }
for r in 0 1; do
  want="rank $r: NIC ib0 of 2 candidates: closest to the rank's NUMA node 0: ib0 (0000:12:00.0) on NUMA node 0; others: ib1 (0000:22:00.0) on NUMA node 1 (distance 21)"
  echo "$out" | grep -qF "$want" || { echo "FAIL: missing: $want"; exit 1; }
  echo "$out" | grep -qF "rank $r: data interface ib0 (10.66.0.1" || { echo "FAIL: rank $r does not use ib0"; exit 1; }
done
echo "$out" | grep -q "Out of bounds values : 0 OK" || { echo "FAIL: wrong results"; exit 1; }
echo "PASS: both ranks chose ib0 (NUMA node 0) over ib1"
