// Helpers shared by the layout dump (built against ACCL's nccl.h) and the layout check (built
// against NVIDIA's nccl.h): the same expression text is evaluated under each header.
#pragma once
#include <cstddef>

#define ACCL_CONFIG_INIT(f) ([] { constexpr ncclConfig_t c_ = NCCL_CONFIG_INITIALIZER; return (long long)c_.f; }())
#define ACCL_CONFIG_INIT_IS_NULL(f) ([] { constexpr ncclConfig_t c_ = NCCL_CONFIG_INITIALIZER; return c_.f == nullptr; }())
#define ACCL_SIMINFO_INIT_MAGIC ([] { constexpr ncclSimInfo_t s_ = NCCL_SIM_INFO_INITIALIZER; return (long long)s_.magic; }())
#define ACCL_SIMINFO_INIT_TIME ([] { constexpr ncclSimInfo_t s_ = NCCL_SIM_INFO_INITIALIZER; return (long long)(s_.estimatedTime * 1000); }())
