#include "nccl_types.h"

namespace torch_accl {

ncclDataType_t toNccl(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kUInt32: return ncclUint32;
    case at::kUInt64: return ncclUint64;
    case at::kFloat8_e4m3fn: return ncclFloat8e4m3;
    case at::kFloat8_e5m2: return ncclFloat8e5m2;
    default:
      TORCH_CHECK(false, "accl: tensor dtype ", t, " has no NCCL equivalent");
  }
}

Reduction toNccl(const c10d::ReduceOp& rop, at::ScalarType t, const char* opName) {
  Reduction r;
  bool isBool = t == at::kBool;
  switch (rop.op_) {
    case c10d::ReduceOp::SUM: r.op = isBool ? ncclMax : ncclSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? ncclMin : ncclProd; break;
    case c10d::ReduceOp::MIN: r.op = ncclMin; break;
    case c10d::ReduceOp::MAX: r.op = ncclMax; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "accl: ", opName, ": AVG is not defined for bool tensors");
      r.op = ncclAvg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t), "accl: ", opName,
                  ": PREMUL_SUM needs a floating-point tensor");
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(rop.supplement_.get());
      TORCH_CHECK(sup, "accl: ", opName, ": PREMUL_SUM without a factor");
      r.op = ncclSum;
      r.premul = true;
      if (sup->tensor_factor.defined()) {
        r.factorTensor = sup->tensor_factor;
      } else {
        r.factor = sup->double_factor;
      }
      break;
    }
    default:
      TORCH_CHECK(false, "accl: ", opName, ": reduce op ", (int)rop.op_, " is not supported "
                  "(BAND/BOR/BXOR have no NCCL equivalent; all_reduce serves them on its own)");
  }
  if (at::isComplexType(t)) {
    TORCH_CHECK(r.op == ncclSum || r.op == ncclAvg, "accl: ", opName,
                ": complex tensors support only SUM, AVG and PREMUL_SUM");
  }
  return r;
}

namespace {
// The factor as a tensor usable on t's device, or undefined when a host scalar is needed.
bool factorOnDevice(const at::Tensor& t, const Reduction& r) {
  return r.factorTensor.defined() && !t.is_cpu() && r.factorTensor.device() == t.device();
}
double hostFactor(const Reduction& r) {
  return r.factorTensor.defined() ? r.factorTensor.item<double>() : r.factor;
}
}  // namespace

void scaleInPlace(at::Tensor& t, const Reduction& r) {
  if (factorOnDevice(t, r)) {
    t.mul_(r.factorTensor);
  } else {
    t.mul_(hostFactor(r));
  }
}

at::Tensor scaled(const at::Tensor& t, const Reduction& r) {
  return factorOnDevice(t, r) ? t.mul(r.factorTensor) : t.mul(hostFactor(r));
}

at::Tensor asNccl(const at::Tensor& t) { return at::isComplexType(t.scalar_type()) ? at::view_as_real(t) : t; }

void checkDense(const at::Tensor& t, const char* opName) {
  TORCH_CHECK(t.defined(), "accl: ", opName, ": undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "accl: ", opName, ": only dense (strided) tensors are supported");
}

}  // namespace torch_accl
