// socket_worker.h: a helper thread that moves bytes between a connection's staging rings and
// some of its sockets (both directions), so the executor does not wait on large transfers
// (small ones it moves itself, see socket_transport.cc). It blocks
// in poll() when there is nothing to move; the executor wakes it through an eventfd only
// when it may be asleep (Dekker handshake on `sleeping_`), so a busy stream costs no syscall.
#pragma once
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>
#include "topo/cpu_mask.h"
#include "transports/socket/socket_link.h"

namespace accl {

class SocketWorker {
 public:
  // The thread runs on `cpus` (empty: anywhere).
  SocketWorker(SocketLink* link, std::vector<int> sockets, const topo::CpuMask& cpus);
  ~SocketWorker();  // stops and joins
  SocketWorker(const SocketWorker&) = delete;
  SocketWorker& operator=(const SocketWorker&) = delete;

  // Executor side, after publishing new data (send) or new space (receive).
  void wake();
  // Executor side, after setting link->ownerAsleep: wakes the thread if it sleeps without
  // watching its sockets for arrivals, so it starts watching them.
  void ownerFellAsleep();
  // Asks the thread to exit (link->stopping must already be set) and joins it.
  void join();

 private:
  void run();
  void sleepUntilReady(int timeoutMs);  // -1: until something happens
  void signal();

  SocketLink* link_;
  std::vector<int> sockets_;
  int eventFd_ = -1;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> deafToArrivals_{false};  // its current sleep leaves POLLIN out
  // With several rails: how often the local interfaces of its sockets are looked at.
  static constexpr int kInterfaceCheckMs = 200;
  std::chrono::steady_clock::time_point nextInterfaceCheck_{};
  std::thread thread_;
};

}  // namespace accl
