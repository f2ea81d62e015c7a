// root.cc: the rendezvous root (see root.h).
#include "bootstrap/root.h"
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "bootstrap/acceptor.h"
#include "bootstrap/auth.h"
#include "bootstrap/wire.h"
#include "base/log.h"
#include "base/param.h"

namespace accl::boot {

namespace {

// A rank that does not read its reply within this long is not allowed to hold up the others.
constexpr int kReplyTimeoutMs = 30 * 1000;
// After a failed rendezvous, late ranks still get the error for this long (instead of
// retrying a closed port for a minute).
constexpr int kFailedLingerMs = 10 * 1000;
// A refusal goes to a connection that may be a stray: never wait long for it to read.
constexpr int kRefusalTimeoutMs = 1000;

// Roots of this process telling their ranks why a rendezvous failed: a rank of this process
// told first must not let the process exit before the others are told too.
std::mutex gAnsweringMu;
std::condition_variable gAnsweringDone;
int gAnswering = 0;
struct AnsweringFailure {
  AnsweringFailure() {
    std::lock_guard<std::mutex> g(gAnsweringMu);
    gAnswering++;
  }
  ~AnsweringFailure() {
    std::lock_guard<std::mutex> g(gAnsweringMu);
    gAnswering--;
    gAnsweringDone.notify_all();
  }
};

class RootServer {
 public:
  RootServer(net::Socket listener, uint64_t magic, std::string label, const Digest& jobKey)
      : listener_(std::move(listener)),
        magic_(magic),
        label_(std::move(label)),
        jobKey_(jobKey),
        acceptor_(listener_, magic, sizeof(Hello), "Bootstrap root", true) {}

  void run() {
    for (;;) {
      HandshakeAcceptor::Arrival arrival;
      const int deadlineMs = msUntilDeadline();
      const int timeout = error_.empty() ? std::min(kRootIdleTimeoutMs, deadlineMs) : kFailedLingerMs;
      ncclResult_t res = acceptor_.next(&arrival, nullptr, timeout);
      if (res == ncclRemoteError) {
        if (!error_.empty()) return;
        // The joined ranks are told who is missing, rather than seeing the connection close.
        char why[160];
        if (deadlineMs < kRootIdleTimeoutMs)
          snprintf(why, sizeof(why), "ACCL_INIT_TIMEOUT=%lld s is up for the first rank that joined the bootstrap root",
                   static_cast<long long>(initTimeoutSec_));
        else
          snprintf(why, sizeof(why), "the bootstrap root gave up after %d s without a new rank", kRootIdleTimeoutMs / 1000);
        fail(std::string(why) + ": " + whoIsMissing(), net::Socket(), -1, ncclRemoteError);
        return;
      }
      if (res != ncclSuccess) return;
      Hello hello;
      std::string bad = decodeHello(arrival.header.data(), arrival.header.size(), magic_, &hello);
      if (!bad.empty()) {
        refuseForeign(arrival, bad);
        continue;
      }
      if (!error_.empty()) {
        maxNranksSeen_ = std::max(maxNranksSeen_, hello.nranks);
        reply(arrival.sock, hello.rank, ncclInvalidUsage, error_);
        if (++answered_ >= maxNranksSeen_) return;
        continue;
      }
      if (!helloAuthentic(hello, jobKey_)) {
        refuseUnauthenticated(arrival, hello.rank);
        continue;
      }
      if (!replay_.firstUse(hello.nonce)) {
        WARN_ASIDE("Bootstrap root for %s: dropped connection from %s: replayed hello (its nonce was used before)",
             label_.c_str(), arrival.from.c_str());
        continue;
      }
      std::string problem = check(hello, arrival.from);
      if (!problem.empty()) {
        fail(problem, std::move(arrival.sock), hello.rank);
        if (answered_ >= maxNranksSeen_) return;
        continue;
      }
      if (joinedRanks_.empty()) firstJoin_ = std::chrono::steady_clock::now();
      joinedRanks_.emplace(hello.rank, Joined{std::move(arrival.sock), hello.listenAddr, arrival.from});
      if (++joined_ == nranks_) {
        sendTable();
        return;
      }
      failIfADamagedIdWasRefused();
      if (!error_.empty() && answered_ >= maxNranksSeen_) return;
    }
  }

