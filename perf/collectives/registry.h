// Every collective the perf binaries can measure, by binary name ("all_reduce_perf").
#pragma once

#include <string_view>
#include <vector>

#include "harness/collective.h"

namespace accl::perf {

const Collective& allReduceCollective();
const Collective& allGatherCollective();
const Collective& broadcastCollective();
const Collective& reduceCollective();
const Collective& reduceScatterCollective();
const Collective& sendRecvCollective();
const Collective& allToAllCollective();
const Collective& gatherCollective();
const Collective& scatterCollective();
const Collective& hypercubeCollective();

const std::vector<const Collective*>& allCollectives();
const Collective* findCollective(std::string_view binaryName);

}  // namespace accl::perf
