#include "ops/norm.h"

#include "backend/cpu/norm.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#if LTX_WITH_CUDA
#include "backend/cuda/norm.h"
#include "backend/cuda/pixel_norm.h"
#include "backend/cuda/residual_norm.h"
#endif

namespace ltx::ops {

namespace {

// An optional affine tensor must be absent or an f32 vector of `n` elements.
void check_affine(const char* op, const char* arg, const Tensor& t, int64_t n, const Tensor& x) {
  if (!t.defined()) return;
  check_float(op, arg, t);
  LTX_CHECK(t.dim() == 1 && t.size(0) == n, op, ": ", arg, " must have shape [", n,
            "] to match input ", x.describe(), ", got ", t.describe());
}

void check_input(const char* op, const Tensor& x, int min_dims) {
  check_defined(op, {&x});
  check_float(op, "x", x);
  LTX_CHECK(x.dim() >= min_dims, op, ": x must have at least ", min_dims, " dims, got ",
            x.describe());
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_input("rms_norm", x, 1);
  check_affine("rms_norm", "weight", weight, x.size(-1), x);
  switch (common_device("rms_norm", {&x, &weight}).type) {
    case DeviceType::CPU: return cpu::rms_norm(x, weight, eps);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::rms_norm(x, weight, eps), "rms_norm");
  }
  unreachable_device("rms_norm");
}

namespace {
void check_rms_norm_modulate(const char* op, const Tensor& x, const Summed& scale,
                             const Summed& shift, const Tensor& weight) {
  check_input(op, x, 1);
  check_affine(op, "weight", weight, x.size(-1), x);
  const Shape ss = scale.check(op, "scale"), ts = shift.check(op, "shift");
  LTX_CHECK(broadcasts_to(ss, x.shape()), op, ": scale ", ss.str(), " must broadcast to x's shape ",
            x.describe());
  LTX_CHECK(broadcasts_to(ts, x.shape()), op, ": shift ", ts.str(), " must broadcast to x's shape ",
            x.describe());
}
}  // namespace

Tensor rms_norm_modulate(const Tensor& x, const Summed& scale, const Summed& shift, double eps,
                         const Tensor& weight) {
  const char* op = "rms_norm_modulate";
  check_rms_norm_modulate(op, x, scale, shift, weight);
  switch (common_device(op, {&x, &scale.a, &scale.b, &shift.a, &shift.b, &weight}).type) {
    case DeviceType::CPU:
      return cpu::rms_norm_modulate(x, materialize(scale), materialize(shift), eps, weight);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::rms_norm_modulate(x, scale, shift, eps, weight), op);
  }
  unreachable_device(op);
}

ResidualNorm gated_add_rms_norm_modulate(const Tensor& x, const Tensor& y, const Summed& gate,
                                         const Summed& scale, const Summed& shift, double eps) {
  const char* op = "gated_add_rms_norm_modulate";
  check_defined(op, {&x, &y, &gate.a, &scale.a, &shift.a});
  check_rms_norm_modulate(op, x, scale, shift, Tensor());
  ResidualNorm r;
#if LTX_WITH_CUDA
  if (x.device().is_cuda() && cuda::gated_add_rms_norm_modulate_fusable(x, y, gate, scale, shift)) {
    LTX_CUDA_DISPATCH(cuda::gated_add_rms_norm_modulate(x, y, gate, scale, shift, eps, &r.x, &r.h),
                      op);
    return r;
  }
#endif
  r.x = gated_add(x, y, gate);
  r.h = rms_norm_modulate(r.x, scale, shift, eps);
  return r;
}

ResidualNorm2 gated_add_rms_norm_modulate2(const Tensor& x, const Tensor& y, const Summed& gate,
                                           const Summed& scale, const Summed& shift,
                                           const Summed& scale2, const Summed& shift2, double eps) {
  const char* op = "gated_add_rms_norm_modulate2";
  check_defined(op, {&x, &y, &gate.a, &scale.a, &shift.a, &scale2.a, &shift2.a});
  check_rms_norm_modulate(op, x, scale, shift, Tensor());
  check_rms_norm_modulate(op, x, scale2, shift2, Tensor());
  ResidualNorm2 r;
#if LTX_WITH_CUDA
  if (x.device().is_cuda() &&
      cuda::gated_add_rms_norm_modulate2_fusable(x, y, gate, scale, shift, scale2, shift2)) {
    LTX_CUDA_DISPATCH(cuda::gated_add_rms_norm_modulate2(x, y, gate, scale, shift, scale2, shift2,
                                                         eps, &r.x, &r.h, &r.h2),
                      op);
    return r;
  }
#endif
  ResidualNorm first = gated_add_rms_norm_modulate(x, y, gate, scale, shift, eps);
  r.x = std::move(first.x);
  r.h = std::move(first.h);
  r.h2 = rms_norm_modulate(r.x, scale2, shift2, eps);
  return r;
}

