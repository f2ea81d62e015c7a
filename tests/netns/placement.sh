# placement.sh: launches one communicator over the pods with a chosen rank-to-pod placement
# (needs pods.sh and run_world.sh sourced). "blocked": ranks 0..k-1 in pod 0, k..2k-1 in pod 1
# (run_world's layout); "roundrobin": rank r in pod r % pods, as mpirun --map-by node and many
# Kubernetes launchers place them.

# run_placed <blocked|roundrobin> <ranks per pod> <log dir> <timeout s> <env...> -- <command...>
run_placed() {
  local placement=$1 per_pod=$2 logs=$3 limit=$4
  shift 4
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local world=$((per_pod * POD_COUNT)) r p l
  local comm_id="$(pod_eth_ip 0):$NEXT_PORT"
  NEXT_PORT=$((NEXT_PORT + 2))
  mkdir -p "$logs"
  WORLD_PIDS=()
  for r in $(seq 0 $((world - 1))); do
    if [ "$placement" = roundrobin ]; then p=$((r % POD_COUNT)) l=$((r / POD_COUNT)); else p=$((r / per_pod)) l=$((r % per_pod)); fi
    env "${envs[@]}" RANK=$r WORLD_SIZE=$world LOCAL_RANK=$l NCCL_COMM_ID="$comm_id" \
      timeout -k 5 "$limit" bash -c "$(declare -f pod in_pod); POD_PREFIX=$POD_PREFIX; in_pod $p \"\$@\"" \
      _ "$@" >"$logs/rank$r.log" 2>&1 &
    WORLD_PIDS+=($!)
  done
}

# Payload bytes interface $2 of pod $1 has sent: tx_bytes less 66 header bytes per packet
# (Ethernet 14 + IPv4 20 + TCP with timestamps 32; a GSO packet counts once), so pure ACKs
# count nothing and what is left is what the ranks wrote to their sockets.
pod_tx_payload() {
  local dir="/sys/class/net/$2/statistics"
  ip netns exec "$(pod "$1")" sh -c "echo \$((\$(cat $dir/tx_bytes) - 66 * \$(cat $dir/tx_packets)))"
}
