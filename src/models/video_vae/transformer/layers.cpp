#include "models/video_vae/transformer/layers.h"

#include <algorithm>

#include "ops/elementwise.h"
#include "ops/mlp.h"
#include "ops/shape.h"

namespace ltx::models::video_vae {

LinearPixelShuffleUpsample LinearPixelShuffleUpsample::load(io::WeightMap& w, int64_t in_channels,
                                                            const std::array<int64_t, 3>& stride,
                                                            int64_t reduction,
                                                            const nn::LoadOptions& opt) {
  LinearPixelShuffleUpsample u;
  u.stride = stride;
  const int64_t cells = stride[0] * stride[1] * stride[2];
  const int64_t proj_out = cells * in_channels / reduction;
  u.out_channels = proj_out / cells;
  u.proj = nn::Linear::load(w, "proj", in_channels, proj_out, true, opt);
  // The checkpoint orders the projection's outputs (c p1 p2 p3): the shuffle would then gather
  // each output channel at a stride of prod(stride) elements (~0.3 TB/s on an H200 for the 6 GB
  // of the stage-5 context, bench/RESULTS.md). Its rows are reordered once to (p1 p2 p3 c) here,
  // the same dot products in another order, so the shuffle moves runs of out_channels contiguous
  // values.
  const int64_t c = u.out_channels;
  u.proj.weight = u.proj.weight.reshape({c, cells, in_channels})
                      .permute({1, 0, 2})
                      .contiguous()
                      .reshape({proj_out, in_channels});
  u.proj.bias = u.proj.bias.reshape({c, cells}).permute({1, 0}).contiguous().reshape({proj_out});
  return u;
}

Tensor LinearPixelShuffleUpsample::shuffle(const Tensor& y, bool drop_leading_frame) const {
  const auto [p1, p2, p3] = stride;
  const int64_t b = y.size(0), t = y.size(1), h = y.size(2), w = y.size(3);
  // (p1 p2 p3 c): the projection's rows were reordered at load (see load()).
  Tensor x = y.reshape({b, t, h, w, p1, p2, p3, out_channels})
                 .permute({0, 1, 4, 2, 5, 3, 6, 7})
                 .reshape({b, t * p1, h * p2, w * p3, out_channels});
  if (p1 == 2 && drop_leading_frame) x = x.narrow(1, 1, x.size(1) - 1);
  return x;
}

Tensor LinearPixelShuffleUpsample::operator()(const Tensor& x, bool drop_leading_frame) const {
  return shuffle(proj(x), drop_leading_frame);
}

SwiGLU SwiGLU::load(io::WeightMap& w, int64_t dim, const nn::LoadOptions& opt) {
  const int64_t hidden = hidden_dim(dim);
  return from(nn::Linear::load(w, "w_gate", dim, hidden, false, opt),
              nn::Linear::load(w, "w_up", dim, hidden, false, opt),
              nn::Linear::load(w, "w_down", hidden, dim, false, opt));
}

SwiGLU SwiGLU::from(const nn::Linear& w_gate, const nn::Linear& w_up, const nn::Linear& w_down) {
  LTX_CHECK(w_gate.weight.shape() == w_up.weight.shape() &&
                w_down.in_features() == w_gate.out_features() && !w_gate.bias.defined() &&
                !w_up.bias.defined() && !w_down.bias.defined(),
            "SwiGLU: gate ", w_gate.weight.describe(), " and up ", w_up.weight.describe(),
            " projections must match (no biases) and feed down ", w_down.weight.describe());
  SwiGLU m;
  m.w_gate_up.weight = ops::concat({w_gate.weight, w_up.weight}, 0);
  m.w_down = w_down;
  return m;
}

int64_t SwiGLU::chunk_rows(int64_t width) const {
  return std::max<int64_t>(1, max_hidden_elements / std::max<int64_t>(width, 1));
}

template <typename Fn>
void SwiGLU::for_each_chunk(int64_t rows, int64_t segment, int64_t width, const Fn& fn) const {
  const int64_t chunk = chunk_rows(width);
  segment = std::max<int64_t>(1, segment);
  for (int64_t s0 = 0; s0 < rows; s0 += segment) {
    const int64_t s1 = std::min(rows, s0 + segment);
    for (int64_t r0 = s0; r0 < s1; r0 += chunk) fn(r0, std::min(chunk, s1 - r0));
  }
}

Tensor SwiGLU::rows_forward(const Tensor& y_rows) const {
  const int64_t hidden = w_down.in_features();
  const Tensor gate_up = w_gate_up(y_rows);  // [n, 2 hidden]
  return w_down(ops::silu_mul(gate_up.narrow(1, 0, hidden), gate_up.narrow(1, hidden, hidden)));
}

Tensor SwiGLU::operator()(const Tensor& y) const {
  const int64_t dim = y.size(-1), rows = dim > 0 ? y.numel() / dim : 0;
  const Tensor flat = y.reshape({rows, dim});
  Tensor out;
  for_each_chunk(rows, rows, w_down.in_features(), [&](int64_t r0, int64_t n) {
    const Tensor part = rows_forward(flat.narrow(0, r0, n));
    if (n == rows) {
      out = part;
      return;
    }
    if (!out.defined()) out = Tensor::empty({rows, part.size(1)}, part.dtype(), part.device());
    out.narrow(0, r0, n).copy_from(part);
  });
  if (!out.defined()) out = Tensor::empty({0, w_down.out_features()}, y.dtype(), y.device());
  Shape shape = y.shape();
  shape[shape.size() - 1] = out.size(1);
  return out.view(shape);
}

void SwiGLU::add_into(const Tensor& residual, const RowInput& input, int64_t segment) const {
  LTX_CHECK(residual.is_contiguous() && residual.dim() >= 1,
            "SwiGLU::add_into: the residual must be contiguous, got ", residual.describe());
  const int64_t dim = residual.size(-1), rows = dim > 0 ? residual.numel() / dim : 0;
  const Tensor flat = residual.view({rows, dim});
  // The fused op stores no [rows, hidden] activations: only the input chunk ([rows, C]) bounds
  // the rows per call then.
  const int64_t hidden = w_down.in_features();
  const bool fused = ops::swiglu_add_fuses(flat, Tensor(), w_gate_up.weight, w_down.weight);
  for_each_chunk(rows, segment, fused ? dim : hidden, [&](int64_t r0, int64_t n) {
    const Tensor target = flat.narrow(0, r0, n);
    Tensor y = input(target, r0).reshape({n, dim});
    if (dim > 1 && y.stride(1) != 1) y = y.contiguous();  // the op reads rows with a dense last dim
    // A y the kernel does not take (another dtype, say) goes through the unfused ops in the
    // hidden-sized chunks after all.
    const int64_t step =
        fused && !ops::swiglu_add_fuses(target, y, w_gate_up.weight, w_down.weight)
            ? chunk_rows(hidden)
            : n;
    for (int64_t s = 0; s < n; s += step) {
      const int64_t m = std::min(step, n - s);
      ops::swiglu_add_(target.narrow(0, s, m), y.narrow(0, s, m), w_gate_up.weight,
                       w_down.weight);
    }
  });
}

}  // namespace ltx::models::video_vae
