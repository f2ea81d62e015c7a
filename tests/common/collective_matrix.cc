// collective_matrix.cc: see collective_matrix.h.
#include "common/collective_matrix.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include "accl.h"
#include "common/reference.h"

namespace accl_test {
namespace {

constexpr size_t kGuard = 64;
constexpr unsigned char kFill = 0xA5;
constexpr size_t kMaxMessagesPerCase = 3;
constexpr size_t kMaxMessages = 40;

bool isReduction(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }
bool hasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Bcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}
// Which in-place layouts a collective defines (Bcast is in-place only; AlltoAll and Send/Recv none).
bool hasOutOfPlace(Coll c) { return c != Coll::Bcast; }
bool hasInPlace(Coll c) { return c != Coll::AlltoAll && c != Coll::SendRecvRing && c != Coll::SendRecvAllPairs; }

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Bcast: return "Bcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AlltoAll: return "AlltoAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
    case Coll::SendRecvRing: return "SendRecvRing";
    case Coll::SendRecvAllPairs: return "SendRecvAllPairs";
  }
  return "?";
}

const char* opName(MatrixOp op) {
  switch (op) {
    case MatrixOp::None: return "-";
    case MatrixOp::Sum: return "sum";
    case MatrixOp::Prod: return "prod";
    case MatrixOp::Max: return "max";
    case MatrixOp::Min: return "min";
    case MatrixOp::Avg: return "avg";
    case MatrixOp::PreMulHost: return "premulsum(host scalar)";
    case MatrixOp::PreMulDevice: return "premulsum(device scalar)";
  }
  return "?";
}

RefOp refOpOf(MatrixOp op) {
  switch (op) {
    case MatrixOp::Prod: return RefOp::Prod;
    case MatrixOp::Max: return RefOp::Max;
    case MatrixOp::Min: return RefOp::Min;
    case MatrixOp::Avg: return RefOp::Avg;
    case MatrixOp::PreMulHost:
    case MatrixOp::PreMulDevice: return RefOp::PreMulSum;
    default: return RefOp::Sum;
  }
}

ncclRedOp_t builtinOf(MatrixOp op) {
  switch (op) {
    case MatrixOp::Prod: return ncclProd;
    case MatrixOp::Max: return ncclMax;
    case MatrixOp::Min: return ncclMin;
    case MatrixOp::Avg: return ncclAvg;
    default: return ncclSum;
  }
}

constexpr MatrixOp kReductionOps[] = {MatrixOp::Sum, MatrixOp::Prod,       MatrixOp::Max,         MatrixOp::Min,
                                      MatrixOp::Avg, MatrixOp::PreMulHost, MatrixOp::PreMulDevice};

// Deterministic inputs: element j of rank r's send buffer in case c.
class InputModel {
 public:
  InputModel(const MatrixCase& c, int nranks) : c_(c), n_(nranks), ti_(typeInfo(c.type)), mask_(widthMask(ti_.size)) {
    isFloat_ = ti_.cls == TypeClass::Float;
    if (isReduction(c.coll) && isFloat_ && c.inputs != Inputs::Affine) {
      PoolKind kind = PoolKind::SmallIntegers;
      RefOp op = refOpOf(c.op);
      if (op == RefOp::Max || op == RefOp::Min) kind = PoolKind::AnyFinite;
      else if (op == RefOp::Prod) kind = c.inputs == Inputs::Approx ? PoolKind::PositiveFactors : PoolKind::ProductFactors;
      else if (c.inputs == Inputs::Approx) kind = PoolKind::Fractions;
      pool_ = &valuePool(c.type, kind);
      // The exact pools keep every partial result exact for up to kPoolRanks terms; in 16-bit
      // and 8-bit floats one more would leave that range (18 ranks' sums and products do), so
      // the ranks past it contribute the operation's identity there. Integers and float32/64
      // check every rank's contribution whatever the count.
      if (nranks > kPoolRanks && ti_.size <= 2 && (kind == PoolKind::SmallIntegers || kind == PoolKind::ProductFactors)) {
        identityValue_ = op == RefOp::Prod ? 1.0 : 0.0;
        identityBits_ = encodeFloat(c.type, identityValue_);
        identityPastPool_ = true;
      }
    }
    affineConstant_ = 0;
    for (int r = 0; r < n_; r++) affineConstant_ += r % 3 - 1;
  }

