// socket_link.h: the state one socket connection shares between the executor thread (which
// fills the send ring and drains the receive ring) and its helper threads (which move bytes
// between the rings and K TCP sockets). Every cursor has one writer; the rings' shared ends
// are published as the minimum of the per-socket cursors (see publishMin).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>
#include "net/socket.h"
#include "transports/doorbell.h"
#include "transports/socket/stripe.h"

namespace accl {

// Who is at the other end, for error messages: "rank 3 (host pod1, 10.77.2.2:41234, hpn0)".
struct SocketPeer {
  SocketPeer() = default;
  SocketPeer(int me, int r, std::string h, std::string a, std::string i)
      : myRank(me), rank(r), host(std::move(h)), addr(std::move(a)), ifname(std::move(i)) {}
  int myRank = -1;
  int rank = -1;
  std::string host;
  std::string addr;
  std::string ifname;  // our local interface the connection uses
  // With several rails: the peer's listener and our interface on each (rail r's sockets are
  // r * socksPerRail ...); empty with one rail (addr, ifname).
  std::vector<std::string> railAddrs, railIfnames;
  int socksPerRail = 0;
  std::string describe() const;
  // The same, for the connection's rail `rail` (< 0 or one rail: describe()).
  std::string describeRail(int rail) const;
  // The rail socket s was opened on.
  int railOf(int s) const { return railAddrs.empty() || socksPerRail <= 0 ? 0 : s / socksPerRail; }
  std::string describeSocket(int s) const { return describeRail(s < 0 ? -1 : railOf(s)); }
  const std::string& ifnameOfRail(int rail) const {
    return railIfnames.empty() || rail < 0 ? ifname : railIfnames[static_cast<size_t>(rail)];
  }
};

// "; local interface hpn1 is down" when that explains a failure, else "".
std::string localInterfaceState(const std::string& ifname);
// True if interface `ifname` of this network namespace is down, not running or gone (one ioctl).
bool interfaceDown(const std::string& ifname);

// A power-of-two byte ring allocated once; positions grow forever and wrap by masking.
struct StagingRing {
  explicit StagingRing(size_t capacity);
  // Whole pages of its own: a device backend pins them (cuMemHostRegister refuses a page that
  // is already registered, as a page shared with another ring would be).
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char[], FreeDeleter> buf;
  size_t cap;
  std::atomic<uint64_t> head{0};  // consumed
  std::atomic<uint64_t> tail{0};  // produced
  char* at(uint64_t pos) { return buf.get() + (pos & (cap - 1)); }
};

// A stretch [start, end) of the stream that lies in the user's buffer at `base` rather than in
// the ring: the helper threads send() straight from it, saving the copy into the ring. The
// executor sets a new span only once every socket has moved past the previous one, and stores
// base and start before end (release); a reader loads end first (acquire), so a torn read
// (new start, old end) is an empty span, never a wrong one.
struct UserSpan {
  std::atomic<const char*> base{nullptr};
  std::atomic<uint64_t> start{0};
  std::atomic<uint64_t> end{0};
};

// One direction of the stream: its ring plus where each socket has got to.
struct StreamDir {
  StreamDir(size_t cap, const Stripe& stripe);
  StagingRing ring;
  UserSpan span;  // out only: stream bytes the ring does not hold (see SendChannel::lend)
  std::unique_ptr<std::atomic<uint64_t>[]> cursor;  // per socket: next stream byte it moves
  int nsocks;
  // Every byte below min(cursor) has been moved; raise `end` (never lower it) to that.
  void publishMin(std::atomic<uint64_t>& end) const;
};

struct SocketLink {
  SocketLink(std::vector<net::Socket> socks, size_t ringBytes, const Stripe& stripe, Doorbell* bell,
             SocketPeer peer);
  std::vector<net::Socket> socks;
  Stripe stripe;
  StreamDir out;  // executor -> peer
  StreamDir in;   // peer -> executor
  Doorbell* bell;  // the owning rank's doorbell: rung after data or space appears
  SocketPeer peer;

  std::unique_ptr<std::atomic<bool>[]> eof;  // per socket: the peer closed it
  // Per socket and direction: someone is moving bytes on it now. The helper thread and the
  // executor (inline, small messages) both pump; whoever finds the socket taken skips it, so
  // each cursor still has one writer at a time.
  std::unique_ptr<std::atomic<bool>[]> sendBusy, recvBusy;
  // The executor sleeps on its doorbell (PeerConnection::ownerSleeps): helper threads must
  // then read whatever arrives and ring it; while it is awake it reads idle links itself.
  std::atomic<bool> ownerAsleep{false};
  std::atomic<bool> stopping{false};
  std::atomic<bool> closedLocally{false};
  std::atomic<int> error{0};  // ncclResult_t of the first hard failure (0 = none)
  // The peer ended the connection (a reset or broken pipe, as a send or a socket error):
  // like eof, it names the peer as the rank that left when the failure is reported.
  std::atomic<bool> endedByPeer{false};

  // Move what socket s can move now without blocking (send: ring -> socket; receive: socket
  // -> ring); true if any byte moved. Skips the socket when another thread is pumping it.
  // The caller publishes the new ring end (StreamDir::publishMin).
  bool pumpSend(int s);
  bool pumpRecv(int s);

