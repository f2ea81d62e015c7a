// NCCL_PROTO grammar (NCCL_ALGO's: spec/nccl-env.md §4) and what each function may use.
#include <gtest/gtest.h>
#include <cstdint>
#include "coll/proto_policy.h"

namespace accl {
namespace {

constexpr int kBroadcast = 0, kReduce = 1, kAllGather = 2, kReduceScatter = 3, kAllReduce = 4;

TEST(ProtoPolicy, EmptyValueAllowsEverything) {
  ProtoPolicy p;
  ASSERT_EQ(parseProtoPolicy("", &p), ncclSuccess);
  for (uint8_t a : p.allowed) EXPECT_EQ(a, kProtoLL | kProtoLL128 | kProtoSimple);
}

TEST(ProtoPolicy, ListAppliesToEveryFunctionCaseInsensitively) {
  ProtoPolicy p;
  ASSERT_EQ(parseProtoPolicy("sImPlE", &p), ncclSuccess);
  for (uint8_t a : p.allowed) EXPECT_EQ(a, kProtoSimple);
  ASSERT_EQ(parseProtoPolicy("ll,Simple", &p), ncclSuccess);
  for (uint8_t a : p.allowed) EXPECT_EQ(a, kProtoLL | kProtoSimple);
}

TEST(ProtoPolicy, CaretExcludesTheListedProtocols) {
  ProtoPolicy p;
  ASSERT_EQ(parseProtoPolicy("^LL", &p), ncclSuccess);
  for (uint8_t a : p.allowed) EXPECT_EQ(a, kProtoLL128 | kProtoSimple);
  EXPECT_FALSE(p.allows(kAllReduce, kProtoLL));
  EXPECT_TRUE(p.allows(kAllReduce, kProtoSimple));
}

TEST(ProtoPolicy, PerFunctionEntriesOverrideTheFirstEntry) {
  ProtoPolicy p;
  ASSERT_EQ(parseProtoPolicy("Simple;allreduce:LL;Broadcast:^simple", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kProtoLL);
  EXPECT_EQ(p.allowed[kBroadcast], kProtoLL | kProtoLL128);
  EXPECT_EQ(p.allowed[kAllGather], kProtoSimple);
  EXPECT_EQ(p.allowed[kReduce], kProtoSimple);
  EXPECT_EQ(p.allowed[kReduceScatter], kProtoSimple);
}

TEST(ProtoPolicy, UnknownProtocolOrFunctionOrALaterEntryWithoutFunctionIsInvalidUsage) {
  ProtoPolicy p;
  EXPECT_EQ(parseProtoPolicy("LL64", &p), ncclInvalidUsage);
  EXPECT_EQ(parseProtoPolicy("allreduced:LL", &p), ncclInvalidUsage);
  EXPECT_EQ(parseProtoPolicy("LL;Simple", &p), ncclInvalidUsage);
}

TEST(ProtoPolicy, NothingLeftIsInvalidUsage) {
  ProtoPolicy p;
  EXPECT_EQ(parseProtoPolicy("^LL,LL128,Simple", &p), ncclInvalidUsage);
  EXPECT_EQ(parseProtoPolicy("reduce:^ll,ll128,simple", &p), ncclInvalidUsage);
}

// A job tuned for NCCL on NVLink often sets LL128: it runs, on Simple, instead of failing.
TEST(ProtoPolicy, Ll128AloneIsCarriedBySimple) {
  ProtoPolicy p;
  ASSERT_EQ(parseProtoPolicy("LL128", &p), ncclSuccess);
  for (int f = 0; f < 5; f++) {
    EXPECT_TRUE(p.allows(f, kProtoSimple)) << f;
    EXPECT_FALSE(p.allows(f, kProtoLL)) << f;
  }
}

// A failed parse leaves the policy it was given as it was.
TEST(ProtoPolicy, AFailedParseLeavesThePolicyAlone) {
  ProtoPolicy p;
  ASSERT_EQ(parseProtoPolicy("Simple", &p), ncclSuccess);
  EXPECT_EQ(parseProtoPolicy("bogus", &p), ncclInvalidUsage);
  for (uint8_t a : p.allowed) EXPECT_EQ(a, kProtoSimple);
}

}  // namespace
}  // namespace accl
