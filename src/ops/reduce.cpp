#include "ops/reduce.h"

#include <algorithm>

#include "backend/cpu/reduce.h"
#include "ops/dispatch.h"
#if LTX_WITH_CUDA
#include "backend/cuda/reduce.h"
#endif

namespace ltx::ops {

namespace {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Amax: return "amax";
    case ReduceOp::Amin: return "amin";
  }
  return "reduce";
}

// Wraps negative dims, rejects repeats; empty = every dim. Sorted. A 0-d tensor accepts 0 / -1
// and yields no dims (its single element is the whole reduction).
std::vector<int> normalize_dims(const char* op, const Tensor& x, const std::vector<int64_t>& dims) {
  const int nd = x.dim();
  std::vector<int> out;
  if (dims.empty()) {
    for (int d = 0; d < nd; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    const int w = wrap_dim(d, nd, op);
    LTX_CHECK(std::find(out.begin(), out.end(), w) == out.end(), op, ": dim ", d,
              " appears more than once in the dims list for ", x.describe());
    out.push_back(w);
  }
  if (nd == 0) return {};
  std::sort(out.begin(), out.end());
  return out;
}

void check_input(const char* op, const Tensor& x) {
  check_defined(op, {&x});
  check_float(op, "x", x);
}

void check_nonempty(const char* op, const Tensor& x, const std::vector<int>& dims) {
  for (int d : dims) {
    LTX_CHECK(x.size(d) > 0, op, ": cannot reduce over dim ", d, " of size 0 in ", x.describe(),
              " (the result would have no defined value)");
  }
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const char* name = reduce_op_name(op);
  check_input(name, x);
  const std::vector<int> nd = normalize_dims(name, x, dims);
  if (op == ReduceOp::Amax || op == ReduceOp::Amin) check_nonempty(name, x, nd);
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::reduce(op, x, nd, keepdim);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::reduce(op, x, nd, keepdim), name);
  }
  unreachable_device(name);
}

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Sum, x, dims, keepdim);
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Mean, x, dims, keepdim);
}
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Amax, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Amin, x, dims, keepdim);
}

namespace {

Tensor var_impl(const char* name, const Tensor& x, const std::vector<int64_t>& dims,
                int64_t correction, bool keepdim, bool take_sqrt) {
  check_input(name, x);
  LTX_CHECK(correction >= 0, name, ": correction must be >= 0, got ", correction);
  const std::vector<int> nd = normalize_dims(name, x, dims);
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::var(x, nd, correction, keepdim, take_sqrt);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::var(x, nd, correction, keepdim, take_sqrt), name);
  }
  unreachable_device(name);
}

}  // namespace

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return var_impl("var", x, dims, correction, keepdim, false);
}

Tensor std(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return var_impl("std", x, dims, correction, keepdim, true);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  check_input("argmax", x);
  const int d = wrap_dim(dim, x.dim(), "argmax");
  if (x.dim() > 0) check_nonempty("argmax", x, {d});
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::argmax(x, d, keepdim);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::argmax(x, d, keepdim), "argmax");
  }
  unreachable_device("argmax");
}

namespace {

Tensor softmax_impl(const char* name, const Tensor& x, int64_t dim, bool log) {
  check_input(name, x);
  const int d = wrap_dim(dim, x.dim(), name);
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::softmax(x, d, log);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::softmax(x, d, log), name);
  }
  unreachable_device(name);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl("log_softmax", x, dim, true);
}

}  // namespace ltx::ops
