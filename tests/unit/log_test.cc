// Logging: line layouts per level, subsystem filter, NCCL_DEBUG_FILE expansion, last error.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "nccl.h"

namespace {

const char* const kLogVariables[] = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
                                     "NCCL_DEBUG_TIMESTAMP_FORMAT", "NCCL_DEBUG_TIMESTAMP_LEVELS",
                                     "NCCL_WARN_ENABLE_DEBUG_INFO"};

std::string shortHost() {
  char name[256] = "";
  gethostname(name, sizeof(name) - 1);
  std::string host(name);
  return host.substr(0, host.find('.'));
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// True if `text` starts with `shape`, where '9' stands for any digit; `rest` gets the remainder.
// (Hand-rolled instead of std::regex, which trips GCC 12 warnings under sanitizers.)
bool startsWithShape(const std::string& text, const std::string& shape, std::string* rest) {
  if (text.size() < shape.size()) return false;
  for (size_t i = 0; i < shape.size(); i++) {
    bool ok = shape[i] == '9' ? isdigit(static_cast<unsigned char>(text[i])) != 0 : text[i] == shape[i];
    if (!ok) return false;
  }
  *rest = text.substr(shape.size());
  return true;
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Each test starts silent with fresh settings and a private directory for log files.
class Log : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kLogVariables) unsetenv(name);
    std::string pattern = (std::filesystem::temp_directory_path() / "accl_log_test.XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    logPath_ = dir_ + "/log.txt";
    accl::resetLogInit();
    accl::setLogDevice(0);
  }
  void TearDown() override {
    for (const char* name : kLogVariables) unsetenv(name);
    accl::resetLogInit();
    std::filesystem::remove_all(dir_);
  }
  // Sets the level, sends output to logPath_ and re-reads the settings.
  void logToFile(const char* level, const char* subsys = nullptr) {
    setenv("NCCL_DEBUG", level, 1);
    if (subsys != nullptr) setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
    setenv("NCCL_DEBUG_FILE", logPath_.c_str(), 1);
    accl::resetLogInit();
  }
  // Closes the log file (so it is complete) and returns its lines.
  std::vector<std::string> loggedLines() {
    accl::resetLogInit();
    return splitLines(readFile(logPath_));
  }
  std::string prefix(int dev) {
    return shortHost() + ":" + std::to_string(getpid()) + ":" + std::to_string(syscall(SYS_gettid)) +
           " [" + std::to_string(dev) + "] ";
  }

  std::string dir_;
  std::string logPath_;
};

TEST_F(Log, InfoLineIsHostPidTidDeviceThenMessage) {
  logToFile("INFO");
  accl::setLogDevice(3);
  INFO(accl::kSubsysInit, "hello %d", 42);
  auto lines = loggedLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind(prefix(3) + "NCCL INFO NCCL version 2.27.7", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1], prefix(3) + "NCCL INFO hello 42");
}

TEST_F(Log, WarnLineIsSetApartAndHasTimestampAndBaseFileName) {
  logToFile("warn");  // level names are case-insensitive
  int line = __LINE__ + 1;
  WARN("bad %s", "thing");
  auto lines = loggedLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("NCCL version 2.27.7", 0), 0u) << "bare banner at WARN: " << lines[0];
  EXPECT_NE(lines[0].find("ACCL"), std::string::npos);
  EXPECT_EQ(lines[1], "");
  std::string rest;
  ASSERT_TRUE(startsWithShape(lines[2], "[9999-99-99 99:99:99] ", &rest)) << lines[2];
  EXPECT_EQ(rest, prefix(0) + "log_test.cc:" + std::to_string(line) + " NCCL WARN bad thing");
}

TEST_F(Log, TraceLineHasMillisecondsSinceInitAndFileLine) {
  logToFile("TRACE", "ALL");
  int line = __LINE__ + 1;
  ACCL_TRACE(accl::kSubsysColl, "step %d", 1);
  auto lines = loggedLines();
  ASSERT_EQ(lines.size(), 2u);
  ASSERT_EQ(lines[1].rfind(prefix(0), 0), 0u) << lines[1];
  std::string afterPrefix = lines[1].substr(prefix(0).size());
  size_t space = afterPrefix.find(' ');
  ASSERT_NE(space, std::string::npos);
  std::string ms = afterPrefix.substr(0, space);
  size_t dot = ms.find('.');
  ASSERT_NE(dot, std::string::npos) << ms;
  EXPECT_EQ(ms.size() - dot - 1, 6u) << ms;
  EXPECT_LT(std::stod(ms), 60000.0);
  EXPECT_EQ(afterPrefix.substr(space + 1), "log_test.cc:" + std::to_string(line) + " NCCL TRACE step 1");
}

