// ifname_spec.cc: NCCL_SOCKET_IFNAME grammar, [^][=]item[,item]*, as NCCL parses it.
#include <utility>
#include "topo/ifaces.h"

namespace accl::topo {

namespace {
constexpr size_t kMaxItems = 16;  // NCCL's MAX_IFS
}

IfnameSpec parseIfnameSpec(const std::string& text) {
  IfnameSpec spec;
  size_t pos = 0;
  // Order matters: "^" first, then "=" ("=^x" means exactly "^x").
  if (pos < text.size() && text[pos] == '^') {
    spec.exclude = true;
    ++pos;
  }
  if (pos < text.size() && text[pos] == '=') {
    spec.exact = true;
    ++pos;
  }
  while (pos <= text.size() && spec.items.size() < kMaxItems) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    size_t colon = item.find(':');  // "name:port": the port means nothing for IP interfaces
    if (colon != std::string::npos) item.resize(colon);
    if (!item.empty()) spec.items.push_back(std::move(item));
    pos = comma + 1;
  }
  return spec;
}

bool matchesSpec(const IfnameSpec& spec, const std::string& ifname) {
  // NCCL: an empty list matches every interface (so "^" with no items matches none).
  bool listed = spec.items.empty();
  for (const std::string& item : spec.items) {
    if (spec.exact ? ifname == item : ifname.compare(0, item.size(), item) == 0) {
      listed = true;
      break;
    }
  }
  return listed != spec.exclude;
}

}  // namespace accl::topo