 private:
  // Returns why `hello` cannot join, or "" if it can.
  std::string check(const Hello& hello, const std::string& from) {
    char why[256];
    maxNranksSeen_ = std::max(maxNranksSeen_, hello.nranks);
    if (hello.nranks <= 0) {
      snprintf(why, sizeof(why), "rank %d (%s) gave nranks=%d", hello.rank, from.c_str(), hello.nranks);
      return why;
    }
    if (nranks_ < 0) nranks_ = hello.nranks;
    if (hello.nranks != nranks_) {
      snprintf(why, sizeof(why), "nranks mismatch: rank %d (%s) gave nranks=%d, earlier ranks gave nranks=%d",
               hello.rank, from.c_str(), hello.nranks, nranks_);
      return why;
    }
    if (hello.rank < 0 || hello.rank >= nranks_) {
      snprintf(why, sizeof(why), "rank %d (%s) is out of range [0, %d)", hello.rank, from.c_str(), nranks_);
      return why;
    }
    if (auto seen = joinedRanks_.find(hello.rank); seen != joinedRanks_.end()) {
      snprintf(why, sizeof(why), "rank %d joined twice (from %s and %s)", hello.rank,
               seen->second.from.c_str(), from.c_str());
      return why;
    }
    return "";
  }

  // A connection with another magic: a rank whose unique id is for another communicator (or a
  // stray). Logged and, if it sent a whole hello, told where it is and what it asked for.
  void refuseForeign(const HandshakeAcceptor::Arrival& arrival, const std::string& bad) {
    std::string theirs = bad.rfind("wrong magic", 0) == 0 ? foreignHelloLabel(arrival.header.data(), arrival.header.size())
                                                          : std::string();
    // A label that is not text is not a rank's: junk that happened to be the hello's size.
    if (std::any_of(theirs.begin(), theirs.end(), [](char ch) { return ch < 0x20 || ch > 0x7e; })) theirs.clear();
    if (theirs.empty()) {
      WARN_ASIDE("Bootstrap root for %s: dropped connection from %s: %s", label_.c_str(), arrival.from.c_str(),
                 bad.c_str());
      return;
    }
    // Same label, other magic: the same kind of id, but not this one (altered, or another
    // ncclGetUniqueId's); naming the labels alone would read as if they matched.
    std::string why = theirs == label_
                          ? "presented a unique id whose magic does not match this root's id (both are '" + theirs +
                                "' ids, but not the same one: an id altered on its way to that rank, or one from "
                                "another call of ncclGetUniqueId); give every rank the same id"
                          : "joined the wrong rendezvous: its unique id is for '" + theirs + "', but " + arrival.from +
                                " reached the root of '" + label_ + "'";
    // The refused rank is told (below) and fails; this root's own calls go on.
    WARN_ASIDE("Bootstrap root for %s: dropped connection from %s: %s (a rank that %s)", label_.c_str(),
               arrival.from.c_str(), bad.c_str(), why.c_str());
    RootReply r{};
    r.status = ncclInvalidUsage;
    snprintf(r.message, sizeof(r.message), "this rank %s", why.c_str());
    (void)net::sendAll(arrival.sock, &r, sizeof(r), arrival.from.c_str(), nullptr, kRefusalTimeoutMs);
    int rank = -1, nranks = 0;
    if (!foreignHelloRank(arrival.header.data(), arrival.header.size(), &rank, &nranks)) return;
    const std::string refusal = theirs == label_ ? "its unique id's magic differs from the root's (an altered id)"
                                                 : "its unique id is for '" + theirs + "'";
    noteRefused(rank, arrival.from, refusal, theirs == label_ ? nranks : 0);
    failIfADamagedIdWasRefused();
  }