  uint64_t hash(int r, size_t j) const {
    return mix64(c_.seed * 0x100000001b3ull ^ (static_cast<uint64_t>(r) << 44) ^ j);
  }
  uint64_t bits(int r, size_t j) const {
    if (c_.inputs == Inputs::Affine) return affineBits(r, j);
    uint64_t h = hash(r, j);
    if (identityPastPool_ && r >= kPoolRanks) return identityBits_;
    if (pool_) return pool_->bits[h % pool_->bits.size()];
    return h & mask_;
  }
  double value(int r, size_t j) const {
    if (identityPastPool_ && r >= kPoolRanks) return identityValue_;
    return pool_->values[hash(r, j) % pool_->values.size()];
  }
  bool pooled() const { return pool_ != nullptr; }

  // Affine inputs (sum only): x_r(j) = a(j) + step(r), so the sum has a closed form.
  uint64_t affineBits(int r, size_t j) const {
    uint64_t h = mix64(c_.seed ^ j);
    if (isFloat_) return encodeFloat(c_.type, static_cast<double>(static_cast<int>(h % 2001) - 1000) + (r % 3 - 1));
    return (h + 37 * static_cast<uint64_t>(r)) & mask_;
  }
  uint64_t affineSum(size_t j) const {
    uint64_t h = mix64(c_.seed ^ j);
    const uint64_t n = static_cast<uint64_t>(n_);
    if (isFloat_) return encodeFloat(c_.type, n_ * static_cast<double>(static_cast<int>(h % 2001) - 1000) + affineConstant_);
    return (n * h + 37 * (n * (n - 1) / 2)) & mask_;
  }

  // PreMulSum scalar of rank r. Integers: r + 2 (wrapping). Floats: powers of two that keep
  // the exact cases exact (types with >= 11 significant bits alternate 2 and 1/2); the
  // tolerance cases use non-dyadic scalars rounded to the type.
  uint64_t scalarBits(int r) const {
    if (!isFloat_) return static_cast<uint64_t>(r + 2) & mask_;
    if (c_.inputs == Inputs::Approx) return encodeFloat(c_.type, 0.3 + 0.07 * (r % 5));
    bool wide = ti_.mantissaBits >= 10;
    return encodeFloat(c_.type, wide && r % 2 ? 2.0 : 0.5);
  }

 private:
  const MatrixCase& c_;
  int n_;
  const TypeInfo& ti_;
  uint64_t mask_;
  bool isFloat_ = false;
  const ValuePool* pool_ = nullptr;
  static constexpr int kPoolRanks = 8;  // the ranks the value pools are sized for
  bool identityPastPool_ = false;
  double identityValue_ = 0;
  uint64_t identityBits_ = 0;
  int affineConstant_ = 0;
};

