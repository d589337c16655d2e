#include "ops/linalg.h"

#include <string>

#include "backend/cpu/linalg.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#if LTX_WITH_CUDA
#include "backend/cuda/linalg.h"
#include "backend/cuda/matmul.h"
#endif

namespace ltx::ops {

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_defined("matmul", {&a, &b});
  LTX_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got ",
            a.describe(), " and ", b.describe());
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  LTX_CHECK(ka == kb, "matmul: inner sizes differ, ", a.describe(), " @ ", b.describe(), " (", ka,
            " vs ", kb, "); the last dim of a must equal the ",
            b.dim() == 1 ? "size of b" : "second-to-last dim of b");
  if (a.dim() > 2 || b.dim() > 2) {
    Shape ab, bb;
    for (int d = 0; d + 2 < a.dim(); ++d) ab.push_back(a.size(d));
    for (int d = 0; d + 2 < b.dim(); ++d) bb.push_back(b.size(d));
    broadcast_shapes(ab, bb, "matmul (batch dims)");
  }
  switch (common_device("matmul", {&a, &b}).type) {
    case DeviceType::CPU:
      check_dtype("matmul", "a", a, DType::F32);
      check_dtype("matmul", "b", b, DType::F32);
      return cpu::matmul(a, b);
    case DeviceType::CUDA:
      check_float("matmul", "a", a);
      check_float("matmul", "b", b);
      LTX_CUDA_DISPATCH(return cuda::matmul(a, b), "matmul");
  }
  unreachable_device("matmul");
}

Tensor matmul_in_order(const Tensor& a, const Tensor& b) {
  check_defined("matmul_in_order", {&a, &b});
  check_dim("matmul_in_order", "a", a, 2);
  check_dim("matmul_in_order", "b", b, 2);
  LTX_CHECK(a.size(1) == b.size(0), "matmul_in_order: inner sizes differ, ", a.describe(), " @ ",
            b.describe());
  check_dtype("matmul_in_order", "a", a, DType::F32);
  check_dtype("matmul_in_order", "b", b, DType::F32);
  switch (common_device("matmul_in_order", {&a, &b}).type) {
    case DeviceType::CPU: return cpu::matmul_in_order(a, b);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::matmul_in_order(a, b), "matmul_in_order");
  }
  unreachable_device("matmul_in_order");
}

namespace {

// linear's shape checks; returns the common device.
Device check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_defined("linear", {&x, &weight});
  LTX_CHECK(x.dim() >= 1, "linear: x must have at least 1 dim, got ", x.describe());
  check_dim("linear", "weight", weight, 2);
  LTX_CHECK(weight.size(1) == x.size(-1), "linear: weight ", weight.describe(),
            " expects ", weight.size(1), " input features but x ", x.describe(), " has ",
            x.size(-1), " (weight is [out, in], torch layout)");
  if (bias.defined()) {
    LTX_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias ",
              bias.describe(), " must be [", weight.size(0), "] to match weight ",
              weight.describe());
  }
  return common_device("linear", {&x, &weight, &bias});
}

// The profile's GEMM sizes: rows x in -> out.
[[maybe_unused]] std::string gemm_detail(const Tensor& x, const Tensor& weight) {
  return std::to_string(x.numel() / x.size(-1)) + "x" + std::to_string(weight.size(1)) + "->" +
         std::to_string(weight.size(0));
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  switch (check_linear(x, weight, bias).type) {
    case DeviceType::CPU:
      check_dtype("linear", "x", x, DType::F32);
      check_dtype("linear", "weight", weight, DType::F32);
      if (bias.defined()) check_dtype("linear", "bias", bias, DType::F32);
      return cpu::linear(x, weight, bias);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH_DETAIL(return cuda::linear(x, weight, bias), "linear",
                               gemm_detail(x, weight));
  }
  unreachable_device("linear");
}

Tensor linear_gelu_tanh(const Tensor& x, const Tensor& weight, const Tensor& bias) {
#if LTX_WITH_CUDA
  // linear's checks first: the fused call fails as the two ops would.
  if (check_linear(x, weight, bias).is_cuda() && cuda::linear_gelu_epilogue_applies(weight, bias))
    LTX_CUDA_DISPATCH_DETAIL(return cuda::linear_gelu_tanh(x, weight, bias), "linear_gelu_tanh",
                             gemm_detail(x, weight));
#endif
  return gelu_tanh(linear(x, weight, bias));
}

}  // namespace ltx::ops
