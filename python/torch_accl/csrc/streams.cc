#include "streams.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch_accl {
namespace {
const c10::impl::DeviceGuardImplInterface* cudaGuard() {
  if (!builtWithCuda() || !c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) return nullptr;
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}
}  // namespace

int cudaDeviceCount() {
  const auto* g = cudaGuard();
  return g ? (int)g->deviceCount() : 0;
}

c10::Device currentCudaDevice() {
  const auto* g = cudaGuard();
  TORCH_CHECK(g, "accl: CUDA tensors need a CUDA build of torch and of torch_accl");
  return g->getDevice();
}

SideStream::SideStream(c10::Device device)
    : stream_(cudaGuard()->getStreamFromGlobalPool(device, /*isHighPriority=*/false)),
      handle_(cudaStreamOf(stream_)) {}

void SideStream::waitForCurrentStream() {
  c10::Event ready(c10::DeviceType::CUDA);
  ready.record(cudaGuard()->getStream(device()));
  ready.block(stream_);
}

void SideStream::recordTensors(const std::vector<at::Tensor>& tensors) {
  const auto* g = cudaGuard();
  for (const auto& t : tensors) {
    if (t.defined() && t.device() == device() && t.has_storage()) g->recordDataPtrOnStream(t.storage().data_ptr(), stream_);
  }
}

std::shared_ptr<c10::Event> SideStream::recordEvent() {
  auto ev = std::make_shared<c10::Event>(c10::DeviceType::CUDA);
  ev->record(stream_);
  return ev;
}

void makeCurrentStreamWait(const c10::Event& event, c10::Device device) {
  event.block(cudaGuard()->getStream(device));
}

}  // namespace torch_accl
