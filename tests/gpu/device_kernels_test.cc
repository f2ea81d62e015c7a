// The CUDA kernels (build/lib/accl_device_kernels.fatbin) against the host kernels: for every
// type and op, reduce/scale/divide on the GPU give bitwise the same bytes as on the CPU (the
// arithmetic is the same source, kernels/host/element_types.h). Skips, saying why, without a
// driver, a device or the fatbin.
#include <algorithm>
#include <gtest/gtest.h>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>
#include "device.h"
#include "device/cuda/cuda_backend.h"
#include "device/cuda/driver_api.h"

namespace accl::dev::cuda {
namespace {

const char* const kOpNames[4] = {"sum", "prod", "max", "min"};

bool isFloat(ncclDataType_t t) { return t >= ncclFloat16 && t != ncclInt8 && t != ncclUint8 && t <= ncclFloat8e5m2; }

// Finite values only: NaN payloads legitimately differ between CPU and GPU arithmetic.
std::vector<char> randomElements(ncclDataType_t t, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> f(-6.0f, 6.0f);
  const size_t es = typeSize(t);
  std::vector<char> out(count * es);
  for (size_t i = 0; i < count; i++) {
    char* p = out.data() + i * es;
    float v = f(rng);
    switch (t) {
      case ncclFloat16: { uint16_t h = floatToHalf(v); std::memcpy(p, &h, 2); break; }
      case ncclBfloat16: { uint16_t b = floatToBf16(v); std::memcpy(p, &b, 2); break; }
      case ncclFloat8e4m3: { uint8_t b = floatToFp8e4m3(v); std::memcpy(p, &b, 1); break; }
      case ncclFloat8e5m2: { uint8_t b = floatToFp8e5m2(v); std::memcpy(p, &b, 1); break; }
      case ncclFloat32: std::memcpy(p, &v, 4); break;
      case ncclFloat64: { double d = static_cast<double>(v) * 1.0000001; std::memcpy(p, &d, 8); break; }
      default: { uint64_t r = (static_cast<uint64_t>(rng()) << 32) | rng(); std::memcpy(p, &r, es); break; }
    }
  }
  return out;
}

class DeviceKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    api_ = loadDriver(&why);
    if (!api_) GTEST_SKIP() << "no usable CUDA driver: " << why;
    int n = 0;
    if (api_->deviceGetCount(&n) != kSuccess || n == 0) GTEST_SKIP() << "no CUDA device visible";
    const char* dir = std::getenv("ACCL_TEST_BUILD_DIR");
    std::string path = std::string(dir ? dir : "build") + "/lib/accl_device_kernels.fatbin";
    std::ifstream in(path, std::ios::binary);
    if (!in) GTEST_SKIP() << "no fatbin at " << path << " (nvcc missing at build time?)";
    image_.assign(std::istreambuf_iterator<char>(in), {});
    CUdevice dev;
    CUcontext ctx;
    ASSERT_EQ(api_->deviceGet(&dev, 0), kSuccess);
    ASSERT_EQ(api_->primaryCtxRetain(&ctx, dev), kSuccess);
    ASSERT_EQ(api_->ctxSetCurrent(ctx), kSuccess);
    ASSERT_EQ(api_->moduleLoadData(&module_, image_.data()), kSuccess) << "fatbin has no code for this GPU";
  }

  CUdeviceptr upload(const std::vector<char>& host) {
    CUdeviceptr p = 0;
    EXPECT_EQ(api_->memAlloc(&p, host.size() + 16), kSuccess);
    EXPECT_EQ(api_->memcpyHtoD(p, host.data(), host.size()), kSuccess);
    allocations_.push_back(p);
    return p;
  }
  std::vector<char> download(CUdeviceptr p, size_t bytes) {
    std::vector<char> out(bytes);
    EXPECT_EQ(api_->ctxSynchronize(), kSuccess);
    EXPECT_EQ(api_->memcpyDtoH(out.data(), p, bytes), kSuccess);
    return out;
  }
  void launch(const std::string& name, std::vector<void*> args) {
    CUfunction fn = nullptr;
    ASSERT_EQ(api_->moduleGetFunction(&fn, module_, name.c_str()), kSuccess) << name;
    ASSERT_EQ(api_->launchKernel(fn, 64, 1, 1, 256, 1, 1, 0, nullptr, args.data(), nullptr), kSuccess) << name;
  }
  void TearDown() override {
    if (api_)
      for (CUdeviceptr p : allocations_) api_->memFree(p);
  }

