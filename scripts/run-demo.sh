#!/usr/bin/env bash
# `make run`: the nccl-tests all-reduce sweep on 4 host ranks in one process (-g 4), printed as
# nccl-tests prints it. Usage: scripts/run-demo.sh [BUILD_DIR]   (default: build)
set -euo pipefail

build=${1:-build}
bin="$build/perf/all_reduce_perf"
if [[ ! -x "$bin" ]]; then
  echo "run-demo: $bin not found; build first (make build, or cmake --build $build)" >&2
  exit 1
fi

echo "run-demo: $bin -b 8 -e 128M -f 2 -g 4"
exec "$bin" -b 8 -e 128M -f 2 -g 4
