// auth.cc: handshake authentication (see auth.h).
#include "bootstrap/auth.h"
#include <sys/random.h>
#include <cerrno>
#include <cstring>
#include <string>
#include "base/param.h"

namespace accl::boot {

namespace {

// Domain labels keep a MAC made for one message kind from being valid for another.
constexpr char kHelloLabel[] = "accl-hello";
constexpr char kHandshakeLabel[] = "accl-handshake";
constexpr char kSessionLabel[] = "accl-session";

std::span<const uint8_t> text(const char* s) { return {reinterpret_cast<const uint8_t*>(s), std::strlen(s)}; }

template <typename T>
Digest macWithoutField(const T& msg, const uint8_t (&mac)[32], const Digest& key, const char* label) {
  T copy = msg;
  std::memset(reinterpret_cast<char*>(&copy) + (mac - reinterpret_cast<const uint8_t*>(&msg)), 0, sizeof(mac));
  return hmacSha256(key, {text(label), bytesOf(copy)});
}

}  // namespace

bool jobSecretSet() { return !param::jobSecret().empty(); }

Digest jobKey() {
  std::string secret = param::jobSecret();
  if (secret.empty()) return Digest{};
  return sha256(secret.data(), secret.size());
}

Digest connectionKey(const Digest& job, const uint8_t (&sessionKey)[32]) {
  return hmacSha256(job, {text(kSessionLabel), std::span<const uint8_t>(sessionKey, sizeof(sessionKey))});
}

bool randomBytes(void* out, size_t size) {
  char* p = static_cast<char*>(out);
  while (size > 0) {
    ssize_t n = getrandom(p, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void signHello(Hello* hello, const Digest& job) {
  Digest mac = macWithoutField(*hello, hello->mac, job, kHelloLabel);
  std::memcpy(hello->mac, mac.data(), sizeof(hello->mac));
}

bool helloAuthentic(const Hello& hello, const Digest& job) {
  Digest mac = macWithoutField(hello, hello.mac, job, kHelloLabel);
  return equalMacs(mac.data(), hello.mac, sizeof(hello.mac));
}

void signHandshake(Handshake* hs, const Digest& conn) {
  Digest mac = macWithoutField(*hs, hs->mac, conn, kHandshakeLabel);
  std::memcpy(hs->mac, mac.data(), sizeof(hs->mac));
}

bool makeHandshake(uint64_t magic, int rank, Purpose purpose, int to, const Digest& conn, Handshake* out) {
  std::memset(out, 0, sizeof(*out));  // padding included: the MAC covers every byte sent
  out->magic = magic;
  out->rank = rank;
  out->purpose = purpose;
  out->to = to;
  if (!randomBytes(out->nonce, sizeof(out->nonce))) return false;
  signHandshake(out, conn);
  return true;
}

bool handshakeAuthentic(const Handshake& hs, const Digest& conn) {
  Digest mac = macWithoutField(hs, hs.mac, conn, kHandshakeLabel);
  return equalMacs(mac.data(), hs.mac, sizeof(hs.mac));
}

bool ReplayGuard::firstUse(const uint8_t (&nonce)[16]) {
  Nonce n;
  std::memcpy(n.data(), nonce, n.size());
  return seen_.insert(n).second;
}

}  // namespace accl::boot
