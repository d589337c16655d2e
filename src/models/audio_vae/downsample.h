#pragma once
// The audio VAE encoder's downsampling path (reference: model/audio_vae/downsample.py).
#include <optional>
#include <string>
#include <vector>

#include "models/audio_vae/attention.h"
#include "models/audio_vae/resnet.h"

namespace ltx::models::audio_vae {

// Halves both axes: zero-pad (by the causality axis: none (0,1,0,1), width (2,0,0,1), height
// (0,1,2,0), width-compatibility (1,0,0,1) in F.pad order) then a 3x3 stride-2 Conv2d `.conv`;
// or, without a conv (only allowed without causality), a 2x2 average pool.
struct Downsample {
  bool with_conv = true;
  CausalityAxis axis = CausalityAxis::Height;
  Conv2d conv;

  static Downsample load(io::WeightMap& w, const std::string& name, int64_t channels,
                         bool with_conv, CausalityAxis axis, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// make_attn: a vanilla AttnBlock, nothing for "none" (an identity), an error for "linear".
std::optional<AttnBlock> make_attn(io::WeightMap& w, const std::string& name, int64_t channels,
                                   AttentionType type, NormType norm, const nn::LoadOptions& opt);

// One level `down.{l}`: num_res_blocks ResnetBlocks (each followed by an attention block when the
// level's resolution is in attn_resolutions) and a Downsample on every level but the last.
struct DownLevel {
  std::vector<ResnetBlock> block;
  std::vector<std::optional<AttnBlock>> attn;  // empty, or one per block (nullopt = identity)
  std::optional<Downsample> downsample;
};

// build_downsampling_path: levels for ch * ch_mult[l]; `*block_out` = the last level's channels.
std::vector<DownLevel> load_downsampling_path(io::WeightMap& w, const AudioVaeConfig& cfg,
                                              const nn::LoadOptions& opt, int64_t* block_out);

}  // namespace ltx::models::audio_vae
