#include "models/video_vae/transformer/blocks.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/shape.h"

namespace ltx::models::video_vae {

namespace {

constexpr double kBlockNormEps = 1e-6;

// Chunk i of modulation [B, 7, C] plus row i of the block's table, as [B, 1, 1, 1, C].
Tensor chunk(const Tensor& modulation, const Tensor& table, int i) {
  const Tensor m = ops::add(modulation.select(1, i), table.select(0, i));
  return m.reshape({m.size(0), 1, 1, 1, m.size(1)});
}

// The W-chunked layout of a W-wide volume: chunks of chunk_w columns, each run on a slab of
// extent = chunk_w + 2 halo columns at W positions core_start - halo + j.
struct WChunking {
  struct Core {
    int64_t start, len;
  };
  int64_t chunk_w = 0, halo = 0, extent = 0;
  std::vector<Core> cores;  // the non-empty chunks (trailing empty ones add nothing)
};

WChunking w_chunking(int64_t w, int64_t kernel_w, int64_t w_chunks) {
  LTX_CHECK(w_chunks >= 1, "diffusion decoder: w_chunks must be >= 1, got ", w_chunks);
  WChunking c;
  c.halo = kernel_w / 2;
  c.chunk_w = (w + w_chunks - 1) / w_chunks;
  c.extent = c.chunk_w + 2 * c.halo;
  for (int64_t i = 0; i < w_chunks; ++i) {
    const int64_t start = i * c.chunk_w, end = std::min(w, (i + 1) * c.chunk_w);
    if (end <= start) break;
    c.cores.push_back({start, end - start});
  }
  return c;
}

}  // namespace

NABlock NABlock::load(io::WeightMap& w, int64_t dim, const Kernel3& kernel, int64_t head_dim,
                      const nn::LoadOptions& opt) {
  NABlock b;
  b.norm1 = w.take("norm1.weight", {dim}, opt.dtype, opt.device);
  b.norm2 = w.take("norm2.weight", {dim}, opt.dtype, opt.device);
  io::WeightMap aw = w.scoped("attn.");
  b.attn = NeighborhoodAttention3D::load(aw, dim, kernel, head_dim, opt);
  io::WeightMap mw = w.scoped("mlp.");
  b.mlp = SwiGLU::load(mw, dim, opt);
  return b;
}

Tensor NABlock::operator()(const Tensor& x, const Probe& probe, const AbsRope3d* rope) const {
  const Tensor y = ops::rms_norm(x, norm1, kBlockNormEps);
  if (probe) probe("x", y);
  const Tensor h = ops::add(x, attn(y, probe, rope));
  return ops::add(h, mlp(ops::rms_norm(h, norm2, kBlockNormEps)));
}

DiffusionNABlock DiffusionNABlock::load(io::WeightMap& w, int64_t dim, int64_t context_channels,
                                        const Kernel3& kernel, int64_t head_dim,
                                        const nn::LoadOptions& opt) {
  DiffusionNABlock b;
  b.context_proj = nn::Linear::load(w, "context_proj", context_channels, dim, true, opt);
  b.scale_shift_table = w.take("scale_shift_table", {kAdaLnChunks, dim}, opt.dtype, opt.device);
  // The norms, attention and MLP are named and shaped as in the deterministic NABlock.
  NABlock shared = NABlock::load(w, dim, kernel, head_dim, opt);
  b.norm1 = std::move(shared.norm1);
  b.norm2 = std::move(shared.norm2);
  b.attn = std::move(shared.attn);
  b.mlp = std::move(shared.mlp);
  return b;
}

std::vector<AbsRope3d> DiffusionNABlock::rope_tables(const Shape& x, Stage5Attention layout,
                                                     int64_t w_chunks, Device device) const {
  LTX_CHECK(x.size() == 5, "diffusion decoder: expected a stage-5 canvas [B, F, H, W, C], got ",
            x.str());
  if (layout == Stage5Attention::FullVolume)
    return {attn.rope_tables(x[1], x[2], positions(x[3]), device)};
  const WChunking c = w_chunking(x[3], attn.kernel[2], w_chunks);
  std::vector<AbsRope3d> out;
  for (const WChunking::Core& core : c.cores)
    out.push_back(attn.rope_tables(x[1], x[2], positions(c.extent, core.start - c.halo), device));
  return out;
}

Tensor DiffusionNABlock::w_chunked_attention_residual(const Tensor& x, const Tensor& scale,
                                                      const Tensor& shift, int64_t w_chunks,
                                                      const std::vector<AbsRope3d>* rope) const {
  const Tensor out = x.clone();
  add_w_chunked_attention(out, scale, shift, w_chunks, rope);
  return out;
}

void DiffusionNABlock::add_w_chunked_attention(const Tensor& x, const Tensor& scale,
                                               const Tensor& shift, int64_t w_chunks,
                                               const std::vector<AbsRope3d>* rope) const {
  LTX_CHECK(x.dim() == 5 && x.is_contiguous(), "diffusion decoder: the W-chunked attention adds "
            "into a contiguous [B, F, H, W, C] canvas, got ", x.describe());
  const int64_t w = x.size(3);
  const WChunking c = w_chunking(w, attn.kernel[2], w_chunks);
  const int64_t halo = c.halo, extent = c.extent;
  std::vector<AbsRope3d> built;
  if (rope == nullptr) {
    built = rope_tables(x.shape(), Stage5Attention::WChunked, w_chunks, x.device());
    rope = &built;
  }
  LTX_CHECK(rope->size() == c.cores.size(), "diffusion decoder: ", rope->size(),
            " RoPE tables for ", c.cores.size(), " W chunks of ", x.describe());
  Shape slab_shape = x.shape();
  slab_shape[3] = extent;
  const DType y_dtype = ops::float_result_dtype({&x, &scale, &shift});
  // The slab's normalised rows go straight from x into y (no copy of the slab itself):
  // slab column j holds block-input column core_start - halo + j where it exists; the true left
  // edge repeats column 0, past the right neighbour's columns the chunk's last column repeats,
  // and left slots a narrower previous chunk cannot fill are zero (as in the reference). The
  // halo columns must be the block input's, so each chunk's attention output is added to x only
  // after the next chunk has read its left halo.
  Tensor pending;  // the previous chunk's attention output, for its core columns of x
  const auto add_pending = [&](size_t chunk) {
    ops::add_(x.narrow(3, c.cores[chunk].start, c.cores[chunk].len), pending);
    pending = Tensor();
  };
  for (size_t i = 0; i < c.cores.size(); ++i) {
    const int64_t core_start = c.cores[i].start, core_len = c.cores[i].len;
    const int64_t core_end = core_start + core_len;
    Tensor y = Tensor::empty(slab_shape, y_dtype, x.device());
    // Normalises source columns [col, col + n) of `from` into slab columns [j0, j0 + n).
    const auto norm_cols = [&](const Tensor& from, int64_t col, int64_t j0, int64_t n) {
      ops::rms_norm_modulate_into(y.narrow(3, j0, n), from.narrow(3, col, n), scale, shift, kBlockNormEps,
                                  norm1);
    };
    // Slab columns [j0, j0 + n) all hold x's column `col`: normalised once, then repeated.
    const auto norm_repeat = [&](int64_t col, int64_t j0, int64_t n) {
      if (n <= 0) return;
      norm_cols(x, col, j0, 1);
      if (n == 1) return;
      Shape s = slab_shape;
      s[3] = n - 1;
      y.narrow(3, j0 + 1, n - 1).copy_from(y.narrow(3, j0, 1).expand(s));
    };
    int64_t first = halo;  // the first slab column filled from x's columns in order
    if (i == 0) {
      norm_repeat(core_start, 0, halo);
    } else {
      const int64_t take = std::min(halo, c.cores[i - 1].len);
      first = halo - take;
      if (first > 0) {
        Shape s = slab_shape;
        s[3] = first;
        norm_cols(Tensor::zeros(s, x.dtype(), x.device()), 0, 0, first);
      }
    }
    int64_t right_filled = 0;
    if (static_cast<int64_t>(i) + 1 < w_chunks) right_filled = std::min(w, core_end + halo) - core_end;
    const int64_t filled = halo + core_len + right_filled;
    norm_cols(x, core_start - halo + first, first, filled - first);
    norm_repeat(core_end - 1, filled, extent - filled);
    if (i > 0) add_pending(i - 1);  // the previous chunk's columns were read as this halo

    // Each buffer is released as soon as the next step has consumed it (the peak is the fused
    // projection plus the attention output).
    NeighborhoodAttention3D::Qkv qkv = attn.project(y, (*rope)[i]);
    y = Tensor();
    // Only the core's queries: the halo columns' outputs would be dropped.
    pending = attn.attend(qkv, {halo, core_len});
    qkv = {};
  }
  if (!c.cores.empty()) add_pending(c.cores.size() - 1);
}

Tensor DiffusionNABlock::operator()(Tensor x_in, const Tensor& context, const Tensor& modulation,
                                    Stage5Attention layout, int64_t w_chunks,
                                    const std::vector<AbsRope3d>* rope) const {
  // x_in + context_proj(context), formed in the projection's buffer (addition commutes, so the
  // bits are those of add(x_in, projection)).
  Tensor x = context_proj(context);
  ops::add_(x, x_in);
  x_in = Tensor();
  if (layout == Stage5Attention::WChunked) {
    add_w_chunked_attention(x, chunk(modulation, scale_shift_table, kScaleMsa),
                            chunk(modulation, scale_shift_table, kShiftMsa), w_chunks, rope);
  } else {
    const Tensor y = ops::rms_norm_modulate(x, chunk(modulation, scale_shift_table, kScaleMsa),
                                            chunk(modulation, scale_shift_table, kShiftMsa), kBlockNormEps,
                                            norm1);
    LTX_CHECK(rope == nullptr || rope->size() == 1, "diffusion decoder: ", rope->size(),
              " RoPE tables for one full-volume attention call");
    ops::add_(x, attn(y, {}, rope != nullptr ? rope->data() : nullptr));
  }
  // x += mlp(modulate(norm2(x))), a chunk of rows at a time (each chunk's rows are read before
  // they are updated).
  const Tensor scale = chunk(modulation, scale_shift_table, kScaleMlp);
  const Tensor shift = chunk(modulation, scale_shift_table, kShiftMlp);
  const int64_t per_sample = x.size(0) > 0 ? x.numel() / x.size(0) / x.size(4) : 1;
  mlp.add_into(
      x,
      [&](const Tensor& rows, int64_t first) {
        const int64_t b = first / per_sample;  // chunks stay within one sample
        const int64_t c = x.size(4);
        return ops::rms_norm_modulate(rows, scale.select(0, b).reshape({1, c}),
                                      shift.select(0, b).reshape({1, c}), kBlockNormEps, norm2);
      },
      per_sample);
  return x;
}

}  // namespace ltx::models::video_vae
