// proto_policy.cc: parsing NCCL_PROTO into the protocols each collective may use.
#include "coll/proto_policy.h"
#include <strings.h>
#include <vector>
#include "base/log.h"

namespace accl {
namespace {

const char* const kFuncNames[5] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return out;
    start = pos + 1;
  }
}

// "[^]name,name" -> the allowed set.
ncclResult_t parseList(const std::string& full, std::string list, uint8_t* out) {
  const bool invert = !list.empty() && list[0] == '^';
  if (invert) list = list.substr(1);
  uint8_t bits = 0;
  for (const std::string& tok : split(list, ',')) {
    if (tok.empty()) continue;
    if (strcasecmp(tok.c_str(), "LL") == 0) {
      bits |= kProtoLL;
    } else if (strcasecmp(tok.c_str(), "LL128") == 0) {
      bits |= kProtoLL128;
    } else if (strcasecmp(tok.c_str(), "Simple") == 0) {
      bits |= kProtoSimple;
    } else {
      WARN("NCCL_PROTO=\"%s\": unknown protocol \"%s\" (known: LL, LL128, Simple)", full.c_str(), tok.c_str());
      return ncclInvalidUsage;
    }
  }
  *out = invert ? static_cast<uint8_t>(kProtoAll & ~bits) : bits;
  return ncclSuccess;
}

}  // namespace

ncclResult_t parseProtoPolicy(const std::string& text, ProtoPolicy* out) {
  ProtoPolicy p;
  const std::vector<std::string> entries = split(text, ';');
  for (size_t i = 0; i < entries.size() && !text.empty(); i++) {
    const std::string& e = entries[i];
    if (e.empty()) continue;
    const size_t colon = e.find(':');
    if (colon == std::string::npos) {
      if (i != 0) {
        WARN("NCCL_PROTO=\"%s\": entry \"%s\" needs a function name (only the first entry may omit it)", text.c_str(),
             e.c_str());
        return ncclInvalidUsage;
      }
      uint8_t bits = 0;
      if (parseList(text, e, &bits) != ncclSuccess) return ncclInvalidUsage;
      for (uint8_t& f : p.allowed) f = bits;
      continue;
    }
    const std::string func = e.substr(0, colon);
    int f = -1;
    for (int k = 0; k < 5; k++)
      if (strcasecmp(func.c_str(), kFuncNames[k]) == 0) f = k;
    if (f < 0) {
      WARN("NCCL_PROTO=\"%s\": unknown function \"%s\" (known: Broadcast, Reduce, AllGather, ReduceScatter, "
           "AllReduce)",
           text.c_str(), func.c_str());
      return ncclInvalidUsage;
    }
    if (parseList(text, e.substr(colon + 1), &p.allowed[f]) != ncclSuccess) return ncclInvalidUsage;
  }
  for (int f = 0; f < 5; f++) {
    if ((p.allowed[f] & (kProtoLL | kProtoSimple)) != 0) continue;
    if (p.allowed[f] == 0) {
      WARN("NCCL_PROTO=\"%s\" leaves no protocol for %s", text.c_str(), kFuncNames[f]);
      return ncclInvalidUsage;
    }
    // LL128 alone (a common setting for NCCL on NVLink machines): ACCL's bulk protocol, Simple,
    // carries what LL128 would, rather than failing a job tuned for NCCL.
    p.allowed[f] |= kProtoSimple;
    INFO(kSubsysTuning, "NCCL_PROTO=\"%s\": %s allows only LL128, which ACCL does not have; Simple carries it",
         text.c_str(), kFuncNames[f]);
  }
  *out = p;
  return ncclSuccess;
}

}  // namespace accl
