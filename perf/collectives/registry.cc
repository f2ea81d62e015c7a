#include "collectives/registry.h"

namespace accl::perf {

const std::vector<const Collective*>& allCollectives() {
  static const std::vector<const Collective*> all = {
      &allReduceCollective(), &allGatherCollective(), &broadcastCollective(), &reduceCollective(),
      &reduceScatterCollective(), &sendRecvCollective(), &allToAllCollective(), &gatherCollective(),
      &scatterCollective(), &hypercubeCollective()};
  return all;
}

const Collective* findCollective(std::string_view binaryName) {
  for (const Collective* c : allCollectives())
    if (binaryName == c->name()) return c;
  return nullptr;
}

}  // namespace accl::perf
