// child_logs.h: the INIT logs of a multi-process test's child processes, one file per process
// (NCCL_DEBUG_FILE's %p), collected and removed by the parent once the children have ended.
#pragma once
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/text_file.h"

namespace accl_test {

// Where this test's children log: <gtest temp dir><stem><parent pid>.log.<child pid>.
inline std::string childLogPath(const char* stem) {
  return testing::TempDir() + stem + std::to_string(getpid()) + ".log";
}

// The environment that makes each child write its INIT log there.
inline std::vector<std::string> childLogEnv(const std::string& path) {
  return {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT", "NCCL_DEBUG_FILE=" + path + ".%p"};
}

// Every child's log for `path`, concatenated; the files are removed.
inline std::string takeChildLogs(const std::string& path) {
  std::string log;
  DIR* dir = opendir(testing::TempDir().c_str());
  const std::string prefix = path.substr(path.rfind('/') + 1) + ".";
  while (dirent* e = dir ? readdir(dir) : nullptr) {
    if (std::string(e->d_name).rfind(prefix, 0) != 0) continue;
    const std::string f = testing::TempDir() + e->d_name;
    log += readFile(f);
    unlink(f.c_str());
  }
  if (dir) closedir(dir);
  return log;
}

}  // namespace accl_test
