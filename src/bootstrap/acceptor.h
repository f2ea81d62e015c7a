// acceptor.h: accepts connections on a listener and hands back those whose fixed-size first
// message arrived and starts with the job's magic. Handshakes are read concurrently (poll), so
// a silent or slow connection never delays the others; wrong-magic ones are dropped and logged.
#pragma once
#include <atomic>
#include <chrono>
#include <string>
#include <vector>
#include "nccl.h"
#include "net/socket.h"

namespace accl::boot {

class HandshakeAcceptor {
 public:
  struct Arrival {
    net::Socket sock;
    std::vector<char> header;  // headerSize bytes, starting with the magic
    std::string from;          // peer address, for logs
  };

  // `listener` must outlive the acceptor; `what` names it in logs ("bootstrap root").
  // passForeign: hand back complete first messages with another magic too (the root answers
  // them with a refusal that names both communicators); otherwise they are dropped at once.
  HandshakeAcceptor(const net::Socket& listener, uint64_t magic, size_t headerSize, std::string what,
                    bool passForeign = false);
  // Stray connections still queued or half-read are dropped and logged here, so every one is
  // logged at the latest when its listener goes away.
  ~HandshakeAcceptor();
  HandshakeAcceptor(const HandshakeAcceptor&) = delete;
  HandshakeAcceptor& operator=(const HandshakeAcceptor&) = delete;

  // Next valid arrival. timeoutMs < 0: no limit. Abort -> ncclInternalError; timeout ->
  // ncclRemoteError; neither WARNs (the caller knows what it was waiting for).
  ncclResult_t next(Arrival* out, const std::atomic<int>* abortFlag, int timeoutMs);

 private:
  struct Pending {
    net::Socket sock;
    std::vector<char> buf;
    size_t got = 0;
    std::chrono::steady_clock::time_point deadline;
    std::string from;
  };
  void acceptNew();
  // Reads what is available; returns true when the connection is finished (complete or dropped).
  bool readSome(Pending& p, bool* complete);

  const net::Socket& listener_;
  uint64_t magic_;
  size_t headerSize_;
  std::string what_;
  bool passForeign_;
  std::vector<Pending> pending_;
};

}  // namespace accl::boot
