#include "ops/resample.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/resample.h"
#include "ops/dispatch.h"
#if LTX_WITH_CUDA
#include "backend/cuda/resample.h"
#endif

namespace ltx::ops {

namespace {

const char* mode_name(InterpMode m) {
  switch (m) {
    case InterpMode::Nearest: return "nearest";
    case InterpMode::NearestExact: return "nearest-exact";
    case InterpMode::Linear: return "linear";
    case InterpMode::Area: return "area";
  }
  return "?";
}

// Common checks; returns the number of spatial dims.
int check_interp_input(const char* op, const Tensor& x, InterpMode mode, bool align_corners,
                       size_t n_sizes) {
  check_defined(op, {&x});
  check_float(op, "input", x);  // f32; f32 or bf16 on CUDA
  LTX_CHECK(x.dim() >= 3 && x.dim() <= 5, op, ": input must be [N, C, *spatial] with 1-3 ",
            "spatial dims, got ", x.describe());
  const int R = x.dim() - 2;
  LTX_CHECK(n_sizes == 1 || static_cast<int>(n_sizes) == R, op, ": ", n_sizes,
            " sizes/factors for ", R, " spatial dims of ", x.describe());
  LTX_CHECK(!align_corners || mode == InterpMode::Linear, op, ": align_corners only applies to ",
            "linear interpolation, not ", mode_name(mode));
  for (int i = 0; i < R; ++i)
    LTX_CHECK(x.size(2 + i) > 0, op, ": empty spatial dim ", 2 + i, " in ", x.describe());
  return R;
}

Tensor dispatch_interp(const char* op, const Tensor& x, const std::vector<int64_t>& size,
                       const std::vector<double>& scales, InterpMode mode, bool align_corners) {
  for (size_t i = 0; i < size.size(); ++i)
    LTX_CHECK(size[i] > 0, op, ": output size ", Dims(size).str(), " of ", x.describe(),
              " must be positive in every spatial dim");
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::interpolate(x, size, scales, mode, align_corners);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::interpolate(x, size, scales, mode, align_corners), op);
  }
  unreachable_device(op);
}

// Full channel order (a permutation of 0..R-1) from the user's (possibly empty) one.
std::vector<int64_t> channel_order_of(const char* op, size_t R, const std::vector<int64_t>& order) {
  if (order.empty()) {
    std::vector<int64_t> id(R);
    for (size_t i = 0; i < R; ++i) id[i] = static_cast<int64_t>(i);
    return id;
  }
  LTX_CHECK(order.size() == R, op, ": channel_order ", Dims(order).str(), " must list each of ",
            "the ", R, " spatial axes once");
  bool seen[3] = {};
  for (int64_t a : order) {
    LTX_CHECK(a >= 0 && a < static_cast<int64_t>(R) && !seen[a], op, ": channel_order ",
              Dims(order).str(), " is not a permutation of 0..", R - 1);
    seen[a] = true;
  }
  return order;
}

void check_factors(const char* op, const Tensor& x, const std::vector<int64_t>& factors) {
  check_defined(op, {&x});
  LTX_CHECK(!factors.empty() && factors.size() <= 3, op, ": 1-3 factors expected, got ",
            Dims(factors).str());
  for (int64_t f : factors)
    LTX_CHECK(f >= 1, op, ": factors ", Dims(factors).str(), " must be >= 1");
  LTX_CHECK(x.dim() == static_cast<int>(factors.size()) + 2, op, ": input must be [N, C, *spatial]",
            " with ", factors.size(), " spatial dims for factors ", Dims(factors).str(), ", got ",
            x.describe());
}

}  // namespace

Tensor interpolate(const Tensor& x, const std::vector<int64_t>& output_size, InterpMode mode,
                   bool align_corners) {
  const int R = check_interp_input("interpolate", x, mode, align_corners, output_size.size());
  std::vector<int64_t> size(R);
  for (int i = 0; i < R; ++i) size[i] = output_size.size() == 1 ? output_size[0] : output_size[i];
  return dispatch_interp("interpolate", x, size, {}, mode, align_corners);
}

Tensor interpolate_scale(const Tensor& x, const std::vector<double>& scale_factors, InterpMode mode,
                         bool align_corners) {
  const int R =
      check_interp_input("interpolate_scale", x, mode, align_corners, scale_factors.size());
  std::vector<double> scales(R);
  std::vector<int64_t> size(R);
  for (int i = 0; i < R; ++i) {
    scales[i] = scale_factors.size() == 1 ? scale_factors[0] : scale_factors[i];
    LTX_CHECK(std::isfinite(scales[i]) && scales[i] > 0, "interpolate_scale: scale factors ",
              "must be positive, got ", scales[i]);
    size[i] = static_cast<int64_t>(std::floor(static_cast<double>(x.size(2 + i)) * scales[i]));
  }
  return dispatch_interp("interpolate_scale", x, size, scales, mode, align_corners);
}

