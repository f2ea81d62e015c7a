// grid.h: runs a kernel of the emulated build as a GPU would run its grid: every block on a
// host thread of its own (blocks of one launch run at the same time, so a kernel that waits
// for another block's or another rank's flag makes progress), and the threads of a block as
// fibers on that host thread, switched at syncBlock (a real barrier: all threads of the block
// arrive before any leaves; threads that returned count as arrived, as on Volta and later)
// and at spinPause (a waiting thread lets the others run).
#pragma once
#include <optional>
#include "emulated/kernel_registry.h"

namespace accl::kern {

// Blocks beyond this many wait for a free host thread, as blocks wait for a free SM on a GPU:
// a kernel that needs more blocks resident at once than this does not fit the emulation.
constexpr unsigned kMaxResidentBlocks = 64;

// Runs the grid to the end; the first fault of any thread, if one ended it.
std::optional<Fault> runGrid(unsigned gridDim, unsigned blockDim, const PreparedLaunch& launch);

}  // namespace accl::kern
