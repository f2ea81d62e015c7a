#include "sched/wait_cycle.h"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>
#include "comm/status_server.h"
#include "sched/call_stamp.h"

namespace accl {
namespace {

// A call as the cycle's message names it: "Recv(from rank 0, 1000 x float32)".
std::string describeWaitCall(const OpDesc& op) {
  if (op.kind != OpKind::Send && op.kind != OpKind::Recv) return op.describe();
  return std::string(op.kind == OpKind::Send ? "Send(to rank " : "Recv(from rank ") + std::to_string(op.peer) + ", " +
         std::to_string(op.count) + " x " + dev::typeName(op.type) + ")";
}

// Whether `w` could still move without any peer: a lane waits for room to send (a peer has
// not read what it sent), for its device, or the work waits for another of its own.
bool couldMoveAlone(const CommWork& w) {
  if (!w.started || w.phase >= w.phases.size()) return true;
  for (const Lane& lane : w.phases[w.phase])
    if (!lane.finished() && (lane.waitingSendTo() >= 0 || lane.waitingOnDevice())) return true;
  return false;
}

// A parsed wait note: "W <order> <busy> <board> <send x n> <recv x n> | <calls>".
struct WaitNote {
  uint64_t order = 0;
  int busy = 1;
  uint64_t board = 0;
  std::vector<uint64_t> sent, read;
  std::string calls;
};

bool parseWaitNote(const std::string& text, int nranks, WaitNote* out) {
  std::istringstream in(text);
  std::string tag;
  if (!(in >> tag >> out->order >> out->busy >> out->board) || tag != "W") return false;
  out->sent.resize(nranks);
  out->read.resize(nranks);
  for (auto& v : out->sent)
    if (!(in >> v)) return false;
  for (auto& v : out->read)
    if (!(in >> v)) return false;
  size_t bar = text.find(" | ");
  if (bar == std::string::npos) return false;
  out->calls = text.substr(bar + 3);
  return true;
}

}  // namespace

void publishWaitNote(CommWork& w, int64_t nowUsec) {
  Comm& c = *w.comm;
  if (w.finished || nowUsec - w.lastProgressUsec < kWaitNoteUsec || !callStampsOn() || c.nranks < 2) return;
  uint64_t order = ~uint64_t(0);
  std::string calls;
  for (const auto& op : w.ops) {
    if (op->stamp.magic == kCallStampMagic) order = std::min(order, stampOrder(op->stamp));
    calls += (calls.empty() ? "" : " + ") + describeWaitCall(*op);
  }
  if (order == ~uint64_t(0)) return;  // a call without a stamp cannot be realigned
  std::string note = "W " + std::to_string(order) + " " + (couldMoveAlone(w) ? "1" : "0") + " " +
                     std::to_string(c.board.posted);
  std::string read;
  for (int p = 0; p < c.nranks; p++) {
    PeerConnection* conn = p == c.rank ? nullptr : c.conns[p].get();
    note += " " + std::to_string(conn ? conn->send()->position() : 0);
    read += " " + std::to_string(conn ? conn->recv()->position() : 0);
  }
  note += read + " | " + calls;
  std::lock_guard<std::mutex> lk(c.statusMu);
  c.waitNote = std::move(note);
}

bool checkWaitCycle(CommWork& w, int64_t nowUsec) {
  Comm& c = *w.comm;
  if (c.rank != 0 || w.finished || c.realign.wanted() || nowUsec - w.lastProgressUsec < kWaitNoteUsec) return false;
  if (!callStampsOn() || c.nranks < 2 || nowUsec - c.cyclePollUsec < kCyclePollUsec) return false;
  c.cyclePollUsec = nowUsec;
  bool allAnswered = false;
  std::vector<std::string> texts = gatherWaitNotes(c, 200, &allAnswered);
  std::vector<WaitNote> notes(c.nranks);
  bool cycle = allAnswered;
  for (int p = 0; p < c.nranks && cycle; p++) cycle = parseWaitNote(texts[p], c.nranks, &notes[p]) && !notes[p].busy;
  // No rank has data to send to another: everything each sent, its peer has read, and no rank
  // posted a shared-memory board operation the others have not (a rank behind on the board
  // may only be slow to read it: its stamp scan, sched/stamp_scan.cc, judges that).
  for (int a = 0; a < c.nranks && cycle; a++)
    for (int b = 0; b < c.nranks && cycle; b++)
      cycle = a == b || (notes[a].sent[b] == notes[b].read[a] && notes[a].board == notes[b].board);
  std::string seen;
  for (const std::string& t : texts) seen += t + "\n";
  if (!cycle || seen != c.cycleSeen) {  // the same standstill twice in a row
    c.cycleSeen = cycle ? seen : "";
    return false;
  }
  c.cycleSeen.clear();
  uint64_t order = ~uint64_t(0);
  std::string why = "a waiting cycle:";
  for (int p = 0; p < c.nranks; p++) {
    order = std::min(order, notes[p].order);
    why += std::string(p ? ", rank " : " rank ") + std::to_string(p) + " waits in " + notes[p].calls;
  }
  why += "; no rank has data to send to another";
  c.realign.request(order, why, kRealignWaitCycle);
  return true;
}

}  // namespace accl
