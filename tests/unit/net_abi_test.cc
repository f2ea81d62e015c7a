// Layout facts of the net-plugin ABI (spec/nccl-plugins.md §3): a plugin built against
// NCCL's header must see the same offsets and sizes through ours.
#include <gtest/gtest.h>
#include <cstddef>
#include "nccl_net.h"

static_assert(NCCL_NET_HANDLE_MAXSIZE == 128);
static_assert(sizeof(ncclNetDeviceHandle_v11_t) == 32);
static_assert(sizeof(ncclNetAttr_v11_t) == 44);
static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96);
static_assert(sizeof(ncclNetProperties_v11_t) == 112);
static_assert(sizeof(ncclNetProperties_v10_t) == 104);
// name + 21 function pointers (v11), name + 19 (v10).
static_assert(sizeof(ncclNet_v11_t) == 22 * sizeof(void*));
static_assert(sizeof(ncclNet_v10_t) == 20 * sizeof(void*));
static_assert(offsetof(ncclNet_v11_t, setNetAttr) == 21 * sizeof(void*));
static_assert(sizeof(ncclCollNet_v11_t) == 19 * sizeof(void*));
// The older tables ACCL loads (v9..v6): member counts and the property layouts they differ by.
static_assert(sizeof(ncclNet_v9_t) == 20 * sizeof(void*));
static_assert(sizeof(ncclNet_v8_t) == 19 * sizeof(void*));
static_assert(sizeof(ncclNet_v7_t) == 19 * sizeof(void*));
static_assert(sizeof(ncclNet_v6_t) == 17 * sizeof(void*));
static_assert(offsetof(ncclNet_v9_t, makeVDevice) == 19 * sizeof(void*));
static_assert(offsetof(ncclNet_v6_t, closeListen) == 16 * sizeof(void*));
static_assert(sizeof(ncclNetProperties_v9_t) == 104);
static_assert(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28);
static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56);
static_assert(sizeof(ncclNetProperties_v8_t) == 64);
static_assert(offsetof(ncclNetProperties_v7_t, speed) == 28);
static_assert(sizeof(ncclNetProperties_v7_t) == 56);
static_assert(offsetof(ncclNetProperties_v6_t, maxRecvs) == 44);
static_assert(sizeof(ncclNetProperties_v6_t) == 48);

TEST(NetPluginAbi, StructLayoutsMatchNcclsPluginAbi) {
  ncclNetAttr_v11_t attr = NCCL_NET_ATTR_INIT;
  EXPECT_EQ(attr.sendCommAttr.maxConcurrentPeers, -1);
  EXPECT_EQ(attr.proto, static_cast<uint32_t>(-1));
}
