#include "ops/rope.h"

#include <utility>
#include <vector>

#include "backend/cpu/rope.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/shape.h"
#if LTX_WITH_CUDA
#include "backend/cuda/rope.h"
#endif

namespace ltx::ops {

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeLayout layout) {
  const char* op = "apply_rope";
  check_defined(op, {&x, &cos, &sin});
  LTX_CHECK(x.dim() >= 1, op, ": x must have at least 1 dim, got ", x.describe());
  const int64_t d = x.size(-1);
  LTX_CHECK(d % 2 == 0, op, ": the last dim of x ", x.describe(), " must be even (rotated pairs)");
  LTX_CHECK(cos.shape() == sin.shape(), op, ": cos ", cos.describe(), " and sin ", sin.describe(),
            " must have the same shape");
  const bool split = layout == RopeLayout::Split;
  const int64_t width = split ? d / 2 : d;
  LTX_CHECK(cos.dim() >= 1 && cos.size(-1) == width, op, ": cos/sin ", cos.describe(),
            " must have last dim ", width, " for x ", x.describe(),
            split ? " (Split layout: half the head dim)" : " (Interleaved layout: the full dim)");
  Shape target = x.shape();
  target[target.size() - 1] = width;
  LTX_CHECK(cos.dim() <= x.dim() && broadcast_shapes(cos.shape(), target, op) == target, op,
            ": cos/sin ", cos.describe(), " do not broadcast to x's leading dims ", target.str(),
            " (x ", x.describe(), ")");
  switch (common_device(op, {&x, &cos, &sin}).type) {
    case DeviceType::CPU:
      check_dtype(op, "x", x, DType::F32);
      check_dtype(op, "cos", cos, DType::F32);
      check_dtype(op, "sin", sin, DType::F32);
      return cpu::apply_rope(x, cos.expand(target), sin.expand(target), layout);
    case DeviceType::CUDA:
      check_float(op, "x", x);
      check_float(op, "cos", cos);
      check_float(op, "sin", sin);
      LTX_CUDA_DISPATCH(return cuda::apply_rope(x, cos.expand(target), sin.expand(target), layout),
                        op);
  }
  unreachable_device(op);
}

Tensor rms_norm_rope_unfused(const Tensor& x, const Tensor& weight, double eps, const Tensor& cos,
                             const Tensor& sin, RopeLayout layout, int64_t heads) {
  const Tensor n = rms_norm(x, weight, eps);
  if (layout == RopeLayout::Interleaved) return apply_rope(n, cos, sin, layout);
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  return apply_rope(n.view({b, t, heads, d / heads}).transpose(1, 2), cos, sin, layout);
}

namespace {

// rms_norm_rope's argument checks; returns the shape the tables broadcast to.
Shape check_rms_norm_rope(const char* op, const Tensor& x, const Tensor& weight, const Tensor& cos,
                          const Tensor& sin, RopeLayout layout, int64_t heads) {
  check_defined(op, {&x, &cos, &sin});
  LTX_CHECK(x.dim() == 3, op, ": x must be [B, T, D], got ", x.describe());
  const int64_t d = x.size(2);
  LTX_CHECK(heads > 0 && d % heads == 0 && (d / heads) % 2 == 0, op, ": ", heads,
            " heads must split D of x ", x.describe(), " into heads of an even size");
  LTX_CHECK(!weight.defined() || (weight.dim() == 1 && weight.size(0) == d), op, ": weight ",
            weight.describe(), " must be [", d, "] for x ", x.describe());
  const bool split = layout == RopeLayout::Split;
  const Shape target = split ? Shape{x.size(0), heads, x.size(1), d / heads / 2} : x.shape();
  LTX_CHECK(cos.shape() == sin.shape() && cos.dim() <= target.size() &&
                broadcast_shapes(cos.shape(), target, op) == target,
            op, ": cos ", cos.describe(), " and sin ", sin.describe(), " must broadcast to ",
            target.str(), " for x ", x.describe());
  return target;
}

}  // namespace

