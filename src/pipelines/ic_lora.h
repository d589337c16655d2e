#pragma once
// The IC-LoRA pipeline (reference: ltx_pipelines/ic_lora.py ICLoraPipeline; iclora_utils.py), video-to-
// video control with an in-context LoRA (depth, pose, edges, union control, ...). Run it through
// run_pipeline(PipelineKind::IcLora, ...); this header holds its entry points and the reference-video
// helpers it is built from (shared with other pipelines that append reference videos).
//
//   stage 1  half size, distilled sigmas, Euler, the IC-LoRA fused (Components::stage_transformer,
//            Stage::One); conditionings: the images, then per reference video
//            VideoConditionByReferenceLatent(encoded video at half size / reference_downscale_factor),
//            wrapped in an AttentionStrengthWrapper when the attention strength is < 1 or a mask is given
//   stage 2  (unless skip_stage_2) x2 latent upsample, stage-2 distilled sigmas, Euler, the base
//            weights (no LoRA, Stage::Two), the images at full size, no reference; its audio ships
//
// Noise: one generator for stage-1 video, stage-1 audio, stage-2 video, stage-2 audio.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/tiling.h"
#include "pipelines/pipeline.h"
#include "sampling/conditioning.h"

namespace ltx::pipelines {

// IC-LoRA checks on top of validate_request's common ones (called by it): at least one reference
// video with u8 [F, H, W, 3] frames and a strength in [0, 1]; an attention strength in [0, 1]; a
// mask f32 [1, 1, F, H, W] in [0, 1]; positive scale factors; stage 1's size divisible by the
// downscale factor; the video encoder.
void validate_ic_lora_request(const GenerationRequest& request, const Components& components);

// The pipeline (run_pipeline calls it after validate_request).
GenerationResult run_ic_lora(const GenerationRequest& request, const Components& components,
                             const TextContexts& contexts, const ProgressCallback& progress = {});

namespace ic_lora {

// The metadata an IC-LoRA file carries about its training references (safetensors metadata keys
// "reference_downscale_factor", "reference_temporal_scale_factor"): target / reference ratios.
struct ReferenceScaleFactors {
  int64_t downscale = 1;
  int64_t temporal = 1;
};
// A positive integer metadata value of a LoRA file, or `fallback` when the key is absent; throws
// ltx::Error naming the file and the key when the value is not a positive integer.
int64_t read_lora_factor(const std::string& lora_path, const std::string& key, int64_t fallback);
// Both factors of one file (1 when absent, as the reference).
ReferenceScaleFactors read_reference_scale_factors(const std::string& lora_path);
// The factors of a LoRA set (ICLoraPipeline.__init__): a factor != 1 wins over 1; two files with
// different factors != 1 are refused (the error names both). `flag` names the option in errors.
ReferenceScaleFactors combine_reference_scale_factors(const std::vector<std::string>& lora_paths,
                                                      const std::string& flag = "--lora");

// downsample_mask_video_to_latent: mask [B, 1, F, H, W] (f32, or bf16 with each step rounded to bf16
// as the reference's ops on a bf16 mask) -> per-token weights f32 [B, F' * h * w]
// for a latent of `frames` x `height` x `width`: area-averaged to h x w per frame; in time the first
// frame alone, then the mean of each group of (F - 1) / (F' - 1) frames (F - 1 must be a multiple of
// F' - 1); just the first frame when F or F' is 1.
Tensor downsample_mask_to_latent(const Tensor& mask, int64_t frames, int64_t height, int64_t width);

// temporal_subsample: video [B, C, F, H, W] -> frames 0, 1, 1 + s, 1 + 2s, ... (s = factor).
Tensor temporal_subsample(const Tensor& video, int64_t factor);

// A reference video ready for the encoder (video_preprocess): each of the first `max_frames` frames
// of u8 [F, H, W, 3] resized and center-cropped to height x width, mapped to [-1, 1] through
// `dtype`: [1, 3, F', height, width] in `dtype`. An EXR folder's f32 frames take the HDR path
// instead (load_exr_folder_conditioning_hdr: reflect-pad fit, the `hdr` colour space into the
// working space), which needs `hdr`.
Tensor preprocess_reference_video(const Tensor& frames, int64_t height, int64_t width, int64_t max_frames,
                                  DType dtype, std::optional<media::HdrColorSpace> hdr = std::nullopt);

// The mask an --conditioning-attention-mask clip gives (ic_lora._load_mask_video): the first
// `max_frames` frames resized and center-cropped to height x width, [-1, 1] in bf16, the channel
// mean, (m + 1) / 2 clamped to [0, 1]: bf16 [1, 1, F', height, width].
Tensor mask_from_frames(const Tensor& frames, int64_t height, int64_t width, int64_t max_frames);

// append_ic_lora_reference_video_conditionings: for each reference video, preprocessed at
// (height / downscale) x (width / downscale), temporally subsampled, encoded on `device`, a
// VideoConditionByReferenceLatent(latent, downscale, temporal, strength), wrapped with the attention
// weights: the downsampled mask x attention_strength when a mask is given, else attention_strength
// when < 1, else none. Latents in `dtype` on the CPU; encoded in one pass, or tiled when
// encode_tiling is set (DubIt's TileSizeConfig default). Throws when height or width is not
// divisible by the downscale factor.
struct ReferenceVideoOptions {
  int64_t height = 0, width = 0, num_frames = 0;  // the target (stage) size
  ReferenceScaleFactors factors;
  double attention_strength = 1.0;
  Tensor attention_mask;  // optional f32 [B, 1, F, H, W]
  DType dtype = DType::F32;
  Device device = Device::cpu();
  std::optional<models::tiling::TilingConfig> encode_tiling;
  std::optional<media::HdrColorSpace> hdr;  // --hdr: the colour space of EXR reference frames
};
void append_reference_video_conditionings(sampling::ConditioningItems& items,
                                          const std::vector<VideoConditioning>& videos,
                                          const models::video_vae::VideoEncoder& encoder,
                                          const ReferenceVideoOptions& options);

}  // namespace ic_lora
}  // namespace ltx::pipelines
