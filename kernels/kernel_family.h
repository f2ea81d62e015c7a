// kernel_family.h: one kernel per (type, op) for a family of device kernels. A family defines
// KERNEL(name, nccltype, opname, Op) and expands ACCL_EVERY_TYPE_AND_OP(KERNEL): twelve types
// (<name> is dev::typeName's spelling, which the backend builds kernel names from) by four ops.
#pragma once

#define ACCL_EVERY_OP_OF_TYPE(KERNEL, name, nccltype) \
  KERNEL(name, nccltype, sum, SumOp)                  \
  KERNEL(name, nccltype, prod, ProdOp)                \
  KERNEL(name, nccltype, max, MaxOp)                  \
  KERNEL(name, nccltype, min, MinOp)

#define ACCL_EVERY_TYPE_AND_OP(KERNEL)                          \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, int8, ncclInt8)                 \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, uint8, ncclUint8)               \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, int32, ncclInt32)               \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, uint32, ncclUint32)             \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, int64, ncclInt64)               \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, uint64, ncclUint64)             \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, float16, ncclFloat16)           \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, float32, ncclFloat32)           \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, float64, ncclFloat64)           \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, bfloat16, ncclBfloat16)         \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, float8e4m3, ncclFloat8e4m3)     \
  ACCL_EVERY_OP_OF_TYPE(KERNEL, float8e5m2, ncclFloat8e5m2)
