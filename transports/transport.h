// transport.h: the seam between algorithms and transports. A connection to a peer is two
// byte rings: SendChannel (we write) and RecvChannel (we read). Both sides see the same byte
// stream in the same order, so plans never frame messages. All calls are non-blocking; the
// executor (src/sched/executor.cc) drives them and decides how to wait.
#pragma once
#include <cstddef>
#include <cstdint>
#include "nccl.h"

namespace accl {

struct Doorbell;

class SendChannel {
 public:
  virtual ~SendChannel() = default;
  // Contiguous writable space at the tail; *avail == 0 means full for now.
  // An error means the connection is gone (peer died, aborted or closed).
  virtual ncclResult_t acquire(void** buf, size_t* avail) = 0;
  // Publishes n bytes written into the space returned by acquire().
  virtual void commit(size_t n) = 0;
  // Publishes n alignment pad bytes that a commit of data always follows (Lane::alignSend).
  // A transport that pushes every commit to the peer (sockets: one send() each) may hold them
  // back and let that next commit carry them, so a small step costs one message, not two.
  virtual void commitPadding(size_t n) { commit(n); }
  // Moves staged bytes towards the peer (sockets); no-op for shared memory.
  virtual ncclResult_t progress() { return ncclSuccess; }
  // True while committed bytes are still only staged locally (sockets).
  virtual bool pendingLocal() const { return false; }
  // Bytes committed so far; both ends count the same stream, so steps can align to it.
  virtual uint64_t position() const = 0;
  // Queues n bytes read straight from src (host memory) after what is already committed,
  // instead of a copy into the ring; position() grows by n at once. src must stay unchanged
  // until handedOff() reaches that position. false: not now or never (acquire and copy).
  virtual bool lend(const void* src, size_t n) {
    (void)src;
    (void)n;
    return false;
  }
  // Whether this transport takes lent bytes at all (sockets do, shared memory does not).
  virtual bool lends() const { return false; }
  // Whether lend(src, ...) would be taken now.
  virtual bool lendable(const void* src) const {
    (void)src;
    return false;
  }
  // Stream bytes the sender's memory is no longer needed for (sockets: taken by send()).
  virtual uint64_t handedOff() const { return position(); }
};

class RecvChannel {
 public:
  virtual ~RecvChannel() = default;
  // Contiguous readable bytes at the head; *avail == 0 means nothing yet.
  virtual ncclResult_t peek(const void** buf, size_t* avail) = 0;
  // peek for a reader that only looks in passing (the network proxy looking for a notice while
  // no call needs this peer): a peer that closed the connection is ncclRemoteError with no log
  // line, since a peer that left after its last call is no error until its data is wanted.
  virtual ncclResult_t peekQuietly(const void** buf, size_t* avail) { return peek(buf, avail); }
  // Frees n bytes at the head for the sender.
  virtual void release(size_t n) = 0;
  virtual ncclResult_t progress() { return ncclSuccess; }
  // Bytes released so far (see SendChannel::position).
  virtual uint64_t position() const = 0;
};

// Per-peer pair of channels plus teardown.
class PeerConnection {
 public:
  virtual ~PeerConnection() = default;
  virtual SendChannel* send() = 0;
  virtual RecvChannel* recv() = 0;
  // Marks the connection dead in both directions so the peer's waits fail promptly.
  // `culprit` is the rank whose loss caused it (-1 unknown); shared memory passes it on.
  virtual void close(int culprit = -1) = 0;
  // Our communicator is being destroyed with all its work done: tells the peer, so a peer
  // that still waits for data from us (it is in a call we never made) fails naming us
  // instead of waiting forever. Shared memory marks the rings; sockets close (EOF).
  virtual void depart(int myRank) { close(myRank); }
  // After a channel error: the rank the peer named as the cause of its failure, or -1.
  virtual int reportedCulprit() const { return -1; }
  // The peer's rank if it closed the connection by itself (it left, died or failed, we did
  // not close it); -1 otherwise. A weaker hint than reportedCulprit: a peer that failed
  // because of another rank closes its connections too.
  virtual int closedByPeer() const { return -1; }
  virtual const char* transportName() const = 0;
  // The executor that drives this connection is about to sleep on its doorbell (true) or has
  // woken (false). While it is awake it reads arriving bytes itself, so a transport with
  // helper threads may let them sleep through arrivals on an idle link (sockets do).
  virtual void ownerSleeps(bool asleep) { (void)asleep; }
};

}  // namespace accl
