// realign_mailbox.h: where a rank collects the notes of a realignment after mismatched calls
// (sched/realign.h has the protocol). A rank that sees a mismatch, or joins a realignment
// another rank started, sends every other rank a note: which call mismatched, which calls it
// is in, and where on each connection its bytes of the calls up to the mismatched one end.
// Notes travel through the status servers (comm/status_server.h), so they reach a rank that
// is blocked in a transport wait without disturbing the connections being realigned.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>
#include "net/socket.h"
#include "transports/call_stamp.h"

namespace accl {

// Why a realignment was asked for, beyond a stamp that did not match (RealignNote::flags).
// Every rank's call fails with either, and the ranks number their next calls alike again.
constexpr uint32_t kRealignWaitCycle = 1;  // every rank waited for another and none had data to send
constexpr uint32_t kRealignRanOrder = 2;   // the ranks ran their calls in a different order

struct RealignNote {
  uint64_t mismatchOrder = 0;  // stampOrder (sched/call_stamp.h) of the mismatched call
  uint64_t firstOrder = 0;     // the calls the rank is in (or starts) when it joins: first..last
  uint64_t lastOrder = 0;
  uint64_t boardPosted = 0;    // its shared-memory board operations of the calls before firstOrder
  int32_t rank = -1;
  uint32_t inMismatched = 0;   // 1: the rank is in the mismatched call itself
  uint32_t callSeq = 0;        // collective calls it has issued (Comm::callSeq)
  uint32_t flags = 0;          // kRealign* of the realignment (the rank that asked for it sets them)
  CallStamp current;           // the first call it is in
  char why[400] = {};          // the WARN of the rank that saw the mismatch ("" if it only joined)
  std::vector<uint64_t> endPos;  // [peer]: where its stream to that peer ends before firstOrder
  std::vector<uint64_t> nowPos;  // [peer]: where it ends now (the rank sends nothing more until done)
};

class RealignMailbox {
 public:
  // The mismatched call's order + 1 once any rank asked for a realignment (0: none pending).
  // Read on every executor pass: one relaxed load.
  bool wanted() const { return wanted_.load(std::memory_order_relaxed) != 0; }
  uint64_t wantedOrder() const { return wanted_.load(std::memory_order_acquire) - 1; }
  // This rank saw mismatched calls (order: the earlier of the two calls): asks for a realignment.
  void request(uint64_t order, const std::string& why, uint32_t flags = 0);
  // A note from a peer (the status server's thread) or this rank's own. False: stale, dropped.
  bool deposit(const RealignNote& note, int nranks);
  // The notes of realignment `order` so far ([rank], rank -1: none yet).
  std::vector<RealignNote> notes(uint64_t order);
  // What this rank saw itself ("" if it only joined).
  std::string localWhy(uint64_t order);
  // The flags of realignment `order`: this rank's own and those of every note in so far.
  uint32_t flags(uint64_t order);
  // Realignment `order` is over: its notes go, a later one (if any) stays wanted.
  void done(uint64_t order);
  // Where this rank's finished call `order` began: its board position and, per peer, where its
  // first stamp went in the stream (~0: none). The last kRecentCalls are kept: a rank that ran
  // calls ahead of a mismatch its peers have not reached yet (a broadcast root needs nobody)
  // keeps every call after the mismatched one when it joins the realignment.
  static constexpr int kRecentCalls = 16;
  // Returns the slot's per-peer positions (all ~0) for the caller to fill: only the thread that
  // runs the communicator's works in ticket order records, and the realignment runs in one too.
  std::vector<uint64_t>* recordCallStart(uint64_t order, uint64_t board, int nranks);
  // Lowers *board and pos[peer] to where the earliest recorded call after `order` began.
  void earliestAfter(uint64_t order, uint64_t* board, std::vector<uint64_t>* pos);

 private:
  std::atomic<uint64_t> wanted_{0};
  std::mutex mu_;
  uint64_t lastDone_ = 0;  // order + 1 of the last realignment finished
  std::vector<RealignNote> notes_;
  std::string localWhy_;
  uint64_t localOrder_ = 0;
  uint32_t localFlags_ = 0;
  struct CallStart {
    uint64_t order = ~uint64_t(0);
    uint64_t board = 0;
    std::vector<uint64_t> sentAt;
  };
  std::mutex recentMu_;
  CallStart recent_[kRecentCalls];
  unsigned nextRecent_ = 0;
};

// Bytes a note takes on the wire for `nranks` ranks, and its encoding (fixed-width fields).
std::string encodeRealignNote(const RealignNote& n, uint64_t commMagic, uint64_t nonce, int toRank);
constexpr uint64_t kRealignNoteMagic = 0x4143434c5245414cull;  // "ACCLREAL"
// Header every note starts with (the status server reads it first).
struct RealignWireHeader {
  uint64_t magic;  // kRealignNoteMagic
  uint64_t commMagic;
  uint64_t nonce;
  int32_t toRank;
  uint32_t nranks;
};
// Decodes the body that follows the header (nranks known); false if malformed.
bool decodeRealignBody(const char* body, size_t bytes, uint32_t nranks, RealignNote* out);
size_t realignBodyBytes(uint32_t nranks);

}  // namespace accl
