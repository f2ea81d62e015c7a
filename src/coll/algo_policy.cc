// algo_policy.cc: parsing NCCL_ALGO into the set of algorithms each collective may use.
#include "coll/algo_policy.h"
#include <strings.h>
#include <vector>
#include "base/log.h"

namespace accl {
namespace {

const char* const kFuncNames[5] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
const char* const kKnownUnimplemented[] = {"CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return out;
    start = pos + 1;
  }
}


// Parses "[^]name,name" into a bit set of allowed algorithms.
ncclResult_t parseList(const std::string& full, std::string list, uint8_t* out) {
  bool invert = !list.empty() && list[0] == '^';
  if (invert) list = list.substr(1);
  uint8_t bits = 0;
  for (const std::string& tok : split(list, ',')) {
    if (tok.empty()) continue;
    if (strcasecmp(tok.c_str(), "Ring") == 0) {
      bits |= kAlgoRing;
    } else if (strcasecmp(tok.c_str(), "Tree") == 0) {
      bits |= kAlgoTree;
    } else if (strcasecmp(tok.c_str(), "ShmDirect") == 0) {
      bits |= kAlgoShmDirect;
    } else if (strcasecmp(tok.c_str(), "AllPairs") == 0) {
      bits |= kAlgoAllPairs;
    } else if (strcasecmp(tok.c_str(), "HierRing") == 0) {
      bits |= kAlgoHierRing;
    } else {
      bool known = false;
      for (const char* k : kKnownUnimplemented) known = known || strcasecmp(tok.c_str(), k) == 0;
      if (!known) {
        WARN("NCCL_ALGO=\"%s\": unknown algorithm \"%s\" (known: Ring, Tree, ShmDirect, AllPairs, HierRing, "
             "CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT)",
             full.c_str(), tok.c_str());
        return ncclInvalidUsage;
      }
    }
  }
  *out = invert ? static_cast<uint8_t>(kAlgoAll & ~bits) : bits;
  return ncclSuccess;
}

}  // namespace

uint8_t extraAlgos(int f) {
  if (f == 2) return kAlgoShmDirect | kAlgoHierRing;
  if (f == 3) return kAlgoHierRing;
  if (f == 4) return kAlgoShmDirect | kAlgoAllPairs | kAlgoHierRing;
  return 0;
}

ncclResult_t parseAlgoPolicy(const std::string& text, AlgoPolicy* out) {
  AlgoPolicy p;
  if (text.empty()) {
    *out = p;
    return ncclSuccess;
  }
  std::vector<std::string> entries = split(text, ';');
  for (size_t i = 0; i < entries.size(); i++) {
    const std::string& e = entries[i];
    if (e.empty()) continue;
    size_t colon = e.find(':');
    if (colon == std::string::npos) {
      if (i != 0) {
        WARN("NCCL_ALGO=\"%s\": entry \"%s\" needs a function name (only the first entry may omit it)",
             text.c_str(), e.c_str());
        return ncclInvalidUsage;
      }
      uint8_t bits;
      if (parseList(text, e, &bits) != ncclSuccess) return ncclInvalidUsage;
      // A list for every function: a function that has none of the listed algorithms keeps
      // Ring and Tree when the list names only our own ones (ShmDirect, AllPairs, HierRing),
      // so NCCL_ALGO=ShmDirect, AllPairs or HierRing forces it where it exists.
      const bool onlyOurs = bits != 0 && (bits & (kAlgoRing | kAlgoTree)) == 0;
      for (int f = 0; f < 5; f++)
        p.allowed[f] = onlyOurs && (bits & extraAlgos(f)) == 0 ? (kAlgoRing | kAlgoTree) : bits;
      continue;
    }
    std::string func = e.substr(0, colon);
    int f = -1;
    for (int k = 0; k < 5; k++)
      if (strcasecmp(func.c_str(), kFuncNames[k]) == 0) f = k;
    if (f < 0) {
      WARN("NCCL_ALGO=\"%s\": unknown function \"%s\" (known: Broadcast, Reduce, AllGather, ReduceScatter, "
           "AllReduce)",
           text.c_str(), func.c_str());
      return ncclInvalidUsage;
    }
    if (parseList(text, e.substr(colon + 1), &p.allowed[f]) != ncclSuccess) return ncclInvalidUsage;
  }
  for (int f = 0; f < 5; f++) {
    p.allowed[f] &= kAlgoRing | kAlgoTree | extraAlgos(f);
    if (p.allowed[f] == 0) {
      WARN("NCCL_ALGO=\"%s\" leaves no algorithm ACCL implements for %s (ACCL has Ring and Tree for every "
           "function, ShmDirect for AllGather and AllReduce, AllPairs for AllReduce, HierRing for AllReduce, "
           "AllGather and ReduceScatter)",
           text.c_str(), kFuncNames[f]);
      return ncclInvalidUsage;
    }
  }
  *out = p;
  return ncclSuccess;
}

}  // namespace accl
