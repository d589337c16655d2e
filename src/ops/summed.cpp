#include "ops/summed.h"

#include "ops/elementwise.h"

namespace ltx::ops {

Tensor materialize(const Summed& s) {
  return materialize_with(s, [](const Tensor& a, const Tensor& b) { return add(a, b); });
}

}  // namespace ltx::ops
