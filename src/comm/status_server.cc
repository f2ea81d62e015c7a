#include "comm/status_server.h"
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>
#include "base/check.h"
#include "comm/comm.h"
#include "comm/kernel_path.h"
#include "topo/ifaces.h"

namespace accl {
namespace {

constexpr uint64_t kStatusMagic = 0x4143434c53544154ull;  // "ACCLSTAT"
constexpr uint64_t kWaitMagic = 0x4143434c57414954ull;    // "ACCLWAIT": the wait note (wait-cycle check)
constexpr uint32_t kMaxReply = 64 << 10;

struct Query {
  uint64_t magic;
  uint64_t commMagic;
  uint64_t nonce;
  int32_t rank;
  int32_t pad;
};

using Clock = std::chrono::steady_clock;
// A connection must deliver its whole query within this long.
constexpr int kQueryDeadlineMs = 1000;
constexpr int kReplyDeadlineMs = 200;
// More pending connections than this: the oldest is dropped (a flood cannot exhaust fds).
constexpr size_t kMaxPending = 256;

struct Pending {
  net::Socket sock;
  Query query;
  size_t got;
  Clock::time_point deadline;
  std::vector<char> note;  // a realignment note's body (comm/realign_mailbox.h), once its header is in
  size_t noteGot = 0;
};
static_assert(sizeof(Query) == sizeof(RealignWireHeader));
// Notes for more ranks than this are not read (a stray cannot make us allocate much).
constexpr uint32_t kMaxNoteRanks = 1 << 16;
// Notes kept for communicators that are not registered yet.
constexpr size_t kMaxEarlyNotes = 64;

struct Key {
  uint64_t nonce;
  int rank;
  bool operator<(const Key& o) const { return nonce != o.nonce ? nonce < o.nonce : rank < o.rank; }
};

class Server {
 public:
  ncclResult_t start(const topo::CpuMask& cpus) {
    std::lock_guard<std::mutex> lk(mu_);
    // A forked child inherits the flag but not the thread: it needs a server of its own.
    if (started_ && pid_ == getpid()) return ncclSuccess;
    pid_ = getpid();
    comms_.clear();
    early_.clear();
    topo::NetIf nif;
    NCCLCHECK(topo::selectBootstrapInterface(&nif));
    NCCLCHECK(net::listenOn(nif.addr, &listener_, &addr_));
    // acceptAll drains the backlog without blocking.
    int flags = fcntl(listener_.fd(), F_GETFL);
    if (flags >= 0) fcntl(listener_.fd(), F_SETFL, flags | O_NONBLOCK);
    // The thread lives for the process; it sleeps in poll() and never touches a dead comm
    // (lookups go through the registry under the lock).
    std::thread([this, cpus] {
      cpus.applyToCurrentThread();
      serve();
    }).detach();
    started_ = true;
    return ncclSuccess;
  }
  net::SockAddr address() const { return addr_; }
  void add(Comm* c) {
    std::lock_guard<std::mutex> lk(mu_);
    comms_[{c->nonce, c->rank}] = c;
    for (size_t i = early_.size(); i-- > 0;) {
      if (early_[i].header.nonce != c->nonce || early_[i].header.toRank != c->rank) continue;
      deliver(*c, early_[i].header, early_[i].note);
      early_.erase(early_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  void remove(Comm* c) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = comms_.find({c->nonce, c->rank});
    if (it != comms_.end() && it->second == c) comms_.erase(it);
  }

 private:
  // One thread serves every connection at once: each pending connection is read without
  // blocking and dropped after kQueryDeadlineMs, so idle or slow connections (strays, a
  // flood) never delay the queries of hang summaries. Nothing here WARNs: the server runs
  // beside calls that succeed, and ncclGetLastError must stay theirs.
  void serve() {
    std::vector<Pending> pending;
    std::vector<pollfd> fds;
    for (;;) {
      auto now = Clock::now();
      std::erase_if(pending, [&](const Pending& p) { return p.deadline <= now; });
      int timeout = -1;
      for (const Pending& p : pending) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(p.deadline - now).count() + 1;
        timeout = timeout < 0 ? static_cast<int>(ms) : std::min(timeout, static_cast<int>(ms));
      }
      fds.assign(1, pollfd{listener_.fd(), POLLIN, 0});
      for (const Pending& p : pending) fds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
      if (poll(fds.data(), fds.size(), timeout) <= 0) continue;
      for (size_t i = pending.size(); i-- > 0;) {
        if (fds[i + 1].revents == 0) continue;
        if (readSome(pending[i])) pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (fds[0].revents & POLLIN) acceptAll(&pending);
    }
  }

  void acceptAll(std::vector<Pending>* pending) {
    for (;;) {
      int fd = accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;
      if (pending->size() >= kMaxPending) {
        INFO(kSubsysInit, "Status server: %zu connections pending, dropped the oldest", pending->size());
        pending->erase(pending->begin());
      }
      pending->push_back(Pending{net::Socket(fd), Query{}, 0,
                                 Clock::now() + std::chrono::milliseconds(kQueryDeadlineMs), {}, 0});
    }
  }

  // Reads what arrived; answers a complete query. True when the connection is finished.
  bool readSome(Pending& p) {
    if (p.got == sizeof(p.query)) return readNote(p);
    char* dst = reinterpret_cast<char*>(&p.query) + p.got;
    ssize_t n = ::recv(p.sock.fd(), dst, sizeof(p.query) - p.got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) return true;  // closed or reset: strays are simply dropped
    p.got += static_cast<size_t>(n);
    if (p.got < sizeof(p.query)) return false;
    if (p.query.magic == kStatusMagic || p.query.magic == kWaitMagic) answer(p);
    if (p.query.magic != kRealignNoteMagic) return true;
    RealignWireHeader h;
    std::memcpy(&h, &p.query, sizeof(h));
    if (h.nranks == 0 || h.nranks > kMaxNoteRanks) return true;
    p.note.resize(realignBodyBytes(h.nranks));
    return readNote(p);
  }

  // Puts a realignment note in its communicator's mailbox (mu_ held) and wakes the rank.
  static void deliver(Comm& c, const RealignWireHeader& h, const RealignNote& note) {
    if (c.bootstrap == nullptr || c.bootstrap->magic() != h.commMagic || static_cast<uint32_t>(c.nranks) != h.nranks)
      return;
    if (isKernelRealignNote(note)) {
      if (c.kernelPath) c.kernelPath->depositRealignNote(note);
      return;
    }
    if (c.realign.deposit(note, c.nranks)) {
      ringDoorbell(c.bell());  // its executor may sleep in a transport wait
      if (c.board.ownBell) ringDoorbell(c.board.ownBell);
    }
  }

  // The body of a realignment note; delivered to its communicator once complete.
  bool readNote(Pending& p) {
    ssize_t n = ::recv(p.sock.fd(), p.note.data() + p.noteGot, p.note.size() - p.noteGot, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) return true;
    p.noteGot += static_cast<size_t>(n);
    if (p.noteGot < p.note.size()) return false;
    RealignWireHeader h;
    std::memcpy(&h, &p.query, sizeof(h));
    RealignNote note;
    if (!decodeRealignBody(p.note.data(), p.note.size(), h.nranks, &note)) return true;
    std::lock_guard<std::mutex> lk(mu_);
    auto it = comms_.find({h.nonce, h.toRank});
    if (it == comms_.end()) {
      // Its rank may still be finishing init (it registers last) while the others already
      // run calls: kept for it, a few at most.
      if (early_.size() >= kMaxEarlyNotes) early_.erase(early_.begin());
      early_.push_back({h, std::move(note)});
      return true;
    }
    deliver(*it->second, h, note);
    return true;
  }

  void answer(const Pending& p) {
    std::string reply;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = comms_.find({p.query.nonce, p.query.rank});
      if (it == comms_.end() || it->second->bootstrap == nullptr ||
          it->second->bootstrap->magic() != p.query.commMagic)
        return;
      if (p.query.magic == kWaitMagic) {
        std::lock_guard<std::mutex> wk(it->second->statusMu);
        reply = it->second->waitNote;
      } else {
        reply = statusLine(*it->second);
      }
    }
    uint32_t len = static_cast<uint32_t>(std::min<size_t>(reply.size(), kMaxReply));
    std::string bytes(reinterpret_cast<const char*>(&len), sizeof(len));
    bytes.append(reply.data(), len);
    // A reply is small; the asker reads it at once. Whoever does not is not waited for long.
    size_t sent = 0;
    auto deadline = Clock::now() + std::chrono::milliseconds(kReplyDeadlineMs);
    while (sent < bytes.size() && Clock::now() < deadline) {
      ssize_t n = ::send(p.sock.fd(), bytes.data() + sent, bytes.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return;
      pollfd out{p.sock.fd(), POLLOUT, 0};
      (void)poll(&out, 1, 10);
    }
  }

  std::mutex mu_;
  bool started_ = false;
  pid_t pid_ = 0;
  net::Socket listener_;
  net::SockAddr addr_;
  std::map<Key, Comm*> comms_;
  struct EarlyNote {
    RealignWireHeader header;
    RealignNote note;
  };
  std::vector<EarlyNote> early_;  // realignment notes for a communicator not registered yet
};

Server& server() {
  static Server* s = new Server();  // never destroyed: its thread outlives static destructors
  return *s;
}

}  // namespace

ncclResult_t statusServerAddress(const topo::CpuMask& cpus, net::SockAddr* out) {
  NCCLCHECK(server().start(cpus));
  *out = server().address();
  return ncclSuccess;
}

void statusRegister(Comm* comm) { server().add(comm); }
void statusUnregister(Comm* comm) { server().remove(comm); }

ncclResult_t sendRealignNote(Comm& c, int peer, const RealignNote& note, int budgetMs) {
  const std::string bytes = encodeRealignNote(note, c.bootstrap ? c.bootstrap->magic() : 0, c.nonce, peer);
  net::Socket s;
  std::string why;
  if (net::connectWithin(c.peers[peer].statusAddr, &s, budgetMs, &why) != ncclSuccess) {
    WARN("rank %d: cannot reach %s to realign the connections after mismatched calls: %s", c.rank,
         c.describePeer(peer).c_str(), why.c_str());
    return ncclRemoteError;
  }
  return net::sendAll(s, bytes.data(), bytes.size(), "realignment note", nullptr, budgetMs);
}

std::string statusLine(Comm& c) {
  uint64_t issued = c.issueTicket.load(), done = c.doneTicket.load();
  std::string line = "rank " + std::to_string(c.rank) + ": " + std::to_string(done) + " of " +
                     std::to_string(issued) + " ops done";
  std::lock_guard<std::mutex> lk(c.statusMu);
  if (issued == done) return line + ", idle (not inside an operation of this communicator)";
  return line + (c.blockedReport.empty() ? ", running" : ", blocked: " + c.blockedReport);
}

namespace {

// Asks every other rank the query `magic` at once; replies within about budgetMs. Ranks that
// give none get the texts below.
std::vector<std::string> gatherReplies(Comm& c, int budgetMs, uint64_t magic) {
  std::vector<std::string> lines(c.nranks);
  const Query base{magic, c.bootstrap ? c.bootstrap->magic() : 0, c.nonce, 0, 0};
  // One thread per peer, so a frozen peer costs the budget once, not once per peer.
  auto ask = [&c, &lines, base, budgetMs](int p) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(budgetMs);
    auto left = [&] {
      return std::max<int>(1, static_cast<int>(
                                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    };
    net::Socket s;
    std::string why;
    Query q = base;
    q.rank = p;
    if (net::connectWithin(c.peers[p].statusAddr, &s, budgetMs, &why) != ncclSuccess) {
      lines[p] = "rank " + std::to_string(p) + ": no answer from " + c.peers[p].statusAddr.str() +
                 " (process gone, hung before init, or unreachable)";
      return;
    }
    uint32_t len = 0;
    bool ok = net::sendAll(s, &q, sizeof(q), "status query", nullptr, left()) == ncclSuccess &&
              net::recvAll(s, &len, sizeof(len), "status reply", nullptr, left()) == ncclSuccess && len <= kMaxReply;
    std::string text(ok ? len : 0, '\0');
    ok = ok && (len == 0 || net::recvAll(s, text.data(), len, "status reply", nullptr, left()) == ncclSuccess);
    lines[p] = ok ? text
                  : "rank " + std::to_string(p) + ": not responding (its status server at " +
                        c.peers[p].statusAddr.str() + " accepted the connection but sent no reply within " +
                        std::to_string(budgetMs) + " ms: the process is alive but stopped (SIGSTOP, a debugger) or starved)";
  };
  std::vector<std::thread> askers;
  for (int p = 0; p < c.nranks; p++)
    if (p != c.rank) askers.emplace_back(ask, p);
  for (auto& t : askers) t.join();
  return lines;
}

}  // namespace

std::vector<std::string> gatherStatus(Comm& c, int budgetMs) {
  std::vector<std::string> lines = gatherReplies(c, budgetMs, kStatusMagic);
  lines[c.rank] = statusLine(c);
  return lines;
}

std::vector<std::string> gatherWaitNotes(Comm& c, int budgetMs, bool* allAnswered) {
  std::vector<std::string> lines = gatherReplies(c, budgetMs, kWaitMagic);
  *allAnswered = true;
  for (int p = 0; p < c.nranks; p++) {
    if (p == c.rank) {
      std::lock_guard<std::mutex> lk(c.statusMu);
      lines[p] = c.waitNote;
    } else if (lines[p].rfind("rank ", 0) == 0) {  // no answer, or not responding
      *allAnswered = false;
      lines[p].clear();
    }
  }
  return lines;
}

}  // namespace accl
