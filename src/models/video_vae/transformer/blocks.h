#pragma once
// The NA transformer blocks of the diffusion video decoder (reference:
// model/video_vae/transformer/blocks.py, chunked/*.py, combined/*.py).
//
// NABlock (stages 1-4):      x += attn(norm1(x));  x += mlp(norm2(x))
// DiffusionNABlock (stage 5): x += context_proj(context);
//                             x += attn(modulate(norm1(x), scale_msa, shift_msa));
//                             x += mlp(modulate(norm2(x), scale_mlp, shift_mlp))
// with the shared AdaLN chunks plus the block's own scale_shift_table; the gate chunks are unused
// (static gates of legacy checkpoints are folded into the weights at load). RMSNorms have weights,
// eps 1e-6.
//
// Stage-5 attention comes in the reference's two layouts:
//  * WChunked (CHUNKED_* modes, the pipelines' default): W is cut into `w_chunks` chunks of
//    ceil(W / w_chunks) columns; each runs on a slab of the chunk plus halo = Kw / 2 columns per
//    side taken from the block input (neighbours where they exist; at the volume's W edges copies
//    of column 0 on the left and of the chunk's last column on the right), with W positions
//    core_start - halo + j; only the core columns are kept. W windows are thus always centred.
//  * FullVolume (COMBINED_* modes): one call over the volume, NATTEN's inward-shifted borders.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/video_vae/transformer/attention.h"
#include "models/video_vae/transformer/layers.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

struct NABlock {
  Tensor norm1, norm2;  // RMSNorm weights [C]
  NeighborhoodAttention3D attn;
  SwiGLU mlp;

  static NABlock load(io::WeightMap& w, int64_t dim, const Kernel3& kernel, int64_t head_dim,
                      const nn::LoadOptions& opt);
  // x [B, T, H, W, C] channels-last; rope: the tables of x's grid (attn.rope_tables, shared by a
  // stage's blocks) or null (built here). Probe names: x (the attention input, norm1's output)
  // and the attention's (NeighborhoodAttention3D::operator()).
  Tensor operator()(const Tensor& x, const Probe& probe = {},
                    const AbsRope3d* rope = nullptr) const;
};

enum class Stage5Attention { WChunked, FullVolume };

// The AdaLN-Zero chunks of the shared modulation, in the reference's order.
enum AdaLnChunk : int {
  kScaleMsa = 0,
  kShiftMsa,
  kGateMsa,
  kScaleMlp,
  kShiftMlp,
  kGateMlp,
  kGateCtx,
  kAdaLnChunks
};

struct DiffusionNABlock {
  nn::Linear context_proj;   // context channels -> C5
  Tensor scale_shift_table;  // [7, C5]
  Tensor norm1, norm2;
  NeighborhoodAttention3D attn;
  SwiGLU mlp;

  static DiffusionNABlock load(io::WeightMap& w, int64_t dim, int64_t context_channels,
                               const Kernel3& kernel, int64_t head_dim, const nn::LoadOptions& opt);
  // The RoPE tables of the attention calls of one block on a canvas [B, F, H5, W5, C5] (one per
  // non-empty W chunk, or one for the full volume) on `device`; the same for every stage-5 block
  // and step on that canvas, so build them once and pass them to each call.
  std::vector<AbsRope3d> rope_tables(const Shape& x, Stage5Attention layout, int64_t w_chunks,
                                     Device device) const;
  // x [B, F, H5, W5, C5], context [B, F, H5, W5, C_ctx] (the upsampled stage-4 output),
  // modulation [B, 7, C5] (shared_adaln chunks before the block's table); rope: rope_tables(x's
  // shape, layout, w_chunks) or null (built here).
  // Pass x by value (std::move it in): it is released as soon as the context is added, and the
  // residual adds then run in place on one buffer (at most one canvas-sized activation besides
  // x and the context, as the reference's in-place chunked path keeps it).
  Tensor operator()(Tensor x, const Tensor& context, const Tensor& modulation,
                    Stage5Attention layout, int64_t w_chunks,
                    const std::vector<AbsRope3d>* rope = nullptr) const;

  // x + attn(modulate(norm1(x))) in the W-chunked layout (the reference's chunked.attn); rope as
  // for operator() with WChunked.
  Tensor w_chunked_attention_residual(const Tensor& x, const Tensor& scale, const Tensor& shift,
                                      int64_t w_chunks,
                                      const std::vector<AbsRope3d>* rope = nullptr) const;
  // The same, added into x in place (x contiguous); every slab reads the block input, as above:
  // a chunk's left halo is saved before its neighbour's update.
  void add_w_chunked_attention(const Tensor& x, const Tensor& scale, const Tensor& shift,
                               int64_t w_chunks, const std::vector<AbsRope3d>* rope = nullptr) const;
};

}  // namespace ltx::models::video_vae