  // Records the first hard failure (WARNs it, naming the rail of socket `sock` if >= 0) and
  // wakes the executor.
  void fail(int result, const std::string& what, int sock = -1);
  // The same for a socket error `err` (errno): a reset or broken pipe also sets endedByPeer.
  void failOnSocketError(int err, const std::string& what, int sock = -1);
  // True if the stream ended before the byte at `waitPos` (the receiver's head, with nothing
  // staged): the socket that carries it was closed by the peer without delivering it.
  bool blockedOnEof(uint64_t waitPos) const;

  // ---- Failover between rails (rail_failover.cc); off with one rail. A socket whose TCP
  // connection fails is "lost" instead of failing the link; the connecting side opens a new
  // one on another rail and both ends exchange where their receive cursor for that stripe is;
  // each then sends again from there (from its replay copy), so no byte is lost or doubled.
  // The connecting side's way back to the peer: `connect` opens a tuned socket on a rail
  // (within timeoutMs), `resume` sends the handshake for stripe s with our receive cursor and
  // reads the peer's. Empty on the accepting side (it waits for the peer to come back).
  struct Redial {
    std::function<ncclResult_t(int rail, int timeoutMs, net::Socket* out)> connect;
    std::function<ncclResult_t(const net::Socket& sock, int s, uint64_t myPos, uint64_t* peerPos)> resume;
    // Accepting side: tells the peer, through its listener on `rail`, that stripe s failed on
    // rail `lostRail` here (a local interface that went down is seen at once; the peer would
    // only see it after ACCL_RAIL_TIMEOUT).
    std::function<ncclResult_t(int rail, int s, int lostRail)> notify;
  };
  // After the sockets are in place; `wakeHelpers` wakes every helper thread of the link.
  void enableFailover(int nrails, int perRail, Redial redial, std::function<void()> wakeHelpers);
  bool failoverOn() const { return nrails_ > 1; }
  int railNow(int s) const { return onRail_[s].load(std::memory_order_relaxed); }
  bool lostSocket(int s) const { return nrails_ > 1 && lost_[s].load(std::memory_order_acquire); }
  // Records that socket s failed (WARN once), so it is skipped until it is replaced.
  void loseSocket(int s, const std::string& what);
  // Helper thread of a rail, every few hundred ms: its sockets whose local interface went
  // down are lost at once (TCP would tell only after ACCL_RAIL_TIMEOUT, an idle socket later).
  void loseSocketsOnDownInterfaces(const std::vector<int>& sockets);
  // Helper thread of a rail: replaces its lost sockets (connecting side), moves sockets back
  // to it when it answers again, or fails the link when no rail is left. Returns the poll
  // timeout it needs (-1: none).
  int tendRail(const std::vector<int>& sockets);
  // Connecting side: the peer says its end of stripe s failed on `rail`: lost now, if it is
  // still there.
  void peerLost(int s, int rail);
  // Accepting side: the peer replaced stripe s by `sock` and expects our bytes from peerPos;
  // answers with where our receive cursor is.
  ncclResult_t acceptResume(int s, int rail, net::Socket sock, uint64_t peerPos);
  // Which socket sits in slot s: changes whenever a swap replaces it. A helper thread that
  // polled socket s notes this first, and applies what poll() said only while it is unchanged
  // (see onPollEvents): news about the replaced socket is not news about its successor.
  uint32_t socketGeneration(int s) const {
    return nrails_ > 1 ? gen_[s].load(std::memory_order_acquire) : 0;
  }
  // A helper thread's poll() reported `revents` for socket s (`fd`, polled for `events`)
  // while its generation was `gen`: marks an EOF or loses/fails the socket, unless the socket
  // was replaced meanwhile (then its successor is left alone).
  void onPollEvents(int s, uint32_t gen, int fd, short events, short revents);

 private:
  struct Replay {
    std::unique_ptr<char[]> buf;
    uint64_t cap = 0;  // a power of two >= the socket's send plus receive buffers
  };
  char* replayAt(int s, uint64_t pos) { return replay_[s].buf.get() + (stripe.subIndex(pos) & (replay_[s].cap - 1)); }
  void holdBoth(int s);
  void releaseBoth(int s);
  // Under holdBoth(s): puts `sock` in place of socket s, the peer expecting our bytes from peerPos.
  bool swapSocket(int s, int rail, net::Socket sock, uint64_t peerPos, const char* why);
  bool resumeOn(int s, int rail, int timeoutMs, const char* why);
  int homeRail(int s) const { return s / perRail_; }
  static int64_t nowMs();

  int nrails_ = 1;
  int perRail_ = 1;
  Redial redial_;
  std::function<void()> wakeHelpers_;
  std::atomic<int> away_{0};  // sockets lost or not on their own rail: helpers have work
  std::vector<Replay> replay_;                          // per socket: the last bytes it sent
  std::unique_ptr<std::atomic<uint64_t>[]> resendEnd_;  // per socket: below this, send from replay
  std::unique_ptr<std::atomic<bool>[]> lost_;
  std::unique_ptr<std::atomic<int>[]> onRail_;
  std::unique_ptr<std::atomic<int64_t>[]> lostAtMs_, movedAtMs_;
  std::unique_ptr<std::atomic<uint32_t>[]> gen_;  // per socket: bumped by every swap
  std::unique_ptr<std::atomic<bool>[]> notified_;  // accepting side: the peer was told of the loss
  // Swaps (worker and acceptor) and their log lines; a swap closes the old socket under it, so
  // a poll result checked against gen_ under it still refers to an open descriptor.
  std::mutex failoverMu_;
};

}  // namespace accl
