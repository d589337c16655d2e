#pragma once
// The DubIt pipeline (reference: ltx_pipelines/dubit.py DubItPipeline), dubbing: a new video and
// speech for a prompt that keep a reference clip's motion and voice. Run it through
// run_pipeline(PipelineKind::DubIt, ...); this header holds its entry points and the audio
// reference helper.
//
//   shape     the frame count is the reference clip's, snapped down to 8k + 1; the frame rate is
//             the clip's; the size is the request's (two-stage: multiples of 64)
//   stage 1   half size, distilled sigmas, Euler, the DubIt IC-LoRA fused (by the caller, in both
//             stages); video: VideoConditionByReferenceLatent(the clip's frames at half size /
//             reference_downscale_factor, tiled-encoded, --reference-strength); audio: generated
//             from noise with the clip's whole encoded audio track appended as reference tokens at
//             negative times (AudioConditionByReferenceLatent, strength 1)
//   stage 2   x2 latent upsample, stage-2 distilled sigmas, Euler; video: the reference again at
//             full size / reference_downscale_factor; audio: stage 1's latent frozen, with stage 1's
//             audio appended as the reference tokens
//   result    the stage-2 video latent and the stage-1 audio latent
//
// Noise: one generator for stage-1 video, stage-1 audio, stage-2 video, stage-2 audio (the frozen
// audio's draws are made and unused, as the reference's).
#include <cstdint>
#include <utility>

#include "core/tensor.h"
#include "pipelines/pipeline.h"

namespace ltx::pipelines {

// The reference clip alone (validate_request calls it before the common checks, which see
// with_dubit_shape's frame count and rate): decoded u8 [F, H, W, 3] frames, a positive frame rate,
// an audio track ([C, N] floating, N > 0, a positive rate), a strength in [0, 1]. Errors name
// --reference-video / --reference-strength.
void validate_dubit_reference(const GenerationRequest& request);
// DubIt's checks on top of validate_request's common ones (called by it): no images, IC-LoRA
// reference videos, attention mask or skipped stage 2; audio on; the video and audio encoders; the
// track's channel count is the audio encoder's; the stage sizes fit the reference_downscale_factor;
// no reference_temporal_scale_factor (the reference's DubIt reads the downscale factor alone).
void validate_dubit_request(const GenerationRequest& request, const Components& components);

// The request with num_frames = the reference clip's frame count snapped down to 8k + 1
// (snap_frames_to_grid) and frame_rate = the clip's (unchanged without a decoded clip).
GenerationRequest with_dubit_shape(const GenerationRequest& request);

// patchify_dubit_audio_reference_latent(latent, negative_positions=true): audio latent
// [B, C, T, mel] -> tokens [B, T, C * mel] and their times f32 [B, 1, T, 2] in seconds (the audio
// patchifier's), shifted back by the last token's end time + 0.04 s so that every reference token
// lies before the generated audio's time 0.
std::pair<Tensor, Tensor> patchify_dubit_audio_reference_latent(const Tensor& latent);

// The pipeline; contexts on the transformer's device (run_pipeline moves them).
GenerationResult run_dubit(const GenerationRequest& request, const Components& components,
                           const TextContexts& contexts, const ProgressCallback& progress = {});

}  // namespace ltx::pipelines
