// Large transfers over sockets with several sockets and helper threads per peer: the socket
// path sends large steps from the user's buffers (SendChannel::lend) instead of copying them
// into its ring. All-gather, broadcast and all-reduce (in place and out of place) and a
// send/receive ring, at ragged sizes of a few MiB, must equal a reference computed here.
// Every case runs in a child process, so the environment is read fresh.
#include <cstdlib>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>
#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::runRanks;

namespace {

// Exact in float: small integers.
float inputOf(int rank, size_t i) { return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 13) % 1024); }

// Runs the checks with `nranks` thread ranks in a child; returns the number of wrong results.
int wrongResultsInChild(int nranks) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_SHM_DISABLE", "1", 1);
    setenv("NCCL_NET_PLUGIN", "none", 1);
    setenv("NCCL_SOCKET_NTHREADS", "2", 1);
    setenv("NCCL_NSOCKS_PERTHREAD", "2", 1);
    std::atomic<int> wrong{0};
    const size_t n = (3 << 20) / sizeof(float) + 7;  // a short last piece in every block
    runRanks(nranks, [&](int rank, ncclComm_t& comm) {
      auto bad = [&](const char* what, size_t i) {
        if (wrong.fetch_add(1) < 5) ADD_FAILURE() << what << ": rank " << rank << " element " << i;
      };
      std::vector<float> in(n);
      for (size_t i = 0; i < n; i++) in[i] = inputOf(rank, i);
      // All-gather, out of place and in place.
      // Each send buffer is scribbled over as soon as its call returns: the transport must
      // have sent every byte it lent from it by then.
      std::vector<float> all(n * nranks, -1.0f), src = in;
      if (ncclAllGather(src.data(), all.data(), n, ncclFloat32, comm, nullptr) != ncclSuccess) bad("allgather", 0);
      std::fill(src.begin(), src.end(), -7.0f);
      for (size_t i = 0; i < all.size(); i++)
        if (all[i] != inputOf(static_cast<int>(i / n), i % n)) return bad("allgather", i);
      std::vector<float> inplace(n * nranks, -1.0f);
      std::copy(in.begin(), in.end(), inplace.begin() + static_cast<ptrdiff_t>(rank * n));
      if (ncclAllGather(inplace.data() + rank * n, inplace.data(), n, ncclFloat32, comm, nullptr) != ncclSuccess)
        bad("allgather in place", 0);
      if (inplace != all) return bad("allgather in place", 0);
      // Broadcast from the last rank, out of place and in place.
      const int root = nranks - 1;
      std::vector<float> got(n, -1.0f);
      if (ncclBroadcast(in.data(), got.data(), n, ncclFloat32, root, comm, nullptr) != ncclSuccess) bad("bcast", 0);
      for (size_t i = 0; i < n; i++)
        if (got[i] != inputOf(root, i)) return bad("broadcast", i);
      std::vector<float> mine = in;
      if (ncclBroadcast(mine.data(), mine.data(), n, ncclFloat32, root, comm, nullptr) != ncclSuccess) bad("bcast", 0);
      if (mine != got) return bad("broadcast in place", 0);
      // All-reduce, out of place and in place (the in-place one overwrites what it sent).
      std::vector<float> sum(n, -1.0f);
      src = in;
      if (ncclAllReduce(src.data(), sum.data(), n, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) bad("ar", 0);
      std::fill(src.begin(), src.end(), -7.0f);
      for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++) want += inputOf(r, i);
        if (sum[i] != want) return bad("allreduce", i);
      }
      mine = in;
      if (ncclAllReduce(mine.data(), mine.data(), n, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) bad("ar", 0);
      if (mine != sum) return bad("allreduce in place", 0);
      // A send/receive ring of bytes, an odd length.
      const size_t bytes = (2 << 20) + 5;
      std::vector<uint8_t> out(bytes), from(bytes, 0);
      for (size_t i = 0; i < bytes; i++) out[i] = static_cast<uint8_t>(i * 31 + rank);
      const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
      ncclGroupStart();
      ncclSend(out.data(), bytes, ncclUint8, next, comm, nullptr);
      ncclRecv(from.data(), bytes, ncclUint8, prev, comm, nullptr);
      if (ncclGroupEnd() != ncclSuccess) bad("sendrecv", 0);
      std::fill(out.begin(), out.end(), 0xee);
      for (size_t i = 0; i < bytes; i++)
        if (from[i] != static_cast<uint8_t>(i * 31 + prev)) return bad("sendrecv", i);
    });
    _exit(wrong.load() == 0 && !testing::Test::HasFailure() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

// A send far larger than the socket buffers and rings, to a receiver that comes late: the
// sender's call may only return once every byte has left its buffer, which it then scribbles
// over; the receiver must still get the original bytes.
int lateReceiverGetsWhatWasSentInChild() {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_SHM_DISABLE", "1", 1);
    setenv("NCCL_NET_PLUGIN", "none", 1);
    std::atomic<int> wrong{0};
    const size_t bytes = (48 << 20) + 3;
    runRanks(2, [&](int rank, ncclComm_t& comm) {
      std::vector<uint8_t> buf(bytes, 0);
      if (rank == 0) {
        for (size_t i = 0; i < bytes; i++) buf[i] = static_cast<uint8_t>(i * 17 + 1);
        if (ncclSend(buf.data(), bytes, ncclUint8, 1, comm, nullptr) != ncclSuccess) wrong++;
        std::fill(buf.begin(), buf.end(), 0xee);
        return;
      }
      usleep(300000);
      if (ncclRecv(buf.data(), bytes, ncclUint8, 0, comm, nullptr) != ncclSuccess) wrong++;
      for (size_t i = 0; i < bytes; i++)
        if (buf[i] != static_cast<uint8_t>(i * 17 + 1)) {
          ADD_FAILURE() << "byte " << i << " of " << bytes << " is " << int(buf[i]);
          wrong++;
          break;
        }
    });
    _exit(wrong.load() == 0 && !testing::Test::HasFailure() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(SocketLargeTransfers, ASendReturnsOnlyOnceItsBufferIsNoLongerRead) {
  EXPECT_EQ(lateReceiverGetsWhatWasSentInChild(), 0);
}

TEST(SocketLargeTransfers, TwoRanksOnFourSocketsEachGetExactResults) { EXPECT_EQ(wrongResultsInChild(2), 0); }

// Three ranks: the ring all-gather and broadcast forward what they receive.
TEST(SocketLargeTransfers, ThreeRanksOnFourSocketsEachGetExactResults) { EXPECT_EQ(wrongResultsInChild(3), 0); }

}  // namespace
