# pods.sh: builds N network namespaces ("pods") on this machine, each with an eth0 and an hpn0,
# like pods on different hosts: pod i has eth0 = 10.77.1.(i+1)/24 and hpn0 = 10.77.2.(i+1)/24.
# The two networks are veth pairs joined by two bridges that live in their own "switch"
# namespace, so nothing is added to the root namespace and no traffic leaves the machine.
# eth0 is rate-limited (tc tbf) far below hpn0 so which network carried the bulk is obvious.
# Source it; call pods_up N, then pods_down (also from a trap).

POD_PREFIX="acclpod$$-"
SWITCH_NS="acclsw$$"
ETH_RATE="${ETH_RATE:-400mbit}"
HPN_RATE="${HPN_RATE:-4gbit}"
POD_COUNT=0

pod() { echo "${POD_PREFIX}$1"; }
pod_eth_ip() { echo "10.77.1.$(($1 + 1))"; }
pod_hpn_ip() { echo "10.77.2.$(($1 + 1))"; }

# Why namespaces cannot be built here (empty when they can).
pods_unavailable() {
  [ "$(id -u)" = 0 ] || { echo "needs root (CAP_NET_ADMIN) to create network namespaces"; return; }
  command -v ip >/dev/null || { echo "iproute2 'ip' not installed"; return; }
  command -v tc >/dev/null || { echo "iproute2 'tc' not installed"; return; }
  ip netns add "${SWITCH_NS}probe" 2>/dev/null || { echo "cannot create network namespaces (ip netns add failed)"; return; }
  ip netns del "${SWITCH_NS}probe"
}

pods_up() {
  POD_COUNT=$1
  ip netns add "$SWITCH_NS" || return 1
  for br in breth brhpn; do
    ip -n "$SWITCH_NS" link add "$br" type bridge || return 1
    ip -n "$SWITCH_NS" link set "$br" up || return 1
  done
  local i ns
  for i in $(seq 0 $((POD_COUNT - 1))); do
    ns=$(pod "$i")
    ip netns add "$ns" || return 1
    for net in eth hpn; do
      ip link add "${net}0" netns "$ns" type veth peer name "s${net}$i" netns "$SWITCH_NS" || return 1
      ip -n "$SWITCH_NS" link set "s${net}$i" master "br${net}" up || return 1
    done
    ip -n "$ns" addr add "$(pod_eth_ip "$i")/24" dev eth0 || return 1
    ip -n "$ns" addr add "$(pod_hpn_ip "$i")/24" dev hpn0 || return 1
    # lo up as in any real pod (a process reaching its own address goes through lo).
    ip -n "$ns" link set lo up && ip -n "$ns" link set eth0 up && ip -n "$ns" link set hpn0 up || return 1
    # Egress shaping on both ends of each pod's link (pod -> switch and switch -> pod).
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$ETH_RATE" burst 256kb latency 20ms || return 1
    ip netns exec "$ns" tc qdisc add dev hpn0 root tbf rate "$HPN_RATE" burst 2mb latency 20ms || return 1
  done
  # veth carrier comes up asynchronously.
  for i in $(seq 0 $((POD_COUNT - 1))); do
    ip netns exec "$(pod "$i")" sh -c 'for t in $(seq 50); do
      grep -q up /sys/class/net/eth0/operstate && grep -q up /sys/class/net/hpn0/operstate && exit 0; sleep 0.1; done; exit 1' || return 1
  done
}

pods_down() {
  local i
  for i in $(seq 0 $((POD_COUNT - 1))); do ip netns del "$(pod "$i")" 2>/dev/null; done
  ip netns del "$SWITCH_NS" 2>/dev/null
  POD_COUNT=0
  return 0
}

# Runs a command in pod i with its own hostname (pod<i>), as in a real pod.
in_pod() {
  local i=$1
  shift
  ip netns exec "$(pod "$i")" unshare --uts sh -c 'hostname "$0"; exec "$@"' "pod$i" "$@"
}

# tx bytes of an interface inside pod i.
pod_tx_bytes() { ip netns exec "$(pod "$1")" cat "/sys/class/net/$2/statistics/tx_bytes"; }

# Gives every pod a second rail, hpn1 = 10.77.3.(i+1)/24 on its own bridge (a second network
# plane), shaped like hpn0. Call after pods_up.
pod_hpn1_ip() { echo "10.77.3.$(($1 + 1))"; }
pods_add_rail() {
  local i ns
  ip -n "$SWITCH_NS" link add brhpn1 type bridge && ip -n "$SWITCH_NS" link set brhpn1 up || return 1
  for i in $(seq 0 $((POD_COUNT - 1))); do
    ns=$(pod "$i")
    ip link add hpn1 netns "$ns" type veth peer name "shpn1x$i" netns "$SWITCH_NS" || return 1
    ip -n "$SWITCH_NS" link set "shpn1x$i" master brhpn1 up || return 1
    ip -n "$ns" addr add "$(pod_hpn1_ip "$i")/24" dev hpn1 && ip -n "$ns" link set hpn1 up || return 1
    ip netns exec "$ns" tc qdisc add dev hpn1 root tbf rate "$HPN_RATE" burst 2mb latency 20ms || return 1
  done
  for i in $(seq 0 $((POD_COUNT - 1))); do
    ip netns exec "$(pod "$i")" sh -c 'for t in $(seq 50); do
      grep -q up /sys/class/net/hpn1/operstate && exit 0; sleep 0.1; done; exit 1' || return 1
  done
}
