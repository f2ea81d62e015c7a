#!/bin/sh
# Compile-time ABI comparison: facts printed by abi_layout_dump (ACCL's nccl.h) must hold under
# NVIDIA's nccl.h. Usage: abi_layout_check.sh <abi_layout_dump> <c++ compiler> <this dir> <workdir>
set -u
dump=$1 cxx=$2 src=$3 work=$4
nv=/usr/local/cuda/include
if [ ! -f "$nv/nccl.h" ] || [ ! -f "$nv/cuda_runtime.h" ]; then
  echo "SKIP: NVIDIA's nccl.h or cuda_runtime.h is not in $nv; nothing to compare against"
  exit 77
fi
mkdir -p "$work"
"$dump" > "$work/accl_facts.inc" || { echo "FAIL: abi_layout_dump failed"; exit 1; }
printf '#include <nccl.h>\n#include "accl_facts.inc"\n' > "$work/check.cc"
"$cxx" -std=c++20 -fsyntax-only -I"$nv" -I"$src" -I"$work" "$work/check.cc" || {
  echo "FAIL: ACCL's nccl.h differs from NVIDIA's (see the static_asserts above)"; exit 1; }
echo "OK: $(grep -c static_assert "$work/accl_facts.inc") layout/enum/macro facts equal in both headers"