// A buffer with guard bytes on both sides, filled with kFill.
class Region {
 public:
  explicit Region(size_t bytes) : bytes_(bytes), mem_(bytes + 2 * kGuard, kFill) {}
  unsigned char* data() { return mem_.data() + kGuard; }
  size_t bytes() const { return bytes_; }
  // With the guards: what a device mirror copies.
  unsigned char* raw() { return mem_.data(); }
  size_t rawBytes() const { return mem_.size(); }
  bool guardsIntact() const {
    for (size_t i = 0; i < kGuard; i++) {
      if (mem_[i] != kFill || mem_[kGuard + bytes_ + i] != kFill) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<unsigned char> mem_;
};

class CaseRunner {
 public:
  CaseRunner(ncclComm_t comm, int rank, int nranks, const MatrixCase& c, cudaStream_t stream,
             std::vector<std::string>* messages, bool corrupt, MatrixDevice* device)
      : comm_(comm), rank_(rank), n_(nranks), c_(c), stream_(stream), in_(c, nranks), es_(typeInfo(c.type).size),
        messages_(messages), corrupt_(corrupt), device_(device) {}

  // Whether this rank checked output elements, and whether any check failed.
  bool checkedOutput() const { return checkedOutput_; }
  bool failed() const { return perCase_ > 0; }

  void run() {
    const size_t n = static_cast<size_t>(n_), cnt = c_.count;
    const bool root = rank_ == c_.root;
    // Layout of this rank's buffers.
    size_t sendElems = cnt, recvElems = cnt;
    switch (c_.coll) {
      case Coll::AllGather: recvElems = n * cnt; break;
      case Coll::Gather: recvElems = root ? n * cnt : 0; break;
      case Coll::ReduceScatter: sendElems = n * cnt; break;
      case Coll::Scatter: sendElems = root ? n * cnt : 0; break;
      case Coll::AlltoAll:
      case Coll::SendRecvAllPairs: sendElems = recvElems = n * cnt; break;
      case Coll::Broadcast:
      case Coll::Bcast: sendElems = root ? cnt : 0; break;
      case Coll::Reduce: recvElems = root ? cnt : 0; break;
      default: break;
    }
    std::unique_ptr<Region> sendR, recvR;
    std::vector<unsigned char> original;  // bytes that must be unchanged afterwards
    unsigned char* originalAt = nullptr;
    void* sendPtr = nullptr;
    void* recvPtr = nullptr;
    unsigned char* out = nullptr;  // this rank's output elements
    if (!c_.inPlace) {
      if (sendElems) {
        sendR = std::make_unique<Region>(sendElems * es_);
        fillInputs(sendR->data(), 0, sendElems);
        sendPtr = sendR->data();
        original.assign(sendR->data(), sendR->data() + sendR->bytes());
        originalAt = sendR->data();
      }
      if (recvElems) {
        recvR = std::make_unique<Region>(recvElems * es_);
        recvPtr = recvR->data();
        out = recvR->data();
      }
    } else {
      // One buffer; input and output sit where the API's in-place rule puts them.
      size_t total = std::max(sendElems, recvElems);
      recvR = std::make_unique<Region>(total * es_);
      unsigned char* b = recvR->data();
      switch (c_.coll) {
        case Coll::AllGather:
          fillInputs(b + rank_ * cnt * es_, 0, cnt);
          sendPtr = b + rank_ * cnt * es_;
          recvPtr = out = b;
          break;
        case Coll::ReduceScatter:
          fillInputs(b, 0, n * cnt);
          sendPtr = b;
          recvPtr = out = b + rank_ * cnt * es_;
          break;
        case Coll::Gather:
          if (root) {
            fillInputs(b + rank_ * cnt * es_, 0, cnt);
            sendPtr = b + rank_ * cnt * es_;
            recvPtr = out = b;
          } else {
            fillInputs(b, 0, cnt);
            sendPtr = b;
          }
          break;
        case Coll::Scatter:
          if (root) {
            fillInputs(b, 0, n * cnt);
            sendPtr = b;
            recvPtr = out = b + rank_ * cnt * es_;
            original.assign(b, b + n * cnt * es_);  // the send buffer is input: unchanged
            originalAt = b;
          } else {
            recvPtr = out = b;
          }
          break;
        case Coll::Broadcast:
        case Coll::Bcast:
          if (root) fillInputs(b, 0, cnt);
          sendPtr = recvPtr = out = b;
          break;
        case Coll::Reduce:
          fillInputs(b, 0, cnt);
          sendPtr = recvPtr = b;
          if (root) {
            out = b;
          } else {
            original.assign(b, b + cnt * es_);  // a non-root's buffer is only its input
            originalAt = b;
          }
          break;
        default:  // AllReduce
          fillInputs(b, 0, cnt);
          sendPtr = recvPtr = out = b;
          break;
      }
    }

    if (!(device_ ? launchOnDevice(sendPtr, recvPtr, sendR.get(), recvR.get()) : launch(sendPtr, recvPtr))) return;

    if (sendR && !sendR->guardsIntact()) fail("bytes next to the send buffer were overwritten");
    if (recvR && !recvR->guardsIntact()) fail("bytes next to the receive buffer were overwritten");
    if (originalAt && !original.empty() && std::memcmp(originalAt, original.data(), original.size()) != 0) {
      fail("an input buffer was modified");
    }
    if (cnt == 0) {
      if (recvR && !allFill(recvR->data(), recvR->bytes())) {
        fail("count 0 wrote to the receive buffer");
      }
      return;
    }
    if (out) {
      if (corrupt_) {
        const size_t last = outputElems(recvElems) - 1;
        storeBits(out, last, es_, loadBits(out, last, es_) ^ (uint64_t{1} << (8 * es_ - 2)));
      }
      checkedOutput_ = true;
      checkOutput(out);
    }
  }

 private:
  // Elements this rank's output holds (recvElems of the layout, except in-place scatter and
  // reduce-scatter, whose output is one block of the buffer).
  size_t outputElems(size_t recvElems) const {
    if (c_.coll == Coll::ReduceScatter || c_.coll == Coll::Scatter || c_.coll == Coll::AllReduce ||
        c_.coll == Coll::Reduce || c_.coll == Coll::Broadcast || c_.coll == Coll::Bcast ||
        c_.coll == Coll::SendRecvRing) {
      return c_.count;
    }
    return recvElems;
  }

  void fail(const std::string& what) {
    if (perCase_++ >= kMaxMessagesPerCase || messages_->size() >= kMaxMessages) return;
    messages_->push_back("rank " + std::to_string(rank_) + ": " + describeCase(c_) + ": " + what);
  }

  // Buffers of a count-0 call hold nothing but fill: they must still.
  bool allFill(const unsigned char* p, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) {
      if (p[i] != kFill) return false;
    }
    return true;
  }

  void fillInputs(unsigned char* dst, size_t first, size_t elems) {
    for (size_t j = 0; j < elems; j++) storeBits(dst, j, es_, in_.bits(rank_, first + j));
  }

  // The case on device mirrors of its regions: same layout, guards included.
  bool launchOnDevice(void* sendPtr, void* recvPtr, Region* sendR, Region* recvR) {
    struct Mirror {
      Region* host;
      unsigned char* dev;
    };
    std::vector<Mirror> mirrors;
    for (Region* r : {sendR, recvR}) {
      if (r == nullptr) continue;
      auto* d = static_cast<unsigned char*>(device_->alloc(r->rawBytes()));
      if (d == nullptr) {
        fail("device allocation failed");
        for (auto& m : mirrors) device_->release(m.dev);
        return false;
      }
      device_->upload(d, r->raw(), r->rawBytes());
      mirrors.push_back({r, d});
    }
    auto onDevice = [&](void* p) -> void* {
      if (p == nullptr) return nullptr;
      auto* q = static_cast<unsigned char*>(p);
      for (auto& m : mirrors)
        if (q >= m.host->raw() && q < m.host->raw() + m.host->rawBytes()) return m.dev + (q - m.host->raw());
      return p;
    };
    ncclRedOp_t op = builtinOf(c_.op);
    bool created = false;
    void* devScalar = nullptr;
    if (c_.op == MatrixOp::PreMulHost || c_.op == MatrixOp::PreMulDevice) {
      const bool device = c_.op == MatrixOp::PreMulDevice;
      alignas(8) uint64_t scalarStorage = device ? 0 : in_.scalarBits(rank_);
      void* scalarArg = &scalarStorage;
      if (device) {
        // Read when the collective runs: zero at creation, the real value stored afterwards.
        devScalar = device_->alloc(8);
        device_->upload(devScalar, &scalarStorage, 8);
        scalarArg = devScalar;
      }
      ncclResult_t r = ncclRedOpCreatePreMulSum(&op, scalarArg, c_.type,
                                                device ? ncclScalarDevice : ncclScalarHostImmediate, comm_);
      if (r != ncclSuccess) {
        fail(std::string("ncclRedOpCreatePreMulSum returned ") + ncclGetErrorString(r));
        if (devScalar) device_->release(devScalar);
        for (auto& m : mirrors) device_->release(m.dev);
        return false;
      }
      created = true;
      if (device) {
        scalarStorage = in_.scalarBits(rank_);
        device_->upload(devScalar, &scalarStorage, 8);
      }
    }
    const cudaStream_t stream = c_.launch == 1 ? device_->stream() : device_->nullStream();
    const bool grouped = c_.launch == 2 || c_.coll == Coll::SendRecvRing || c_.coll == Coll::SendRecvAllPairs;
    ncclResult_t r = ncclSuccess;
    if (grouped) r = ncclGroupStart();
    if (r == ncclSuccess) r = call(onDevice(sendPtr), onDevice(recvPtr), op, stream);
    if (grouped) {
      ncclResult_t e = ncclGroupEnd();
      if (r == ncclSuccess) r = e;
    }
    if (r == ncclSuccess) r = device_->synchronize(stream);
    if (created) {
      ncclResult_t d = ncclRedOpDestroy(op, comm_);
      if (d != ncclSuccess) fail(std::string("ncclRedOpDestroy returned ") + ncclGetErrorString(d));
    }
    for (auto& m : mirrors) {
      device_->download(m.host->raw(), m.dev, m.host->rawBytes());
      device_->release(m.dev);
    }
    if (devScalar) device_->release(devScalar);
    if (r != ncclSuccess) {
      fail(std::string("returned ") + ncclGetErrorString(r) + " (" + ncclGetLastError(comm_) + ")");
      return false;
    }
    return true;
  }

  bool launch(void* sendPtr, void* recvPtr) {
    ncclRedOp_t op = builtinOf(c_.op);
    alignas(8) uint64_t scalarStorage = 0;
    bool created = false;
    if (c_.op == MatrixOp::PreMulHost || c_.op == MatrixOp::PreMulDevice) {
      const bool device = c_.op == MatrixOp::PreMulDevice;
      // A device scalar is read when the collective runs: create the op with a wrong value
      // (zero) and store the real one afterwards.
      scalarStorage = device ? 0 : in_.scalarBits(rank_);
      ncclResult_t r = ncclRedOpCreatePreMulSum(&op, &scalarStorage, c_.type,
                                                device ? ncclScalarDevice : ncclScalarHostImmediate, comm_);
      if (r != ncclSuccess) {
        fail(std::string("ncclRedOpCreatePreMulSum returned ") + ncclGetErrorString(r));
        return false;
      }
      created = true;
      if (device) scalarStorage = in_.scalarBits(rank_);
      else scalarStorage = 0;  // immediate: the value was copied at creation
    }
    const cudaStream_t stream = c_.launch == 1 ? stream_ : nullptr;
    const bool grouped = c_.launch == 2 || c_.coll == Coll::SendRecvRing || c_.coll == Coll::SendRecvAllPairs;
    ncclResult_t r = ncclSuccess;
    if (grouped) r = ncclGroupStart();
    if (r == ncclSuccess) r = call(sendPtr, recvPtr, op, stream);
    if (grouped) {
      ncclResult_t e = ncclGroupEnd();
      if (r == ncclSuccess) r = e;
    }
    if (r == ncclSuccess && stream) r = ncclHostStreamSynchronize(stream);
    if (created) {
      ncclResult_t d = ncclRedOpDestroy(op, comm_);
      if (d != ncclSuccess) fail(std::string("ncclRedOpDestroy returned ") + ncclGetErrorString(d));
    }
    if (r != ncclSuccess) {
      fail(std::string("returned ") + ncclGetErrorString(r) + " (" + ncclGetLastError(comm_) + ")");
      return false;
    }
    return true;
  }

  ncclResult_t call(void* s, void* r, ncclRedOp_t op, cudaStream_t st) {
    const size_t cnt = c_.count;
    const ncclDataType_t t = c_.type;
    switch (c_.coll) {
      case Coll::AllReduce: return ncclAllReduce(s, r, cnt, t, op, comm_, st);
      case Coll::Broadcast: return ncclBroadcast(s, r, cnt, t, c_.root, comm_, st);
      case Coll::Bcast: return ncclBcast(r, cnt, t, c_.root, comm_, st);
      case Coll::Reduce: return ncclReduce(s, r, cnt, t, op, c_.root, comm_, st);
      case Coll::AllGather: return ncclAllGather(s, r, cnt, t, comm_, st);
      case Coll::ReduceScatter: return ncclReduceScatter(s, r, cnt, t, op, comm_, st);
      case Coll::AlltoAll: return ncclAlltoAll(s, r, cnt, t, comm_, st);
      case Coll::Gather: return ncclGather(s, r, cnt, t, c_.root, comm_, st);
      case Coll::Scatter: return ncclScatter(s, r, cnt, t, c_.root, comm_, st);
      case Coll::SendRecvRing: {
        ncclResult_t res = ncclSend(s, cnt, t, (rank_ + 1) % n_, comm_, st);
        if (res == ncclSuccess) res = ncclRecv(r, cnt, t, (rank_ + n_ - 1) % n_, comm_, st);
        return res;
      }
      case Coll::SendRecvAllPairs: {
        const size_t es = es_;
        for (int k = 0; k < n_; k++) {
          // Post in a rank-dependent order so no two ranks walk peers alike.
          int p = (rank_ + k) % n_;
          ncclResult_t res = ncclSend(static_cast<char*>(s) + p * cnt * es, cnt, t, p, comm_, st);
          if (res == ncclSuccess) res = ncclRecv(static_cast<char*>(r) + p * cnt * es, cnt, t, p, comm_, st);
          if (res != ncclSuccess) return res;
        }
        return ncclSuccess;
      }
    }
    return ncclInvalidArgument;
  }

  // Element k of `out` must be a copy of element j of rank src's input.
  void expectCopy(const unsigned char* out, size_t k, int src, size_t j) {
    uint64_t got = loadBits(out, k, es_), want = in_.bits(src, j);
    if (got != want) {
      fail("element " + std::to_string(k) + ": got " + formatBits(c_.type, got) + " want " +
           formatBits(c_.type, want) + " (rank " + std::to_string(src) + "'s element " + std::to_string(j) + ")");
    }
  }

  // out[k] for k < count must reduce input element (offset + k) over all ranks.
  void expectReduction(const unsigned char* out, size_t offset) {
    const size_t cnt = c_.count;
    if (c_.inputs == Inputs::Affine) {
      for (size_t k = 0; k < cnt; k++) {
        uint64_t got = loadBits(out, k, es_), want = in_.affineSum(offset + k);
        if (got != want) {
          fail("element " + std::to_string(k) + ": got " + formatBits(c_.type, got) + " want " +
               formatBits(c_.type, want));
          if (perCase_ >= kMaxMessagesPerCase) return;
        }
      }
      return;
    }
    RefAccumulator acc(c_.type, refOpOf(c_.op), n_);
    const bool premul = refOpOf(c_.op) == RefOp::PreMulSum;
    std::vector<uint64_t> scalarBits(n_);
    std::vector<double> scalarValues(n_, 1.0);
    for (int r = 0; r < n_; r++) {
      scalarBits[r] = in_.scalarBits(r);
      if (premul && typeInfo(c_.type).cls == TypeClass::Float) scalarValues[r] = decodeFloat(c_.type, scalarBits[r]);
    }
    const bool exact = c_.inputs == Inputs::Exact;
    std::string why;
    for (size_t k = 0; k < cnt; k++) {
      acc.reset();
      if (in_.pooled()) {
        for (int r = 0; r < n_; r++) acc.addFloat(in_.value(r, offset + k), scalarValues[r]);
      } else {
        for (int r = 0; r < n_; r++) acc.add(in_.bits(r, offset + k), scalarBits[r]);
      }
      if (!acc.matches(loadBits(out, k, es_), exact, &why)) {
        fail("element " + std::to_string(k) + ": " + why);
        if (perCase_ >= kMaxMessagesPerCase) return;
      }
    }
  }

  void checkOutput(const unsigned char* out) {
    const size_t cnt = c_.count;
    const size_t before = perCase_;
    auto copyLoop = [&](size_t elems, auto&& source) {
      for (size_t k = 0; k < elems && perCase_ - before < kMaxMessagesPerCase; k++) {
        auto [src, j] = source(k);
        expectCopy(out, k, src, j);
      }
    };
    switch (c_.coll) {
      case Coll::AllReduce:
      case Coll::Reduce: expectReduction(out, 0); break;
      case Coll::ReduceScatter: expectReduction(out, rank_ * cnt); break;
      case Coll::Broadcast:
      case Coll::Bcast: copyLoop(cnt, [&](size_t k) { return std::pair<int, size_t>(c_.root, k); }); break;
      case Coll::AllGather:
      case Coll::Gather:
        copyLoop(n_ * cnt, [&](size_t k) { return std::pair<int, size_t>(static_cast<int>(k / cnt), k % cnt); });
        break;
      case Coll::Scatter:
        copyLoop(cnt, [&](size_t k) { return std::pair<int, size_t>(c_.root, rank_ * cnt + k); });
        break;
      case Coll::AlltoAll:
      case Coll::SendRecvAllPairs:
        copyLoop(n_ * cnt,
                 [&](size_t k) { return std::pair<int, size_t>(static_cast<int>(k / cnt), rank_ * cnt + k % cnt); });
        break;
      case Coll::SendRecvRing:
        copyLoop(cnt, [&](size_t k) { return std::pair<int, size_t>((rank_ + n_ - 1) % n_, k); });
        break;
    }
  }

  ncclComm_t comm_;
  int rank_, n_;
  const MatrixCase& c_;
  cudaStream_t stream_;
  InputModel in_;
  size_t es_;
  std::vector<std::string>* messages_;
  size_t perCase_ = 0;
  bool corrupt_ = false;
  MatrixDevice* device_ = nullptr;
  bool checkedOutput_ = false;
};

}  // namespace

