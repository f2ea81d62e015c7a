// staged_kernel.h: the staged kernel, written once (portable.h): one block on the caller's
// stream moves a call's data between user memory and the rank's staging box, round by round,
// and waits for the rank's staged proxy (a host thread that makes no device call) to run the
// round's collectives on the box (staged_args.h says how). Nothing it waits for is work the host
// queues on the device, so it cannot deadlock behind the caller's stream, whatever
// CUDA_DEVICE_MAX_CONNECTIONS says, and a captured launch replays like any kernel.
#pragma once
#include <cstddef>
#include <cstdint>
#include "collective_args.h"
#include "portable.h"
#include "staged_args.h"

namespace accl::kern::staged {

constexpr uint64_t kWaitStagedProxy = 5;  // kReportWhat: the kernel waited for its staged proxy

// Copies the round's part of every segment going one way (toStage: user memory -> data area).
ACCL_DEV void moveRound(const StagedArgs& a, char* data, uint64_t round, uint8_t toStage) {
  uint64_t off = 0;
  for (uint32_t i = 0; i < a.nseg; i++) {
    const StagedSegment& s = a.seg[i];
    const uint64_t part = stagedRoundPart(s, round);
    if (part != 0 && s.toStage == toStage) {
      for (uint32_t b = 0; b < s.blocks; b++) {
        char* user = devicePointer(s.dev) + b * s.bytes + round * s.roundBytes;
        char* stage = data + off + b * part;
        if (toStage)
          stridedCopy(stage, user, part, threadIndex(), blockSize());
        else
          stridedCopy(user, stage, part, threadIndex(), blockSize());
      }
    }
    off += part * s.blocks;
  }
}

// Thread 0 waits until the proxy has finished round number `seq`: false once it failed, the
// host asked kernels to give up, or ACCL_TIMEOUT passed (then the report says so).
ACCL_DEV bool waitProxy(const StagedArgs& a, StagedBoxHeader* h, uint64_t seq) {
  const uint64_t start = a.timeoutNs ? nowNs() : 0;
  for (uint32_t i = 0;; i++) {
    if (loadAcquire(&h->done) >= seq) return loadAcquire(&h->failed) == 0;
    if ((i & 255) == 255) {
      if (loadAcquire(devicePointer(a.abortFlag)) != 0) return false;
      if (a.timeoutNs && nowNs() - start > a.timeoutNs) {
        uint64_t* report = a.report ? devicePointer(a.report) : nullptr;
        if (report && claimOnce(&report[kReportRank], static_cast<uint64_t>(a.rank) + 1)) {
          report[kReportPeer] = static_cast<uint64_t>(a.rank);
          report[kReportWhat] = kWaitStagedProxy;
          report[kReportChannel] = 0;
          report[kReportChunk] = loadAcquire(&h->round);
          storeRelease(&report[kReportCode], kReportTimedOut);
        }
        return false;
      }
    }
    spinPause();
  }
}

ACCL_DEV void run(const StagedArgs& a) {
  StagedBoxHeader* h = devicePointer(reinterpret_cast<StagedBoxHeader*>(a.box));
  char* data = devicePointer(a.box + kStagedHeaderBytes);
  for (uint32_t round = 0; round < a.rounds; round++) {
    moveRound(a, data, round, 1);
    fenceSystem();  // this thread's writes to the box, before thread 0 posts the round
    syncBlock();
    if (threadIndex() == 0) {
      if (a.scalarPtr) {
        const unsigned char* s = devicePointer(static_cast<const unsigned char*>(a.scalarPtr));
        for (uint32_t i = 0; i < a.scalarBytes && i < sizeof(h->scalar); i++) h->scalar[i] = s[i];
      }
      h->call = a.call;
      h->round = round;
      fenceSystem();
      const uint64_t seq = loadAcquire(&h->posted) + 1;
      storeRelease(&h->posted, seq);
      storeRelease(&h->verdict, waitProxy(a, h, seq) ? seq : 0);
    }
    syncBlock();
    // Every thread decides alike (a block returns as one): the round thread 0 posted went well.
    if (loadAcquire(&h->verdict) != loadAcquire(&h->posted)) return;
    moveRound(a, data, round, 0);
    syncBlock();  // the data area is read before the next round overwrites it
  }
}

}  // namespace accl::kern::staged

ACCL_KERNEL_NAMED(accl_staged, (accl::kern::StagedArgs a)) { accl::kern::staged::run(a); }