void rms_norm_modulate_into(const Tensor& out, const Tensor& x, const Tensor& scale,
                            const Tensor& shift, double eps, const Tensor& weight) {
  const char* op = "rms_norm_modulate_into";
  check_rms_norm_modulate(op, x, scale, shift, weight);
  check_defined(op, {&out});
  const DType dt = float_result_dtype({&x, &scale, &shift});
  LTX_CHECK(out.shape() == x.shape() && out.dtype() == dt, op, ": out ", out.describe(),
            " must have x's shape ", x.shape().str(), " and dtype ", dtype_name(dt));
  switch (common_device(op, {&out, &x, &scale, &shift, &weight}).type) {
    case DeviceType::CPU:
      out.copy_from(cpu::rms_norm_modulate(x, scale, shift, eps, weight));
      return;
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::rms_norm_modulate_into(out, x, scale, shift, eps, weight), op);
  }
  unreachable_device(op);
}

namespace {
Tensor rms_norm_dim_op(const char* op, const Tensor& x, int64_t dim, double eps, bool silu) {
  check_input(op, x, 0);
  const int d = wrap_dim(dim, x.dim(), op);
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::rms_norm_dim(x, d, eps, silu);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::rms_norm_dim(x, d, eps, silu), op);
  }
  unreachable_device(op);
}
}  // namespace

Tensor rms_norm_dim(const Tensor& x, int64_t dim, double eps) {
  return rms_norm_dim_op("rms_norm_dim", x, dim, eps, false);
}

Tensor rms_norm_dim_silu(Tensor x, int64_t dim, double eps, const Tensor& bias) {
  const char* op = "rms_norm_dim_silu";
  if (!bias.defined()) return rms_norm_dim_op(op, x, dim, eps, true);
  check_input(op, x, 0);
  const int d = wrap_dim(dim, x.dim(), op);
  check_defined(op, {&bias});
  LTX_CHECK(bias.dim() == 1 && bias.size(0) == x.size(d), op, ": bias ", bias.describe(),
            " must hold one value per entry of dim ", d, " of ", x.describe());
  common_device(op, {&x, &bias});  // throws unless both are on one device
#if LTX_WITH_CUDA
  if (x.device().is_cuda() && cuda::rms_norm_dim_bias_fuses(x, d, bias))
    LTX_CUDA_DISPATCH(return cuda::rms_norm_dim(x, d, eps, true, bias), op);
#endif
  // The bias added first; x released before the norm, so that at most two activations are held
  // (the pre-bias x moved in by the caller, then the sum and the result).
  Shape shape;
  for (int i = 0; i < x.dim(); ++i) shape.push_back(i == d ? x.size(d) : 1);
  Tensor sum = add(x, bias.view(shape));
  x = Tensor();
  return rms_norm_dim_op(op, sum, d, eps, true);
}

Tensor add_then_add_rms_norm_dim_silu_(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                       int64_t dim, double eps) {
  const char* op = "add_then_add_rms_norm_dim_silu_";
  check_input(op, x, 0);
  const int d = wrap_dim(dim, x.dim(), op);
  check_defined(op, {&bias, &residual});
  LTX_CHECK(bias.dim() == 1 && bias.size(0) == x.size(d), op, ": bias ", bias.describe(),
            " must hold one value per entry of dim ", d, " of ", x.describe());
  LTX_CHECK(residual.shape() == x.shape(), op, ": residual ", residual.describe(),
            " must have the shape of x ", x.describe());
  common_device(op, {&x, &bias, &residual});  // throws unless all are on one device
#if LTX_WITH_CUDA
  if (x.device().is_cuda() && cuda::rms_norm_dim_residual_fuses(x, d, bias, residual))
    LTX_CUDA_DISPATCH(return cuda::rms_norm_dim_silu_residual_(x, d, eps, bias, residual), op);
#endif
  Shape shape;
  for (int i = 0; i < x.dim(); ++i) shape.push_back(i == d ? x.size(d) : 1);
  add_then_add_(x, bias.view(shape), residual);
  return rms_norm_dim_op(op, x, d, eps, true);
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_input("layer_norm", x, 1);
  check_affine("layer_norm", "weight", weight, x.size(-1), x);
  check_affine("layer_norm", "bias", bias, x.size(-1), x);
  switch (common_device("layer_norm", {&x, &weight, &bias}).type) {
    case DeviceType::CPU: return cpu::layer_norm(x, weight, bias, eps);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::layer_norm(x, weight, bias, eps), "layer_norm");
  }
  unreachable_device("layer_norm");
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check_input("group_norm", x, 2);
  const int64_t C = x.size(1);
  LTX_CHECK(num_groups > 0 && C % num_groups == 0, "group_norm: num_groups (", num_groups,
            ") must be positive and divide the channel count C = ", C, " of x ", x.describe());
  check_affine("group_norm", "weight", weight, C, x);
  check_affine("group_norm", "bias", bias, C, x);
  switch (common_device("group_norm", {&x, &weight, &bias}).type) {
    case DeviceType::CPU: return cpu::group_norm(x, num_groups, weight, bias, eps);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::group_norm(x, num_groups, weight, bias, eps), "group_norm");
  }
  unreachable_device("group_norm");
}

}  // namespace ltx::ops