Tensor rms_norm_rope(const Tensor& x, const Tensor& weight, double eps, const Tensor& cos,
                     const Tensor& sin, RopeLayout layout, int64_t heads) {
  const char* op = "rms_norm_rope";
  [[maybe_unused]] const Shape target = check_rms_norm_rope(op, x, weight, cos, sin, layout, heads);
  switch (common_device(op, {&x, &weight, &cos, &sin}).type) {
    case DeviceType::CPU: return rms_norm_rope_unfused(x, weight, eps, cos, sin, layout, heads);
    case DeviceType::CUDA:
      // Rows off the kernel's vector path run the unfused ops (the same bits).
      LTX_CUDA_DISPATCH(
          const Tensor c = cos.expand(target); const Tensor s = sin.expand(target);
          if (!cuda::rms_norm_rope_fusable(x, weight, c, s, layout, heads))
              return rms_norm_rope_unfused(x, weight, eps, cos, sin, layout, heads);
          return cuda::rms_norm_rope(x, weight, eps, c, s, layout, heads), op);
  }
  unreachable_device(op);
}

QkRope qk_rms_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                        const Tensor& k_weight, double eps, const Tensor& cos, const Tensor& sin,
                        RopeLayout layout, int64_t heads) {
  const char* op = "qk_rms_norm_rope";
  [[maybe_unused]] const Shape target = check_rms_norm_rope(op, q, q_weight, cos, sin, layout, heads);
  check_defined(op, {&k});
  LTX_CHECK(q.shape() == k.shape() && q.dtype() == k.dtype(), op, ": q ", q.describe(), " and k ",
            k.describe(), " must have one shape and dtype");
  check_rms_norm_rope(op, k, k_weight, cos, sin, layout, heads);
  const auto separately = [&] {
    return QkRope{rms_norm_rope(q, q_weight, eps, cos, sin, layout, heads),
                  rms_norm_rope(k, k_weight, eps, cos, sin, layout, heads)};
  };
  switch (common_device(op, {&q, &k, &q_weight, &k_weight, &cos, &sin}).type) {
    case DeviceType::CPU: return separately();
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(
          const Tensor c = cos.expand(target); const Tensor s = sin.expand(target);
          if (!cuda::qk_rms_norm_rope_fusable(q, k, q_weight, k_weight, c, s, layout, heads))
              return separately();
          return cuda::qk_rms_norm_rope(q, k, q_weight, k_weight, eps, c, s, layout, heads), op);
  }
  unreachable_device(op);
}

namespace {

// x [B, T, H, W, heads, D] and tables that fit it (see Rope3dTables); returns (d_t, d_h, d_w).
std::array<int64_t, 3> check_rope_3d(const char* op, const Tensor& x, const Rope3dTables& rope) {
  LTX_CHECK(x.dim() == 6, op, ": expected x [B, T, H, W, heads, D], got ", x.describe());
  static const char* const kAxis[3] = {"t", "h", "w"};
  std::array<int64_t, 3> d{};
  for (int a = 0; a < 3; ++a) {
    const Tensor& c = rope.cos[a];
    const Tensor& s = rope.sin[a];
    LTX_CHECK(c.defined() && s.defined(), op, ": the ", kAxis[a], " table (cos and sin) is missing");
    LTX_CHECK(c.dim() == 2 && c.shape() == s.shape() && c.size(0) == x.size(1 + a) &&
                  c.size(1) > 0 && c.size(1) % 2 == 0,
              op, ": the ", kAxis[a], " tables must be [", x.size(1 + a),
              ", d] with d even and positive (one row per index along dim ", 1 + a, " of x ",
              x.describe(), "), got cos ", c.describe(), ", sin ", s.describe());
    d[a] = c.size(1);
  }
  LTX_CHECK(d[0] + d[1] + d[2] == x.size(5), op, ": the tables' widths ", d[0], " + ", d[1], " + ",
            d[2], " must add up to the head dim of x ", x.describe());
  return d;
}

}  // namespace

Tensor apply_rope_3d(const Tensor& x, const Rope3dTables& rope) {
  check_defined("apply_rope_3d", {&x});
  const auto d = check_rope_3d("apply_rope_3d", x, rope);
  // Axis a's table [L, d] broadcasts as [L, 1, .., 1, d] against [B, T, H, W, heads, d] (unit
  // dims inserted, so tables of any strides do).
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int a = 0; a < 3; ++a) {
    Tensor c = rope.cos[a], s = rope.sin[a];
    for (int i = 0; i < 3 - a; ++i) {
      c = c.unsqueeze(1);
      s = s.unsqueeze(1);
    }
    parts.push_back(apply_rope(x.narrow(5, start, d[a]), c, s, RopeLayout::Interleaved));
    start += d[a];
  }
  return concat(parts, 5);
}

