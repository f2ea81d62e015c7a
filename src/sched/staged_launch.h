// staged_launch.h: NCCL's execution model for communicators with a staged path
// (comm/staged_path.h): a group's ops are queued at call time as launches of the staged kernel
// on the caller's stream, from the calling thread, one per collective in call order and one for
// all sends and receives; the rank's staged proxy runs them on the host.
#pragma once
#include <memory>
#include <vector>
#include "sched/op.h"

namespace accl {

// Launches `ops`: one rank's share of a group (its stagedPath is set; every op on a Device
// stream). Ops on streams other than the first one's are ordered before and after the launches.
ncclResult_t launchStagedOps(std::vector<std::unique_ptr<OpDesc>> ops);

}  // namespace accl
