// torch_compat.h: c10d API differences between the torch releases torch_accl builds against
// (2.5 .. 2.15; docs/pytorch.md), keyed on TORCH_VERSION_MAJOR/MINOR, so the rest of the code
// reads the same for all of them.
#pragma once

#include <torch/version.h>

#define TORCH_ACCL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// Hooks that newer releases made virtual - c10d::Backend::shutdown() (called by
// destroy_process_group) and c10d::Work::blockCurrentStream() - are declared with this: an
// override where the tested newest release (2.15) has them, a plain member on 2.5, which has
// not. Releases in between that have them are still overridden (same signature).
#if TORCH_ACCL_TORCH_AT_LEAST(2, 15)
#define TORCH_ACCL_OVERRIDE_SINCE_2_15 override
#define TORCH_ACCL_WORK_HAS_BLOCK_CURRENT_STREAM 1
#else
#define TORCH_ACCL_OVERRIDE_SINCE_2_15
#define TORCH_ACCL_WORK_HAS_BLOCK_CURRENT_STREAM 0
#endif
