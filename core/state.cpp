// State helpers (see state.h).
#include "core/state.h"

#include <algorithm>

namespace ssm {

int64_t stage_elems(const ModelSpec& m) {
  int64_t n = 0;
  for (const auto& l : m.layers) n = std::max(n, l.h_elems());
  return n;
}

}  // namespace ssm
