#include "op_types/neighborhood_attention.h"

#include <algorithm>

namespace ltx::ops {

int64_t neighborhood_window_start(int64_t i, int64_t length, int64_t kernel) {
  if (kernel >= length) return 0;
  return std::clamp<int64_t>(i - kernel / 2, 0, length - kernel);
}

}  // namespace ltx::ops