TEST_F(Log, VersionLevelPrintsTheBannerOnceAndNothingElse) {
  setenv("NCCL_DEBUG", "Version", 1);
  setenv("NCCL_DEBUG_FILE", logPath_.c_str(), 1);  // not used at VERSION: banner goes to stdout
  testing::internal::CaptureStdout();
  accl::resetLogInit();
  INFO(accl::kSubsysInit, "not shown");
  WARN("not shown either");
  INFO(accl::kSubsysInit, "not shown");
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out.rfind("NCCL version 2.27.7", 0), 0u) << out;
  EXPECT_EQ(splitLines(out).size(), 1u) << out;
  EXPECT_FALSE(std::filesystem::exists(logPath_));
}

TEST_F(Log, UnsetLevelIsSilent) {
  testing::internal::CaptureStdout();
  INFO(accl::kSubsysAll, "quiet");
  WARN("quiet");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Warn, accl::kSubsysAll));
}

TEST_F(Log, DefaultSubsystemsAreInitBootstrapEnv) {
  setenv("NCCL_DEBUG", "INFO", 1);
  accl::resetLogInit();
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysInit));
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysBootstrap));
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysEnv));
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysColl));
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysNet));
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Trace, accl::kSubsysInit)) << "level INFO < TRACE";
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Warn, accl::kSubsysNet)) << "WARN ignores subsystems";
}

TEST_F(Log, SubsystemListSelectsAndIgnoresUnknownNames) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "net,Coll,bogus", 1);
  accl::resetLogInit();
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysNet));
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysColl));
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysInit));
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysEnv));
}

TEST_F(Log, CaretInvertsTheSubsystemList) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "^NET,SHM", 1);
  accl::resetLogInit();
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysNet));
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysShm));
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysColl));
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysRas));
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysInit));
}

TEST_F(Log, FilteredSubsystemLinesAreNotWritten) {
  logToFile("INFO", "COLL");
  INFO(accl::kSubsysColl, "coll line");
  INFO(accl::kSubsysNet, "net line");
  INFO(accl::kSubsysNet | accl::kSubsysColl, "either line");
  auto lines = loggedLines();
  ASSERT_EQ(lines.size(), 3u);  // banner (all subsystems) + 2
  EXPECT_EQ(lines[1], prefix(0) + "NCCL INFO coll line");
  EXPECT_EQ(lines[2], prefix(0) + "NCCL INFO either line");
}

TEST_F(Log, DebugFileNameExpandsHostPidAndPercent) {
  setenv("NCCL_DEBUG", "INFO", 1);
  std::string pattern = dir_ + "/nccl.%h.%p.%%.%x.log";
  setenv("NCCL_DEBUG_FILE", pattern.c_str(), 1);
  accl::resetLogInit();
  INFO(accl::kSubsysInit, "to the expanded file");
  accl::resetLogInit();
  std::string expected = dir_ + "/nccl." + shortHost() + "." + std::to_string(getpid()) + ".%.%x.log";
  ASSERT_TRUE(std::filesystem::exists(expected)) << expected;
  EXPECT_NE(readFile(expected).find("to the expanded file"), std::string::npos);
}

TEST_F(Log, DebugFileIsTruncatedWhenOpened) {
  { std::ofstream(logPath_) << "old content\n"; }
  logToFile("INFO");
  INFO(accl::kSubsysInit, "new");
  auto lines = loggedLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], prefix(0) + "NCCL INFO new");
}

TEST_F(Log, UnopenableDebugFileFallsBackToStdout) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_FILE", (dir_ + "/no/such/dir/log").c_str(), 1);
  testing::internal::CaptureStdout();
  accl::resetLogInit();
  INFO(accl::kSubsysInit, "on stdout");
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find(prefix(0) + "NCCL INFO on stdout\n"), std::string::npos) << out;
}

