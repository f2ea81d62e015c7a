// launch_done.h: how a launch of the collective or direct kernel tells that it has ended
// (collective_args.h, LaunchDone): no event record per call, one store in mapped host memory.
#pragma once
#include <cstdint>
#include "collective_args.h"
#include "portable.h"

namespace accl::kern {

// Stores launch number `seq` (its low 32 bits) into a rank's word, widened against the number
// the word holds (the rank's previous launch, which ended before this one started).
ACCL_DEV void publishLaunchDone(uint64_t* word, uint32_t seq) {
  uint64_t* w = devicePointer(word);
  const uint64_t before = loadAcquire(w);
  storeRelease(w, before + static_cast<uint32_t>(seq - static_cast<uint32_t>(before)));
}

// Called by thread 0 of `rank`'s last block of the launch, once that block has set the rank's
// per-launch counters back: the launch's last such rank stores every counted rank's number.
ACCL_DEV void launchRankEnded(const LaunchDone& d, char* const* mailbox, int rank) {
  if (d.ranks <= 0 || d.word[rank] == nullptr) return;
  if (d.ranks > 1) {
    MailboxHeader* lead = devicePointer(reinterpret_cast<MailboxHeader*>(mailbox[d.lead]));
    if (fetchAdd(&lead->ranksEnded, 1) + 1 != static_cast<uint64_t>(d.ranks)) return;
    lead->ranksEnded = 0;  // made visible by the release stores below
    for (int r = 0; r < kMailboxRanks; r++)
      if (d.word[r] != nullptr) publishLaunchDone(d.word[r], d.seq[r]);
    return;
  }
  publishLaunchDone(d.word[rank], d.seq[rank]);
}

}  // namespace accl::kern