QkRope qk_norm_rope_3d_unfused(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                               const Tensor& k_weight, double eps, double q_scale,
                               const Rope3dTables& rope) {
  return {apply_rope_3d(mul(rms_norm(q, q_weight, eps), q_scale), rope),
          apply_rope_3d(rms_norm(k, k_weight, eps), rope)};
}

namespace {

// Validates qk_norm_rope_3d's arguments; returns their device.
Device check_qk_norm_rope(const char* op, const Tensor& q, const Tensor& k, const Tensor& q_weight,
                          const Tensor& k_weight, const Rope3dTables& rope) {
  check_defined(op, {&q, &k});
  check_rope_3d(op, q, rope);
  LTX_CHECK(k.shape() == q.shape() && k.dtype() == q.dtype(), op, ": q ", q.describe(), " and k ",
            k.describe(), " must have one shape and dtype");
  const int64_t d = q.size(5);
  for (const auto& [name, w] : {std::pair<const char*, const Tensor*>{"q_weight", &q_weight},
                                {"k_weight", &k_weight}}) {
    if (!w->defined()) continue;
    check_float(op, name, *w);
    LTX_CHECK(w->dim() == 1 && w->size(0) == d, op, ": ", name, " must have shape [", d,
              "] (the head dim of q ", q.describe(), "), got ", w->describe());
  }
  const Device dev = common_device(op, {&q, &k, &q_weight, &k_weight, &rope.cos[0], &rope.sin[0],
                                        &rope.cos[1], &rope.sin[1], &rope.cos[2], &rope.sin[2]});
  check_float(op, "q", q);
  check_float(op, "k", k);
  for (int a = 0; a < 3; ++a) {
    check_float(op, "cos", rope.cos[a]);
    check_float(op, "sin", rope.sin[a]);
  }
  return dev;
}

}  // namespace

QkRope qk_norm_rope_3d(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                       const Tensor& k_weight, double eps, double q_scale,
                       const Rope3dTables& rope) {
  const char* op = "qk_norm_rope_3d";
  const Device dev = check_qk_norm_rope(op, q, k, q_weight, k_weight, rope);
  const float scale = static_cast<float>(q_scale);  // as ops::mul(x, double)
  switch (dev.type) {
    case DeviceType::CPU:
      return cpu::qk_norm_rope_3d(q, k, q_weight, k_weight, eps, scale, rope);
    case DeviceType::CUDA:
      // Head dims beyond the kernel's staging: the unfused ops (the same results, bit for bit).
      LTX_CUDA_DISPATCH(
          if (q.size(5) > cuda::kQkNormRopeMaxDim) return qk_norm_rope_3d_unfused(
              q, k, q_weight, k_weight, eps, q_scale, rope);
          return cuda::qk_norm_rope_3d(q, k, q_weight, k_weight, eps, scale, rope), op);
  }
  unreachable_device(op);
}

void qk_norm_rope_3d_(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                      const Tensor& k_weight, double eps, double q_scale, const Rope3dTables& rope) {
  const char* op = "qk_norm_rope_3d_";
  const Device dev = check_qk_norm_rope(op, q, k, q_weight, k_weight, rope);
  // The CUDA kernel writes rows with a dense head dim; anything else goes through new tensors.
  if (dev.type == DeviceType::CUDA) {
    bool done = false;
    LTX_CUDA_DISPATCH(
        if (q.size(5) <= cuda::kQkNormRopeMaxDim && q.stride(5) == 1 && k.stride(5) == 1) {
          cuda::qk_norm_rope_3d(q, k, q_weight, k_weight, eps, static_cast<float>(q_scale), rope,
                                &q, &k);
          done = true;
        },
        op);
    if (done) return;
  }
  const QkRope r = qk_norm_rope_3d(q, k, q_weight, k_weight, eps, q_scale, rope);
  q.copy_from(r.q);
  k.copy_from(r.k);
}

}  // namespace ltx::ops
