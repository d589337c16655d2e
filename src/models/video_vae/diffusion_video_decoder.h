#pragma once
// The diffusion video decoder of LTX-2.5 (reference: model/video_vae/diffusion_video_decoder.py,
// the port of NADiffusionDecoder; docs/DIFFUSION_DECODER.md).
//
//   auto dec = DiffusionVideoDecoder::from_file("ltx-2.5-video-vae.safetensors");
//   sampling::TorchCpuGenerator gen(seed);
//   auto noise = [&](const Shape& s) { return gen.randn(s); };
//   Tensor pixels = dec(latent, noise);                          // [B, 3, F, H, W], [-1, 1] scale
//   dec.decode_video(latent, tiling, noise, [](const Tensor& frames) { ... });  // [f, H, W, 3]
//
// Stages 1-3 upsample the latent deterministically (NA transformer blocks + pixel-shuffle
// upsamples), stage 4 does it once more per tile, and stage 5 denoises patchified pixel-space
// noise guided by the stage-4 context with AdaLN-modulated NA blocks, in the file's number of
// Euler steps (1 step with an x0 output on the 2.5 file). Everything runs channels-last
// [B, T, H, W, C]. The latent is first padded to the stages' size floor, the last latent frame is
// replicated (K_t / 2) * 2 times through stages 1-4 (cropped before stage 5), and the pixels are
// cropped back to 8 (T - 1) + 1 frames x 32 H x 32 W.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/tiling.h"
#include "models/transformer/timestep_embedding.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/diffusion_tiling.h"
#include "models/video_vae/model_configurator.h"
#include "models/video_vae/ops.h"
#include "models/video_vae/transformer/blocks.h"
#include "models/video_vae/transformer/layers.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

// The reference's DiffVAE modes, as far as the numbers go: the pipelines' default CHUNKED_EAGER
// (W-chunked stage-5 attention with 4 chunks and replicated W edges, stage 4 cropped before its
// upsample) or COMBINED_* (full-volume stage-5 attention, stage 4 cropped after its upsample).
struct DiffusionDecodeOptions {
  Stage5Attention layout = Stage5Attention::WChunked;
  int64_t w_chunks = 4;
  // Replay: the full work-canvas draw [B, 3, F, H, W] (of the padded latent) to start from
  // instead of drawing; every tile starts from its slice (resized to its canvas: T repeat last,
  // H / W symmetric), as the multi-step path does with its one draw. Undefined: draw.
  Tensor initial_noise;
  // Intermediates (untiled decode): s0.conv_in, s{1,2,3}.blocks_out, s{1,2,3}.upsample_out,
  // feat_s4, s4.out, na.{x,q,k,v,out,y} (stage 2 block 0), and per step i: s5.x_in.step<i>,
  // s5.timestep_scaled.step<i>, s5.t_emb.step<i>, s5.modulation.step<i> ([B, 7, C5]).
  Probe probe;
};

class DiffusionVideoDecoder {
 public:
  // Binds every parameter from `w` (names after diffusion_decoder_key_map() and the load-time
  // folds); call w.finish() afterwards.
  static DiffusionVideoDecoder load(io::WeightMap& w, const DiffusionDecoderConfig& config,
                                    const nn::LoadOptions& opt = {});
  // Opens a diffusion VAE file (split `vae` file or a checkpoint with `vae.decoder.*`): config
  // from its metadata, weights through diffusion_decoder_key_map(); legacy static gates
  // (`*.gate_{msa,mlp,ctx}`) are folded into attn.proj / mlp.w_down / context_proj (in f32 from
  // the stored values, rounded back to the stored dtype, as the reference) and dropped, as are
  // `coarse_*` and `type_emb`; every other decoder tensor must be used.
  static DiffusionVideoDecoder from_file(const std::string& path, const nn::LoadOptions& opt = {});
  // The load-time folds of a decoder weight map (gates into the linears, dropped names ignored).
  static void fold_legacy_gates(io::WeightMap& w);

  const DiffusionDecoderConfig& config() const { return config_; }
  tiling::ScaleFactors video_downscale_factors() const { return {8, 32, 32}; }
  // [B, out_channels, 8 (F - 1) + 1, 32 H, 32 W] for a latent [B, C, F, H, W].
  Shape output_shape(const Shape& latent) const;
  // torch.linspace(1, 1 / N, N) in f32, N = default_num_inference_steps.
  std::vector<float> inference_timesteps() const;
  // Latent size floor, stage-4 tile floor and tile halos (stage 4, stage 5) on the stage-4 grid.
  const Axis3& stage_min_tile_sizes() const { return stage_min_tile_sizes_; }
  const Axis3& tile_min_sizes() const { return tile_min_sizes_; }
  const std::pair<Axis3, Axis3>& tile_halos() const { return tile_halos_; }
  // Latent frames replicated after the last one through stages 1-4: (K_t of stage 1 / 2) * 2.
  int64_t trailing_ghost_frames() const { return (config_.stage_kernels[0][0] / 2) * 2; }

