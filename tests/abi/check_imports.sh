#!/bin/sh
# Checks that every nccl* function a binary built against NVIDIA's NCCL imports is defined by our
# libnccl.so.2, so the binary loads over ACCL (LD_PRELOAD or LD_LIBRARY_PATH) instead of failing
# with "undefined symbol". Skips (77) with the reason when none of the binaries exists.
# Usage: check_imports.sh <our libnccl.so.2> <binary or library>...
set -u
lib=$1
shift
command -v nm >/dev/null || { echo "SKIP: nm not installed"; exit 77; }
ours=$(nm -D --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u)
checked=0
fail=0
for bin in "$@"; do
  [ -f "$bin" ] || continue
  checked=$((checked + 1))
  wanted=$(nm -D --undefined-only "$bin" | awk '$2 ~ /^p?nccl/ { sub(/@.*/, "", $2); print $2 }' | sort -u)
  missing=$(echo "$ours" | comm -13 - "$(printf '%s\n' $wanted > "${TMPDIR:-/tmp}/accl_imports.$$"; echo "${TMPDIR:-/tmp}/accl_imports.$$")")
  rm -f "${TMPDIR:-/tmp}/accl_imports.$$"
  if [ -n "$missing" ]; then
    echo "FAIL: $bin imports NCCL functions ours does not define:" $missing
    fail=1
  else
    echo "OK: all $(echo "$wanted" | grep -c .) NCCL functions $bin imports are defined"
  fi
done
[ "$checked" -gt 0 ] || { echo "SKIP: none of the given binaries exists: $*"; exit 77; }
exit $fail
