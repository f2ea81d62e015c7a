#include "sched/plan_sim.h"
#include <algorithm>
#include <deque>
#include <queue>
#include <unordered_map>
#include "sched/coll_plan.h"

namespace accl {
namespace {

// Bytes of one message and when its first and last byte reach the receiver.
struct Msg {
  uint64_t start, end;  // stream positions of its first byte and after its last
  double first, last;
};

struct Chan {
  std::deque<Msg> msgs;
  uint64_t sent = 0, received = 0;
  int waiter = -1;  // the receiving rank, while it waits for bytes not yet sent
};

struct RankRun {
  std::vector<std::unique_ptr<StepSource>> phases;
  size_t phase = 0;
  Step cur;
  bool hasCur = false;
  bool done = false;
  double clock = 0;
};

// Fake buffer addresses: plans only compute pointers, the simulator never dereferences them.
char* fakeBuffer(int which) { return reinterpret_cast<char*>(static_cast<uintptr_t>(which) << 40); }

class Sim {
 public:
  Sim(const SimCluster& c, const SimOp& op) : c_(c), op_(op), l_(c.layout), n_(static_cast<int>(l_.hostOf.size())) {
    const LinkCosts& k = c.links;
    const size_t bytes = op.count * dev::typeSize(op.type);
    // Reductions read the op's input: a reduce-scatter's is N blocks of count.
    const double touched = static_cast<double>(bytes) * (op.kind == OpKind::ReduceScatter ? n_ : 1);
    copyGbps_ = copyGbps(k);
    reduceGbps_ = reduceGbps(k, touched);
    const int hostsPerPod = std::max(1, l_.nhosts / std::max(1, l_.npods));
    podGbps_ = hostsPerPod * c.nicsPerHost * k.inter.gbytesPerSec / std::max(1.0, c.podOversub);
    nicOut_.assign(static_cast<size_t>(l_.nhosts) * c.nicsPerHost, 0);
    nicIn_ = nicOut_;
    podOut_.assign(l_.npods, 0);
    res_.hostSent.assign(l_.nhosts, 0);
    res_.hostRecv.assign(l_.nhosts, 0);
    res_.podSent.assign(l_.npods, 0);
  }

  SimResult run(uint64_t maxSteps) {
    ranks_.resize(n_);
    const topo::RankLayout& l = l_;
    for (int r = 0; r < n_; r++) {
      CollArgs a;
      a.src = fakeBuffer(1);
      a.dst = fakeBuffer(2);
      a.count = op_.count;
      a.type = op_.type;
      a.root = op_.root;
      a.rank = r;
      a.nranks = n_;
      a.pieceBytes = op_.pieceBytes;
      if (!l.inRankOrder) {
        a.ringRanks = l.ring.data();
        a.ringPos = l.ringPos.data();
      }
      ranks_[r].phases = planOverConnections(op_.kind, op_.algo, a, l, op_.treePieceBytes, fakeBuffer(3), op_.treeShape);
      ready_.push({0.0, r});
    }
    while (!ready_.empty()) {
      auto [t, r] = ready_.top();
      ready_.pop();
      RankRun& rr = ranks_[r];
      rr.clock = std::max(rr.clock, t);
      double later = 0;
      const bool ran = advance(r, &later);
      // Every step drawn counts, empty ones too: a ring of 65,536 ranks draws 2N-1 a round
      // on each rank even where only a few carry bytes.
      if (res_.steps > maxSteps) {
        res_.error = "more than " + std::to_string(maxSteps) + " steps";
        return res_;
      }
      if (!ran) {
        // Its bytes are sent but arrive later: run the step then, so that every link serves
        // its messages in the order of their start times.
        if (later > 0) ready_.push({later, r});
        continue;  // otherwise it waits for bytes not sent yet; the sender wakes it
      }
      if (!ranks_[r].done) ready_.push({ranks_[r].clock, r});
    }
    for (int r = 0; r < n_; r++) {
      if (!ranks_[r].done) {
        res_.error =
            "deadlock: rank " + std::to_string(r) + " waits for rank " + std::to_string(ranks_[r].cur.recvPeer);
        return res_;
      }
      res_.us = std::max(res_.us, ranks_[r].clock);
    }
    for (auto& [key, ch] : chans_)
      if (ch.sent != ch.received) {
        res_.error = std::to_string(ch.sent - ch.received) + " bytes from rank " + std::to_string(key >> 32) +
                     " to rank " + std::to_string(key & 0xffffffffu) + " never received";
        return res_;
      }
    res_.ok = true;
    return res_;
  }

 private:
  static uint64_t key(int from, int to) { return (static_cast<uint64_t>(from) << 32) | static_cast<uint32_t>(to); }
  // One pass over a step's bytes: a reduction, or a copy.
  double pass(const Step& s) const {
    const bool reduces = s.kind == Step::Kind::RecvReduce || s.kind == Step::Kind::RecvReduceSend ||
                         s.kind == Step::Kind::Accumulate || s.kind == Step::Kind::Scale ||
                         s.kind == Step::Kind::Divide;
    return static_cast<double>(s.bytes) / ((reduces ? reduceGbps_ : copyGbps_) * 1e3);
  }
  static double wire(size_t bytes, double gbps) { return static_cast<double>(bytes) / (gbps * 1e3); }
  bool next(RankRun& rr) {
    while (rr.phase < rr.phases.size()) {
      if (rr.phases[rr.phase]->next(&rr.cur)) {
        res_.steps++;
        return true;
      }
      rr.phase++;
    }
    return false;
  }