Tensor depth_to_space(const Tensor& x, const std::vector<int64_t>& factors,
                      const std::vector<int64_t>& channel_order, Subpositions subpositions) {
  check_factors("depth_to_space", x, factors);
  const size_t R = factors.size();
  const std::vector<int64_t> order = channel_order_of("depth_to_space", R, channel_order);
  int64_t F = 1;
  for (int64_t f : factors) F *= f;
  LTX_CHECK(x.size(1) % F == 0, "depth_to_space: channels of ", x.describe(),
            " are not divisible by the product ", F, " of factors ", Dims(factors).str());
  // [N, C, f_{order[0]}, ..., S_0, ...] (Outer: [N, f_{order[0]}, ..., C, S_0, ...])
  //   -> [N, C, S_0, q_0, S_1, q_1, ...] -> merge pairs.
  const bool outer = subpositions == Subpositions::Outer;
  const int64_t c_dim = outer ? static_cast<int64_t>(1 + R) : 1;  // where C sits in the split
  const int64_t q_first = outer ? 1 : 2;                          // where the digits start
  Shape split = {x.size(0)};
  if (!outer) split.push_back(x.size(1) / F);
  for (size_t j = 0; j < R; ++j) split.push_back(factors[order[j]]);
  if (outer) split.push_back(x.size(1) / F);
  for (size_t i = 0; i < R; ++i) split.push_back(x.size(2 + i));
  std::vector<int64_t> perm = {0, c_dim};
  Shape out_shape = {x.size(0), x.size(1) / F};
  for (size_t i = 0; i < R; ++i) {
    size_t pos = 0;
    while (order[pos] != static_cast<int64_t>(i)) ++pos;
    perm.push_back(static_cast<int64_t>(2 + R + i));
    perm.push_back(q_first + static_cast<int64_t>(pos));
    out_shape.push_back(x.size(2 + i) * factors[i]);
  }
  const Tensor moved = x.reshape(split).permute(perm);
  // A channels-last input gives a channels-last result ([N, S_0, q_0, ..., C] memory: the pairs
  // still merge); otherwise contiguous. The same single copy either way.
  if (x.is_channels_last() && !x.is_contiguous())
    return moved.contiguous_in_order(Tensor::channels_last_order(moved.dim())).view(out_shape);
  return moved.clone().view(out_shape);
}

Tensor permute_depth_channels(const Tensor& w, int64_t F) {
  check_defined("permute_depth_channels", {&w});
  LTX_CHECK(F >= 1 && w.dim() >= 1 && w.size(0) % F == 0, "permute_depth_channels: ",
            w.describe(), " has no [C * ", F, ", ...] channel rows");
  // [C, F, rest] -> [F, C, rest]: row c * F + sub moves to sub * C + c.
  Shape split = {w.size(0) / F, F, w.shape().numel() / std::max<int64_t>(w.size(0), 1)};
  return w.contiguous().view(split).transpose(0, 1).contiguous().view(w.shape());
}

Tensor space_to_depth(const Tensor& x, const std::vector<int64_t>& factors,
                      const std::vector<int64_t>& channel_order) {
  check_factors("space_to_depth", x, factors);
  const size_t R = factors.size();
  const std::vector<int64_t> order = channel_order_of("space_to_depth", R, channel_order);
  int64_t F = 1;
  for (int64_t f : factors) F *= f;
  // [N, C, S_0, q_0, S_1, q_1, ...] -> [N, C, q_{order[0]}, ..., S_0, ...] -> merge channels.
  Shape split = {x.size(0), x.size(1)};
  Shape out_shape = {x.size(0), x.size(1) * F};
  for (size_t i = 0; i < R; ++i) {
    LTX_CHECK(x.size(2 + i) % factors[i] == 0, "space_to_depth: spatial dim ", 2 + i, " of ",
              x.describe(), " is not divisible by its factor ", factors[i]);
    split.push_back(x.size(2 + i) / factors[i]);
    split.push_back(factors[i]);
    out_shape.push_back(x.size(2 + i) / factors[i]);
  }
  std::vector<int64_t> perm = {0, 1};
  for (size_t j = 0; j < R; ++j) perm.push_back(3 + 2 * order[j]);
  for (size_t i = 0; i < R; ++i) perm.push_back(static_cast<int64_t>(2 + 2 * i));
  const Tensor moved = x.reshape(split).permute(perm);  // [N, C, q..., S'...]
  if (x.is_channels_last() && !x.is_contiguous()) {
    // Channels-last result: [N, S'..., C, q...] memory, so (C, q...) merge into the channels.
    std::vector<int64_t> order = {0};
    for (size_t i = 0; i < R; ++i) order.push_back(static_cast<int64_t>(2 + R + i));
    for (size_t j = 0; j <= R; ++j) order.push_back(static_cast<int64_t>(1 + j));
    return moved.contiguous_in_order(order).view(out_shape);
  }
  return moved.clone().view(out_shape);
}

namespace {

// Runs a 2-D depth_to_space/space_to_depth over x [*, C, H, W] with any leading dims.
template <typename Fn>
Tensor over_leading_dims(const char* op, const Tensor& x, int64_t r, Fn fn) {
  check_defined(op, {&x});
  LTX_CHECK(x.dim() >= 3, op, ": input must be [*, C, H, W], got ", x.describe());
  LTX_CHECK(r >= 1, op, ": factor must be >= 1, got ", r);
  int64_t lead = 1;
  for (int d = 0; d < x.dim() - 3; ++d) lead *= x.size(d);
  Tensor y = fn(x.reshape({lead, x.size(-3), x.size(-2), x.size(-1)}));
  Shape out = x.shape();
  for (int k = 1; k <= 3; ++k) out[x.dim() - k] = y.size(4 - k);
  return y.view(out);
}

}  // namespace

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  return over_leading_dims("pixel_shuffle", x, r, [&](const Tensor& t) {
    LTX_CHECK(t.size(1) % (r * r) == 0, "pixel_shuffle: channels of ", x.describe(),
              " are not divisible by r * r = ", r * r);
    return depth_to_space(t, {r, r});
  });
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  return over_leading_dims("pixel_unshuffle", x, r, [&](const Tensor& t) {
    LTX_CHECK(t.size(2) % r == 0 && t.size(3) % r == 0, "pixel_unshuffle: height and width of ",
              x.describe(), " are not divisible by ", r);
    return space_to_depth(t, {r, r});
  });
}

}  // namespace ltx::ops
