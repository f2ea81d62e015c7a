// ib_rail_return.cc: taking a failed port back into use (see ib_rail_return.h).
#include "transports/ib/ib_rail_return.h"
#include <sys/socket.h>
#include <algorithm>
#include <cerrno>
#include "base/log.h"

namespace accl::ib {
namespace {

constexpr uint32_t kNoteMagic = 0x52455455;                // "UTER": a rail note
constexpr auto kLookEvery = std::chrono::milliseconds(5);  // a syscall only now and then

// Why a receiver refused (Note::why).
constexpr uint32_t kPortDown = 1, kLastRail = 2, kQpRefused = 3;
const char* refusal(uint32_t why) {
  return why == kPortDown    ? "its port there is not active"
         : why == kLastRail  ? "it was the only port the peer still used"
         : why == kQpRefused ? "a QP there refused to come back"
                             : "no reason given";
}

}  // namespace

IbRailReturn::IbRailReturn(IbRailSet& rails, const net::Socket& oob, IbRailSender* sender, IbRailReceiver* receiver,
                           std::vector<QpInfo> local, std::vector<QpInfo> remote, int retrySec)
    : rails_(rails),
      oob_(oob),
      sender_(sender),
      receiver_(receiver),
      local_(std::move(local)),
      remote_(std::move(remote)),
      retry_(std::chrono::seconds(std::max(retrySec, 1))),
      nextTry_(static_cast<size_t>(rails.rails())),
      offered_(static_cast<size_t>(rails.rails())),
      pending_(static_cast<size_t>(rails.rails())) {}

void IbRailReturn::poll() {
  if (oobDone_ || !rails_.error().empty()) return;
  const Clock::time_point now = Clock::now();
  if (now < nextLook_) return;
  nextLook_ = now + kLookEvery;
  while (!oobDone_) {
    const ssize_t n = recv(oob_.fd(), reinterpret_cast<char*>(&in_) + inGot_, sizeof in_ - inGot_, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {  // the peer left: the comm's own check (ib_net.cc idle()) reports it
      oobDone_ = true;
      break;
    }
    inGot_ += static_cast<size_t>(n);
    if (inGot_ < sizeof in_) continue;
    inGot_ = 0;
    onNote(in_);
  }
  if (oobDone_) return;
  if (sender_) offerDueRails(now);
  if (receiver_) answerPending();
}

void IbRailReturn::onNote(const Note& note) {
  const int r = static_cast<int>(note.rail);
  if (note.magic != kNoteMagic || r < 0 || r >= rails_.rails()) {
    INFO(kSubsysNet, "NET/IB: a malformed rail note from peer %s; no port is taken back into use on this connection",
         rails_.peer().c_str());
    oobDone_ = true;
    return;
  }
  if (receiver_ && note.kind == kOffer) {
    pending_[r] = true;
    if (!rails_.live(r)) return;
    // The sender lost this port and we did not notice: out of use here too, its receives
    // flushed, so that both ends start it again from the first exchange's state.
    if (rails_.liveRails() == 1) {
      pending_[r] = false;
      send(kRefuse, r, kLastRail);
      return;
    }
    rails_.retire(r, "taken out of use to be reset");
    INFO(kSubsysNet, "NET/IB: peer %s dropped %s; its QPs here are reset before it is used again",
         rails_.peer().c_str(), rails_.name(r).c_str());
    if (!bringUp(r, {QpState::Error})) {  // its receives would never be flushed
      pending_[r] = false;
      send(kRefuse, r, kQpRefused);
    }
    return;
  }
  if (sender_ && offered_[r] && (note.kind == kAccept || note.kind == kRefuse)) {
    offered_[r] = false;
    if (note.kind == kRefuse) {
      INFO(kSubsysNet, "NET/IB: %s is active again here but not taken back into use with peer %s: %s; asking again "
           "in %lld s",
           rails_.name(r).c_str(), rails_.peer().c_str(), refusal(note.why),
           static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(retry_).count()));
      return;
    }
    if (!bringUp(r, {QpState::Rts})) return;  // the receiver's side waits unused until asked again
    rails_.revive(r);
    WARN("NET/IB: %s to peer %s is in use again: its port answers again on both ends; messages stripe over %s",
         rails_.name(r).c_str(), rails_.peer().c_str(), rails_.liveNames().c_str());
  }
}

void IbRailReturn::offerDueRails(Clock::time_point now) {
  for (int r = 0; r < rails_.rails(); r++) {
    if (rails_.live(r)) {
      nextTry_[r] = {};
      continue;
    }
    if (offered_[r]) continue;
    if (nextTry_[r] == Clock::time_point{}) nextTry_[r] = now + retry_;  // first seen dropped
    // Writes still outstanding on r complete (with an error) and go elsewhere first, as a
    // reset would drop their completions: looked at again on the next call until then.
    if (now < nextTry_[r] || !sender_->quiet(r)) continue;
    nextTry_[r] = now + retry_;
    if (!portActive(r)) continue;
    if (!bringUp(r, {QpState::Reset, QpState::Init, QpState::Rtr})) continue;
    offered_[r] = send(kOffer, r);
  }
}

void IbRailReturn::answerPending() {
  for (int r = 0; r < rails_.rails(); r++) {
    if (!pending_[r] || !receiver_->quiet(r)) continue;
    pending_[r] = false;
    if (!portActive(r)) {
      send(kRefuse, r, kPortDown);
      continue;
    }
    if (!bringUp(r, {QpState::Reset, QpState::Init}) || receiver_->refill(r) != ncclSuccess ||
        !bringUp(r, {QpState::Rtr, QpState::Rts})) {
      send(kRefuse, r, kQpRefused);
      continue;
    }
    rails_.revive(r);
    if (send(kAccept, r))
      WARN("NET/IB: %s to peer %s is in use again: its port answers again on both ends; messages stripe over %s",
           rails_.name(r).c_str(), rails_.peer().c_str(), rails_.liveNames().c_str());
  }
}

bool IbRailReturn::send(Kind kind, int rail, uint32_t why) {
  if (oobDone_) return false;
  const Note note{kNoteMagic, kind, static_cast<uint32_t>(rail), why};
  // 16 bytes on a connection that carries nothing else: they fit its buffer whole.
  if (::send(oob_.fd(), &note, sizeof note, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof note)) {
    oobDone_ = true;  // the peer left (idle() reports it) or the connection broke
    return false;
  }
  return true;
}

bool IbRailReturn::portActive(int rail) {
  PortInfo port;
  return rails_.rail(rail).verbs().queryPort(&port) == ncclSuccess && port.active;
}

bool IbRailReturn::bringUp(int rail, std::initializer_list<QpState> states) {
  const size_t r = static_cast<size_t>(rail);
  for (QpState s : states) {
    if (rails_.rail(rail).moveAll(s, local_[r], remote_[r]) != ncclSuccess) {
      INFO(kSubsysNet, "NET/IB: a QP on %s to peer %s refused state %d; the port stays out of use for now",
           rails_.name(rail).c_str(), rails_.peer().c_str(), static_cast<int>(s));
      return false;
    }
  }
  return true;
}

}  // namespace accl::ib
