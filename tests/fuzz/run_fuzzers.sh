#!/bin/sh
# Builds the libFuzzer targets with clang in BUILD_DIR and runs each for SECONDS.
#   tests/fuzz/run_fuzzers.sh SECONDS BUILD_DIR
# Exit 77 (skip, with the reason printed) when clang/libFuzzer is not available.
set -u
SECONDS_EACH=${1:-10}
BUILD_DIR=${2:-build-fuzz}
HERE=$(cd "$(dirname "$0")" && pwd)
CXX_FUZZ=${FUZZ_CXX:-}
if [ -z "$CXX_FUZZ" ]; then
  for c in clang++ clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null 2>&1; then CXX_FUZZ=$c; break; fi
  done
fi
if [ -z "$CXX_FUZZ" ]; then
  echo "SKIP: no clang++ found (libFuzzer needs clang; install clang and libclang-rt-dev)"
  exit 77
fi
probe=$(mktemp -d)
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$probe/p.cc"
if ! "$CXX_FUZZ" -fsanitize=fuzzer "$probe/p.cc" -o "$probe/p" >/dev/null 2>&1; then
  rm -rf "$probe"
  echo "SKIP: $CXX_FUZZ cannot link -fsanitize=fuzzer (install libclang-rt-dev for this clang)"
  exit 77
fi
rm -rf "$probe"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$HERE" -B "$BUILD_DIR" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DCMAKE_BUILD_TYPE=Debug >/dev/null || exit 1
fi
cmake --build "$BUILD_DIR" -j 2 >"$BUILD_DIR/build.log" 2>&1 || { cat "$BUILD_DIR/build.log"; exit 1; }
status=0
for f in "$BUILD_DIR"/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  corpus="$BUILD_DIR/corpus/$name"
  mkdir -p "$corpus"
  log="$BUILD_DIR/$name.log"
  "$f" -max_total_time="$SECONDS_EACH" -print_final_stats=1 -rss_limit_mb=1024 -max_len=4096 \
       -artifact_prefix="$BUILD_DIR/crash-$name-" "$corpus" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [ $rc -ne 0 ]; then
    echo "FAIL: $name exited $rc; last lines of $log:"
    tail -n 30 "$log"
    status=1
  else
    echo "ok: $name: ${runs:-?} runs in ${SECONDS_EACH} s"
  fi
done
exit $status