  // An id of this very kind with another magic, claiming a rank of this size that has not
  // joined: almost surely this job's rank with a damaged id, and the rendezvous cannot complete
  // without it. The others learn it now (or as soon as the first rank joins and says the size)
  // instead of at their deadline. Another job's id, or a hello that fails authentication,
  // could be anyone's: those are only named when the wait ends.
  void failIfADamagedIdWasRefused() {
    if (nranks_ <= 0 || !error_.empty()) return;
    for (const Refused& r : refused_) {
      if (r.damagedIdNranks != nranks_ || r.rank < 0 || r.rank >= nranks_ || joinedRanks_.count(r.rank)) continue;
      fail("rank " + std::to_string(r.rank) + " (" + r.from + ") was refused: " + r.why +
               "; give every rank the same unique id (" + whoIsMissing(false) + ")",
           net::Socket(), -1);
      return;
    }
  }

  // A hello with the right magic whose MAC does not verify: a rank with another ACCL_JOB_SECRET
  // (or none), or a forger. It never joins and never fails the rendezvous of the others.
  void refuseUnauthenticated(const HandshakeAcceptor::Arrival& arrival, int claimedRank) {
    const char* why = jobSecretSet() ? "its ACCL_JOB_SECRET differs from the root's, or it has none"
                                     : "it has ACCL_JOB_SECRET set, but the root (rank 0's process) has none";
    WARN_ASIDE("Bootstrap root for %s: dropped connection from %s claiming rank %d: hello failed authentication (%s)",
         label_.c_str(), arrival.from.c_str(), claimedRank, why);
    noteRefused(claimedRank, arrival.from, std::string("authentication failed: ") + why);
    RootReply r{};
    r.status = ncclInvalidUsage;
    snprintf(r.message, sizeof(r.message),
             "the root refused this rank: authentication failed (%s); set the same ACCL_JOB_SECRET on every rank", why);
    (void)net::sendAll(arrival.sock, &r, sizeof(r), arrival.from.c_str(), nullptr, kRefusalTimeoutMs);
  }

  // Tells every rank that joined (and the offender, if any) why the rendezvous failed.
  void fail(const std::string& problem, net::Socket offender, int offenderRank,
            ncclResult_t status = ncclInvalidUsage) {
    WARN("Bootstrap root: rendezvous failed: %s", problem.c_str());
    error_ = problem;
    AnsweringFailure answering;
    if (offender.valid()) reply(offender, offenderRank, status, error_);
    for (const auto& [rank, joined] : joinedRanks_) reply(joined.sock, rank, status, error_);
    answered_ = joined_ + (offender.valid() ? 1 : 0);
    joinedRanks_.clear();
  }

  // A connection refused before it could join, kept to name it when the rendezvous fails.
  struct Refused {
    int rank;
    std::string from, why;
    int damagedIdNranks;  // the nranks of a hello whose id is this one's altered; 0: another kind of refusal
  };
  void noteRefused(int rank, const std::string& from, const std::string& why, int damagedIdNranks = 0) {
    if (refused_.size() < 8) refused_.push_back({rank, from, why, damagedIdNranks});
  }

  // "rank 3 of 4 never joined (refused: rank 3 from H: why)": the ranks this rendezvous still
  // waits for, as ranges, and the connections it refused.
  std::string whoIsMissing(bool withRefused = true) const {
    if (nranks_ <= 0) return "no rank had joined";
    std::string ranks;
    int missing = 0;
    for (int r = 0; r < nranks_; r++) {
      if (joinedRanks_.count(r)) continue;
      int end = r;
      while (end + 1 < nranks_ && !joinedRanks_.count(end + 1)) end++;
      missing += end - r + 1;
      if (ranks.size() < 80) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r) + (end > r ? "-" + std::to_string(end) : "");
      else if (ranks.back() != '.') ranks += ", ...";
      r = end;
    }
    std::string s = missing == 0 ? "every rank joined"
                                 : (missing == 1 ? "rank " : "ranks ") + ranks + " of " + std::to_string(nranks_) +
                                       (missing == 1 ? " never joined" : " never joined (" + std::to_string(missing) + ")");
    if (withRefused)
      for (const Refused& r : refused_) s += "; refused: rank " + std::to_string(r.rank) + " from " + r.from + " (" + r.why + ")";
    return s;
  }

