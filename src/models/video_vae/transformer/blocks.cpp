#include "models/video_vae/transformer/blocks.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/shape.h"

namespace ltx::models::video_vae {

namespace {

constexpr double kEps = 1e-6;

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
  const Tensor y = ops::rms_norm(x, norm1, kEps);
  if (probe) probe("x", y);
  const Tensor h = ops::add(x, attn(y, probe, rope));
  return ops::add(h, mlp(ops::rms_norm(h, norm2, kEps)));
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
  std::vector<Tensor> cores;
  for (size_t i = 0; i < c.cores.size(); ++i) {
    const int64_t core_start = c.cores[i].start, core_len = c.cores[i].len;
    const int64_t core_end = core_start + core_len;
    // Source column of every slab slot (-1: left as zeros, which the reference does when a chunk
    // is narrower than the halo).
    std::vector<int64_t> src(static_cast<size_t>(extent), -1);
    if (i > 0) {
      const int64_t prev_len = c.cores[i - 1].len;
      const int64_t take = std::min(halo, prev_len);
      for (int64_t j = 0; j < take; ++j) src[halo - take + j] = core_start - take + j;
    }
    for (int64_t j = 0; j < core_len; ++j) src[halo + j] = core_start + j;
    int64_t right_filled = 0;
    if (static_cast<int64_t>(i) + 1 < w_chunks) {
      right_filled = std::min(w, core_end + halo) - core_end;
      for (int64_t j = 0; j < right_filled; ++j) src[halo + core_len + j] = core_end + j;
    }
    if (i == 0)  // the true left edge: copies of column 0
      for (int64_t j = 0; j < halo; ++j) src[j] = core_start;
    for (int64_t j = halo + core_len + right_filled; j < extent; ++j)
      src[j] = core_end - 1;  // the right edge: copies of the chunk's last column
    std::vector<int64_t> index(src.size());
    std::transform(src.begin(), src.end(), index.begin(),
                   [](int64_t s) { return std::max<int64_t>(s, 0); });
    Tensor slab = ops::index_select(x, 3, Tensor::from_vector(index, {extent}).to(x.device()));
    for (int64_t j = 0; j < extent; ++j)
      if (src[j] < 0) slab.narrow(3, j, 1).fill(0.0);

    const Tensor y = ops::modulate(ops::rms_norm(slab, norm1, kEps), scale, shift);
    const Tensor out = attn.attend(attn.project(y, (*rope)[i]));
    cores.push_back(out.narrow(3, halo, core_len));
  }
  const Tensor delta = cores.size() == 1 ? cores.front() : ops::concat(cores, 3);
  return ops::add(x, delta);
}

Tensor DiffusionNABlock::operator()(const Tensor& x_in, const Tensor& context,
                                    const Tensor& modulation, Stage5Attention layout,
                                    int64_t w_chunks, const std::vector<AbsRope3d>* rope) const {
  const Tensor x = ops::add(x_in, context_proj(context));
  Tensor h;
  if (layout == Stage5Attention::WChunked) {
    h = w_chunked_attention_residual(x, chunk(modulation, scale_shift_table, kScaleMsa),
                                     chunk(modulation, scale_shift_table, kShiftMsa), w_chunks,
                                     rope);
  } else {
    const Tensor y = ops::modulate(ops::rms_norm(x, norm1, kEps),
                                   chunk(modulation, scale_shift_table, kScaleMsa),
                                   chunk(modulation, scale_shift_table, kShiftMsa));
    LTX_CHECK(rope == nullptr || rope->size() == 1, "diffusion decoder: ", rope->size(),
              " RoPE tables for one full-volume attention call");
    h = ops::add(x, attn(y, {}, rope != nullptr ? rope->data() : nullptr));
  }
  const Tensor y =
      ops::modulate(ops::rms_norm(h, norm2, kEps), chunk(modulation, scale_shift_table, kScaleMlp),
                    chunk(modulation, scale_shift_table, kShiftMlp));
  return ops::add(h, mlp(y));
}

}  // namespace ltx::models::video_vae
