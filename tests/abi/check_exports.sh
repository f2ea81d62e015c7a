#!/bin/sh
# Checks what libnccl.so.2 exports (spec/nccl-api.md §1, §7):
#  - only nccl*/pnccl* symbols, unversioned;
#  - for each of the 41 nccl.h functions, the 11 device-API host functions and any ACCL extra:
#    "T pncclX" and "W ncclX" at the same address;
#  - ncclResetDebugInitInternal (no twin) is exported;
#  - SONAME is libnccl.so.2;
#  - if NVIDIA's libnccl.so.2 is given as $2, every symbol it defines is defined by ours.
# Usage: check_exports.sh <our libnccl.so.2> [nvidia libnccl.so.2]
set -u
lib=$1
nvidia=${2:-}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

command -v nm >/dev/null && command -v readelf >/dev/null || { echo "SKIP: nm/readelf not installed"; exit 77; }
[ -f "$lib" ] || { echo "FAIL: $lib does not exist"; exit 1; }

syms=$(nm -D --defined-only "$lib" | awk 'NF == 3 { print $1, $2, $3 }')
[ -n "$syms" ] || { echo "FAIL: nm -D found no defined symbols in $lib"; exit 1; }

# 1. Only nccl*/pnccl*, none versioned.
others=$(echo "$syms" | awk '$3 !~ /^p?nccl/ { print "  " $2 " " $3 }')
[ -z "$others" ] || bad "exports symbols outside nccl*/pnccl*:
$others"
versioned=$(echo "$syms" | awk '$3 ~ /@/ { print "  " $3 }')
[ -z "$versioned" ] || bad "exports versioned symbols (NCCL's are unversioned):
$versioned"

# 2. The 52 API functions: T pncclX + W ncclX at one address.
api="GetVersion GetUniqueId MemAlloc MemFree GetErrorString GetLastError ResetDebugInit
CommInitRank CommInitRankConfig CommInitRankScalable CommInitAll CommSplit CommShrink CommFinalize
CommDestroy CommAbort CommRevoke CommGetAsyncError CommCount CommCuDevice CommUserRank
CommRegister CommDeregister CommWindowRegister CommWindowDeregister RedOpCreatePreMulSum RedOpDestroy
Reduce Bcast Broadcast AllReduce ReduceScatter AllGather AlltoAll Gather Scatter Send Recv
GroupStart GroupEnd GroupSimulateEnd
DevCommCreate DevCommDestroy TeamWorld TeamLsa TeamRail TeamRankToWorld TeamRankToLsa
LsaBarrierCreateRequirement GinBarrierCreateRequirement LLA2ACalcSlots LLA2ACreateRequirement"
n=0
for f in $api; do
  n=$((n + 1))
  p=$(echo "$syms" | awk -v s="pnccl$f" '$3 == s { print $1, $2 }')
  w=$(echo "$syms" | awk -v s="nccl$f" '$3 == s { print $1, $2 }')
  [ -n "$p" ] || { bad "pnccl$f is not exported"; continue; }
  [ -n "$w" ] || { bad "nccl$f is not exported"; continue; }
  [ "${p#* }" = "T" ] || bad "pnccl$f has type ${p#* } (want T, a strong function)"
  [ "${w#* }" = "W" ] || bad "nccl$f has type ${w#* } (want W, a weak alias)"
  [ "${p% *}" = "${w% *}" ] || bad "pnccl$f (${p% *}) and nccl$f (${w% *}) are at different addresses"
done
[ "$n" -eq 52 ] || bad "internal: the list holds $n functions, not 52"

# 3. Any other exported function (ACCL extras) follows the same twin rule.
echo "$syms" | awk '$3 ~ /^nccl/ && $3 != "ncclResetDebugInitInternal" { print $3 }' | while read -r s; do
  echo "$syms" | awk -v s="p$s" '$3 == s { found = 1 } END { exit !found }' || echo "FAIL: $s has no p$s twin"
done | grep FAIL && fail=1

# 4. ncclResetDebugInitInternal, a strong function without twin.
echo "$syms" | awk '$3 == "ncclResetDebugInitInternal" && $2 == "T" { found = 1 } END { exit !found }' ||
  bad "ncclResetDebugInitInternal is not exported as T"

# 5. SONAME.
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = "libnccl.so.2" ] || bad "SONAME is '$soname', want libnccl.so.2"

# 6. Everything NVIDIA's library defines, ours defines too.
if [ -n "$nvidia" ] && [ -f "$nvidia" ]; then
  missing=$(nm -D --defined-only "$nvidia" | awk 'NF == 3 { print $3 }' | sort -u |
            comm -23 - "$(echo "$syms" | awk '{ print $3 }' | sort -u > "${TMPDIR:-/tmp}/accl_syms.$$"; echo "${TMPDIR:-/tmp}/accl_syms.$$")")
  rm -f "${TMPDIR:-/tmp}/accl_syms.$$"
  [ -z "$missing" ] || bad "symbols NVIDIA's $nvidia exports but ours does not: $missing"
  echo "compared with $nvidia: $(nm -D --defined-only "$nvidia" | awk 'NF == 3' | wc -l) NVIDIA symbols all present"
fi

[ $fail -eq 0 ] && echo "OK: $(echo "$syms" | wc -l) exported symbols, 52 API twins, SONAME $soname"
exit $fail