TEST_F(Log, WarnIsRecordedAsLastErrorWhileSilent) {
  testing::internal::CaptureStdout();
  WARN("connection to %s lost", "peer 3");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_STREQ(accl::lastErrorText(), "connection to peer 3 lost");
  EXPECT_STREQ(ncclGetLastError(nullptr), "connection to peer 3 lost");
  WARN("second");
  EXPECT_STREQ(ncclGetLastError(nullptr), "second");
}

TEST_F(Log, LastErrorIsSharedAcrossThreads) {
  std::thread([] { WARN("from another thread"); }).join();
  EXPECT_STREQ(accl::lastErrorText(), "from another thread");
}

TEST_F(Log, TimestampFormatLevelsAndFraction) {
  logToFile("INFO", "INIT");
  setenv("NCCL_DEBUG_TIMESTAMP_FORMAT", "<%Y_%3f>_", 1);
  setenv("NCCL_DEBUG_TIMESTAMP_LEVELS", "INFO", 1);
  accl::resetLogInit();
  INFO(accl::kSubsysInit, "stamped");
  WARN("plain");
  auto lines = loggedLines();
  ASSERT_EQ(lines.size(), 4u);
  std::string rest;
  ASSERT_TRUE(startsWithShape(lines[1], "<9999 999> ", &rest)) << lines[1];
  EXPECT_EQ(rest, prefix(0) + "NCCL INFO stamped");
  EXPECT_EQ(lines[2], "");
  EXPECT_EQ(lines[3].rfind(prefix(0), 0), 0u) << "WARN not in the levels list: " << lines[3];
}

TEST_F(Log, EmptyTimestampFormatMeansNoTimestamp) {
  logToFile("WARN");
  setenv("NCCL_DEBUG_TIMESTAMP_FORMAT", "", 1);
  accl::resetLogInit();
  WARN("no stamp");
  auto lines = loggedLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].rfind(prefix(0), 0), 0u) << lines[2];
}

TEST_F(Log, WarnEnableDebugInfoRaisesLevelAfterFirstWarn) {
  logToFile("WARN");
  setenv("NCCL_WARN_ENABLE_DEBUG_INFO", "1", 1);
  accl::resetLogInit();
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysInit));
  WARN("first failure");
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysInit));
}

TEST_F(Log, ResetRereadsTheSettings) {
  setenv("NCCL_DEBUG", "INFO", 1);
  accl::resetLogInit();
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysInit));
  setenv("NCCL_DEBUG", "WARN", 1);
  EXPECT_TRUE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysInit)) << "cached until reset";
  ncclResetDebugInit();
  EXPECT_FALSE(accl::logEnabled(accl::LogLevel::Info, accl::kSubsysInit));
}

TEST_F(Log, ConcurrentLinesAreNeverInterleaved) {
  logToFile("INFO", "ALL");
  constexpr int kThreads = 8, kLinesEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([t] {
      accl::setLogDevice(t);
      for (int i = 0; i < kLinesEach; i++) INFO(accl::kSubsysColl, "thread %d line %d", t, i);
    });
  }
  for (auto& thread : threads) thread.join();
  auto lines = loggedLines();
  ASSERT_EQ(lines.size(), 1u + kThreads * kLinesEach);
  for (size_t i = 1; i < lines.size(); i++) {
    int dev = -1, thread = -2, index = -1, consumed = 0;
    int fields = sscanf(lines[i].c_str(), "%*[^:]:%*d:%*d [%d] NCCL INFO thread %d line %d%n", &dev,
                        &thread, &index, &consumed);
    ASSERT_EQ(fields, 3) << lines[i];
    EXPECT_EQ(static_cast<size_t>(consumed), lines[i].size()) << lines[i];
    EXPECT_EQ(dev, thread) << lines[i];
  }
}

TEST(ErrorString, EveryResultHasItsOwnTextAndOutOfRangeIsUnknown) {
  std::vector<std::string> seen;
  for (int r = ncclSuccess; r < ncclNumResults; r++) {
    const char* text = ncclGetErrorString(static_cast<ncclResult_t>(r));
    ASSERT_NE(text, nullptr);
    EXPECT_STRNE(text, "unknown result code");
    for (const auto& other : seen) EXPECT_NE(other, text);
    seen.push_back(text);
  }
  EXPECT_STREQ(ncclGetErrorString(ncclNumResults), "unknown result code");
  EXPECT_STREQ(ncclGetErrorString(static_cast<ncclResult_t>(-1)), "unknown result code");
}

}  // namespace
