// mps_probe.h: is an NVIDIA MPS server running for this process's user? Without a GPU to ask,
// it looks for the MPS control daemon's socket: `control` in the pipe directory,
// CUDA_MPS_PIPE_DIRECTORY or, unset, /tmp/nvidia-mps (where nvidia-cuda-mps-control -d puts it).
// Processes that share a device without MPS time-slice it: each switch costs tens of
// microseconds, and a collective whose ranks wait for each other pays it at every step.
#pragma once
#include <string>

namespace accl {

// The pipe directory MPS uses for this process (the environment's, else the default).
std::string mpsPipeDirectory();
// Whether `<pipe directory>/control` is a socket (the control daemon is up).
bool mpsControlSocketSeen();

}  // namespace accl
