// SHA-256 and HMAC-SHA-256 against the published test vectors (FIPS 180-4 examples, RFC 4231).
#include <algorithm>
#include <gtest/gtest.h>
#include <cstdio>
#include <string>
#include <vector>
#include "bootstrap/hmac_sha256.h"

using namespace accl::boot;

namespace {

std::string hex(const Digest& d) {
  std::string s;
  char b[3];
  for (uint8_t v : d) {
    snprintf(b, sizeof(b), "%02x", v);
    s += b;
  }
  return s;
}

std::span<const uint8_t> span(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

}  // namespace

TEST(Sha256, MatchesTheStandardVectors) {
  EXPECT_EQ(hex(sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(sha256(two.data(), two.size())), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  EXPECT_EQ(hex(sha256(million.data(), million.size())),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecewiseUpdatesEqualOneUpdate) {
  std::string text(200, 'x');
  for (size_t i = 0; i < text.size(); i++) text[i] = static_cast<char>(i * 7);
  Sha256 s;
  for (size_t i = 0; i < text.size(); i += 13) s.update(text.data() + i, std::min<size_t>(13, text.size() - i));
  EXPECT_EQ(hex(s.finish()), hex(sha256(text.data(), text.size())));
}

TEST(HmacSha256, MatchesRfc4231) {
  std::string key1(20, '\x0b');
  EXPECT_EQ(hex(hmacSha256(span(key1), {span("Hi There")})),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmacSha256(span("Jefe"), {span("what do ya "), span("want for nothing?")})),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::string longKey(131, '\xaa');
  EXPECT_EQ(hex(hmacSha256(span(longKey), {span("Test Using Larger Than Block-Size Key - Hash Key First")})),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, EqualMacsComparesEveryByte) {
  Digest a = sha256("a", 1), b = a;
  EXPECT_TRUE(equalMacs(a.data(), b.data(), a.size()));
  b[31] ^= 1;
  EXPECT_FALSE(equalMacs(a.data(), b.data(), a.size()));
}