  // Runs rank r's current step if its bytes have arrived: true when it ran (or r finished).
  // False with *later set: the first of them arrives then; with *later 0: not sent yet.
  bool advance(int r, double* later) {
    RankRun& rr = ranks_[r];
    for (;;) {
      if (!rr.hasCur) {
        if (!next(rr)) {
          rr.done = true;
          return true;
        }
        rr.hasCur = true;
      }
      if (rr.cur.bytes > 0) break;
      rr.hasCur = false;  // both ends skip empty steps (Lane)
    }
    const Step& s = rr.cur;
    const bool receives = s.kind == Step::Kind::Recv || s.kind == Step::Kind::RecvReduce ||
                          s.kind == Step::Kind::RecvReduceSend || s.kind == Step::Kind::RecvCopySend;
    const bool sends = s.kind == Step::Kind::Send || s.kind == Step::Kind::RecvReduceSend ||
                       s.kind == Step::Kind::RecvCopySend;
    double start = rr.clock, end = rr.clock;
    if (receives) {
      Chan& ch = chans_[key(s.recvPeer, r)];
      const uint64_t want = ch.received + s.bytes;
      if (ch.sent < want) {
        ch.waiter = r;
        return false;
      }
      // From the first message holding bytes of this step to the last.
      const double first = ch.msgs.front().first;
      if (first > rr.clock) {
        *later = first;
        return false;
      }
      double last = 0;
      while (!ch.msgs.empty() && ch.msgs.front().end <= want) {
        last = ch.msgs.front().last;
        ch.msgs.pop_front();
      }
      if (!ch.msgs.empty() && ch.msgs.front().start < want) last = std::max(last, ch.msgs.front().last);
      ch.received = want;
      start = std::max(rr.clock, first);
      end = std::max(start + pass(s), last);
    } else if (!sends) {
      end = start + pass(s);  // a local copy or reduction
    }
    if (sends) send(r, s.sendPeer, s.bytes, start, end);
    rr.clock = end;
    rr.hasCur = false;
    return true;
  }

  // Rank r streams `bytes` to `to` from `start`, the last of them ready at `ready`.
  void send(int r, int to, size_t bytes, double start, double ready) {
    const LinkCosts& k = c_.links;
    double first, last;
    if (l_.hostOf[r] == l_.hostOf[to]) {
      res_.intraBytes += bytes;
      first = start + k.intra.latencyUs;
      last = ready + k.intra.latencyUs;
    } else {
      const int hs = l_.hostOf[r], hr = l_.hostOf[to];
      double& out = nicOut_[static_cast<size_t>(hs) * c_.nicsPerHost + l_.slot[r] % c_.nicsPerHost];
      double& in = nicIn_[static_cast<size_t>(hr) * c_.nicsPerHost + l_.slot[to] % c_.nicsPerHost];
      const double nic = k.inter.gbytesPerSec;
      // Each link is busy for the message's wire time from when it can start; while a
      // forwarded message waits for its input the link carries other messages (a fluid
      // share, not a reservation until the last byte).
      const double txStart = std::max(start, out);
      out = txStart + wire(bytes, nic);
      double txEnd = std::max(ready, out);
      const bool acrossPods = l_.podOf[r] != l_.podOf[to];
      if (acrossPods) {
        double& up = podOut_[l_.podOf[r]];
        up = std::max(txStart, up) + wire(bytes, podGbps_);
        txEnd = std::max(txEnd, up);
        res_.podSent[l_.podOf[r]] += bytes;
      }
      in = std::max(txStart, in) + wire(bytes, nic);
      const double rxEnd = std::max(txEnd, in);
      const double lat = acrossPods && k.podLatencyUs > 0 ? k.podLatencyUs : k.inter.latencyUs;
      first = txStart + lat;
      last = rxEnd + lat;
      res_.hostSent[hs] += bytes;
      res_.hostRecv[hr] += bytes;
    }
    Chan& ch = chans_[key(r, to)];
    ch.msgs.push_back({ch.sent, ch.sent + bytes, first, last});
    ch.sent += bytes;
    if (ch.waiter >= 0) {
      ready_.push({std::max(ranks_[ch.waiter].clock, first), ch.waiter});
      ch.waiter = -1;
    }
  }

  const SimCluster& c_;
  SimOp op_;
  const topo::RankLayout& l_;
  int n_;
  double copyGbps_ = 1, reduceGbps_ = 1, podGbps_ = 1;
  std::vector<double> nicOut_, nicIn_, podOut_;  // when each is free again
  std::vector<RankRun> ranks_;
  std::unordered_map<uint64_t, Chan> chans_;
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready_;
  SimResult res_;
};

}  // namespace

SimResult simulatePlans(const SimCluster& cluster, const SimOp& op, uint64_t maxSteps) {
  Sim sim(cluster, op);
  return sim.run(maxSteps);
}

SimOp simOpFor(OpKind kind, Algo algo, size_t bytes, const topo::RankLayout& layout, TreeShape tree) {
  SimOp op;
  op.kind = kind;
  op.algo = algo;
  op.type = ncclFloat32;
  op.count = bytes / dev::typeSize(op.type);
  const bool allNet = layout.nhosts == static_cast<int>(layout.hostOf.size());
  op.pieceBytes = allNet ? 512 << 10 : 128 << 10;
  op.treePieceBytes = allNet ? 1 << 20 : 512 << 10;
  op.treeShape = tree;
  return op;
}

}  // namespace accl
