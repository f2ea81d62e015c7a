# run_world.sh: launches one communicator across the pods the way the perf harness's non-MPI
# launch expects: every rank gets RANK, WORLD_SIZE, LOCAL_RANK and NCCL_COMM_ID (rank 0's
# eth0; the harness meets out of band on the next port). Needs pods.sh sourced.

# Below the kernel's ephemeral range (32768+), where ranks' own listeners (port 0) land: a
# rendezvous port there could already be taken by one of them ("Address already in use").
NEXT_PORT=$((20000 + $$ % 10000))

# run_world <ranks per pod> <log dir> <timeout s> <env assignments...> -- <command...>
# Starts every rank in the background; WORLD_PIDS holds their pids, logs go to <log dir>/rank<r>.log.
run_world() {
  local per_pod=$1 logs=$2 limit=$3
  shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local world=$((per_pod * POD_COUNT)) r
  local comm_id="$(pod_eth_ip 0):$NEXT_PORT"
  NEXT_PORT=$((NEXT_PORT + 2))
  mkdir -p "$logs"
  WORLD_PIDS=()
  for r in $(seq 0 $((world - 1))); do
    env "${envs[@]}" RANK=$r WORLD_SIZE=$world LOCAL_RANK=$((r % per_pod)) NCCL_COMM_ID="$comm_id" \
      timeout -k 5 "$limit" bash -c "$(declare -f pod in_pod); POD_PREFIX=$POD_PREFIX; in_pod $((r / per_pod)) \"\$@\"" \
      _ "$@" >"$logs/rank$r.log" 2>&1 &
    WORLD_PIDS+=($!)
  done
}

# Waits for every rank; returns the number of ranks that failed.
wait_world() {
  local failed=0 pid
  for pid in "${WORLD_PIDS[@]}"; do wait "$pid" || failed=$((failed + 1)); done
  return $failed
}
