// Datatypes and reduction ops as the perf binaries name them (-d / -o), and how an exact
// value (a small integer or a quotient, held in a double) is stored in each datatype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "nccl.h"

namespace accl::perf {

// The ops a perf binary can loop over; PreMulSum is "mulsum" (scalar 1 on even ranks, 2 on odd).
enum class ReduceOp { kSum, kProd, kMax, kMin, kAvg, kMulSum };

std::string_view typeName(ncclDataType_t type);
size_t typeSize(ncclDataType_t type);
bool isFloatType(ncclDataType_t type);
// Largest L such that every integer 0..L is exact in the type and sums stay in range.
int64_t exactIntegerLimit(ncclDataType_t type);
std::optional<ncclDataType_t> parseTypeName(std::string_view name);
// nccl-tests' "-d all" order.
const std::vector<ncclDataType_t>& allTypes();

std::string_view opName(ReduceOp op);
std::optional<ReduceOp> parseOpName(std::string_view name);
const std::vector<ReduceOp>& allOps();
ncclRedOp_t builtinOp(ReduceOp op);  // kMulSum has none: it is created per communicator

// Stores `value` into `out` (typeSize bytes), rounding to nearest even for narrow floats.
void encodeValue(ncclDataType_t type, double value, void* out);
// Distance in units in the last place between two stored values (0 = same bits). Integers:
// 0 when equal, else a large number.
uint64_t ulpDistance(ncclDataType_t type, const void* a, const void* b);

}  // namespace accl::perf
