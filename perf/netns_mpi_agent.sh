#!/bin/sh
# OpenMPI's launch agent for the network-namespace pods (tests/netns/pods.sh), used by
# perf/pods_mpi_compare.sh as `mpirun --mca plm_rsh_agent <this file>`. mpirun calls it as ssh
# would be called, "agent [options] HOST COMMAND...", with HOST a pod's eth0 address
# 10.77.1.(i+1); it runs COMMAND in pod i (with hostname pod<i>), so the pods look like hosts to
# OpenMPI. POD_PREFIX (pods.sh) names the namespaces; mpirun passes it on from its environment.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
case "$host" in
  10.77.1.*) ;;
  *) echo "netns_mpi_agent: $host is not a pod's eth0 address (10.77.1.N)" >&2; exit 1 ;;
esac
idx=$((${host##*.} - 1))
exec ip netns exec "${POD_PREFIX:?netns_mpi_agent: POD_PREFIX unset}$idx" unshare --uts \
  sh -c 'hostname "$0"; exec sh -c "$1"' "pod$idx" "$*"
