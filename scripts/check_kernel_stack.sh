#!/bin/sh
# check_kernel_stack.sh NVCC SOURCE_DIR ARCH...: compiles the CUDA kernels for each SM version
# with ptxas -v and fails when any kernel has a stack frame (local memory: a runtime-indexed
# array or a spill, which costs a round trip to memory per access). Prints every kernel's
# registers so that a change that raises them shows in the test log.
# Exit 77 (skipped) when nvcc is missing.
nvcc="$1"; src="$2"; shift 2
if [ -z "$nvcc" ] || ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "SKIPPED: nvcc not found, the CUDA kernels are not built here"; exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
for arch in "$@"; do
  if ! "$nvcc" -std=c++20 --expt-relaxed-constexpr -O3 -gencode=arch=compute_${arch},code=sm_${arch} \
      -I"$src/include" -I"$src/kernels" -Xptxas -v --cubin "$src/kernels/cuda/device_kernels.cu" \
      -o "$tmp/k.cubin" >"$tmp/log" 2>&1; then
    cat "$tmp/log"; echo "FAIL: nvcc failed for sm_$arch"; exit 1
  fi
  # ptxas prints, per kernel: "Compiling entry function 'NAME'", then "N bytes stack frame, ...",
  # then "Used R registers, ...".
  awk -v arch="$arch" '
    /Compiling entry function/ { split($0, q, "'"'"'"); name = q[2] }
    /bytes stack frame/ { stack = $1 + 0; spill = $5 + 0 }
    /Used [0-9]+ registers/ {
      for (i = 1; i <= NF; i++) if ($i == "Used") regs = $(i + 1)
      printf "sm_%s %-36s %4s registers %6d bytes stack %6d bytes spilled\n", arch, name, regs, stack, spill
      if (stack != 0 || spill != 0) { bad++; print "  ^ FAIL: local memory in a kernel" }
      n++
    }
    END { if (n == 0) { print "FAIL: no kernel found in ptxas output"; exit 1 } exit bad ? 1 : 0 }
  ' "$tmp/log" || status=1
done
[ $status -eq 0 ] && echo "PASS: no kernel uses local memory on sm $*"
exit $status
