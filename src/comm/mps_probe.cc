#include "comm/mps_probe.h"
#include <sys/stat.h>
#include <cstdlib>

namespace accl {

std::string mpsPipeDirectory() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  return dir != nullptr && dir[0] != '\0' ? dir : "/tmp/nvidia-mps";
}

bool mpsControlSocketSeen() {
  struct stat st{};
  const std::string control = mpsPipeDirectory() + "/control";
  return stat(control.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace accl
