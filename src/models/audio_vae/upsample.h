#pragma once
// The audio VAE decoder's upsampling path (reference: model/audio_vae/upsample.py).
#include <optional>
#include <string>
#include <vector>

#include "models/audio_vae/attention.h"
#include "models/audio_vae/resnet.h"

namespace ltx::models::audio_vae {

// Nearest x2 on both axes -> CausalConv2d `.conv` -> drop the first element of the causal axis
// (height: first time row; width: first column; none / width-compatibility: nothing), so a causal
// time axis maps T -> 2T - 1.
struct Upsample {
  CausalityAxis axis = CausalityAxis::Height;
  CausalConv2d conv;

  static Upsample load(io::WeightMap& w, const std::string& name, int64_t channels,
                       CausalityAxis axis, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// One level `up.{l}`: num_res_blocks + 1 ResnetBlocks (each followed by an attention block when
// the level's resolution is in attn_resolutions) and an Upsample on every level but 0.
struct UpLevel {
  std::vector<ResnetBlock> block;
  std::vector<std::optional<AttnBlock>> attn;
  std::optional<Upsample> upsample;
};

// build_upsampling_path: levels[l] for l = 0 .. n-1 (run from n-1 down to 0), starting from
// `initial_channels`; `*block_out` = the channels of level 0's output.
std::vector<UpLevel> load_upsampling_path(io::WeightMap& w, const AudioVaeConfig& cfg,
                                          int64_t initial_channels, const nn::LoadOptions& opt,
                                          int64_t* block_out);

}  // namespace ltx::models::audio_vae
