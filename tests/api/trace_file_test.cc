// ACCL_TRACE_FILE: the last operations of each communicator as Chrome-trace JSON.
#include <cstdlib>
#include <gtest/gtest.h>
#include <unistd.h>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "nccl.h"

TEST(TraceFile, DestroyWritesOneCompleteEventPerOperationWithItsRankAndSize) {
  // Read once per process at first use, so set it before any NCCL call.
  std::string path = testing::TempDir() + "accl_trace_" + std::to_string(getpid()) + ".json";
  setenv("ACCL_TRACE_FILE", path.c_str(), 1);
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  std::vector<float> a(1000, 1.0f), b(1000);
  for (int iter = 0; iter < 3; iter++) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; r++) ASSERT_EQ(ncclAllReduce(a.data(), b.data(), 1000, ncclFloat, ncclSum, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  }
  for (auto c : comms) ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string json = ss.str();
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u) << json;
  size_t events = 0;
  for (size_t pos = 0; (pos = json.find("\"ph\":\"X\"", pos)) != std::string::npos; pos++) events++;
  EXPECT_EQ(events, 6u) << json;  // 3 all-reduces x 2 ranks
  EXPECT_NE(json.find("\"name\":\"AllReduce 1000 x float32\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"tid\":1,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"seq\":2,"), std::string::npos) << json;
  unlink(path.c_str());
}
