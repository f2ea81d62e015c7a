// bootstrap_p2p.cc: tagged messages between any two ranks. A sender keeps one connection per
// peer; a receiver reads that peer's messages in order and queues those with other tags.
#include <algorithm>
#include <cstring>
#include "bootstrap/bootstrap_impl.h"
#include "base/check.h"
#include "base/log.h"

namespace accl {

namespace {

ncclResult_t checkPeer(const Bootstrap::Impl& b, int peer, const char* op) {
  if (peer >= 0 && peer < b.nranks) return ncclSuccess;
  WARN("Bootstrap %s: peer %d out of range [0, %d)", op, peer, b.nranks);
  return ncclInvalidArgument;
}

ncclResult_t sendImpl(Bootstrap::Impl& b, int peer, int tag, const void* data, size_t size) {
  net::Socket* sock;
  {
    std::lock_guard<std::mutex> lock(b.socketsMu);
    sock = &b.p2pOut[peer];  // std::map: the element stays put while we use it unlocked
  }
  if (!sock->valid()) {
    net::Socket fresh;
    NCCLCHECK(net::connectTo(b.table[peer], &fresh, b.abortFlag));
    boot::Handshake hs;
    NCCLCHECK(b.handshakeTo(peer, boot::Purpose::P2p, &hs));
    NCCLCHECK(net::sendAll(fresh, &hs, sizeof(hs), b.desc(peer), b.abortFlag));
    std::lock_guard<std::mutex> lock(b.socketsMu);
    *sock = std::move(fresh);
  }
  boot::P2pHeader header{tag, 0, size};
  NCCLCHECK(net::sendAll(*sock, &header, sizeof(header), b.desc(peer), b.abortFlag));
  NCCLCHECK(net::sendAll(*sock, data, size, b.desc(peer), b.abortFlag));
  return ncclSuccess;
}

// Takes a queued message (peer, tag) if there is one.
bool takeQueued(Bootstrap::Impl& b, int peer, int tag, void* data, size_t size, ncclResult_t* res) {
  std::lock_guard<std::mutex> lock(b.queueMu);
  auto it = std::find_if(b.unexpected.begin(), b.unexpected.end(),
                         [&](const auto& m) { return m.peer == peer && m.tag == tag; });
  if (it == b.unexpected.end()) return false;
  if (it->data.size() > size) {
    WARN("Bootstrap recv from %s tag %d: message of %zu bytes does not fit in %zu", b.desc(peer), tag,
         it->data.size(), size);
    *res = ncclInvalidUsage;
  } else {
    std::memcpy(data, it->data.data(), it->data.size());
    *res = ncclSuccess;
  }
  b.unexpected.erase(it);
  return true;
}

ncclResult_t recvImpl(Bootstrap::Impl& b, int peer, int tag, void* data, size_t size) {
  for (;;) {
    ncclResult_t res;
    if (takeQueued(b, peer, tag, data, size, &res)) return res;
    if (peer == b.rank) {
      WARN("Bootstrap recv from self (rank %d) tag %d: no matching send was posted before", peer, tag);
      return ncclInvalidUsage;
    }
    NCCLCHECK(b.waited(b.waitForConnection(peer, boot::Purpose::P2p, b.waitMs()), peer, "its first message"));
    net::Socket* sock;
    {
      std::lock_guard<std::mutex> lock(b.socketsMu);
      sock = &b.p2pIn.at(peer);
    }
    boot::P2pHeader raw, header;
    NCCLCHECK(b.waited(net::recvAll(*sock, &raw, sizeof(raw), b.desc(peer), b.abortFlag, b.waitMs()), peer,
                       "a message"));
    std::string bad = boot::decodeP2pHeader(&raw, sizeof(raw), &header);
    if (!bad.empty()) {
      WARN("Bootstrap recv from %s: corrupt message: %s", b.desc(peer), bad.c_str());
      return ncclRemoteError;
    }
    if (header.tag == tag) {
      if (header.size > size) {
        WARN("Bootstrap recv from %s tag %d: message of %lu bytes does not fit in %zu", b.desc(peer), tag,
             static_cast<unsigned long>(header.size), size);
        return ncclInvalidUsage;
      }
      return net::recvAll(*sock, data, header.size, b.desc(peer), b.abortFlag);
    }
    Bootstrap::Impl::Message m{peer, header.tag, std::vector<char>(header.size)};
    NCCLCHECK(net::recvAll(*sock, m.data.data(), m.data.size(), b.desc(peer), b.abortFlag));
    std::lock_guard<std::mutex> lock(b.queueMu);
    b.unexpected.push_back(std::move(m));
  }
}

}  // namespace

ncclResult_t Bootstrap::send(int peer, int tag, const void* data, size_t size) {
  Impl& b = *impl_;
  NCCLCHECK(checkPeer(b, peer, "send"));
  if (peer == b.rank) {
    const char* bytes = static_cast<const char*>(data);
    std::lock_guard<std::mutex> lock(b.queueMu);
    b.unexpected.push_back({peer, tag, std::vector<char>(bytes, bytes + size)});
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(b.sendMu);
  return b.result(sendImpl(b, peer, tag, data, size));
}

ncclResult_t Bootstrap::recv(int peer, int tag, void* data, size_t size) {
  Impl& b = *impl_;
  NCCLCHECK(checkPeer(b, peer, "recv"));
  std::lock_guard<std::mutex> lock(b.recvMu);
  return b.result(recvImpl(b, peer, tag, data, size));
}

}  // namespace accl
