#include "device/deferred_release.h"
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace accl::dev {
namespace {

struct Pending {
  std::shared_ptr<Backend> owner;  // outlives the buffer: its deleter may use the backend
  Buffer buffer;
};

// One thread per process, started on first use and never joined: a release may wait for the
// device as long as a user's stream is held, possibly past exit (then the memory goes with the
// process). The state is never destroyed, so the thread never sees it vanish at exit.
class ReleaseThread {
 public:
  void add(Pending p) {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(p));
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
    cv_.notify_one();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return !queue_.empty(); });
      Pending p = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      p.buffer = Buffer();  // the release: may wait for the device
      p.owner.reset();
      lk.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool started_ = false;
};

}  // namespace

void releaseLater(std::shared_ptr<Backend> owner, Buffer buffer) {
  static ReleaseThread* releaser = new ReleaseThread;  // never destroyed: see ReleaseThread
  releaser->add({std::move(owner), std::move(buffer)});
}

}  // namespace accl::dev
