#!/bin/bash
# pods_mpi_compare.sh <build dir>: all-reduce (float, sum) on network-namespace pods
# (tests/netns/pods.sh; default 4 pods x 2 ranks placed round robin, as `mpirun --map-by node`
# places them; pod links hpn0 shaped to HPN_RATE, default 2gbit), this build's ACCL
# (build/perf/all_reduce_perf, its own tuner) against OpenMPI over its tcp BTL on hpn0
# (build/perf/mpi_coll_bench, launched by mpirun from pod 0 through perf/netns_mpi_agent.sh):
# once with OpenMPI's default collectives (coll/tuned) and once with `--mca coll_han_priority
# 100` (coll/han, hierarchical). The variants run interleaved, ROUNDS rounds (default 2); the
# table has each round's time per size (us per all-reduce, mean over ranks and iterations)
# and OpenMPI's best time over ACCL's best (above 1: ACCL is faster). A benchmark, not a test
# (needs root). Settings: PODS, PER_POD, PLACEMENT (roundrobin|blocked), ROUNDS, LARGE (sizes
# in bytes, default 1 MiB-128 MiB), ITERS (timed iterations at those sizes, default 3),
# SMALL_ITERS (at 8 B, default 200), MPI_EXTRA (more mpirun options for both OpenMPI variants,
# e.g. "--mca mpi_yield_when_idle 1"), VARIANTS (default "accl mpi-tuned mpi-han").
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: pods_mpi_compare.sh <build dir>}" && pwd)
HPN_RATE=${HPN_RATE:-2gbit}
. "$HERE/../tests/netns/pods.sh"
. "$HERE/../tests/netns/run_world.sh"
. "$HERE/../tests/netns/placement.sh"
why=$(pods_unavailable)
[ -z "$why" ] || { echo "cannot run: $why"; exit 77; }
command -v mpirun >/dev/null || { echo "cannot run: mpirun not installed (make deps)"; exit 77; }
[ -x "$BUILD/perf/mpi_coll_bench" ] || { echo "cannot run: $BUILD/perf/mpi_coll_bench not built (no MPI at configure time)"; exit 77; }
LOGS=$(mktemp -d /tmp/accl-mpicompare.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
PODS=${PODS:-4} PER_POD=${PER_POD:-2} PLACEMENT=${PLACEMENT:-roundrobin}
ROUNDS=${ROUNDS:-2} ITERS=${ITERS:-3} SMALL_ITERS=${SMALL_ITERS:-200}
LARGE=${LARGE:-"1048576 4194304 16777216 67108864 134217728"}
VARIANTS=${VARIANTS:-"accl mpi-tuned mpi-han"}
pods_up "$PODS" || exit 1
export POD_PREFIX
WORLD=$((PODS * PER_POD))
HOSTS="$LOGS/hosts"
for i in $(seq 0 $((PODS - 1))); do echo "$(pod_eth_ip "$i") slots=$PER_POD"; done >"$HOSTS"
MAP=node
[ "$PLACEMENT" = blocked ] && MAP=slot
declare -A T

# One ACCL launch; adds "size time" pairs (out-of-place time) to T[accl.<round>.<size>].
run_accl() {
  local round=$1 dir=$2
  shift 2
  run_placed "$PLACEMENT" "$PER_POD" "$dir" 900 NCCL_DEBUG=VERSION -- "$BUILD/perf/all_reduce_perf" "$@" -c 0
  wait_world || { echo "accl round $round failed:"; tail -n 3 "$dir"/rank*.log; exit 1; }
  while read -r size t; do T[accl.$round.$size]=$t; done < <(awk '/^ +[0-9]+ +[0-9]+ +float/ {print $1, $6}' "$dir/rank0.log")
}

run_mpi() {
  local variant=$1 round=$2 cases=() size han=()
  [ "$variant" = mpi-han ] && han=(--mca coll_han_priority 100)
  cases+=("8:$SMALL_ITERS:$((SMALL_ITERS / 10))")
  for size in $LARGE; do cases+=("$size:$ITERS:1"); done
  # shellcheck disable=SC2086
  in_pod 0 timeout -k 5 900 mpirun --allow-run-as-root --hostfile "$HOSTS" --map-by "$MAP" -np "$WORLD" \
    --mca plm_rsh_agent "$HERE/netns_mpi_agent.sh" --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include hpn0 --mca oob_tcp_if_include eth0 "${han[@]}" ${MPI_EXTRA:-} \
    "$BUILD/perf/mpi_coll_bench" all_reduce "${cases[@]}" >"$LOGS/$variant.$round.json" 2>"$LOGS/$variant.$round.err" ||
    { echo "$variant round $round failed:"; tail -n 5 "$LOGS/$variant.$round.err"; exit 1; }
  while read -r size t; do T[$variant.$round.$size]=$t; done < <(python3 -c '
import json, sys
for r in json.load(open(sys.argv[1]))["results"]: print(r["bytes"], r["time_us"])' "$LOGS/$variant.$round.json")
}

for round in $(seq "$ROUNDS"); do
  for v in $VARIANTS; do
    case "$v" in
      accl)
        run_accl "$round" "$LOGS/accl.small.$round" -b 8 -e 8 -n "$SMALL_ITERS" -w $((SMALL_ITERS / 10))
        set -- $LARGE
        run_accl "$round" "$LOGS/accl.large.$round" -b "$1" -e "${!#}" -f 2 -n "$ITERS" -w 1
        ;;
      mpi-*) run_mpi "$v" "$round" ;;
    esac
  done
done

echo "all_reduce float, $PODS pods x $PER_POD ranks ($PLACEMENT), hpn0 $HPN_RATE; time us per all-reduce${MPI_EXTRA:+; OpenMPI with $MPI_EXTRA}"
printf '%12s' bytes
for round in $(seq "$ROUNDS"); do for v in $VARIANTS; do printf ' %14s' "$v.r$round"; done; done
printf '   %s\n' "best OpenMPI / best ACCL (tuned, han)"
for size in 8 $LARGE; do
  printf '%12s' "$size"
  declare -A best=()
  for round in $(seq "$ROUNDS"); do
    for v in $VARIANTS; do
      t=${T[$v.$round.$size]:-}
      printf ' %14s' "${t:--}"
      [ -n "$t" ] || continue
      best[$v]=$(awk -v a="${best[$v]:-1e18}" -v b="$t" 'BEGIN {print (b < a ? b : a)}')
    done
  done
  ratios=""
  for v in mpi-tuned mpi-han; do
    [ -n "${best[$v]:-}" ] && [ -n "${best[accl]:-}" ] &&
      ratios+=$(awk -v m="${best[$v]}" -v a="${best[accl]}" 'BEGIN {printf " %.2fx", m / a}')
  done
  echo "  $ratios"
  unset best
done
