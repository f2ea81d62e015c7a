// ib_net.h: the internal "IB" net module: ncclNet's interface (transports/net/net_module.h)
// over the IB data path (ib_channel.h). A device is one active port that NCCL_IB_DISABLE and
// NCCL_IB_HCA admit. listen() opens a TCP listener on the interface the socket rules pick
// (NCCL_SOCKET_IFNAME, the HPN rule) and puts its address in the handle; that connection is
// used only to swap QpInfo records (connector first, then the acceptor's reply, then a "ready"
// byte once the connector's QPs are at RTS) and stays open afterwards, so a peer that is gone
// is seen as EOF even where no completion would ever report it. Each send or receive comm has
// its own verbs context, QPs (NCCL_IB_QPS_PER_CONNECTION) and registration cache.
//
// Only host memory (NCCL_PTR_HOST): the module cannot take device pointers yet.
#pragma once
#include <memory>
#include <string>
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_setup.h"
#include "transports/net/net_module.h"

namespace accl::ib {

class IbNetModule : public net::NetModule {
 public:
  // After init(): why there is no device (empty when there is one).
  virtual const std::string& whyNoDevice() const = 0;
};

// A module over `verbs`. `cfg` null: IbConfig::fromParams() at init.
std::unique_ptr<IbNetModule> makeIbNetModule(std::shared_ptr<VerbsApi> verbs, const IbConfig* cfg = nullptr);

// The process's IB module, over libibverbs (or what setIbVerbsForTesting installed).
IbNetModule* processIbNetModule();

// Tests only: the verbs the process's IB module will use; call before the first communicator.
void setIbVerbsForTesting(std::shared_ptr<VerbsApi> verbs);

}  // namespace accl::ib
