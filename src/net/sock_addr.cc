// sock_addr.cc: SockAddr formatting and NCCL_COMM_ID-style "host:port" parsing.
#include <arpa/inet.h>
#include <netdb.h>
#include <cstdlib>
#include <cstring>
#include <string>
#include "base/log.h"
#include "net/socket.h"

namespace accl::net {

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void SockAddr::setPort(int p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(static_cast<uint16_t>(p));
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(static_cast<uint16_t>(p));
}

std::string SockAddr::str() const {
  if (family() != AF_INET && family() != AF_INET6) return "<no address>";
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&ss), len, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return "<bad address>";
  }
  std::string port = std::to_string(this->port());
  // Built with append() rather than operator+ chains: GCC 12 at -O3 reports a false
  // -Wrestrict on the latter.
  std::string out;
  if (family() == AF_INET6) out.append("[").append(host).append("]");
  else out.append(host);
  return out.append(":").append(port);
}

namespace {

constexpr const char* kAcceptedFormats = "<ipv4>:<port>, <hostname>:<port> or [<ipv6>]:<port>";

ncclResult_t badSyntax(const char* text, const char* why) {
  WARN("Invalid address '%s' (%s); accepted formats: %s", text ? text : "(null)", why, kAcceptedFormats);
  return ncclInvalidArgument;
}

bool parsePort(const std::string& text, int* port) {
  if (text.empty() || text.size() > 5) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  *port = std::atoi(text.c_str());
  return *port >= 1 && *port <= 65535;
}

}  // namespace

ncclResult_t parseHostPort(const char* text, SockAddr* out) {
  if (text == nullptr || *text == '\0') return badSyntax(text, "empty");
  std::string s(text);
  std::string host, portText;
  bool bracketed = s[0] == '[';
  if (bracketed) {
    size_t close = s.find(']');
    if (close == std::string::npos) return badSyntax(text, "missing ']'");
    if (close + 1 >= s.size() || s[close + 1] != ':') return badSyntax(text, "missing ':<port>' after ']'");
    host = s.substr(1, close - 1);
    portText = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos) return badSyntax(text, "missing ':<port>'");
    if (s.find(':') != colon) return badSyntax(text, "an IPv6 address must be in brackets");
    host = s.substr(0, colon);
    portText = s.substr(colon + 1);
  }
  if (host.empty()) return badSyntax(text, "empty host");
  int port = 0;
  if (!parsePort(portText, &port)) return badSyntax(text, "port must be 1..65535");

  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = bracketed ? AF_INET6 : AF_UNSPEC;
  if (bracketed) hints.ai_flags = AI_NUMERICHOST;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    WARN("Cannot resolve host '%s' of address '%s': %s; accepted formats: %s", host.c_str(), text,
         gai_strerror(rc), kAcceptedFormats);
    return ncclInvalidArgument;
  }
  *out = SockAddr{};
  std::memcpy(&out->ss, found->ai_addr, found->ai_addrlen);
  out->len = found->ai_addrlen;
  freeaddrinfo(found);
  out->setPort(port);
  return ncclSuccess;
}

}  // namespace accl::net
