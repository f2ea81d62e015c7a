#include "rank_resources.h"

#include <cstring>

namespace accl::perf {
namespace {

using dev::cuda::CUdeviceptr;
using dev::cuda::CUresult;
using dev::cuda::kSuccess;

bool cudaOk(const CudaSession& cuda, CUresult r, const char* call, std::string* error) {
  if (r == kSuccess) return true;
  *error = std::string(call) + ": " + cudaErrorText(cuda, r);
  return false;
}

// With the library's last error, as nccl-tests prints it for a failed call: the code alone
// ("remote process exited or there was a network error") does not say which peer or link.
bool ncclOk(ncclResult_t r, const char* call, std::string* error) {
  if (r == ncclSuccess) return true;
  const char* last = ncclGetLastError(nullptr);
  *error = std::string(call) + ": " + ncclGetErrorString(r) + " / " + (last ? last : "");
  return false;
}

}  // namespace

bool RankStream::create(CudaSession* cuda, RankStream* out, std::string* error) {
  out->cuda_ = cuda;
  if (!cuda) return ncclOk(ncclHostStreamCreate(&out->stream_), "ncclHostStreamCreate", error);
  return cudaOk(*cuda, cuda->api().streamCreate(&out->stream_, dev::cuda::kStreamNonBlocking), "cuStreamCreate",
                error);
}

RankStream::~RankStream() {
  if (!stream_) return;
  if (cuda_) cuda_->api().streamDestroy(stream_);
  else ncclHostStreamDestroy(stream_);
}

bool RankStream::synchronize(std::string* error) const {
  if (cuda_) return cudaOk(*cuda_, cuda_->api().streamSynchronize(stream_), "cuStreamSynchronize", error);
  if (!stream_) return true;  // the host backend finished NULL-stream work before returning
  return ncclOk(ncclHostStreamSynchronize(stream_), "ncclHostStreamSynchronize", error);
}

RankStream::State RankStream::query(std::string* error) const {
  if (cuda_) {
    const CUresult r = cuda_->api().streamQuery(stream_);
    if (r == dev::cuda::kErrorNotReady) return State::kBusy;
    return cudaOk(*cuda_, r, "cuStreamQuery", error) ? State::kDone : State::kFailed;
  }
  if (!stream_) return State::kDone;
  const ncclResult_t r = ncclHostStreamQuery(stream_);
  if (r == ncclInProgress) return State::kBusy;
  return ncclOk(r, "ncclHostStreamQuery", error) ? State::kDone : State::kFailed;
}

ncclResult_t RankBuffer::allocate(size_t bytes, CudaSession* cuda, RankBuffer* out) {
  out->bytes_ = bytes;
  out->cuda_ = cuda;
  if (cuda) out->staging_.reset(new char[bytes ? bytes : 1]);  // not zeroed: every use fills it first
  ncclResult_t res = ncclMemAlloc(&out->ptr_, bytes ? bytes : 1);
  // Host memory that was never written reads as the kernel's shared zero page: with -c 0 an
  // out-of-place input would come from one cached 4 KiB page and time far too fast (in-place
  // looked 1.2-1.6x slower than out-of-place at 16-128 MiB for that reason alone). Write every
  // page once, as device memory and OpenMPI's benchmark buffers are real memory.
  if (res == ncclSuccess && !cuda) std::memset(out->ptr_, 0, bytes);
  return res;
}

bool RankBuffer::upload(size_t offset, size_t bytes, std::string* error) const {
  if (!cuda_ || bytes == 0) return true;
  return cudaOk(*cuda_,
                cuda_->api().memcpyHtoD(reinterpret_cast<CUdeviceptr>(data() + offset), staging_.get() + offset, bytes),
                "cuMemcpyHtoD", error);
}

bool RankBuffer::download(size_t offset, size_t bytes, std::string* error) const {
  if (!cuda_ || bytes == 0) return true;
  return cudaOk(*cuda_,
                cuda_->api().memcpyDtoH(staging_.get() + offset, reinterpret_cast<CUdeviceptr>(data() + offset), bytes),
                "cuMemcpyDtoH", error);
}

}  // namespace accl::perf
