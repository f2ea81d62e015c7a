// The grid emulation (kernels/emulated) that the fake CUDA driver runs the library's kernels
// on: barriers are real, blocks of one launch run at the same time, spinning threads let the
// others run, and the faults a GPU raises end the launch with the right kind.
#include <gtest/gtest.h>
#include <atomic>
#include <cstdint>
#include <vector>
#include "device/cuda/kernel_names.h"
#include "emulated/grid.h"
#include "portable.h"

// Test kernels, registered like the library's (they take host memory: hostView is identity
// here, except for one address standing for memory no GPU could reach).
namespace {
char unreachable;
}
void* accl::kern::hostView(const void* p) {
  if (p == &unreachable) throw Fault{Fault::IllegalAddress, "unreachable"};
  return const_cast<void*>(p);
}

// Each thread writes its slot, then (after the barrier) reads its neighbour's: without a real
// barrier a thread reads a slot nobody has written yet.
ACCL_KERNEL_NAMED(test_neighbour_after_barrier, (int* slots, int* seen)) {
  using namespace accl::kern;
  const unsigned t = threadIndex(), n = blockSize(), base = blockIndex() * n;
  slots[base + t] = static_cast<int>(base + t) + 1;
  syncBlock();
  seen[base + t] = slots[base + (t + 1) % n];
  syncBlock();
  slots[base + t] = 0;  // the neighbour read before anyone clears: a second barrier
}

// Block 0 waits for a flag the last block sets: only blocks that run together finish.
ACCL_KERNEL_NAMED(test_first_block_waits_for_last, (uint64_t* flag, int* done)) {
  using namespace accl::kern;
  if (threadIndex() != 0) return;
  if (blockIndex() == gridSize() - 1) storeRelease(flag, 1);
  if (blockIndex() == 0) {
    while (loadAcquire(flag) == 0) spinPause();
    *done = 1;
  }
}

// Thread 0 waits for a flag the block's last thread sets, without a barrier.
ACCL_KERNEL_NAMED(test_thread_waits_for_sibling, (uint64_t* flag, int* done)) {
  using namespace accl::kern;
  if (threadIndex() == blockSize() - 1) storeRelease(flag, 1);
  if (threadIndex() == 0) {
    while (loadAcquire(flag) == 0) spinPause();
    *done = 1;
  }
}

ACCL_KERNEL_NAMED(test_vector_copy, (const char* src, char* dst)) {
  accl::kern::storeVec(dst, accl::kern::loadVec(src));
}

ACCL_KERNEL_NAMED(test_touch, (char* p)) { *p = 1; }

namespace accl::kern {
namespace {

template <class... A>
std::optional<Fault> launch(const char* name, unsigned grid, unsigned block, A... args) {
  const EmulatedKernel* k = findKernel(name);
  EXPECT_NE(k, nullptr) << name;
  if (k == nullptr) return Fault{Fault::IllegalAddress, "no kernel"};
  void* params[] = {&args...};
  return runGrid(grid, block, k->bind(params));
}

TEST(EmulatedGrid, BarriersHoldEveryThreadOfTheBlockUntilAllArrive) {
  const unsigned grid = 3, block = 256;
  std::vector<int> slots(grid * block), seen(grid * block, -1);
  ASSERT_FALSE(launch("test_neighbour_after_barrier", grid, block, slots.data(), seen.data()));
  for (unsigned b = 0; b < grid; b++)
    for (unsigned t = 0; t < block; t++)
      ASSERT_EQ(seen[b * block + t], static_cast<int>(b * block + (t + 1) % block) + 1) << "block " << b << " thread " << t;
}

TEST(EmulatedGrid, BlocksOfOneLaunchRunTogether) {
  uint64_t flag = 0;
  int done = 0;
  ASSERT_FALSE(launch("test_first_block_waits_for_last", 40u, 32u, &flag, &done));
  EXPECT_EQ(done, 1);
}

TEST(EmulatedGrid, ASpinningThreadLetsItsSiblingsRun) {
  uint64_t flag = 0;
  int done = 0;
  ASSERT_FALSE(launch("test_thread_waits_for_sibling", 1u, 128u, &flag, &done));
  EXPECT_EQ(done, 1);
}

TEST(EmulatedGrid, AMisalignedVectorAccessFaultsAsOnAGpu) {
  alignas(16) char src[48] = {}, dst[48] = {};
  EXPECT_FALSE(launch("test_vector_copy", 1u, 1u, static_cast<const char*>(src), dst));
  auto fault = launch("test_vector_copy", 1u, 1u, static_cast<const char*>(src + 4), dst);
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->kind, Fault::MisalignedAddress) << fault->what;
}

TEST(EmulatedGrid, APointerNoGpuCouldReachFaultsBeforeTheKernelRuns) {
  auto fault = launch("test_touch", 1u, 1u, &unreachable);
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->kind, Fault::IllegalAddress);
  EXPECT_EQ(unreachable, 0);
}

TEST(EmulatedGrid, HoldsEveryKernelTheLibraryLaunches) {
  const auto names = accl::dev::cuda::libraryKernelNames();
  // Beyond them: this test's 5 kernels and the two flag kernels the fake's rule tests use.
  EXPECT_EQ(names.size(), kernelNames().size() - 7) << "the emulated build has kernels the library never launches";
  for (const std::string& name : names) EXPECT_NE(findKernel(name.c_str()), nullptr) << name;
}

}  // namespace
}  // namespace accl::kern
