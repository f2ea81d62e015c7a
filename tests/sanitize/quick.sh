#!/bin/sh
# The cheap sanitizer subset that runs inside `make test` (ctest labels sanitize):
#   quick.sh asan-ubsan|tsan SOURCE_DIR BUILD_BASE [JOBS]
# With QUICK_BUILD_ONLY=1 it only builds (`make test` does that before ctest, so the suite's
# time is the tests', not two more compilations of the library; run from ctest alone it builds
# what is missing itself). JOBS: parallel compile jobs (default 1: ctest runs it next to others).
# Builds only libnccl.so.2 and tests/api/leak_cycles_test with the sanitizer in
# BUILD_BASE/<kind> (Debug: fastest to compile) and runs a short version of it: ASan+UBSan
# runs 100 init/all-reduce/destroy cycles plus the 4-thread-rank test, TSan the 4-thread-rank
# test. The full sanitizer suites: make test-asan, make test-tsan, make test-ubsan.
set -u
KIND=$1
SRC=$2
BASE=$3
case "$KIND" in
  asan-ubsan) SAN=address,undefined; FILTER='*'; EXTRA= ;;
  # gcc cannot instrument atomic_thread_fence (transports/doorbell.cc) and warns -Wtsan.
  tsan) SAN=thread; FILTER='ThreadRanks.*'; EXTRA=-Wno-tsan ;;
  *) echo "usage: quick.sh asan-ubsan|tsan SOURCE_DIR BUILD_BASE"; exit 2 ;;
esac
DIR=$BASE/$KIND
mkdir -p "$BASE"
start=$(date +%s)
if [ ! -f "$DIR/CMakeCache.txt" ]; then
  launcher=""; command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
  cmake -S "$SRC" -B "$DIR" $launcher -DCMAKE_BUILD_TYPE=Debug -DACCL_WERROR=ON -DACCL_SANITIZE=$SAN -DCMAKE_CXX_FLAGS="$EXTRA" >"$BASE/$KIND-configure.log" 2>&1 ||
    { cat "$BASE/$KIND-configure.log"; exit 1; }
fi
cmake --build "$DIR" -j "${4:-1}" --target leak_cycles_test >"$BASE/$KIND-build.log" 2>&1 ||
  { tail -n 60 "$BASE/$KIND-build.log"; exit 1; }
built=$(date +%s)
if [ "${QUICK_BUILD_ONLY:-0}" = 1 ]; then
  echo "quick $KIND: built in $((built - start)) s ($DIR)"
  exit 0
fi
# fast_unwind_on_malloc=0: full allocation stacks, so lsan.supp can match third-party frames.
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1:fast_unwind_on_malloc=0
export LSAN_OPTIONS=suppressions=$SRC/tests/sanitize/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
export ACCL_LEAK_CYCLES=100
"$DIR/tests/leak_cycles_test" --gtest_filter="$FILTER"
rc=$?
echo "quick $KIND: build $((built - start)) s, run $(($(date +%s) - built)) s, exit $rc"
exit $rc