  // Milliseconds until shortly before ACCL_INIT_TIMEOUT (as this process reads it) has passed
  // since the first rank joined: that rank gives up then, so the root tells every joined rank
  // who is missing just before (a quarter of the limit, at most a second, ahead). INT32_MAX
  // while none joined or without a limit.
  int msUntilDeadline() const {
    if (initTimeoutSec_ <= 0 || joinedRanks_.empty()) return INT32_MAX;
    const auto limit = std::chrono::milliseconds(initTimeoutSec_ * 1000);
    const auto ahead = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(1000), limit / 4);
    const auto left = firstJoin_ + limit - ahead - std::chrono::steady_clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, INT32_MAX));
  }

  void reply(const net::Socket& sock, int rank, ncclResult_t status, const std::string& message) {
    RootReply r{};
    r.status = status;
    snprintf(r.message, sizeof(r.message), "%s", message.c_str());
    std::string desc = "rank " + std::to_string(rank);
    (void)net::sendAll(sock, &r, sizeof(r), desc.c_str(), nullptr, kReplyTimeoutMs);
  }

  void sendTable() {
    RootReply ok{};
    ok.status = ncclSuccess;
    if (!randomBytes(ok.sessionKey, sizeof(ok.sessionKey))) {
      fail("getrandom failed for the session key", net::Socket(), -1);
      return;
    }
    // Every rank has joined here: only now is a table of nranks entries built.
    std::vector<net::SockAddr> table;
    table.reserve(joinedRanks_.size());
    for (const auto& entry : joinedRanks_) table.push_back(entry.second.addr);
    for (const auto& [r, joined] : joinedRanks_) {
      std::string desc = "rank " + std::to_string(r) + " (" + joined.from + ")";
      if (net::sendAll(joined.sock, &ok, sizeof(ok), desc.c_str(), nullptr, kReplyTimeoutMs) != ncclSuccess) continue;
      (void)net::sendAll(joined.sock, table.data(), table.size() * sizeof(net::SockAddr), desc.c_str(), nullptr,
                         kReplyTimeoutMs);
    }
    INFO(kSubsysBootstrap, "Bootstrap root: rendezvous of %d ranks complete", nranks_);
  }

  net::Socket listener_;
  uint64_t magic_;
  std::string label_;
  Digest jobKey_;  // ACCL_JOB_SECRET's key when the root was started
  ReplayGuard replay_;
  HandshakeAcceptor acceptor_;
  int nranks_ = -1;
  int maxNranksSeen_ = 0;
  int joined_ = 0;
  int answered_ = 0;  // ranks told about error_
  std::string error_;
  // Only the ranks that have joined: memory grows with arrivals, not with the nranks a hello claims.
  struct Joined {
    net::Socket sock;
    net::SockAddr addr;
    std::string from;
  };
  std::map<int, Joined> joinedRanks_;
  std::vector<Refused> refused_;
  const int64_t initTimeoutSec_ = param::initTimeoutSec();
  std::chrono::steady_clock::time_point firstJoin_;
};

}  // namespace

void waitForFailureAnswers(int timeoutMs) {
  std::unique_lock<std::mutex> g(gAnsweringMu);
  gAnsweringDone.wait_for(g, std::chrono::milliseconds(timeoutMs), [] { return gAnswering == 0; });
}

void startRootThread(net::Socket listener, uint64_t magic, const std::string& label) {
  std::thread([listener = std::move(listener), magic, label, key = jobKey()]() mutable {
    RootServer(std::move(listener), magic, label, key).run();
  }).detach();
}

}  // namespace accl::boot
