// ib_rail_return.h: a port that failed is taken back into use by the connection that dropped
// it (ib_rails.h), once the port is active again on both ends.
//
// The QPs of a dropped rail are reset and brought up again with the records of the first
// exchange (same QPNs, PSNs and addresses), so no new record travels: both ends only agree on
// the moment, over the setup connection that each comm keeps open (IbComm::oob), with three
// notes of 16 bytes. The sending side asks, the receiving side answers:
//   1. Sender, every ACCL_RAIL_RETRY_SEC while rail r is dropped: once none of its writes is
//      outstanding on r and r's port is active, its QPs on r go Reset -> Init -> Rtr (credits
//      may land from now on) and it sends Offer(r).
//   2. Receiver, on Offer(r): takes r out of use if it still had it (its QPs go to Error, which
//      flushes its receives), waits until none of its receives or credits is outstanding on r,
//      then, if r's port is active here too: Reset -> Init -> receive pool -> Rtr -> Rts, r
//      back in use (credits may go on it), WARN, Accept(r). Else Refuse(r).
//   3. Sender, on Accept(r): Rts, r back in use, WARN; the next message's pieces stripe over r
//      again. On Refuse(r): asks again after ACCL_RAIL_RETRY_SEC.
// Nothing is lost or counted twice: a message's pieces may land on any lane, each counted once
// by its immediate, so a piece simply goes on r if it is posted after step 3, and resetting
// only quiet QPs drops no completion. A rail whose port got a new LID (InfiniBand, after the
// subnet manager reassigned it) is not followed: the records are the first exchange's.
#pragma once
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <vector>
#include "net/socket.h"
#include "transports/ib/ib_rails.h"

namespace accl::ib {

class IbRailReturn {
 public:
  // Exactly one of `sender` (this comm sends and asks) or `receiver` (it answers) is set.
  // `local`/`remote`: the records of the first exchange, per rail in use.
  IbRailReturn(IbRailSet& rails, const net::Socket& oob, IbRailSender* sender, IbRailReceiver* receiver,
               std::vector<QpInfo> local, std::vector<QpInfo> remote, int retrySec);
  // From every isend/irecv/test of the comm: looks at the setup connection at most every few
  // milliseconds and acts on what came; never fails the comm (a rail that cannot be brought
  // back stays out of use, and is asked again later).
  void poll();

 private:
  enum Kind : uint32_t { kOffer = 1, kAccept = 2, kRefuse = 3 };
  struct Note {
    uint32_t magic;
    uint32_t kind;
    uint32_t rail;
    uint32_t why;  // kRefuse: the reason
  };
  using Clock = std::chrono::steady_clock;
  void onNote(const Note& note);
  void offerDueRails(Clock::time_point now);
  void answerPending();
  bool send(Kind kind, int rail, uint32_t why = 0);  // false once the connection is gone
  bool portActive(int rail);
  // `states` in order on every QP of the rail; false (with an INFO) if one is refused.
  bool bringUp(int rail, std::initializer_list<QpState> states);

  IbRailSet& rails_;
  const net::Socket& oob_;
  IbRailSender* sender_;
  IbRailReceiver* receiver_;
  std::vector<QpInfo> local_, remote_;
  Clock::duration retry_;
  Clock::time_point nextLook_{};
  bool oobDone_ = false;  // closed or garbled: nothing more is read or sent
  Note in_{};
  size_t inGot_ = 0;
  std::vector<Clock::time_point> nextTry_;  // sender: per dropped rail; {} = not yet scheduled
  std::vector<bool> offered_;               // sender: Offer sent, answer not yet read
  std::vector<bool> pending_;               // receiver: Offer read, not yet answered
};

}  // namespace accl::ib
