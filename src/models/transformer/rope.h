#pragma once
// Rotary position embeddings of the transformer (reference: model/transformer/rope.py).
//
// Positions [B, n, T, 2] hold [start, end) per axis; the angle of frequency j on axis a is
// ladder_j * (2 * mid_a / max_pos_a - 1) with mid the middle of the interval, computed in f32 in
// the reference's order. The ladder is theta^linspace(0, 1, inner_dim / (2n)) * pi / 2, made in
// float64 and rounded to f32 when `double_precision` (the published "float64" setting), in f32
// otherwise. Angles are laid out [j0a0, j0a1, .., j1a0, ..].
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ltx::models::transformer {

enum class LTXRopeType {
  Interleaved,  // legacy: pairs (x[2i], x[2i+1]) over the whole inner dim
  Split,        // every published checkpoint: per head, pairs (x[i], x[i + Dh/2])
};
const char* rope_type_name(LTXRopeType type);

// cos/sin tables. Split: [B, H, T, inner/2/H] with identity padding (cos 1, sin 0) at the front of
// the inner/2 vector before it is cut into heads. Interleaved: [B, T, inner], each angle repeated
// twice, inner % (2n) identity slots at the front.
struct RopeTables {
  Tensor cos, sin;
  bool defined() const { return cos.defined(); }
};

// The frequency ladder [inner_dim / (2 * n_pos_dims)] f32 (generate_freq_grid_np / _pytorch).
Tensor rope_freq_grid(double theta, int64_t n_pos_dims, int64_t inner_dim, bool double_precision);

// precompute_freqs_cis with use_middle_indices_grid (the only mode the configurators accept).
// positions [B, n, T, 2] f32; max_pos has n entries. Tables are f32 on positions' device.
RopeTables precompute_freqs_cis(const Tensor& positions, int64_t inner_dim, double theta,
                                const std::vector<double>& max_pos, int64_t num_attention_heads,
                                LTXRopeType rope_type, bool double_precision);

// apply_rotary_emb. Split: x [B, H, T, Dh] (any strides) with tables [B|1, H, T, Dh/2].
// Interleaved: x [B, T, inner] with tables [B|1, T, inner].
Tensor apply_rotary_emb(const Tensor& x, const RopeTables& pe, LTXRopeType rope_type);

}  // namespace ltx::models::transformer
