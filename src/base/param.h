// param.h: every environment parameter ACCL reads, declared once in params.def.
// Numeric parameters are read once and cached; strings are read at each call (NCCL re-reads
// e.g. NCCL_ALGO at every init). Both go through envGet(), which loads NCCL_CONF_FILE /
// ~/.nccl.conf and /etc/nccl.conf once ("set only if unset", so the environment wins).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace accl {

// getenv() after the conf files have been merged into the environment. nullptr if unset.
const char* envGet(const char* name);

namespace param {
#define ACCL_PARAM_INT(id, env, def, doc) int64_t id();
#define ACCL_PARAM_STR(id, env, def, doc) std::string id();
#include "base/params.def"
#undef ACCL_PARAM_INT
#undef ACCL_PARAM_STR
}  // namespace param

// The whole table, for docs/env.md generation and `accl-info`.
struct ParamInfo {
  const char* env;
  const char* defaultText;
  const char* doc;
  bool isString;
};
const ParamInfo* paramTable(size_t* count);

}  // namespace accl
