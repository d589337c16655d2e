#pragma once
// Analytic FLOP models for the benchmarks (`ltx bench`): what one forward costs in the work that
// dominates it, counted the way the issue and the official benchmark script count it.
//   - GEMM-like work: a linear layer on M rows is 2 * M * in * out; a convolution is
//     2 * out_channels * in_channels * k^3 per output voxel;
//   - attention: 4 * B * heads * Tq * Tk * head_dim (Q K^T and P V); softmax, norms, RoPE,
//     modulation and other elementwise work are not counted.
// The floor of a forward is its GEMM FLOPs at the GEMM ceiling plus its attention FLOPs at the
// attention ceiling (the issue: 790 TFLOP/s bf16 GEMM, ~690 TFLOP/s fused attention on an H200).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/tiling.h"
#include "models/transformer/config.h"
#include "models/video_vae/model_configurator.h"

namespace ltx::bench {

// One named part of a forward (summed over layers / tiles).
struct FlopTerm {
  std::string name;
  int64_t gemm = 0;
  int64_t attention = 0;
};

struct FlopCount {
  std::vector<FlopTerm> terms;  // in model order; names are unique

  int64_t gemm() const;
  int64_t attention() const;
  int64_t total() const { return gemm() + attention(); }
  // Adds to the term `name` (created at the end when new).
  void add(const std::string& name, int64_t gemm, int64_t attention = 0);
  // Every term of `other` times `times`, added by name.
  void add(const FlopCount& other, int64_t times = 1);
};

// 2 * rows * in * out.
inline int64_t linear_flops(int64_t rows, int64_t in, int64_t out) { return 2 * rows * in * out; }
// 4 * batch * heads * tq * tk * head_dim.
inline int64_t attention_flops(int64_t batch, int64_t heads, int64_t tq, int64_t tk,
                               int64_t head_dim) {
  return 4 * batch * heads * tq * tk * head_dim;
}

// Token counts of one transformer call. A stream with 0 tokens is absent (its parts and the
// audio-video cross-attention are not counted).
struct TransformerTokens {
  int64_t batch = 1;
  int64_t video = 0;
  int64_t audio = 0;
  int64_t video_text = 0;  // video text-context length
  int64_t audio_text = 0;  // audio text-context length
};

// One LTXModel forward (velocity; the X0 conversion is elementwise). Terms: "video.patchify",
// "video.adaln", "video.prompt_adaln", "video.caption_projection", "video.av_adaln",
// "video.proj_out", the block terms "video.self_attn", "video.text_attn", "video.ff",
// "audio.*" likewise, "a2v_attn", "v2a_attn" (projections in `gemm`, the product in
// `attention`). AdaLN of per-token timesteps is counted per token, as the model computes it.
FlopCount transformer_flops(const models::transformer::LTXModelConfig& config,
                            const TransformerTokens& tokens);

// The conv video VAE decoder on one latent [B, C, F, H, W]: terms "conv_in", "up_blocks.<i>"
// (res_x, compress_*, attn), "conv_out". The timestep-conditioning embeddings (a few small
// per-sample GEMMs) are not counted.
FlopCount conv_decoder_flops(const models::video_vae::DecoderConfig& config, const Shape& latent);

// A tiled decode: the decoder on every tile's latent slice (prepare_tiles_for_decoding), so
// overlaps count as often as they are decoded. No config: one tile.
FlopCount tiled_decoder_flops(const models::video_vae::DecoderConfig& config, const Shape& latent,
                              const std::optional<models::tiling::TilingConfig>& tiling);

// Ceilings of the device the floor is computed for, in TFLOP/s.
struct Ceilings {
  double gemm_tflops = 790;       // dense bf16 GEMM (the H200 measurement)
  double attention_tflops = 690;  // fused attention (cuDNN on an H200)
};

// Milliseconds at the ceilings: gemm / gemm ceiling + attention / attention ceiling.
double floor_ms(const FlopCount& flops, const Ceilings& ceilings);

}  // namespace ltx::bench
