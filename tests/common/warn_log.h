// warn_log.h: what the library WARNs while a test body runs. The constructor points
// NCCL_DEBUG_FILE at a file of its own (NCCL_DEBUG=WARN) and re-reads the debug settings;
// take() stops that and returns the file's text, removed.
//
//   accl_test::WarnLog warns("root_mismatch");
//   ... calls that should WARN ...
//   const std::string text = warns.take();
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>
#include <cstdlib>
#include <string>
#include "common/text_file.h"
#include "nccl.h"

namespace accl_test {

class WarnLog {
 public:
  explicit WarnLog(const char* stem) : path_(testing::TempDir() + stem + std::to_string(getpid()) + ".log") {
    setenv("NCCL_DEBUG", "WARN", 1);
    setenv("NCCL_DEBUG_FILE", path_.c_str(), 1);
    ncclResetDebugInit();
  }
  ~WarnLog() { take(); }
  WarnLog(const WarnLog&) = delete;
  WarnLog& operator=(const WarnLog&) = delete;

  std::string take() {
    if (taken_) return "";
    taken_ = true;
    unsetenv("NCCL_DEBUG_FILE");
    ncclResetDebugInit();
    std::string text = readFile(path_);
    unlink(path_.c_str());
    return text;
  }

 private:
  std::string path_;
  bool taken_ = false;
};

}  // namespace accl_test
