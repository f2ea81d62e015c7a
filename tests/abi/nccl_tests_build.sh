#!/bin/sh
# Builds NVIDIA's nccl-tests (source in $1, unmodified) against OUR installed nccl.h and
# libnccl.so, as a user would: `make NCCL_HOME=<our prefix>`. Proves programs written for NCCL
# compile against our header when the CUDA headers are present (issue 10).
# Usage: nccl_tests_build.sh <our include dir> <our libnccl.so.2> <workdir> [nccl-tests dir]
# NVCC_GENCODE (env) narrows the archs; default sm_90 only (compile time).
set -u
inc=$1 lib=$2 work=$3 src=${4:-}
if [ -z "$src" ] || [ ! -f "$src/src/Makefile" ]; then
  echo "SKIP: NCCL_TESTS_DIR is not set (or has no src/Makefile); configure with -DNCCL_TESTS_DIR=<nccl-tests checkout>"
  exit 77
fi
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
if [ ! -x "$nvcc" ]; then
  echo "SKIP: no nvcc at $nvcc (set CUDA_HOME)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/prefix/include" "$work/prefix/lib" "$work/out" || exit 1
cp "$inc/nccl.h" "$work/prefix/include/" || exit 1
ln -s "$lib" "$work/prefix/lib/libnccl.so" && ln -s "$lib" "$work/prefix/lib/libnccl.so.2" || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
make -C "$src/src" -j"$jobs" NCCL_HOME="$work/prefix" BUILDDIR="$work/out" \
  NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" > "$work/build.log" 2>&1 || {
  tail -40 "$work/build.log"; echo "FAIL: nccl-tests does not build against ACCL's nccl.h (log: $work/build.log)"; exit 1; }
n=$(ls "$work/out"/*_perf 2>/dev/null | wc -l)
[ "$n" -ge 10 ] || { echo "FAIL: only $n *_perf binaries built"; exit 1; }
echo "OK: $n nccl-tests binaries built against ACCL's nccl.h in $work/out"
