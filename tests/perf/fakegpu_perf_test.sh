#!/usr/bin/env bash
# The perf binaries in device mode against the fake CUDA driver (tests/fake_cuda): device
# buffers the CPU cannot touch, CUDA streams, several ranks on one "GPU", as threads and as
# processes, results checked after cuMemcpyDtoH, and a corrupted result caught.
#   fakegpu_perf_test.sh PERF_BIN_DIR FAKE_CUDA_DIR
# Exit 77 (skip, with the reason) when the library has no CUDA backend; any other reason for
# host buffers is a failure.
set -u
bin=$1
export LD_LIBRARY_PATH=$2${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset ACCL_BACKEND ACCL_PERF_HOST ACCL_PERF_DEVICE ACCL_PERF_CORRUPT NCCL_TESTS_DEVICE
failures=0

if [ ! -e "$2/libcuda.so.1" ]; then
  echo "SKIP: no fake CUDA driver at $2/libcuda.so.1 (tests/fake_cuda not built: no cuda.h?)"
  exit 77
fi
init=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 "$bin/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 -c 0 2>&1)
if echo "$init" | grep -qE "has no CUDA (backend|kernels)"; then
  echo "SKIP: the fake driver loads but this build of ACCL cannot run on it:"
  echo "$init" | grep -m1 "backend"
  exit 77
fi
if ! echo "$init" | grep -q "^# Buffers: device memory"; then
  echo "FAIL: the perf binary did not pick device buffers on the fake driver:"
  echo "$init"
  exit 1
fi

# expect NAME RC_WANTED COMMAND...: runs it, wants that exit code, device buffers, and for rc 0
# a clean verification.
expect() {
  local name=$1 want=$2 out rc
  shift 2
  out=$(timeout 120 "$@" 2>&1)
  rc=$?
  local bad=""
  [ $rc -eq "$want" ] || bad="exit code $rc, wanted $want"
  echo "$out" | grep -q "^# Buffers: device memory" || bad="${bad:+$bad; }no '# Buffers: device memory' line"
  echo "$out" | grep -q "^#  Rank .* device  0 \[0000:" || bad="${bad:+$bad; }no rank on device 0"
  if [ "$want" = 0 ]; then
    echo "$out" | grep -q "Out of bounds values : 0 OK" || bad="${bad:+$bad; }wrong results"
    echo "$out" | grep -qE "^ +[0-9]" || bad="${bad:+$bad; }no table rows"
  fi
  if [ -n "$bad" ]; then
    echo "FAIL $name: $bad"
    echo "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

expect "all_reduce -g 2 (two ranks, one device, one thread)" 0 \
  "$bin/all_reduce_perf" --device -g 2 -b 8 -e 1M -f 32 -c 1 -n 2 -w 1
expect "all_gather -g 2" 0 "$bin/all_gather_perf" --device -g 2 -b 8 -e 1M -f 32 -c 1 -n 2 -w 1
expect "all_reduce -t 2 -p 1 (two threads, each inits its comm)" 0 \
  "$bin/all_reduce_perf" --device -t 2 -g 1 -p 1 -b 1K -e 64K -f 8 -c 1 -n 2
expect "reduce_scatter accl-run -np 2 -y 1 (NULL stream = each process's default stream)" 0 \
  "$bin/accl-run" -np 2 "$bin/reduce_scatter_perf" --device -g 1 -y 1 -b 1K -e 64K -f 8 -c 1 -n 2
expect "reduce_scatter -g 2 -y 1 (two ranks of one thread on the default stream, one group)" 0 \
  "$bin/reduce_scatter_perf" --device -g 2 -y 1 -b 1K -e 64K -f 8 -c 1 -n 2
# Ranks of two threads on one device's in-order default stream would wait for each other
# (separate groups): refused, not hung.
out=$(timeout 60 "$bin/all_reduce_perf" --device -t 2 -g 1 -y 1 -b 8 -e 8 2>&1)
if [ $? -eq 6 ] && echo "$out" | grep -q "would share its default stream"; then
  echo "ok   -t 2 -y 1 on one device is refused with the reason"
else
  echo "FAIL -t 2 -y 1:"; echo "$out" | sed 's/^/    /'; failures=$((failures + 1))
fi
expect "all_reduce accl-run -np 2 (processes on one device)" 0 \
  "$bin/accl-run" -np 2 "$bin/all_reduce_perf" --device -g 1 -b 8 -e 256K -f 32 -c 1 -n 2
# -G (CUDA graphs): the timed iterations and the checked call are captured on the ranks'
# streams and launched as graphs; the check passes only if the graph launches did the work
# (a harness that skipped them reports #wrong). The fake's trace counts the launches:
# sizes x 2 placements x (G timed + c checked) x ranks of the process.
graph_case() {  # NAME LAUNCHES_WANTED COMMAND...
  local name=$1 want=$2 trace out rc got bad=""
  shift 2
  trace=$(mktemp)
  out=$(FAKE_CUDA_TRACE=1 timeout 120 "$@" 2>"$trace")
  rc=$?
  got=$(grep -c "launch graph exec" "$trace")
  [ $rc -eq 0 ] || bad="exit code $rc"
  echo "$out" | grep -q "^# Buffers: device memory" || bad="${bad:+$bad; }no '# Buffers: device memory' line"
  echo "$out" | grep -q "graph: [1-9]" || bad="${bad:+$bad; }the preamble does not say graph: N"
  echo "$out" | grep -q "Out of bounds values : 0 OK" || bad="${bad:+$bad; }wrong results"
  [ "$got" = "$want" ] || bad="${bad:+$bad; }$got graph launches, wanted $want"
  if [ -n "$bad" ]; then
    echo "FAIL $name: $bad"
    echo "$out" | sed 's/^/    /'
    grep -v "fake libcuda: stream" "$trace" | tail -20 | sed 's/^/    stderr: /'
    failures=$((failures + 1))
  else
    echo "ok   $name ($got graph launches)"
  fi
  rm -f "$trace"
}
# 4 sizes x 2 x (3 + 1) x 2 ranks
graph_case "all_reduce -g 2 -G 3 (two ranks of one thread, two captured streams)" 64 \
  "$bin/all_reduce_perf" --device -g 2 -b 8 -e 1M -f 32 -c 1 -n 2 -w 1 -G 3
# 2 sizes x 2 x (2 + 1) x 1 rank, in each of two threads capturing at once
graph_case "all_reduce -t 2 -G 2 (two threads capture at once)" 24 \
  "$bin/all_reduce_perf" --device -t 2 -g 1 -b 1K -e 8K -f 8 -c 1 -n 2 -G 2
# 3 sizes x 2 x (2 + 1) x 1 rank x 2 processes
graph_case "all_reduce accl-run -np 2 -G 2 (processes)" 36 \
  "$bin/accl-run" -np 2 "$bin/all_reduce_perf" --device -g 1 -b 8 -e 8K -f 32 -c 1 -n 2 -G 2
# 2 sizes x 2 x (2 + 1) x 3 ranks
graph_case "sendrecv -g 3 -G 2 (p2p in a group, captured)" 36 \
  "$bin/sendrecv_perf" --device -g 3 -b 64 -e 4K -f 64 -c 1 -n 2 -G 2
out=$(timeout 60 "$bin/all_reduce_perf" --device -g 2 -y 1 -b 8 -e 8 -G 2 2>&1)
if [ $? -eq 6 ] && echo "$out" | grep -q "NULL stream cannot be captured"; then
  echo "ok   -G -y 1 is refused with the reason"
else
  echo "FAIL -G -y 1:"; echo "$out" | sed 's/^/    /'; failures=$((failures + 1))
fi
# Every binary, every type (and every op where it applies), two ranks on the device.
for name in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter hypercube; do
  ops=()
  case $name in all_reduce | reduce | reduce_scatter) ops=(-o all) ;; esac
  expect "${name} -g 2 -d all${ops[*]:+ ${ops[*]}}" 0 "$bin/${name}_perf" --device -g 2 -b 64 -e 1K -f 16 -c 1 -n 1 -w 0 -d all "${ops[@]}"
done
# --host on a machine with a (fake) GPU: the library keeps its host backend, buffers are host memory.
out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 "$bin/all_reduce_perf" --host -g 2 -b 8 -e 64K -f 8 -c 1 -n 2 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q "^# Buffers: host memory" && echo "$out" | grep -q "ACCL_BACKEND=host" &&
   echo "$out" | grep -q "Out of bounds values : 0 OK"; then
  echo "ok   --host keeps host buffers and the host backend"
else
  echo "FAIL --host:"; echo "$out" | sed 's/^/    /'; failures=$((failures + 1))
fi
# A flipped byte in the downloaded result must be counted: the check reads device results.
expect "a corrupted result is caught (exit 7)" 7 \
  env ACCL_PERF_CORRUPT=1 "$bin/all_reduce_perf" --device -g 2 -b 1K -e 1K -c 1 -n 1

[ $failures -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "all device-mode cases passed"
