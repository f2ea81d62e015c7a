// The HIP kernels' offload bundle, read with LLVM's own tools (no AMD GPU, no ROCm): one code
// object per requested target, each holding every kernel the library can launch, and the very
// same bytes embedded in libnccl.so.2. "Every kernel the library can launch" is the registry of
// the emulated build (kernels/emulated), the table the fake CUDA driver resolves the library's
// launches from (a second compile of the same source by another compiler), which holds the
// device backend's own list (device/cuda/kernel_names.h).
#include <gtest/gtest.h>
#include <unistd.h>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include "device/cuda/kernel_names.h"
#include "device/hip/kernel_bundle.h"
#include "emulated/kernel_registry.h"

// The emulated kernels map device addresses through the fake driver's hostView; this test only
// reads their registry and runs none, so plain host memory is its own view.
namespace accl::kern {
void* hostView(const void* p) { return const_cast<void*>(p); }
}  // namespace accl::kern

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Runs a command; its standard output, and its exit status in *status.
std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *status = pclose(p);
  return out;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t'\"");
  const auto e = s.find_last_not_of(" \t'\"");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "hipv4-amdgcn-amd-amdhsa--gfx942": the bundle entry of one target's code object.
std::string entryOf(const std::string& arch) { return "hipv4-amdgcn-amd-amdhsa--" + arch; }

class HipKernelBundle : public ::testing::Test {
 protected:
  void SetUp() override {
    archs_ = split(ACCL_HIP_ARCHS, ' ');
    ASSERT_FALSE(archs_.empty());
    dir_ = std::filesystem::temp_directory_path() / ("accl_hip_bundle_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Target `arch`'s code object, unbundled into a file of its own.
  std::string unbundle(const std::string& arch) {
    const std::string out = (dir_ / (arch + ".co")).string();
    int st = 0;
    run(std::string(ACCL_HIP_BUNDLER) + " --unbundle --type=o --input=" + ACCL_HIP_BUNDLE +
            " --targets=" + entryOf(arch) + " --output=" + out + " 2>&1",
        &st);
    EXPECT_EQ(st, 0) << "clang-offload-bundler could not unbundle " << arch;
    return out;
  }

  std::vector<std::string> archs_;
  std::filesystem::path dir_;
};

TEST_F(HipKernelBundle, ListsOneCodeObjectPerRequestedTarget) {
  int st = 0;
  const std::string listed =
      run(std::string(ACCL_HIP_BUNDLER) + " --list --type=o --input=" + ACCL_HIP_BUNDLE + " 2>&1", &st);
  ASSERT_EQ(st, 0) << listed;
  std::set<std::string> device;
  for (const std::string& e : split(listed, '\n'))
    if (e.rfind("host-", 0) != 0) device.insert(e);
  std::set<std::string> want;
  for (const std::string& a : archs_) want.insert(entryOf(a));
  EXPECT_EQ(device, want) << "clang-offload-bundler --list said:\n" << listed;
}

TEST_F(HipKernelBundle, EachTargetHoldsEveryKernelTheLibraryCanLaunch) {
  // The emulated registry less the LL kernels, which clang's HIP build leaves out
  // (kernels/ll_kernel.h; the HIP backend keeps small calls on the mailbox kernel).
  std::set<std::string> want;
  for (const std::string& n : accl::kern::kernelNames())
    if (n.rfind("accl_ll_", 0) != 0) want.insert(n);
  // 12 types x (4 reductions + scale + divide + 4 collective kernels + 4 direct kernels) + copy +
  // the two flag kernels of the stream gates + the staged kernel (communicators of more than 16 ranks).
  ASSERT_EQ(want.size(), 172u) << "the emulated registry is not the kernel list this test was written for";
  ASSERT_TRUE(want.count("accl_copy") && want.count("accl_reduce2_bfloat16_max") &&
              want.count("accl_coll_float8e5m2_min") && want.count("accl_staged"));
  // What the device backend resolves at init and launches is a subset of it.
  for (const std::string& n : accl::dev::cuda::libraryKernelNames(/*withLl=*/false))
    EXPECT_TRUE(want.count(n)) << n << " is launched by the library but not in the emulated registry";
  for (const std::string& arch : archs_) {
    SCOPED_TRACE(arch);
    const std::string co = unbundle(arch);
    int st = 0;
    // The ELF header names the machine; ABI version 3 is code object v5 (what portable.h reads).
    const std::string headers = run(std::string(ACCL_HIP_READOBJ) + " --file-headers " + co, &st);
    ASSERT_EQ(st, 0);
    std::string mach = "EF_AMDGPU_MACH_AMDGCN_" + arch;
    for (char& c : mach) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_NE(headers.find(mach), std::string::npos) << headers;
    EXPECT_NE(headers.find("ABIVersion: 3"), std::string::npos) << "not code object v5:\n" << headers;
    // The runtime finds kernels by the metadata note (amdhsa.kernels: .name) ...
    const std::string notes = run(std::string(ACCL_HIP_READOBJ) + " --notes " + co, &st);
    ASSERT_EQ(st, 0);
    std::set<std::string> inNotes;
    for (const std::string& line : split(notes, '\n')) {
      const auto at = line.find(".name:");
      if (at != std::string::npos && line.find(".name:", at + 1) == std::string::npos)
        inNotes.insert(trim(line.substr(at + 6)));
    }
    EXPECT_EQ(inNotes, want);
    // ... and launches the kernel descriptor, symbol <name>.kd.
    const std::string syms = run(std::string(ACCL_HIP_NM) + " --defined-only " + co, &st);
    ASSERT_EQ(st, 0);
    std::set<std::string> descriptors;
    for (const std::string& line : split(syms, '\n')) {
      const std::vector<std::string> f = split(line, ' ');
      if (f.size() == 3 && f[2].size() > 3 && f[2].compare(f[2].size() - 3, 3, ".kd") == 0)
        descriptors.insert(f[2].substr(0, f[2].size() - 3));
    }
    EXPECT_EQ(descriptors, want);
    // No call was left for a device library to satisfy (the build links none: -nogpulib).
    const std::string undefined = run(std::string(ACCL_HIP_NM) + " --undefined-only " + co, &st);
    EXPECT_EQ(undefined, "") << "undefined symbols in the " << arch << " code object";
  }
}

TEST_F(HipKernelBundle, LibraryCarriesTheSameBytes) {
  const std::string built = readFile(ACCL_HIP_BUNDLE);
  ASSERT_GT(built.size(), 0u);
  size_t bytes = 0;
  const void* embedded = accl::dev::hip::embeddedKernels(&bytes);
  ASSERT_EQ(bytes, built.size());
  EXPECT_EQ(std::string(static_cast<const char*>(embedded), bytes), built);
  // libnccl.so.2 itself (not only the internal library this test links) holds the bundle.
  const char* buildDir = std::getenv("ACCL_TEST_BUILD_DIR");
  ASSERT_NE(buildDir, nullptr);
  const std::string lib = readFile(std::string(buildDir) + "/lib/libnccl.so.2");
  ASSERT_GT(lib.size(), 0u);
  EXPECT_NE(lib.find(built), std::string::npos) << "the bundle is not inside libnccl.so.2";
}

}  // namespace
