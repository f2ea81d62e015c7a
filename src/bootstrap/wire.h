// wire.h: the bootstrap's messages on the wire (same binary on every rank, so plain structs).
#pragma once
#include <cstdint>
#include "net/socket.h"

namespace accl::boot {

// First message of a rank to the root.
struct Hello {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
  net::SockAddr listenAddr;  // where this rank accepts ring and point-to-point connections
};

// Root's answer; on success followed by nranks net::SockAddr (every rank's listen address).
struct RootReply {
  int32_t status;  // ncclSuccess or the error every rank returns
  char message[244];  // why, when status != ncclSuccess
};

// First message on every rank-to-rank connection.
enum class Purpose : int32_t { Ring = 1, P2p = 2 };
struct Handshake {
  uint64_t magic;
  int32_t rank;
  Purpose purpose;
};

// Precedes each point-to-point message.
struct P2pHeader {
  int32_t tag;
  uint32_t reserved;
  uint64_t size;
};

// A connection that has not sent its handshake in this long is dropped, so a silent stray
// connection cannot hold up the rendezvous.
constexpr int kHandshakeTimeoutMs = 5000;

}  // namespace accl::boot