std::string describeCase(const MatrixCase& c) {
  std::string s = std::string(collName(c.coll)) + " " + typeInfo(c.type).name;
  if (c.op != MatrixOp::None) s += std::string(" ") + opName(c.op);
  s += " count=" + std::to_string(c.count);
  if (hasRoot(c.coll)) s += " root=" + std::to_string(c.root);
  s += c.inPlace ? " in-place" : " out-of-place";
  if (c.inputs == Inputs::Approx) s += " non-integer";
  if (c.inputs == Inputs::Affine) s += " affine";
  s += c.launch == 0 ? " (NULL stream)" : c.launch == 1 ? " (host stream)" : " (in a group)";
  return s;
}

std::vector<MatrixCase> buildMatrix(int nranks, const MatrixScope& scope) {
  std::vector<MatrixCase> cases;
  auto add = [&](Coll coll, ncclDataType_t t, MatrixOp op, bool ip, size_t count, int root, Inputs inputs) {
    MatrixCase c{coll, t, op, ip, count, root, inputs, static_cast<int>(cases.size() % 3), cases.size() + 1};
    cases.push_back(c);
  };
  std::vector<Coll> colls = {Coll::AllReduce, Coll::Broadcast, Coll::Bcast, Coll::Reduce};
  if (scope.onlyAllGather) {
    colls = {Coll::AllGather};
  } else if (!scope.onlyAllReduceBroadcastReduce) {
    colls.insert(colls.end(), {Coll::AllGather, Coll::ReduceScatter, Coll::AlltoAll, Coll::Gather, Coll::Scatter,
                               Coll::SendRecvRing, Coll::SendRecvAllPairs});
  }
  const char* fewTypesEnv = std::getenv("ACCL_TEST_MATRIX_FEW_TYPES");
  const bool fewTypes = scope.fewTypes || (fewTypesEnv != nullptr && std::string(fewTypesEnv) == "1");
  int rotate = 0;
  for (Coll coll : colls) {
    const bool red = isReduction(coll);
    std::vector<bool> placements;
    if (hasOutOfPlace(coll)) placements.push_back(false);
    if (hasInPlace(coll)) placements.push_back(true);
    for (size_t ti = 0; ti < std::size(kAllTypes); ti++) {
      const ncclDataType_t t = kAllTypes[ti];
      if (fewTypes && t != ncclInt8 && t != ncclInt32 && t != ncclBfloat16 && t != ncclFloat32 && t != ncclFloat64)
        continue;
      const bool isFloat = typeInfo(t).cls == TypeClass::Float;
      std::vector<MatrixOp> ops;
      if (red) ops.assign(std::begin(kReductionOps), std::end(kReductionOps));
      else ops = {MatrixOp::None};
      const MatrixOp first = ops[0];
      // count 0: a legal no-op.
      for (bool ip : placements) add(coll, t, first, ip, 0, 0, Inputs::Exact);
      // counts 1 and 7: everything; count 7 with every root.
      for (size_t count : {size_t{1}, size_t{7}}) {
        for (MatrixOp op : ops) {
          for (bool ip : placements) {
            if (!hasRoot(coll)) {
              add(coll, t, op, ip, count, 0, Inputs::Exact);
            } else if (count == 7 || scope.fullOps) {
              for (int root = 0; root < nranks; root++)
                if (!scope.fewRoots || root <= 1 || root == nranks / 2 || root == nranks - 1)
                  add(coll, t, op, ip, count, root, Inputs::Exact);
            } else {
              add(coll, t, op, ip, count, rotate++ % nranks, Inputs::Exact);
            }
          }
        }
      }
      if (red && isFloat) {
        int k = 0;
        for (MatrixOp op : {MatrixOp::Sum, MatrixOp::Avg, MatrixOp::Prod, MatrixOp::PreMulHost}) {
          add(coll, t, op, placements[k++ % placements.size()], 7, rotate++ % nranks, Inputs::Approx);
        }
      }
      // The prime count: sum plus one rotating op (all ops with fullOps).
      std::vector<MatrixOp> primeOps = {first};
      if (red) {
        if (scope.fullOps) primeOps = ops;
        else primeOps.push_back(ops[1 + (ti + static_cast<size_t>(coll)) % (ops.size() - 1)]);
      }
      for (MatrixOp op : primeOps) {
        for (bool ip : placements) add(coll, t, op, ip, kPrimeCount, rotate++ % nranks, Inputs::Exact);
      }
      if (red && isFloat) add(coll, t, MatrixOp::Sum, placements[ti % placements.size()], kPrimeCount,
                              rotate++ % nranks, Inputs::Approx);
    }
  }
  if (scope.big) {
    const size_t n = static_cast<size_t>(nranks);
    const int last = nranks - 1;
    for (Coll coll : colls) {
      switch (coll) {
        case Coll::AllReduce:
          add(coll, ncclFloat32, MatrixOp::Sum, false, kBigBytes / 4, 0, Inputs::Affine);
          add(coll, ncclInt8, MatrixOp::Sum, true, kBigBytes, 0, Inputs::Affine);
          break;
        case Coll::Reduce: add(coll, ncclInt8, MatrixOp::Sum, false, kBigBytes, last, Inputs::Affine); break;
        case Coll::ReduceScatter:
          add(coll, ncclFloat32, MatrixOp::Sum, true, kBigBytes / 4 / n, 0, Inputs::Affine);
          break;
        case Coll::Broadcast: add(coll, ncclFloat32, MatrixOp::None, false, kBigBytes / 4, last, Inputs::Exact); break;
        case Coll::Bcast: break;
        case Coll::AllGather: add(coll, ncclInt8, MatrixOp::None, false, kBigBytes / n, 0, Inputs::Exact); break;
        case Coll::Gather:
        case Coll::Scatter:
        case Coll::AlltoAll:
          add(coll, ncclInt8, MatrixOp::None, coll == Coll::Gather, kBigBytes / n, nranks / 2, Inputs::Exact);
          break;
        case Coll::SendRecvRing:
        case Coll::SendRecvAllPairs:
          add(coll, ncclUint32, MatrixOp::None, false, kBigBytes / 4 / (coll == Coll::SendRecvRing ? 1 : n), 0,
              Inputs::Exact);
          break;
      }
    }
  }
  return cases;
}

