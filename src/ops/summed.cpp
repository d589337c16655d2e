#include "ops/summed.h"

#include <string>

#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ltx::ops {

Shape Summed::check(const char* op, const char* arg) const {
  LTX_CHECK(a.defined(), op, ": ", arg, " is an undefined tensor");
  check_float(op, arg, a);
  if (!b.defined()) return a.shape();
  check_float(op, (std::string(arg) + " (second summand)").c_str(), b);
  return broadcast_shapes(a.shape(), b.shape(), op);
}

DType Summed::dtype() const { return b.defined() ? float_result_dtype({&a, &b}) : a.dtype(); }

Tensor Summed::value() const { return b.defined() ? add(a, b) : a; }

}  // namespace ltx::ops
