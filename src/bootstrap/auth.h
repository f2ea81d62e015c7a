// auth.h: what proves that a bootstrap connection comes from a rank of this job. The magic
// alone does not (a constant with NCCL_COMM_ID, and visible to anyone who saw the unique id):
//  * hello to the root: HMAC-SHA-256 under the job key (from ACCL_JOB_SECRET; empty when unset)
//    over the whole message and a fresh nonce, so a rank proves it knows the secret without
//    sending it, and the root drops a replayed hello (same nonce);
//  * rank-to-rank handshakes: HMAC under the communicator's connection key, derived from the
//    job key and a random session key that the root gives every rank that joined. A process
//    that only knows the id (or only the magic) cannot make one; each handshake names its
//    destination rank and carries a nonce, so it cannot be replayed elsewhere or twice.
#pragma once
#include <array>
#include <cstdint>
#include <set>
#include "bootstrap/hmac_sha256.h"
#include "bootstrap/wire.h"

namespace accl::boot {

using Nonce = std::array<uint8_t, sizeof(Handshake::nonce)>;

// The key ranks prove to the root: SHA-256 of ACCL_JOB_SECRET, or all zero when it is unset.
Digest jobKey();
bool jobSecretSet();
// The key of one communicator's rank-to-rank handshakes.
Digest connectionKey(const Digest& job, const uint8_t (&sessionKey)[32]);
// Random bytes from the kernel (getrandom); false if it failed.
bool randomBytes(void* out, size_t size);

void signHello(Hello* hello, const Digest& job);
bool helloAuthentic(const Hello& hello, const Digest& job);
void signHandshake(Handshake* hs, const Digest& conn);
// A signed handshake from `rank` to `to`; false if no random nonce could be made.
bool makeHandshake(uint64_t magic, int rank, Purpose purpose, int to, const Digest& conn, Handshake* out);
bool handshakeAuthentic(const Handshake& hs, const Digest& conn);

// Nonces already accepted by one listener: a second use is a replay.
class ReplayGuard {
 public:
  bool firstUse(const uint8_t (&nonce)[16]);  // false if seen before

 private:
  std::set<Nonce> seen_;
};

}  // namespace accl::boot
