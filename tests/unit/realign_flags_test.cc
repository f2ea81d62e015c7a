// The flags of a realignment (comm/realign_mailbox.h): a waiting cycle or calls run in another
// order make every rank's call fail, so every rank must learn them, from its own request or from
// any note that carries them, and they must survive the wire.
#include <gtest/gtest.h>
#include <cstring>
#include <string>
#include "comm/realign_mailbox.h"

namespace accl {
namespace {

RealignNote noteFrom(int rank, uint64_t order, uint32_t flags) {
  RealignNote n;
  n.rank = rank;
  n.mismatchOrder = order;
  n.flags = flags;
  n.endPos.assign(2, 0);
  n.nowPos.assign(2, 0);
  return n;
}

TEST(RealignFlags, ARankLearnsThemFromItsOwnRequestOrFromAPeersNote) {
  RealignMailbox own;
  own.request(7, "a waiting cycle: ...", kRealignWaitCycle);
  EXPECT_EQ(own.flags(7), kRealignWaitCycle);
  EXPECT_EQ(own.flags(8), 0u) << "another realignment's flags";

  RealignMailbox joining;
  ASSERT_TRUE(joining.deposit(noteFrom(1, 5, kRealignRanOrder), 2));
  EXPECT_EQ(joining.flags(5), kRealignRanOrder);
  ASSERT_TRUE(joining.deposit(noteFrom(0, 5, 0), 2));
  EXPECT_EQ(joining.flags(5), kRealignRanOrder) << "a note without flags does not clear another's";
  joining.done(5);
  EXPECT_EQ(joining.flags(5), 0u) << "the notes of a finished realignment are gone";
}

TEST(RealignFlags, TheyTravelInTheNote) {
  RealignNote n = noteFrom(1, 9, kRealignWaitCycle | kRealignRanOrder);
  n.callSeq = 4;
  std::string wire = encodeRealignNote(n, 0x1234, 0x5678, 0);
  ASSERT_EQ(wire.size(), sizeof(RealignWireHeader) + realignBodyBytes(2));
  RealignNote back;
  ASSERT_TRUE(decodeRealignBody(wire.data() + sizeof(RealignWireHeader), wire.size() - sizeof(RealignWireHeader), 2,
                                &back));
  EXPECT_EQ(back.flags, kRealignWaitCycle | kRealignRanOrder);
  EXPECT_EQ(back.callSeq, 4u);
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.mismatchOrder, 9u);
}

}  // namespace
}  // namespace accl
