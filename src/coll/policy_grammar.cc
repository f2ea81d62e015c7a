// policy_grammar.cc: splitting an NCCL_ALGO / NCCL_PROTO value into its entries and lists.
#include "coll/policy_grammar.h"
#include <strings.h>
#include <vector>
#include "base/log.h"

namespace accl {
namespace {

const char* const kFuncNames[kPolicyFunctions] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};

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

std::string knownNames(const PolicyGrammar& g) {
  std::string s;
  for (size_t i = 0; i < g.nameCount; i++) s += (i ? ", " : "") + std::string(g.names[i].name);
  return s;
}

// "[^]name,name" -> a bit set.
ncclResult_t parseList(const std::string& full, const PolicyGrammar& g, std::string list, uint8_t* out) {
  const bool invert = !list.empty() && list[0] == '^';
  if (invert) list = list.substr(1);
  uint8_t bits = 0;
  for (const std::string& tok : split(list, ',')) {
    if (tok.empty()) continue;
    const PolicyName* found = nullptr;
    for (size_t i = 0; i < g.nameCount && !found; i++)
      if (strcasecmp(tok.c_str(), g.names[i].name) == 0) found = &g.names[i];
    if (!found) {
      WARN("%s=\"%s\": unknown %s \"%s\" (known: %s)", g.variable, full.c_str(), g.what, tok.c_str(),
           knownNames(g).c_str());
      return ncclInvalidUsage;
    }
    bits |= found->bit;
  }
  *out = invert ? static_cast<uint8_t>(g.all & ~bits) : bits;
  return ncclSuccess;
}

}  // namespace

const char* policyFunctionName(int f) { return f >= 0 && f < kPolicyFunctions ? kFuncNames[f] : "?"; }

ncclResult_t parsePolicyEntries(const std::string& text, const PolicyGrammar& g, PolicyEntries* out) {
  PolicyEntries p;
  const std::vector<std::string> entries = text.empty() ? std::vector<std::string>{} : split(text, ';');
  for (size_t i = 0; i < entries.size(); i++) {
    const std::string& e = entries[i];
    if (e.empty()) continue;
    const size_t colon = e.find(':');
    if (colon == std::string::npos) {
      if (i != 0) {
        WARN("%s=\"%s\": entry \"%s\" needs a function name (only the first entry may omit it)", g.variable,
             text.c_str(), e.c_str());
        return ncclInvalidUsage;
      }
      if (parseList(text, g, e, &p.everyFunction) != ncclSuccess) return ncclInvalidUsage;
      p.hasEveryFunction = true;
      continue;
    }
    const std::string func = e.substr(0, colon);
    int f = -1;
    for (int k = 0; k < kPolicyFunctions; k++)
      if (strcasecmp(func.c_str(), kFuncNames[k]) == 0) f = k;
    if (f < 0) {
      WARN("%s=\"%s\": unknown function \"%s\" (known: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce)",
           g.variable, text.c_str(), func.c_str());
      return ncclInvalidUsage;
    }
    if (parseList(text, g, e.substr(colon + 1), &p.function[f]) != ncclSuccess) return ncclInvalidUsage;
    p.hasFunction[f] = true;
  }
  *out = p;
  return ncclSuccess;
}

}  // namespace accl