std::vector<std::string> runMatrixCases(ncclComm_t comm, int rank, int nranks, const std::vector<MatrixCase>& cases,
                                        Watchdog* watchdog, bool corruptOutputs, MatrixDevice* device) {
  std::vector<std::string> messages;
  std::vector<std::string> undetected, scratch;
  cudaStream_t stream = nullptr;
  ncclResult_t r = ncclHostStreamCreate(&stream);
  if (r != ncclSuccess) {
    messages.push_back("rank " + std::to_string(rank) + ": ncclHostStreamCreate: " + ncclGetErrorString(r));
    return messages;
  }
  for (const MatrixCase& c : cases) {
    if (watchdog) watchdog->at(rank, describeCase(c));
    CaseRunner runner(comm, rank, nranks, c, stream, corruptOutputs ? &scratch : &messages, corruptOutputs, device);
    runner.run();
    if (corruptOutputs && runner.checkedOutput() && !runner.failed() && undetected.size() < kMaxMessages) {
      undetected.push_back("rank " + std::to_string(rank) + ": " + describeCase(c) + ": corrupted output not detected");
    }
    scratch.clear();
  }
  if (corruptOutputs) messages = undetected;
  if (watchdog) watchdog->at(rank, "done");
  ncclHostStreamDestroy(stream);
  return messages;
}

