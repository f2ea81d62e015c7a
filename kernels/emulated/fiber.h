// fiber.h: the smallest context switch the grid emulation needs. A block runs up to 1024
// threads as fibers on one host thread; the C library's swapcontext makes a system call per
// switch (it saves the signal mask), which made a 1000-block elementwise launch take seconds.
// On x86-64 a switch here saves the callee-saved registers and the FPU control words only.
#pragma once
#include <cstddef>

namespace accl::kern {

// Starts `entry(arg)` on [stack, stack+bytes) the first time it is switched to. `entry` must
// never return: it switches back for good when its thread is done.
struct FiberContext {
  void* sp = nullptr;
};
void fiberPrepare(FiberContext* ctx, char* stack, size_t bytes, void (*entry)(void*), void* arg);
// Saves the running context in *from and resumes `to`.
void fiberSwitch(FiberContext* from, FiberContext* to);

}  // namespace accl::kern
