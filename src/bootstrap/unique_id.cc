// unique_id.cc: what an ncclUniqueId holds and how ncclGetUniqueId makes one.
#include <sys/random.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "base/log.h"
#include "base/param.h"
#include "topo/ifaces.h"

namespace accl {

net::SockAddr UniqueIdContents::root() const {
  net::SockAddr addr;
  sa_family_t family;
  std::memcpy(&family, &rootAddr, sizeof(family));
  addr.len = family == AF_INET6 ? sizeof(sockaddr_in6) : family == AF_INET ? sizeof(sockaddr_in) : 0;
  std::memcpy(&addr.ss, &rootAddr, addr.len);
  return addr;
}

void UniqueIdContents::setLabel(const std::string& text) {
  std::memset(label, 0, sizeof(label));
  std::memcpy(label, text.data(), std::min(text.size(), sizeof(label) - 1));
}

void UniqueIdContents::setRoot(const net::SockAddr& addr) {
  std::memset(&rootAddr, 0, sizeof(rootAddr));
  std::memcpy(&rootAddr, &addr.ss, std::min<size_t>(addr.len, sizeof(rootAddr)));
}

ncclUniqueId encodeUniqueId(const UniqueIdContents& contents) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(&id, &contents, sizeof(contents));
  return id;
}

UniqueIdContents decodeUniqueId(const ncclUniqueId& id) {
  UniqueIdContents contents;
  std::memcpy(&contents, &id, sizeof(contents));
  return contents;
}

namespace {

// A random magic that cannot be confused with the NCCL_COMM_ID one (or an all-zero id).
ncclResult_t randomMagic(uint64_t* magic) {
  do {
    ssize_t n = getrandom(magic, sizeof(*magic), 0);
    if (n != static_cast<ssize_t>(sizeof(*magic))) {
      if (n < 0 && errno == EINTR) continue;
      WARN("getrandom failed: %s", n < 0 ? strerror(errno) : "short read");
      return ncclSystemError;
    }
  } while (*magic == 0 || *magic == kCommIdMagic);
  return ncclSuccess;
}

}  // namespace

namespace {

// A new root listener on the bootstrap interface, served by its own thread until one
// rendezvous is complete.
ncclResult_t startFreshRoot(const std::string& label, ncclUniqueId* id) {
  UniqueIdContents contents{};
  ncclResult_t res = randomMagic(&contents.magic);
  if (res != ncclSuccess) return res;
  contents.setLabel(label);
  topo::NetIf nif;
  std::string reason;
  res = topo::selectBootstrapInterface(&nif, &reason);
  if (res != ncclSuccess) return res;
  net::Socket listener;
  net::SockAddr bound;
  res = net::listenOn(nif.addr, &listener, &bound);
  if (res != ncclSuccess) return res;
  contents.setRoot(bound);
  INFO(kSubsysBootstrap | kSubsysInit, "Bootstrap root for %s listening on %s via %s", contents.label,
       bound.str().c_str(), reason.c_str());
  boot::startRootThread(std::move(listener), contents.magic, contents.label);
  *id = encodeUniqueId(contents);
  return ncclSuccess;
}

}  // namespace

ncclResult_t bootstrapGetUniqueId(ncclUniqueId* id) {
  std::string commId = param::commId();
  if (commId.size() > 1) {
    // Every rank can compute this id itself; rank 0 starts the root at init.
    UniqueIdContents contents{};
    net::SockAddr root;
    ncclResult_t res = net::parseHostPort(commId.c_str(), &root);
    if (res != ncclSuccess) return res;
    contents.magic = kCommIdMagic;
    contents.setRoot(root);
    contents.setLabel("NCCL_COMM_ID=" + commId);
    INFO(kSubsysBootstrap | kSubsysInit, "Bootstrap: unique id from NCCL_COMM_ID=%s", commId.c_str());
    *id = encodeUniqueId(contents);
    return ncclSuccess;
  }
  return startFreshRoot("ncclGetUniqueId", id);
}

ncclResult_t bootstrapNewUniqueId(ncclUniqueId* id, const std::string& label) { return startFreshRoot(label, id); }

}  // namespace accl
