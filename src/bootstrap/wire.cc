// wire.cc: validated decoding of bootstrap and transport messages (see wire.h). Depends on
// nothing but headers, so tests/fuzz builds it alone.
#include "bootstrap/wire.h"
#include <cstdio>
#include <cstring>
#include "bootstrap/bootstrap.h"

namespace accl::boot {

namespace {

std::string format(const char* fmt, long long a, long long b = 0) {
  char buf[160];
  snprintf(buf, sizeof(buf), fmt, a, b);
  return buf;
}

template <typename T>
std::string copyExact(const void* data, size_t size, T* out, const char* what) {
  if (data == nullptr || size != sizeof(T)) {
    char buf[160];
    snprintf(buf, sizeof(buf), "%s of %zu bytes (expected %zu)", what, size, sizeof(T));
    return buf;
  }
  std::memcpy(out, data, sizeof(T));
  return "";
}

std::string checkMagic(uint64_t got, uint64_t want) {
  if (got == want) return "";
  char buf[80];
  snprintf(buf, sizeof(buf), "wrong magic 0x%016llx (not this job)", static_cast<unsigned long long>(got));
  return buf;
}

}  // namespace

bool validPeerAddress(const net::SockAddr& addr) {
  if (addr.len > sizeof(addr.ss)) return false;
  if (addr.family() == AF_INET && addr.len == sizeof(sockaddr_in)) {
    return reinterpret_cast<const sockaddr_in*>(&addr.ss)->sin_port != 0;
  }
  if (addr.family() == AF_INET6 && addr.len == sizeof(sockaddr_in6)) {
    return reinterpret_cast<const sockaddr_in6*>(&addr.ss)->sin6_port != 0;
  }
  return false;
}

std::string decodeHello(const void* data, size_t size, uint64_t magic, Hello* out) {
  std::string why = copyExact(data, size, out, "hello");
  if (why.empty()) why = checkMagic(out->magic, magic);
  if (!why.empty()) return why;
  out->label[sizeof(out->label) - 1] = '\0';
  // Rank and nranks are checked by the root against the other ranks (it tells them why).
  if (!validPeerAddress(out->listenAddr)) {
    return format("rank %lld sent an unusable listen address (family %lld)", out->rank, out->listenAddr.family());
  }
  return "";
}

std::string foreignHelloLabel(const void* data, size_t size) {
  Hello hello;
  if (!copyExact(data, size, &hello, "hello").empty()) return "";
  std::string label;
  for (char c : hello.label) {
    if (c == '\0') break;
    label += c >= 0x20 && c < 0x7f ? c : '?';
  }
  return label;
}

bool foreignHelloRank(const void* data, size_t size, int* rank, int* nranks) {
  Hello hello;
  if (!copyExact(data, size, &hello, "hello").empty()) return false;
  *rank = hello.rank;
  *nranks = hello.nranks;
  return true;
}

std::string decodeHandshake(const void* data, size_t size, uint64_t magic, int nranks, int selfRank,
                            Handshake* out) {
  std::string why = copyExact(data, size, out, "handshake");
  if (why.empty()) why = checkMagic(out->magic, magic);
  if (!why.empty()) return why;
  if (out->rank < 0 || out->rank >= nranks || out->rank == selfRank) {
    return format("handshake from rank %lld, not a peer of this %lld-rank communicator", out->rank, nranks);
  }
  if (out->purpose != Purpose::Ring && out->purpose != Purpose::P2p) {
    return format("handshake with unknown purpose %lld", static_cast<int32_t>(out->purpose));
  }
  if (out->to != selfRank) return format("handshake addressed to rank %lld, not this rank %lld", out->to, selfRank);
  return "";
}

std::string decodeRootReply(const void* data, size_t size, RootReply* out) {
  std::string why = copyExact(data, size, out, "root reply");
  if (!why.empty()) return why;
  out->message[sizeof(out->message) - 1] = '\0';
  if (out->status < ncclSuccess || out->status >= ncclNumResults) {
    return format("root reply with invalid status %lld", out->status);
  }
  return "";
}

std::string decodeAddressTable(const void* data, size_t size, int nranks, std::vector<net::SockAddr>* out) {
  if (nranks <= 0 || data == nullptr || size != static_cast<size_t>(nranks) * sizeof(net::SockAddr)) {
    return format("address table of %lld bytes for %lld ranks", static_cast<long long>(size), nranks);
  }
  out->resize(nranks);
  std::memcpy(out->data(), data, size);
  for (int r = 0; r < nranks; r++) {
    if (!validPeerAddress((*out)[r])) return format("address table: rank %lld has an unusable address", r);
  }
  return "";
}

std::string decodeP2pHeader(const void* data, size_t size, P2pHeader* out) {
  std::string why = copyExact(data, size, out, "message header");
  if (!why.empty()) return why;
  if (out->size > kMaxP2pMessageBytes) {
    return format("message header announces %lld bytes (limit %lld)", static_cast<long long>(out->size),
                  static_cast<long long>(kMaxP2pMessageBytes));
  }
  return "";
}

std::string decodeUniqueIdBytes(const void* data, size_t size, UniqueIdContents* out, net::SockAddr* root) {
  if (data == nullptr || size < sizeof(UniqueIdContents)) {
    return format("unique id of %lld bytes (need %lld)", static_cast<long long>(size),
                  static_cast<long long>(sizeof(UniqueIdContents)));
  }
  std::memcpy(out, data, sizeof(*out));
  *root = net::SockAddr{};
  sa_family_t family;
  std::memcpy(&family, &out->rootAddr, sizeof(family));
  root->len = family == AF_INET6 ? sizeof(sockaddr_in6) : family == AF_INET ? sizeof(sockaddr_in) : 0;
  std::memcpy(&root->ss, &out->rootAddr, root->len);
  if (out->magic == 0) return "unique id with a zero magic (was it made by ncclGetUniqueId?)";
  if (!validPeerAddress(*root)) return "unique id without a usable root address (was it made by ncclGetUniqueId?)";
  return "";
}

}  // namespace accl::boot
