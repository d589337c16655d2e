#include "models/transformer/rope.h"

#include <cmath>
#include <ios>

#include "core/constant_cache.h"
#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/rope.h"
#include "ops/shape.h"

namespace ltx::models::transformer {

const char* rope_type_name(LTXRopeType type) {
  return type == LTXRopeType::Split ? "split" : "interleaved";
}

Tensor rope_freq_grid(double theta, int64_t n_pos_dims, int64_t inner_dim, bool double_precision) {
  LTX_CHECK(n_pos_dims > 0 && inner_dim > 0 && theta > 0, "rope: bad frequency grid arguments (theta ",
            theta, ", ", n_pos_dims, " position dims, inner dim ", inner_dim, ")");
  const int64_t count = inner_dim / (2 * n_pos_dims);
  std::vector<float> ladder(static_cast<size_t>(count));
  constexpr double kPi = 3.141592653589793;
  if (double_precision) {
    // numpy: linspace(0, 1, count) (= i * (1 / (count - 1)), last exactly 1), power in float64,
    // (p * pi) / 2 in float64, then one rounding to f32.
    const double step = count > 1 ? 1.0 / static_cast<double>(count - 1) : 0.0;
    for (int64_t i = 0; i < count; ++i) {
      const double e = (count > 1 && i == count - 1) ? 1.0 : static_cast<double>(i) * step;
      ladder[i] = static_cast<float>(std::pow(theta, e) * kPi / 2.0);
    }
  } else {
    // torch.linspace in f32 (symmetric halves), pow and the two scalings in f32.
    const float step = count > 1 ? 1.0f / static_cast<float>(count - 1) : 0.0f;
    const int64_t halfway = count / 2;
    for (int64_t i = 0; i < count; ++i) {
      const float e = i < halfway ? step * static_cast<float>(i)
                                  : 1.0f - step * static_cast<float>(count - i - 1);
      const float p = std::pow(static_cast<float>(theta), e);
      ladder[i] = (p * static_cast<float>(kPi)) / 2.0f;
    }
  }
  return Tensor::from_vector(ladder, {count});
}

namespace {

// `pad` columns of `value` before x's last dim, and every last-dim value twice in a row: plain
// device fills and copies (ops::pad / repeat_interleave upload index maps from the host on each
// call, which a step recorded as a CUDA graph cannot do).
Tensor pad_front(const Tensor& x, int64_t pad, double value) {
  Shape s = x.shape();
  s[s.size() - 1] = pad;
  return ops::concat({Tensor::full(s, value, x.dtype(), x.device()), x}, -1);
}
Tensor repeat_each_twice(const Tensor& x) {
  Shape twice = x.shape();
  twice[twice.size() - 1] *= 2;
  Shape expanded = x.shape();
  expanded.push_back(2);
  return x.unsqueeze(-1).expand(expanded).contiguous().view(twice);
}

}  // namespace

RopeTables precompute_freqs_cis(const Tensor& positions, int64_t inner_dim, double theta,
                                const std::vector<double>& max_pos, int64_t num_attention_heads,
                                LTXRopeType rope_type, bool double_precision) {
  LTX_CHECK(positions.dim() == 4 && positions.size(3) == 2,
            "rope: positions must be [B, n_pos_dims, T, 2] ([start, end) per axis), got ",
            positions.describe());
  const int64_t b = positions.size(0), n = positions.size(1), t = positions.size(2);
  LTX_CHECK(n == static_cast<int64_t>(max_pos.size()), "rope: positions have ", n,
            " axes but max_pos has ", max_pos.size(), " entries");
  LTX_CHECK(num_attention_heads > 0, "rope: num_attention_heads must be positive");
  const Tensor pos = positions.to(DType::F32);
  // Middle of [start, end), then the fraction of max_pos per axis: [B, T, n].
  const Tensor mid = ops::div(ops::add(pos.select(3, 0), pos.select(3, 1)), 2.0);
  std::vector<Tensor> fracs;
  for (int64_t a = 0; a < n; ++a) fracs.push_back(ops::div(mid.select(1, a), max_pos[a]));
  const Tensor frac = ops::stack(fracs, -1);
  // angle[b, t, a, j] = ladder_j * (2 frac - 1), then [B, T, count, n] flattened (j outer).
  const Tensor ladder = cached_constant(
      str(std::hexfloat, "rope_ladder theta=", theta, " axes=", n, " dim=", inner_dim,
          " f64=", double_precision),
      pos.device(), [&] { return rope_freq_grid(theta, n, inner_dim, double_precision); });
  const int64_t count = ladder.size(0);
  const Tensor signed_frac = ops::sub(ops::mul(frac, 2.0), 1.0).unsqueeze(-1);  // [B, T, n, 1]
  const Tensor angles =
      ops::mul(ladder, signed_frac).transpose(-1, -2).contiguous().view({b, t, count * n});
  Tensor cos = ops::cos(angles), sin = ops::sin(angles);

  if (rope_type == LTXRopeType::Split) {
    const int64_t half = inner_dim / 2, pad = half - count * n;
    LTX_CHECK(inner_dim % 2 == 0 && half % num_attention_heads == 0,
              "rope: inner dim ", inner_dim, " cannot be split into ", num_attention_heads,
              " heads of rotation pairs");
    if (pad > 0) {
      cos = pad_front(cos, pad, 1.0);
      sin = pad_front(sin, pad, 0.0);
    }
    const Shape heads{b, t, num_attention_heads, half / num_attention_heads};
    return {cos.view(heads).permute({0, 2, 1, 3}).contiguous(),
            sin.view(heads).permute({0, 2, 1, 3}).contiguous()};
  }
  const int64_t pad = inner_dim % (2 * n);
  cos = repeat_each_twice(cos);
  sin = repeat_each_twice(sin);
  if (pad > 0) {
    cos = pad_front(cos, pad, 1.0);
    sin = pad_front(sin, pad, 0.0);
  }
  return {cos, sin};
}

Tensor apply_rotary_emb(const Tensor& x, const RopeTables& pe, LTXRopeType rope_type) {
  return ops::apply_rope(x, pe.cos, pe.sin,
                         rope_type == LTXRopeType::Split ? ops::RopeLayout::Split
                                                         : ops::RopeLayout::Interleaved);
}

}  // namespace ltx::models::transformer
