# Thin wrapper over CMake. `make run` and `make test` install dependencies first.
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
# Warnings are errors in the project's own builds (make, make test, CI); a plain `cmake` build
# leaves them warnings (ACCL_WERROR, CMakeLists.txt). WERROR=OFF turns that off here too.
WERROR ?= ON
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CCACHE_FLAGS)
# ccache (scripts/install-deps.sh installs it) keyed on paths relative to the checkout, so a
# fresh clone (CI) reuses what an earlier build of the same sources compiled.
CCACHE_FLAGS := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
# Python virtual environment with torch (scripts/install-torch.sh, tests/torch)
VENV ?= $(CURDIR)/.venv
export VENV

.PHONY: all deps deps-torch configure build run test install clean bench

all: build

# Debian packages for the build, the demo and the tests.
deps:
	@bash scripts/install-deps.sh

# PyTorch (~10 GB with its CUDA wheels, once per machine): only the torch tests and benchmarks use it.
deps-torch:
	@bash scripts/install-torch.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DACCL_WERROR=$(WERROR)

configure: $(BUILD)/CMakeCache.txt

build: configure
	@grep -q '^ACCL_WERROR:BOOL=$(WERROR)$$' $(BUILD)/CMakeCache.txt || cmake $(BUILD) -DACCL_WERROR=$(WERROR) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	@if grep -q '^ACCL_PERF_MPI:INTERNAL=OFF' $(BUILD)/CMakeCache.txt; then \
	  echo '*** WARNING: built WITHOUT MPI (libopenmpi-dev not found): mpirun cannot start build/perf/*_perf.'; \
	  echo '*** `make test` installs it; or run `make deps` (apt-get install libopenmpi-dev), then rm -rf $(BUILD) && make.'; \
	fi

run: deps build
	@bash scripts/run-demo.sh $(BUILD)

# The quick sanitizer tests' own builds of the library (tests/sanitize/quick.sh) and the torch
# extension for the newest and the oldest torch (tests/torch/run_*.sh, `-c pass`: build, then
# run nothing) are made here, before ctest, with every CPU: the suite then times tests, not
# compilers (the two extension builds took 200 s of torch.PytestSuite and torch.OldestTorch).
test: deps deps-torch build
	QUICK_BUILD_ONLY=1 sh tests/sanitize/quick.sh asan-ubsan $(CURDIR) $(abspath $(BUILD))/sanitize $(JOBS)
	QUICK_BUILD_ONLY=1 sh tests/sanitize/quick.sh tsan $(CURDIR) $(abspath $(BUILD))/sanitize $(JOBS)
	sh tests/torch/run_ctest.sh $(CURDIR) $(abspath $(BUILD))/lib/libnccl.so.2 -c pass
	MAX_JOBS=$(JOBS) sh tests/torch/run_oldest.sh $(CURDIR) $(abspath $(BUILD))/lib/libnccl.so.2 $(abspath $(BUILD))/torch-oldest -c pass
	cd $(BUILD) && ctest --output-on-failure -j 2 --timeout 600

# ACCL next to OpenMPI and Gloo, interleaved, in one run (perf/compare.py; BENCH_ARGS adds options,
# e.g. BENCH_ARGS="--np 2 --reps 5"). Writes compare.json and compare.png here.
BENCH_ARGS ?=
bench: deps deps-torch build
	/usr/bin/python3 perf/compare.py --build-dir $(BUILD) $(BENCH_ARGS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)

# ---- fuzzing and sanitizers (failure-handling helper) -----------------------------------------
# make fuzz: libFuzzer targets for every network-bytes decoder (clang), FUZZ_SECONDS each.
# make test-asan|test-tsan|test-ubsan: the unit and API suites built with one sanitizer, each
# in its own build dir. SAN_TESTS narrows the ctest run (a -R regex); SAN_LABELS the labels.
FUZZ_SECONDS ?= 60
SAN_LABELS ?= unit|api
SAN_TESTS ?= .
SAN_CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACCL_WERROR=ON -DACCL_SANITIZE=$(1)
.PHONY: fuzz test-asan test-tsan test-ubsan

fuzz:
	sh tests/fuzz/run_fuzzers.sh $(FUZZ_SECONDS) build-fuzz

define accl_san_target
test-$(1):
	cmake -S . -B build-$(1) $$(call SAN_CMAKE_FLAGS,$(2))
	cmake --build build-$(1) -j $$(JOBS)
	cd build-$(1) && $(3) ctest --output-on-failure -j 2 --timeout 900 -L '$$(SAN_LABELS)' -R '$$(SAN_TESTS)'
endef
$(eval $(call accl_san_target,asan,address,ASAN_OPTIONS=detect_leaks=1:abort_on_error=1))
$(eval $(call accl_san_target,tsan,thread -DCMAKE_CXX_FLAGS=-Wno-tsan,TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1))
$(eval $(call accl_san_target,ubsan,undefined,UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1))
