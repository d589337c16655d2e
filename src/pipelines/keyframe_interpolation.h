#pragma once
// Keyframe interpolation (reference: ltx_pipelines/keyframe_interpolation.py
// KeyframeInterpolationPipeline): the two-stage pipeline with every image, the one at frame 0
// included, appended as guiding keyframe tokens at its pixel frame
// (helpers.image_conditionings_by_adding_guiding_latent) instead of replacing latent frame 0.
// Stage 1: guided Euler at half size (the guider factories of the request's guider params);
// x2 spatial upsample; stage 2: the distilled-LoRA model, conditioned pass only, which refines the
// audio too and keeps it (TwoStage keeps stage 1's audio).
#include <vector>

#include "pipelines/pipeline.h"
#include "pipelines/stages.h"
#include "sampling/conditioning.h"

namespace ltx::pipelines {

// image_conditionings_by_adding_guiding_latent at one stage's size: each image resized + center
// cropped to height x width, [-1, 1] through `dtype`, encoded on `device`, latent in `dtype` on the
// CPU -> VideoConditionByKeyframeIndex(latent, frame, strength), frame 0 too.
sampling::ConditioningItems keyframe_conditionings(const std::vector<PreparedImage>& images, int64_t height,
                                                   int64_t width, const models::video_vae::VideoEncoder& encoder,
                                                   DType dtype, Device device = Device::cpu());

// The pipeline on a validated request (run_pipeline validates first); contexts on c.device.
GenerationResult run_keyframe_interpolation(const GenerationRequest& request, const Components& components,
                                            const TextContexts& contexts, const ProgressCallback& progress);

}  // namespace ltx::pipelines
