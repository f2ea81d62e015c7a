#include "emulated/fiber.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__)

// accl_fiber_switch(void** saveSp, void* newSp): push the callee-saved registers and the
// MXCSR/x87 control words, store the stack pointer, load the other, pop its state.
// accl_fiber_start: where a new fiber's first switch "returns" to; calls its entry.
asm(R"(
  .text
  .p2align 4
  .type accl_fiber_switch,@function
accl_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size accl_fiber_switch, .-accl_fiber_switch

  .p2align 4
  .type accl_fiber_start,@function
accl_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size accl_fiber_start, .-accl_fiber_start
)");

extern "C" void accl_fiber_switch(void** saveSp, void* newSp);
extern "C" void accl_fiber_start();

namespace accl::kern {

void fiberPrepare(FiberContext* ctx, char* stack, size_t bytes, void (*entry)(void*), void* arg) {
  // Layout below the 16-aligned top T, as accl_fiber_switch pops it: control words at T-80,
  // r15 r14 r13 r12 rbx rbp at T-72..T-32, the start address at T-24; after `ret` the stack
  // pointer is T-16, 16-aligned, as at a call site.
  auto top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t{15};
  auto* w = reinterpret_cast<uint64_t*>(top - 80);
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  w[0] = mxcsr | (static_cast<uint64_t>(fpucw) << 32);
  w[1] = 0;                                       // r15
  w[2] = 0;                                       // r14
  w[3] = reinterpret_cast<uint64_t>(entry);       // r13
  w[4] = reinterpret_cast<uint64_t>(arg);         // r12
  w[5] = 0;                                       // rbx
  w[6] = 0;                                       // rbp
  w[7] = reinterpret_cast<uint64_t>(&accl_fiber_start);
  ctx->sp = w;
}

void fiberSwitch(FiberContext* from, FiberContext* to) { accl_fiber_switch(&from->sp, to->sp); }

}  // namespace accl::kern

#else
#error "kernels/emulated/fiber.cc: only x86-64 has a context switch here; add one (or ucontext) for this machine"
#endif
