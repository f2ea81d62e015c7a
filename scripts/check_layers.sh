#!/bin/sh
# check_layers.sh: the library's folders form one stack of layers, and every #include must point
# down it (or stay in its own folder). Prints each include that runs upward and fails if there is
# any. The order is declared here and drawn in docs/design.md ("Layers"); a new folder under src/
# must be added to it before its files build.
#
#   usage: scripts/check_layers.sh [repo-root]
#   ACCL_LAYERS="a b c" overrides the order (lowest first), e.g. to count an older tree.
#
# Public headers (include/: nccl.h, accl.h, nccl_net.h) sit below every layer. kernels/ and
# transports/ are top-level folders but layers like the ones in src/. tools/, perf/ and tests/
# sit above everything and are not checked.
set -eu
root=${1:-"$(dirname "$0")/.."}
cd "$root"
# Lowest first. base: log, param, check, trace. kernels: copy/reduce. device: the device seam
# (backends: memory, streams, data calls; host streams; the CUDA driver table). net: sockets. topo:
# interfaces and host identity. bootstrap: rendezvous. transports: byte rings to peers. coll:
# algorithms as step plans. comm: the communicator (state, init, config, status server).
# sched: groups, planner, executor, streams. api: the exported entry points.
layers=${ACCL_LAYERS:-"base kernels device net topo bootstrap transports coll comm sched api"}

find src transports kernels -type f \( -name '*.h' -o -name '*.cc' -o -name '*.def' \) | LC_ALL=C sort |
while read -r f; do
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed "s|^|$f:|" || true
done |
awk -v layers="$layers" '
  BEGIN {
    n = split(layers, order, " ")
    for (i = 1; i <= n; i++) rank[order[i]] = i
    public["nccl.h"] = public["accl.h"] = public["nccl_net.h"] = 1
    up = 0; upSrc = 0; upTop = 0; bad = 0
  }
  {
    split($0, part, ":")
    file = part[1]; line = part[2]
    match($0, /"[^"]+"/); inc = substr($0, RSTART + 1, RLENGTH - 2)
    split(file, p, "/"); from = (p[1] == "src") ? p[2] : p[1]
    if (!(from in rank)) { printf "%s:%s: folder \"%s\" is not a declared layer\n", file, line, from; bad++; next }
    if (inc in public) next
    slash = index(inc, "/"); first = slash ? substr(inc, 1, slash - 1) : ""
    if (first in rank) to = first
    else if (inc == "device.h" || inc == "portable.h" || inc == "device_kernels.h" || inc == "collective_args.h" ||
             inc == "collective_kernel.h" || inc == "staged_args.h" || inc == "staged_kernel.h" ||
             inc == "direct_args.h" || inc == "direct_kernel.h" || inc == "ll_kernel.h" ||
             first == "host" || first == "emulated") to = "kernels"
    else {
      dir = file; sub(/\/[^\/]*$/, "", dir)
      if (system("test -f \"" dir "/" inc "\"") == 0) to = from
      else { printf "%s:%s: include \"%s\" belongs to no declared layer\n", file, line, inc; bad++; next }
    }
    if (rank[to] > rank[from]) {
      printf "%s:%s: %s includes %s, a higher layer (\"%s\")\n", file, line, from, to, inc
      up++
      if (p[1] == "src") upSrc++; else upTop++
    }
  }
  END {
    printf "upward includes: %d (inside src/: %d; from transports/ or kernels/: %d); unresolved: %d\n", up, upSrc, upTop, bad
    printf "layers, lowest first: %s\n", layers
    exit (up + bad > 0) ? 1 : 0
  }'
