// nccl_types.h: torch's dtypes, reduce ops and tensors as the NCCL API sees them.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "nccl.h"

namespace torch_accl {

ncclDataType_t toNccl(at::ScalarType t);

// A c10d reduce op as an NCCL one. PREMUL_SUM is a SUM over inputs scaled first (scale()).
struct Reduction {
  ncclRedOp_t op = ncclSum;
  bool premul = false;
  double factor = 1.0;
  at::Tensor factorTensor;  // PREMUL_SUM with a tensor factor (it may live on the GPU)
};
Reduction toNccl(const c10d::ReduceOp& rop, at::ScalarType t, const char* opName);
// BAND/BOR/BXOR: no NCCL op; all_reduce folds gathered inputs itself (allreduceBitwise).
inline bool isBitwise(const c10d::ReduceOp& rop) {
  return rop.op_ == c10d::ReduceOp::BAND || rop.op_ == c10d::ReduceOp::BOR || rop.op_ == c10d::ReduceOp::BXOR;
}

// PREMUL_SUM's scaling, in place and into a new tensor; on the tensor's device and (CUDA) the
// current stream, without a host sync when the factor lives on that device.
void scaleInPlace(at::Tensor& t, const Reduction& r);
at::Tensor scaled(const at::Tensor& t, const Reduction& r);

// A tensor as NCCL sees it: complex viewed as pairs of reals.
at::Tensor asNccl(const at::Tensor& t);

// Defined and dense (strided); the device is checked when the op is launched.
void checkDense(const at::Tensor& t, const char* opName);

}  // namespace torch_accl
