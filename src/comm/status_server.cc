#include "comm/status_server.h"
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include "base/check.h"
#include "comm/comm.h"
#include "topo/ifaces.h"

namespace accl {
namespace {

constexpr uint64_t kStatusMagic = 0x4143434c53544154ull;  // "ACCLSTAT"
constexpr uint32_t kMaxReply = 64 << 10;

struct Query {
  uint64_t magic;
  uint64_t commMagic;
  uint64_t nonce;
  int32_t rank;
  int32_t pad;
};

struct Key {
  uint64_t nonce;
  int rank;
  bool operator<(const Key& o) const { return nonce != o.nonce ? nonce < o.nonce : rank < o.rank; }
};

class Server {
 public:
  ncclResult_t start() {
    std::lock_guard<std::mutex> lk(mu_);
    // A forked child inherits the flag but not the thread: it needs a server of its own.
    if (started_ && pid_ == getpid()) return ncclSuccess;
    pid_ = getpid();
    comms_.clear();
    topo::NetIf nif;
    NCCLCHECK(topo::selectBootstrapInterface(&nif));
    NCCLCHECK(net::listenOn(nif.addr, &listener_, &addr_));
    // The thread lives for the process; it sleeps in poll() and never touches a dead comm
    // (lookups go through the registry under the lock).
    std::thread([this] { serve(); }).detach();
    started_ = true;
    return ncclSuccess;
  }
  net::SockAddr address() const { return addr_; }
  void add(Comm* c) {
    std::lock_guard<std::mutex> lk(mu_);
    comms_[{c->nonce, c->rank}] = c;
  }
  void remove(Comm* c) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = comms_.find({c->nonce, c->rank});
    if (it != comms_.end() && it->second == c) comms_.erase(it);
  }

 private:
  void serve() {
    for (;;) {
      pollfd pfd{listener_.fd(), POLLIN, 0};
      if (poll(&pfd, 1, -1) <= 0) continue;
      net::Socket s(::accept(listener_.fd(), nullptr, nullptr));
      if (!s.valid()) continue;
      Query q{};
      if (net::recvAll(s, &q, sizeof(q), "status query", nullptr, 1000) != ncclSuccess || q.magic != kStatusMagic)
        continue;  // strays are simply closed
      std::string reply;
      {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = comms_.find({q.nonce, q.rank});
        if (it == comms_.end() || it->second->bootstrap == nullptr || it->second->bootstrap->magic() != q.commMagic)
          continue;
        reply = statusLine(*it->second);
      }
      uint32_t len = static_cast<uint32_t>(std::min<size_t>(reply.size(), kMaxReply));
      if (net::sendAll(s, &len, sizeof(len), "status reply", nullptr, 1000) == ncclSuccess)
        (void)net::sendAll(s, reply.data(), len, "status reply", nullptr, 1000);
    }
  }

  std::mutex mu_;
  bool started_ = false;
  pid_t pid_ = 0;
  net::Socket listener_;
  net::SockAddr addr_;
  std::map<Key, Comm*> comms_;
};

Server& server() {
  static Server* s = new Server();  // never destroyed: its thread outlives static destructors
  return *s;
}

}  // namespace

ncclResult_t statusServerAddress(net::SockAddr* out) {
  NCCLCHECK(server().start());
  *out = server().address();
  return ncclSuccess;
}

void statusRegister(Comm* comm) { server().add(comm); }
void statusUnregister(Comm* comm) { server().remove(comm); }

std::string statusLine(Comm& c) {
  uint64_t issued = c.issueTicket.load(), done = c.doneTicket.load();
  std::string line = "rank " + std::to_string(c.rank) + ": " + std::to_string(done) + " of " +
                     std::to_string(issued) + " ops done";
  std::lock_guard<std::mutex> lk(c.statusMu);
  if (issued == done) return line + ", idle (not inside an operation of this communicator)";
  return line + (c.blockedReport.empty() ? ", running" : ", blocked: " + c.blockedReport);
}

std::vector<std::string> gatherStatus(Comm& c, int budgetMs) {
  std::vector<std::string> lines(c.nranks);
  const Query base{kStatusMagic, c.bootstrap ? c.bootstrap->magic() : 0, c.nonce, 0, 0};
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
  for (int p = 0; p < c.nranks; p++) {
    if (p == c.rank) lines[p] = statusLine(c);
    else askers.emplace_back(ask, p);
  }
  for (auto& t : askers) t.join();
  return lines;
}

}  // namespace accl