  const DriverApi* api_ = nullptr;
  std::vector<char> image_;
  CUmodule module_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
};

// Odd, larger than one grid pass (64 x 256), so the grid-stride tail runs too.
constexpr size_t kCount = 64 * 256 * 3 + 7;

TEST_F(DeviceKernels, ReduceOfEveryTypeAndOpIsBitwiseEqualToTheHostKernels) {
  for (int ti = 0; ti < ncclNumTypes; ti++) {
    const auto t = static_cast<ncclDataType_t>(ti);
    const size_t bytes = kCount * typeSize(t);
    std::vector<char> a = randomElements(t, kCount, 1 + ti), b = randomElements(t, kCount, 100 + ti);
    for (int op = 0; op < 4; op++) {
      std::vector<char> want(bytes);
      reduce2(t, static_cast<RedKind>(op), want.data(), a.data(), b.data(), kCount);
      CUdeviceptr da = upload(a), db = upload(b), dd = upload(std::vector<char>(bytes));
      size_t n = kCount;
      launch(kernelName("accl_reduce2_", t) + "_" + kOpNames[op], {&dd, &da, &db, &n});
      EXPECT_TRUE(download(dd, bytes) == want) << typeName(t) << " " << kOpNames[op];
    }
  }
}

TEST_F(DeviceKernels, ScaleAndDivideOfEveryTypeAreBitwiseEqualToTheHostKernels) {
  for (int ti = 0; ti < ncclNumTypes; ti++) {
    const auto t = static_cast<ncclDataType_t>(ti);
    const size_t bytes = kCount * typeSize(t);
    std::vector<char> src = randomElements(t, kCount, 7 + ti), scalar = randomElements(t, 1, 77 + ti);
    std::vector<char> wantScale(bytes), wantDivide(bytes);
    scale(t, wantScale.data(), src.data(), scalar.data(), kCount);
    divide(t, wantDivide.data(), src.data(), 3, kCount);
    CUdeviceptr ds = upload(src), dk = upload(scalar), out1 = upload(std::vector<char>(bytes)),
                out2 = upload(std::vector<char>(bytes));
    size_t n = kCount;
    int divisor = 3;
    launch(kernelName("accl_scale_", t), {&out1, &ds, &dk, &n});
    launch(kernelName("accl_divide_", t), {&out2, &ds, &divisor, &n});
    EXPECT_TRUE(download(out1, bytes) == wantScale) << "scale " << typeName(t) << (isFloat(t) ? " (float)" : "");
    EXPECT_TRUE(download(out2, bytes) == wantDivide) << "divide " << typeName(t);
  }
}

TEST_F(DeviceKernels, CopyMovesEveryByteAlignedOrNot) {
  std::vector<char> src = randomElements(ncclUint8, 100003, 5);
  CUdeviceptr ds = upload(src), dd = upload(std::vector<char>(src.size()));
  for (size_t offset : {size_t(0), size_t(3)}) {
    CUdeviceptr d = dd + offset, s = ds + offset;
    size_t n = src.size() - offset;
    launch("accl_copy", {&d, &s, &n});
    std::vector<char> got = download(dd, src.size());
    EXPECT_TRUE(std::equal(got.begin() + offset, got.end(), src.begin() + offset)) << "offset " << offset;
  }
}

}  // namespace
}  // namespace accl::dev::cuda
