// device_kernels.cc: the emulated build of kernels/device_kernels.h: the same kernel code,
// compiled by the host compiler and registered by name (kernel_registry.h) for the fake CUDA
// driver, which runs it as a grid (grid.h) when the library launches a kernel.
#include "device_kernels.h"
