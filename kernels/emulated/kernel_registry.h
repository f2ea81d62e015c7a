// kernel_registry.h: the emulated build's table of kernels (kernels/device_kernels.h compiled by
// the host compiler), by name, so the fake CUDA driver can resolve cuModuleGetFunction and run a
// cuLaunchKernel of any kernel the library launches. Each entry copies the launch's arguments
// (kernelParams: one pointer per parameter, as the driver reads them) and later, when the
// stream reaches the launch, maps pointer arguments to where the CPU reaches them and runs one
// thread of the kernel per call (kernels/emulated/grid.h runs the grid).
#pragma once
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace accl::kern {

void* hostView(const void* p);

// What ends an emulated kernel early: a fault a GPU would raise (the stream's sticky error).
struct Fault {
  enum Kind { IllegalAddress, MisalignedAddress } kind;
  std::string what;
};

// One thread of a prepared launch.
using ThreadBody = std::function<void()>;
// Prepares a launch when it runs (pointer arguments mapped; throws Fault for one no GPU could
// reach) and returns the per-thread body.
using PreparedLaunch = std::function<ThreadBody()>;

struct EmulatedKernel {
  std::string name;
  size_t params = 0;
  size_t argBytes = 0;  // the parameters' sizes summed (what cuLaunchKernel copies)
  // Copies the arguments now, as cuLaunchKernel does.
  std::function<PreparedLaunch(void* const* params)> bind;
};

// The kernel called `name`, or nullptr.
const EmulatedKernel* findKernel(const char* name);
// Every kernel of the emulated build (for tests that check nothing the library launches is missing).
std::vector<std::string> kernelNames();
void registerKernel(EmulatedKernel k);

template <class T>
T mapArgument(T v) {
  if constexpr (std::is_pointer_v<T>) {
    return v == nullptr ? v : static_cast<T>(hostView(v));
  } else {
    return v;
  }
}

template <class... A>
struct KernelRegistration {
  KernelRegistration(const char* name, void (*fn)(A...)) {
    registerKernel({name, sizeof...(A), (size_t{0} + ... + sizeof(A)), [fn](void* const* params) -> PreparedLaunch {
                      std::tuple<std::remove_cv_t<A>...> args;
                      size_t i = 0;
                      std::apply([&](auto&... a) { ((std::memcpy(&a, params[i++], sizeof a)), ...); }, args);
                      return [fn, args]() -> ThreadBody {
                        auto mapped = std::apply([](auto... a) { return std::make_tuple(mapArgument(a)...); }, args);
                        return [fn, mapped] { std::apply(fn, mapped); };
                      };
                    }});
  }
};

}  // namespace accl::kern
