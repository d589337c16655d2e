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
#include "models/video_vae/transformer/blocks.h"

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

// The LTX-2.5 diffusion video decoder (DiffusionVideoDecoder::tiled_decode) on one latent
// [B, C, F, H, W] with `tiling` (nullopt: one tile), counted as the decoder runs it:
//   - the latent padded to the stages' size floor, plus the trailing ghost frames through
//     stages 1-3 (once), stage 4 and stage 5 per tile on the tile's stage-4 slice (trailing tiles
//     with the ghost frames), stage 5 for every Euler step (default_num_inference_steps);
//   - an NA block on rows = B T H W tokens of width C: qkv (C -> 3C) and proj (C -> C) GEMMs, the
//     neighbourhood attention 4 * rows * window * C (= 4 * heads * queries * keys * head_dim), the
//     window Kt Kh Kw with each kernel side clamped to its axis length (NATTEN: whole axis when
//     shorter), and the SwiGLU w_gate, w_up (C -> hidden) and w_down (hidden -> C);
//   - upsamples: their linear on the input rows (C -> prod(stride) C / reduction);
//   - stage 5: conv_in_x_t (48 -> C5), per block context_proj (C_ctx -> C5) + attention + SwiGLU,
//     conv_out (C5 -> 48).
// Stage-5 attention in the W-chunked layout (`w_chunks` > 0, the pipelines' CHUNKED_EAGER): W is
// cut into w_chunks chunks of ceil(W / w_chunks) columns and each chunk's attention (qkv, the
// product and proj) runs on a slab of the chunk plus Kw / 2 halo columns per side, every slab
// column computed and the halo results dropped; the halo work is the separate term
// "stage5.attn_halo" (GEMM and attention of the halo columns), "stage5.attn" is the chunk cores.
// The window is clamped to the slab's width. FullVolume: one call over the volume, no halo.
// Terms: "conv_in", "stage<s>.attn", "stage<s>.mlp" (s = 1..4), "upsamples.<i>" (i = 0..3),
// "stage5.conv_in_x_t", "stage5.context_proj", "stage5.attn", "stage5.attn_halo", "stage5.mlp",
// "stage5.conv_out". Not counted: norms, RoPE, modulation, the timestep embedding and
// shared_adaln (a few per-sample GEMMs), the Euler updates, padding / slab copies and blending.
// `tiles` (optional) receives the number of tiles.
FlopCount diffusion_decoder_flops(
    const models::video_vae::DiffusionDecoderConfig& config, const Shape& latent,
    const std::optional<models::tiling::TilingConfig>& tiling,
    models::video_vae::Stage5Attention layout = models::video_vae::Stage5Attention::WChunked,
    int64_t w_chunks = 4, int64_t* tiles = nullptr);
// The NA window of one query: prod over axes of min(kernel, length).
int64_t na_window(const models::video_vae::Axis3& kernel, const models::video_vae::Axis3& volume);

// Ceilings of the device the floor is computed for, in TFLOP/s.
struct Ceilings {
  double gemm_tflops = 790;       // dense bf16 GEMM (the H200 measurement)
  double attention_tflops = 690;  // fused attention (cuDNN on an H200)
};

// Milliseconds at the ceilings: gemm / gemm ceiling + attention / attention ceiling.
double floor_ms(const FlopCount& flops, const Ceilings& ceilings);

}  // namespace ltx::bench
