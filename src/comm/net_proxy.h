// net_proxy.h: a rank's proxy thread (NCCL's proxy), for the peers its collective kernels reach
// only through a host transport (ranks on other hosts; every peer with NCCL_P2P_DISABLE=1).
// It moves bytes and nothing else: out slots of the rank's proxy box that the kernel posted go
// into the peer's connection (socket, IB, net plugin or shared-memory ring), and what arrives
// from the peer goes into the box's in slots for the kernel (kern::ProxyHeader says how the
// counters work). It makes no device call at all, so nothing the kernels wait for is device
// work queued by the host, and it never allocates: the box and connections are made at init.
//
// On the connection every chunk is one frame: a 40-byte header (magic, channel, byte count,
// the sender's call stamp, which the peer's proxy puts next to the in slot for its kernel to
// check) and the bytes. The two channels of a pair share the connection in the order their chunks
// were posted; the receiving side of a channel never waits for the other channel, so a frame
// that waits for a free in slot holds up the ones behind it only until the kernel takes it.
//
// One more frame, a notice (no bytes): once nothing has moved for a while and the rank's kernel
// waits for a peer's chunk that has not arrived, the proxy tells that peer which collective the
// kernel is in (the stamp the kernel published in the box header). The peer's proxy puts it in
// its box header for its kernel, which compares it with its own call while it waits: two ranks
// that wait for each other in different calls (reduces whose roots differ) both fail with a
// mismatch instead of waiting forever. Once nothing moves, a notice is taken from any peer, not
// only from those whose data the kernel waits for: in a ring of ranks each waiting for the next
// (broadcasts whose roots differ) each notice reaches a rank that waits for someone else.
// Nothing is announced while data flows, so a matched call costs nothing.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>
#include "collective_args.h"
#include "nccl.h"

namespace accl {

class Comm;
class PeerConnection;
class RecvChannel;

class NetProxy {
 public:
  // `box`: the host view of the rank's proxy box (kern::proxyBoxBytes(c->nranks), zeroed),
  // mapped for the device; `peers`: the ranks reached through it.
  NetProxy(Comm* c, char* box, std::vector<int> peers);
  ~NetProxy();  // stops the thread
  // Makes the connection to every peer (init, outside any capture), then starts the thread.
  ncclResult_t start();
  // A launch was queued: poll without backing off for a while.
  void wake();
  // Every chunk the kernels posted so far has been handed to its connection and has left this
  // process (a transport that stages bytes has sent them): true, or false once `limit` passed
  // or the communicator failed.
  bool drain(std::chrono::milliseconds limit);
  void stop();
  int peerCount() const { return static_cast<int>(peers_.size()); }

  // Realignment after mismatched calls (comm/kernel_realign.cc), once this rank's kernels have
  // ended. pause: the thread finishes the frame it is sending, then sends and reads nothing;
  // true once it is there, with the frames (chunks and notices) it has sent each peer since the
  // last realignment in (*framesSent)[rank]. discard: it reads and drops what each peer sent
  // until (*framesFrom)[rank] frames have come from it, then forgets every stream position (the
  // caller zeroes the box). resume: it moves chunks again. False: `limit` passed or it failed.
  bool pause(std::chrono::milliseconds limit, std::vector<uint64_t>* framesSent);
  bool discard(const std::vector<uint64_t>& framesFrom, std::chrono::milliseconds limit);
  void resume();

 private:
  struct Frame {
    uint32_t magic;
    uint8_t ch;
    uint8_t pad[3];
    uint64_t bytes;
    kern::KStamp stamp;  // the sender's call stamp for the chunk (kern::KStamp)
  };
  static_assert(sizeof(Frame) == 40, "frame header");
  struct Peer {
    int rank = 0;
    PeerConnection* conn = nullptr;
    uint64_t shipped[kern::kChannels] = {};   // chunks handed to the connection
    uint64_t received[kern::kChannels] = {};  // chunks put in in slots
    int nextCh = 0;
    // The frame being sent: its header, channel, chunk, and bytes of header + data written.
    bool sending = false;
    Frame out{};
    size_t outDone = 0;
    // The frame being received.
    unsigned char inHeader[sizeof(Frame)] = {};
    size_t inHeaderHave = 0;
    bool receiving = false;
    Frame in{};
    size_t inDone = 0;
    bool notice = false;     // the frame being sent is a notice
    uint64_t announced = 0;  // the kernel's call word last announced to this peer
    // Whole frames sent to / read from the peer since the last realignment.
    uint64_t framesOut = 0;
    uint64_t framesIn = 0;
  };
  // What the thread does: move chunks, or one of the realignment's steps.
  enum Mode : int { kRun, kPausing, kPaused, kDiscarding, kDiscarded };
  void run();
  // One pass over every peer: did anything move? An error fails the communicator.
  // With `announce` (nothing moved for kNoticeAfter): notices to the peers the kernel waits for.
  ncclResult_t pass(bool* moved, bool* quiet, bool announce);
  void announceCall(Peer& p, uint64_t word, const kern::KStamp& call);
  void takeNotice(Peer& p);
  // `startNew`: false while pausing (only the frame being sent is finished).
  ncclResult_t sendSome(Peer& p, bool* moved, bool startNew = true);
  // Takes header bytes of p's next frame from `buf` (avail > 0, released): true once the
  // whole header is in p.in.
  bool takeHeaderBytes(Peer& p, RecvChannel* ch, const void* buf, size_t avail);
  // Reads and drops p's bytes up to frame `upTo`: true once there.
  ncclResult_t discardSome(Peer& p, uint64_t upTo, bool* done);
  // One step of the realignment mode `m`; an error fails the communicator.
  ncclResult_t realignStep(int m);
  bool waitMode(int want, std::chrono::milliseconds limit);
  // `quietWhile`: nothing moved for kNoticeAfter, so a notice from a peer whose data the kernel
  // does not wait for is taken too (takeNotice).
  ncclResult_t receiveSome(Peer& p, bool* moved, bool quietWhile);
  void failed(const Peer& p, const char* what);

  Comm* c_;
  char* box_;
  kern::ProxyHeader* header_;
  std::vector<Peer> peers_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> dead_{false};
  // Passes done, and the last one at which nothing was left to send (drain() compares them).
  std::atomic<uint64_t> passes_{0};
  std::atomic<uint64_t> quietPass_{0};
  std::mutex mu_;
  std::condition_variable wakeCv_;
  uint64_t wakes_ = 0;
  std::atomic<int> mode_{kRun};
  std::vector<uint64_t> discardUpTo_;  // by index in peers_ (set before kDiscarding)
  std::vector<uint64_t> pausedAt_;     // framesOut by index in peers_ (set before kPaused)
};

}  // namespace accl
