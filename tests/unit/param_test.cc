// Parameters: conf file precedence, integer parsing and caching, strings re-read, the table.
// Integer values and the conf files are cached once per process, so those tests run their
// body in a forked child to start from a fresh cache.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "base/log.h"
#include "base/param.h"

namespace {

// Runs `body` in a fresh child process and returns what it produced (or a failure note).
std::string inFreshProcess(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string result = body();
    ssize_t written = write(fds[1], result.data(), result.size());
    _exit(written == static_cast<ssize_t>(result.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string result;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) result.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed";
  return result;
}

// NCCL_BUFFSIZE as the library reads it, in a fresh process with the given value.
std::string bufferSizeFor(const char* value) {
  return inFreshProcess([value] {
    if (value == nullptr) {
      unsetenv("NCCL_BUFFSIZE");
    } else {
      setenv("NCCL_BUFFSIZE", value, 1);
    }
    return std::to_string(accl::param::buffSize());
  });
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "accl_param_test.XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST(IntParam, ParsesLikeStrtollBaseZero) {
  EXPECT_EQ(bufferSizeFor("123"), "123");
  EXPECT_EQ(bufferSizeFor("0x10"), "16");
  EXPECT_EQ(bufferSizeFor("010"), "8");
  EXPECT_EQ(bufferSizeFor("-5"), "-5");
  EXPECT_EQ(bufferSizeFor("64k"), "64") << "trailing text is ignored, as strtoll does";
}

TEST(IntParam, UnsetOrEmptyMeansDefault) {
  EXPECT_EQ(bufferSizeFor(nullptr), "1048576");
  EXPECT_EQ(bufferSizeFor(""), "1048576");
}

TEST(IntParam, GarbageParsesAsZero) { EXPECT_EQ(bufferSizeFor("garbage"), "0"); }

TEST(IntParam, OverflowFallsBackToDefault) {
  EXPECT_EQ(bufferSizeFor("99999999999999999999999"), "1048576");
  EXPECT_EQ(bufferSizeFor("-99999999999999999999999"), "1048576");
}

TEST(IntParam, IsReadOnceAndCached) {
  std::string result = inFreshProcess([] {
    setenv("NCCL_SOCKET_RETRY_CNT", "5", 1);
    int64_t first = accl::param::socketRetryCnt();
    setenv("NCCL_SOCKET_RETRY_CNT", "7", 1);
    return std::to_string(first) + "," + std::to_string(accl::param::socketRetryCnt());
  });
  EXPECT_EQ(result, "5,5");
}

TEST(StringParam, IsReReadAtEachCall) {
  setenv("NCCL_ALGO", "ring", 1);
  EXPECT_EQ(accl::param::algo(), "ring");
  setenv("NCCL_ALGO", "tree", 1);
  EXPECT_EQ(accl::param::algo(), "tree");
  unsetenv("NCCL_ALGO");
  EXPECT_EQ(accl::param::algo(), "");
}

TEST(StringParam, UnsetMeansDefaultText) {
  unsetenv("NCCL_DEBUG_SUBSYS");
  EXPECT_EQ(accl::param::debugSubsys(), "INIT,BOOTSTRAP,ENV");
}

// The conf files are loaded once per process and a fork would inherit that, so the checks
// run in a re-executed copy of this binary (ConfFileChild below) that starts from scratch.
int runChildTest(const char* filter, const std::function<void()>& prepareEnvironment) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    prepareEnvironment();
    setenv("ACCL_PARAM_TEST_CHILD", "1", 1);
    std::string filterFlag = std::string("--gtest_filter=") + filter;
    execl("/proc/self/exe", "param_test", filterFlag.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ConfFileChild, ValuesSeenFromTheConfFile) {
  if (getenv("ACCL_PARAM_TEST_CHILD") == nullptr) GTEST_SKIP() << "runs as a child of ConfFile tests";
  EXPECT_STREQ(accl::envGet("ACCL_TEST_FROM_CONF"), "conf value");
  EXPECT_STREQ(accl::envGet("ACCL_TEST_ENV_WINS"), "env");
  EXPECT_EQ(accl::envGet("ACCL_TEST_COMMENTED"), nullptr);
  EXPECT_STREQ(accl::envGet("ACCL_TEST_SPACED "), " kept as is ") << "no trimming";
  EXPECT_STREQ(accl::envGet("ACCL_TEST_LAST_LINE"), "no newline");
  EXPECT_EQ(accl::param::chunkSize(), 4096);
  // Merged into the environment, so the application sees the same values through getenv.
  EXPECT_STREQ(getenv("ACCL_TEST_FROM_CONF"), "conf value");
}

TEST_F(TempDir, ConfFileFillsUnsetVariablesButEnvironmentWins) {
  std::string conf = dir_ + "/nccl.conf";
  std::ofstream(conf) << "ACCL_TEST_FROM_CONF=conf value\n"
                      << "ACCL_TEST_ENV_WINS=conf\n"
                      << "#ACCL_TEST_COMMENTED=1\n"
                      << "ACCL_TEST_SPACED = kept as is \n"
                      << "a line without equals\n"
                      << "ACCL_CHUNK_SIZE=0x1000\n"
                      << "ACCL_TEST_LAST_LINE=no newline";
  int status = runChildTest("ConfFileChild.ValuesSeenFromTheConfFile", [&conf] {
    setenv("NCCL_CONF_FILE", conf.c_str(), 1);
    setenv("ACCL_TEST_ENV_WINS", "env", 1);
    for (const char* name : {"ACCL_TEST_FROM_CONF", "ACCL_TEST_COMMENTED", "ACCL_TEST_SPACED ",
                             "ACCL_TEST_LAST_LINE", "ACCL_CHUNK_SIZE"}) {
      unsetenv(name);
    }
  });
  EXPECT_EQ(status, 0) << "see the child's gtest output above";
}

TEST_F(TempDir, MissingConfFileIsHarmless) {
  std::string result = inFreshProcess([this] {
    setenv("NCCL_CONF_FILE", (dir_ + "/absent.conf").c_str(), 1);
    setenv("ACCL_TEST_PLAIN", "x", 1);
    return std::string(accl::envGet("ACCL_TEST_PLAIN"));
  });
  EXPECT_EQ(result, "x");
}

TEST_F(TempDir, NonDefaultValuesAreLoggedOnceAtInfoEnv) {
  std::string log = dir_ + "/log.txt";
  std::string result = inFreshProcess([&log] {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "ENV", 1);
    setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
    accl::resetLogInit();
    setenv("NCCL_SOCKET_RETRY_CNT", "3", 1);
    setenv("NCCL_SHM_DISABLE", "0", 1);  // equal to the default: not logged
    setenv("NCCL_BUFFSIZE", "99999999999999999999", 1);
    setenv("NCCL_ALGO", "ring", 1);
    accl::param::socketRetryCnt();
    accl::param::socketRetryCnt();
    accl::param::shmDisable();
    accl::param::buffSize();
    accl::param::algo();
    accl::param::algo();
    setenv("NCCL_ALGO", "tree", 1);
    accl::param::algo();
    accl::resetLogInit();
    return std::string("done");
  });
  ASSERT_EQ(result, "done");
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  std::string all = text.str();
  auto count = [&all](const std::string& needle) {
    size_t n = 0;
    for (size_t at = all.find(needle); at != std::string::npos; at = all.find(needle, at + 1)) n++;
    return n;
  };
  EXPECT_EQ(count("NCCL INFO NCCL_SOCKET_RETRY_CNT set by environment to 3\n"), 1u) << all;
  EXPECT_EQ(count("NCCL_SHM_DISABLE"), 0u) << all;
  EXPECT_EQ(count("NCCL INFO Invalid value 99999999999999999999 for NCCL_BUFFSIZE"), 1u) << all;
  EXPECT_EQ(count("NCCL INFO NCCL_ALGO set by environment to ring\n"), 1u) << all;
  EXPECT_EQ(count("NCCL INFO NCCL_ALGO set by environment to tree\n"), 1u) << all;
}

TEST(ParamTable, ListsEveryParameterOnceWithEvaluatedDefaults) {
  size_t count = 0;
  const accl::ParamInfo* table = accl::paramTable(&count);
  ASSERT_NE(table, nullptr);
  ASSERT_GT(count, 10u);
  std::set<std::string> names;
  bool sawBuffSize = false;
  for (size_t i = 0; i < count; i++) {
    EXPECT_TRUE(names.insert(table[i].env).second) << "duplicate " << table[i].env;
    EXPECT_STRNE(table[i].doc, "");
    if (std::string(table[i].env) == "NCCL_BUFFSIZE") {
      sawBuffSize = true;
      EXPECT_STREQ(table[i].defaultText, "1048576");
      EXPECT_FALSE(table[i].isString);
    }
    if (std::string(table[i].env) == "NCCL_DEBUG_SUBSYS") {
      EXPECT_STREQ(table[i].defaultText, "INIT,BOOTSTRAP,ENV");
      EXPECT_TRUE(table[i].isString);
    }
  }
  EXPECT_TRUE(sawBuffSize);
}

}  // namespace
