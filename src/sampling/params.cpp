#include "sampling/params.h"

#include "io/checkpoint.h"

namespace ltx::sampling {
namespace {

GuiderParams guider(double cfg, double stg, std::vector<int> blocks, double rescale, double modality) {
  GuiderParams p;
  p.cfg_scale = cfg;
  p.stg_scale = stg;
  p.stg_blocks = std::move(blocks);
  p.rescale_scale = rescale;
  p.modality_scale = modality;
  p.skip_step = 0;
  return p;
}

}  // namespace

const PipelineParams& ltx_2_params() {
  static const PipelineParams p = [] {
    PipelineParams q;
    q.name = "LTX_2_PARAMS";
    q.video_guider = guider(3.0, 1.0, {29}, 0.7, 3.0);
    q.audio_guider = guider(7.0, 1.0, {29}, 0.7, 3.0);
    return q;
  }();
  return p;
}

const PipelineParams& ltx_2_3_params() {
  static const PipelineParams p = [] {
    PipelineParams q = ltx_2_params();
    q.name = "LTX_2_3_PARAMS";
    q.num_inference_steps = 30;
    q.video_guider.stg_blocks = {28};
    q.audio_guider.stg_blocks = {28};
    return q;
  }();
  return p;
}

const PipelineParams& ltx_2_4_params() {
  static const PipelineParams p = [] {
    PipelineParams q = ltx_2_3_params();
    q.name = "LTX_2_4_PARAMS";
    q.default_image_crf = 18;
    return q;
  }();
  return p;
}

const PipelineParams& ltx_2_3_hq_params() {
  static const PipelineParams p = [] {
    PipelineParams q;
    q.name = "LTX_2_3_HQ_PARAMS";
    q.num_inference_steps = 15;
    q.stage_1_height = 1088 / 2;
    q.stage_1_width = 1920 / 2;
    q.video_guider = guider(3.0, 0.0, {}, 0.45, 3.0);
    q.audio_guider = guider(7.0, 0.0, {}, 1.0, 3.0);
    return q;
  }();
  return p;
}

ModelVersion parse_model_version(const std::string& model_version) {
  return io::parse_model_version(model_version);
}

bool version_at_least(const ModelVersion& version, const ModelVersion& since) {
  // Python tuple comparison: lexicographic, a proper prefix is smaller.
  return !std::lexicographical_compare(version.begin(), version.end(), since.begin(), since.end());
}

const PipelineParams& detect_params(const std::string& model_version) {
  const ModelVersion v = parse_model_version(model_version);
  if (version_at_least(v, {2, 4})) return ltx_2_4_params();
  if (version_at_least(v, {2, 3})) return ltx_2_3_params();
  return ltx_2_params();
}

bool use_ancestral_sampler(const std::string& model_version) {
  return version_at_least(parse_model_version(model_version), kAncestralSamplerSinceVersion);
}

}  // namespace ltx::sampling