std::vector<std::string> runMatrixOnThreads(int nranks, const MatrixScope& scope) {
  const std::vector<MatrixCase> cases = buildMatrix(nranks, scope);
  std::vector<std::vector<std::string>> perRank(nranks);
  Watchdog watchdog(nranks, 120);
  std::string error;
  bool ok = runThreadRanks(
      nranks, [&](ncclComm_t comm, int rank) {
        perRank[rank] = runMatrixCases(comm, rank, nranks, cases, &watchdog, scope.corruptOutputs);
      },
      &error);
  std::vector<std::string> all;
  if (!ok) all.push_back(error);
  for (auto& v : perRank) all.insert(all.end(), v.begin(), v.end());
  return all;
}

std::vector<std::string> runMatrixAsRank(const ChildRole& role, const MatrixScope& scope) {
  const std::vector<MatrixCase> cases = buildMatrix(role.nranks, scope);
  std::vector<std::string> messages;
  ncclComm_t comm = nullptr;
  Watchdog watchdog(role.nranks, 120);
  watchdog.at(role.rank, "ncclCommInitRank");
  ncclResult_t r = initChildRankComm(role, &comm);
  if (r != ncclSuccess) return {std::string("ncclCommInitRank: ") + ncclGetErrorString(r)};
  messages = runMatrixCases(comm, role.rank, role.nranks, cases, &watchdog);
  watchdog.at(role.rank, "ncclCommDestroy");
  r = ncclCommDestroy(comm);
  if (r != ncclSuccess) messages.push_back(std::string("ncclCommDestroy: ") + ncclGetErrorString(r));
  return messages;
}

void expectMatrixPassesInChild(const ChildRole& role, const MatrixScope& scope) {
  std::vector<std::string> messages =
      role.rank < 0 ? runMatrixOnThreads(role.nranks, scope) : runMatrixAsRank(role, scope);
  EXPECT_TRUE(messages.empty()) << joinedLines(messages);
}

std::string joinedLines(const std::vector<std::string>& messages) {
  std::string s;
  for (const std::string& m : messages) s += m + "\n";
  return s;
}

bool fullMatrixRequested() {
  const char* v = std::getenv("ACCL_TEST_FULL");
  return v != nullptr && std::strcmp(v, "0") != 0 && *v != 0;
}

}  // namespace accl_test
