#!/bin/bash
# pods_topo_bench.sh <build dir> <baseline lib dir>: all-reduce on 4 pods x 2 ranks placed
# round robin (tests/netns/placement.sh), pod links (hpn0) shaped to HPN_RATE (default 2gbit),
# this build's library against another libnccl.so.2 (e.g. a copy of main's build/lib, loaded
# through LD_LIBRARY_PATH, which comes before the harness's RUNPATH), interleaved over ROUNDS
# rounds (default 2). Prints the time (us, out-of-place) per size of each round and the
# speed-up of the first variant's best round over the second's. A benchmark, not a test (needs
# root). VARIANTS (default "base ours") may name NCCL_ALGO settings too, e.g.
#   PODS=8 PER_POD=1 MIN=8 MAX=8 VARIANTS="ours:Ring ours:Tree" perf/pods_topo_bench.sh build /tmp/base/lib
#   VARIANTS="ours:Ring ours:HierRing" perf/pods_topo_bench.sh build /tmp/base/lib
#   VARIANTS="ours:Ring ours:Tree ours:Tree:doubling ours:Tree:binomial" (a third field sets ACCL_TREE_SHAPE)
# COLL (default all_reduce) names another perf binary: all_gather, reduce_scatter, ...
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: pods_topo_bench.sh <build dir> <baseline lib dir>}" && pwd)
BASE=$(cd "${2:?usage: pods_topo_bench.sh <build dir> <baseline lib dir>}" && pwd)
HPN_RATE=${HPN_RATE:-2gbit}
. "$HERE/../tests/netns/pods.sh"
. "$HERE/../tests/netns/run_world.sh"
. "$HERE/../tests/netns/placement.sh"
why=$(pods_unavailable)
[ -z "$why" ] || { echo "cannot run: $why"; exit 77; }
LOGS=$(mktemp -d /tmp/accl-topobench.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
PODS=${PODS:-4} PER_POD=${PER_POD:-2} PLACEMENT=${PLACEMENT:-roundrobin}
pods_up "$PODS" || exit 1
ROUNDS=${ROUNDS:-2}
MIN=${MIN:-16M} MAX=${MAX:-128M}
VARIANTS=${VARIANTS:-base ours}
declare -A T
for round in $(seq "$ROUNDS"); do
  for lib in $VARIANTS; do
    envs=()
    [ "${lib%%:*}" = base ] && envs=(LD_LIBRARY_PATH="$BASE")
    IFS=: read -r _ algo shape <<<"$lib"
    [ -n "$algo" ] && envs+=(NCCL_ALGO="$algo")
    [ -n "$shape" ] && envs+=(ACCL_TREE_SHAPE="$shape")
    dir="$LOGS/$lib.$round"
    run_placed "$PLACEMENT" "$PER_POD" "$dir" 300 "${envs[@]}" NCCL_DEBUG=VERSION -- \
      "$BUILD/perf/${COLL:-all_reduce}_perf" -b "$MIN" -e "$MAX" -f 2 -n "${ITERS:-2}" -w 1 -c 0 ${EXTRA:-}
    wait_world || { echo "$lib round $round failed"; tail -n 3 "$dir"/rank*.log; exit 1; }
    # Columns: size count type redop root time algbw busbw #wrong (out-of-place), then in-place.
    while read -r size t; do T[$lib.$round.$size]=$t; done < <(awk '/^ +[0-9]+ +[0-9]+ +float/ {print $1, $6}' "$dir/rank0.log")
    SIZES_SEEN=$(awk '/^ +[0-9]+ +[0-9]+ +float/ {print $1}' "$dir/rank0.log")
  done
done
echo "${COLL:-all_reduce} float, $PODS pods x $PER_POD ranks ($PLACEMENT), hpn0 $HPN_RATE; time us (out-of-place)"
printf '%12s' bytes
set -- $VARIANTS
A=$1 B=$2
for round in $(seq "$ROUNDS"); do for v in $VARIANTS; do printf ' %16s' "$v.r$round"; done; done
printf '   %s\n' "best $A / best $B"
for size in $SIZES_SEEN; do
  printf '%12s' "$size"
  ba=999999999999 bb=999999999999
  for round in $(seq "$ROUNDS"); do
    for v in $VARIANTS; do printf ' %16s' "${T[$v.$round.$size]}"; done
    ba=$(awk -v a="$ba" -v b="${T[$A.$round.$size]}" 'BEGIN {print (b < a ? b : a)}')
    bb=$(awk -v a="$bb" -v b="${T[$B.$round.$size]}" 'BEGIN {print (b < a ? b : a)}')
  done
  awk -v a="$ba" -v b="$bb" 'BEGIN {printf "   %.2fx\n", a / b}'
done
