#!/bin/sh
# check_kernel_stack.sh: fails when any CUDA kernel has a stack frame (local memory: a
# runtime-indexed array or a spill, which costs a round trip to memory per access), for every
# SM version asked for. Prints every kernel's registers so that a change that raises them shows
# in the test log.
#   check_kernel_stack.sh --log PTXAS_LOG ARCH...   reads what ptxas -v said when the build made
#                                                   the fatbin (no second compile: ctest uses this)
#   check_kernel_stack.sh NVCC SOURCE_DIR ARCH...   compiles the kernels itself, one arch at a time
# Exit 77 (skipped) when there is neither a log nor nvcc.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# Reads ptxas -v output (for one or several archs) on stdin; checks the archs in $@.
check_log() {
  awk -v want="$*" '
    /Compiling entry function/ {
      split($0, q, "'"'"'"); name = q[2]; arch = q[4]; sub(/^sm_/, "", arch); seen[arch] = 1
    }
    /bytes stack frame/ { stack = $1 + 0; spill = $5 + 0 }
    /Used [0-9]+ registers/ {
      for (i = 1; i <= NF; i++) if ($i == "Used") regs = $(i + 1)
      printf "sm_%s %-36s %4s registers %6d bytes stack %6d bytes spilled\n", arch, name, regs, stack, spill
      if (stack != 0 || spill != 0) { bad++; print "  ^ FAIL: local memory in a kernel" }
      n++
    }
    END {
      if (n == 0) { print "FAIL: no kernel found in ptxas output"; exit 1 }
      split(want, w, " ")
      for (i in w) if (!(w[i] in seen)) { print "FAIL: ptxas compiled nothing for sm_" w[i]; bad++ }
      exit bad ? 1 : 0
    }
  '
}

if [ "$1" = "--log" ]; then
  log="$2"; shift 2
  if [ ! -s "$log" ]; then echo "SKIPPED: no ptxas log at $log (the CUDA kernels are not built here)"; exit 77; fi
  check_log "$@" <"$log" || exit 1
  echo "PASS: no kernel uses local memory on sm $*"
  exit 0
fi

nvcc="$1"; src="$2"; shift 2
if [ -z "$nvcc" ] || ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "SKIPPED: nvcc not found, the CUDA kernels are not built here"; exit 77
fi
status=0
for arch in "$@"; do
  if ! "$nvcc" -std=c++20 --expt-relaxed-constexpr -O3 -gencode=arch=compute_${arch},code=sm_${arch} \
      -I"$src/include" -I"$src/kernels" -Xptxas -v --cubin "$src/kernels/cuda/device_kernels.cu" \
      -o "$tmp/k.cubin" >"$tmp/log" 2>&1; then
    cat "$tmp/log"; echo "FAIL: nvcc failed for sm_$arch"; exit 1
  fi
  check_log "$arch" <"$tmp/log" || status=1
done
[ $status -eq 0 ] && echo "PASS: no kernel uses local memory on sm $*"
exit $status