  // latent [B, C, F, H, W] (normalised) -> pixels [B, 3, 8 (F - 1) + 1, 32 H, 32 W], [-1, 1]
  // scale, not clamped (the reference's forward: one tile). `noise(shape)` draws standard normal
  // noise (the pipeline's generator): once per tile with the stage-5 canvas shape for a 1-step x0
  // decoder, once for the whole work canvas otherwise; not called when options.initial_noise is
  // given.
  Tensor operator()(const Tensor& latent, const NoiseFn& noise,
                    const DiffusionDecodeOptions& options = {}) const;
  // Stages 1-3 run once, stages 4-5 per tile of `config` (pixel / frame sizes on the stage-4
  // grid, overlaps >= the halos: tiling errors name the floor); chunks [B, 3, f, H, W] are handed
  // over in temporal order as soon as no later tile touches them. No config: one tile.
  void tiled_decode(const Tensor& latent, const std::optional<tiling::TilingConfig>& config,
                    const NoiseFn& noise, const ChunkFn& on_chunk,
                    const DiffusionDecodeOptions& options = {}) const;
  Tensor tiled_decode_all(const Tensor& latent, const std::optional<tiling::TilingConfig>& config,
                          const NoiseFn& noise, const DiffusionDecodeOptions& options = {},
                          std::vector<int64_t>* chunk_frames = nullptr) const;
  // The pipelines' decode_video: sample 0 as [f, H, W, C] chunks in [0, 1] ((x + 1) / 2, clamped).
  void decode_video(const Tensor& latent, const std::optional<tiling::TilingConfig>& config,
                    const NoiseFn& noise, const ChunkFn& on_chunk,
                    const DiffusionDecodeOptions& options = {}) const;

  // ---- the stages (channels-last), for tests and parity ----
  // Un-normalise, conv_in, stages 1-3 (each upsample drops the duplicate leading frame).
  Tensor forward_stages_1_to_3(const Tensor& latent, const Probe& probe = {}) const;
  // Stage 4 on a stage-4 feature tile -> the stage-5 context [B, F5, H5, W5, C_ctx] (after
  // upsamples[3]), the trailing ghost frames cropped when `pad_trailing`; `stage4_out` receives
  // the blocks' output (cropped for the W-chunked layout, which crops before the upsample).
  Tensor forward_stage_4(const Tensor& feat, bool drop_leading_frame, bool pad_trailing,
                         Stage5Attention layout, Tensor* stage4_out = nullptr) const;
  // The shared AdaLN chunks [B, 7, C5] at diffusion time t [B] (before the scale multiplier);
  // t_emb (and the scaled timesteps) optionally returned.
  Tensor modulation(const Tensor& t, Tensor* t_emb = nullptr, Tensor* scaled = nullptr) const;
  // One stage-5 model call: x_t [B, 3, F, H, W] pixels -> the model output (x0 or v) [B, 3, F,
  // H, W] given the context and t [B]. rope: the blocks' RoPE tables for this canvas
  // (DiffusionNABlock::rope_tables, the same for every step of a tile) or null (built here).
  // x_t is taken by value: a caller that moves it in lets it go before the blocks run.
  Tensor forward_diff_step(Tensor x_t, const Tensor& context, const Tensor& t,
                           const DiffusionDecodeOptions& options, int step = -1,
                           const std::vector<AbsRope3d>* rope = nullptr) const;

 private:
  DiffusionDecoderConfig config_;
  PerChannelStatistics stats_;
  nn::Linear conv_in_;
  std::vector<std::vector<NABlock>> det_stages_;  // 4 stages (the 4th is stage 4)
  std::vector<LinearPixelShuffleUpsample> upsamples_;
  transformer::PixArtAlphaCombinedTimestepSizeEmbeddings t_embedder_;
  nn::Linear conv_in_x_t_;
  nn::Linear shared_adaln_;
  std::vector<DiffusionNABlock> diff_blocks_;
  Tensor norm_out_;
  nn::Linear conv_out_;
  Axis3 stage_min_tile_sizes_{}, tile_min_sizes_{};
  std::pair<Axis3, Axis3> tile_halos_;

  Tensor decode_one_tile(const Tensor& feat_tile, Tensor x_t_init, bool is_origin,
                         bool pad_trailing, const DiffusionDecodeOptions& options) const;
};

}  // namespace ltx::models::video_vae
