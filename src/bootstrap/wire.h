// wire.h: the bootstrap's messages on the wire (same binary on every rank, so plain structs).
//
// Every byte that arrives from the network (or from a user's ncclUniqueId) is decoded by one of
// the pure functions at the end of this file before anything else looks at it: they check the
// size, the magic and every field's range and return why the bytes are unacceptable ("" when
// they are fine). They have no side effects, so tests/fuzz feeds them arbitrary bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "net/socket.h"

namespace accl {
struct UniqueIdContents;
}

namespace accl::boot {

// First message of a rank to the root.
struct Hello {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
  net::SockAddr listenAddr;  // where this rank accepts ring and point-to-point connections
  char label[80];            // the label of the rank's unique id (UniqueIdContents::label)
  uint8_t nonce[16];         // fresh per hello (replay protection)
  uint8_t mac[32];           // HMAC under the job key (auth.h)
};

// Root's answer; on success followed by nranks net::SockAddr (every rank's listen address).
struct RootReply {
  int32_t status;  // ncclSuccess or the error every rank returns
  char message[244];  // why, when status != ncclSuccess
  uint8_t sessionKey[32];  // on success: this communicator's handshake key material (auth.h)
};

// First message on every rank-to-rank connection.
enum class Purpose : int32_t { Ring = 1, P2p = 2 };
struct Handshake {
  uint64_t magic;
  int32_t rank;      // the sender
  Purpose purpose;
  int32_t to;        // the receiver: a handshake is valid at one listener only
  uint32_t reserved;
  uint8_t nonce[16];  // fresh per connection (replay protection)
  uint8_t mac[32];    // HMAC under the communicator's connection key (auth.h)
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

// Bootstrap point-to-point messages are small (unique ids for ncclCommShrink); a header
// announcing more than this is corrupt, not a message to wait for or allocate for. A message
// whose tag the receiver is waiting for must also fit what it expects.
constexpr uint64_t kMaxP2pMessageBytes = uint64_t(1) << 20;

// ---- validated decoding (wire.cc) -----------------------------------------------------------
// An address another rank can connect to: AF_INET/AF_INET6 with the matching length, port != 0.
bool validPeerAddress(const net::SockAddr& addr);
std::string decodeHello(const void* data, size_t size, uint64_t magic, Hello* out);
// A hello from a rank whose id has another magic: the label it presents, printable only
// ("" if the bytes are not a hello at all), so the root can tell it where it went wrong.
std::string foreignHelloLabel(const void* data, size_t size);
// The rank and nranks such a hello claims (unauthenticated: for naming it in messages only);
// false if the bytes are not a hello.
bool foreignHelloRank(const void* data, size_t size, int* rank, int* nranks);
// nranks: the communicator's size (the sender's rank must be in range and not `selfRank`, and
// the handshake must be addressed to `selfRank`). Authenticity is checked by auth.h.
std::string decodeHandshake(const void* data, size_t size, uint64_t magic, int nranks, int selfRank,
                            Handshake* out);
std::string decodeRootReply(const void* data, size_t size, RootReply* out);  // NUL-terminates message
std::string decodeAddressTable(const void* data, size_t size, int nranks, std::vector<net::SockAddr>* out);
std::string decodeP2pHeader(const void* data, size_t size, P2pHeader* out);
// An ncclUniqueId as a user handed it to us: non-zero magic and a usable root address.
std::string decodeUniqueIdBytes(const void* data, size_t size, UniqueIdContents* out, net::SockAddr* root);

}  // namespace accl::boot
