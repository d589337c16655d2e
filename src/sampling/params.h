#pragma once
// Per-generation pipeline defaults (ltx_pipelines.utils.constants.PipelineParams) and the rules
// that pick them from a checkpoint's `model_version` metadata.
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/guiders.h"

namespace ltx::sampling {

struct PipelineParams {
  const char* name = "LTX_2_PARAMS";
  int64_t seed = 10;
  int64_t stage_1_height = 512;
  int64_t stage_1_width = 768;
  int64_t num_frames = 121;
  double frame_rate = 24.0;
  int64_t num_inference_steps = 40;
  int64_t default_image_crf = 33;  // H.264 CRF of the image-conditioning re-encode
  GuiderParams video_guider;
  GuiderParams audio_guider;

  int64_t stage_2_height() const { return stage_1_height * 2; }
  int64_t stage_2_width() const { return stage_1_width * 2; }
};

// LTX-2 (19B) and any model_version < 2.3 or unset: 40 steps, STG on block 29.
const PipelineParams& ltx_2_params();
// 2.3 <= model_version < 2.4: 30 steps, STG on block 28.
const PipelineParams& ltx_2_3_params();
// model_version >= 2.4 (2.5 included): as 2.3 with image CRF 18.
const PipelineParams& ltx_2_4_params();
// The HQ (res_2s) two-stage preset: 15 steps, 1088x1920, STG off, rescale 0.45 / 1.0.
const PipelineParams& ltx_2_3_hq_params();

// The reference's model_version parsing: '-' counts as '.', numeric parts up to the first
// non-numeric one ("2.3.rc1" -> {2, 3}, "" -> {}). Compared lexicographically like Python tuples.
using ModelVersion = std::vector<int>;
ModelVersion parse_model_version(const std::string& model_version);
bool version_at_least(const ModelVersion& version, const ModelVersion& since);

// detect_params: the newest generation the version is at or above (>= 2.4, >= 2.3), else LTX-2.
const PipelineParams& detect_params(const std::string& model_version);

// The distilled pipeline samples stage 1 with the ancestral Euler sampler from this version on.
inline const ModelVersion kAncestralSamplerSinceVersion = {2, 5};
inline constexpr double kAncestralEta = 1.0;
inline constexpr double kAncestralSNoise = 1.0;
inline constexpr int64_t kAncestralNoiseSeedOffset = 10000;  // its generator seed = seed + offset
bool use_ancestral_sampler(const std::string& model_version);

// res_2s loop defaults: step-noise seed (the pipelines never pass one) and the substep offset.
inline constexpr int64_t kRes2sDefaultNoiseSeed = -1;
inline constexpr int64_t kRes2sSubstepSeedOffset = 10000;

}  // namespace ltx::sampling
