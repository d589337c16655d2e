#pragma once
// The audio-to-video pipeline (reference: ltx_pipelines/a2vid_two_stage.py, A2VidPipelineTwoStage).
// Run it through run_pipeline(PipelineKind::A2Vid, ...); this header holds its entry points.
//
//   audio     the input waveform (GenerationRequest::input_audio, any rate) -> the encoder's
//             AudioProcessor (resampled to its rate, log-mel) -> audio VAE encoder -> latent, its
//             frames cut to AudioLatentShape.from_duration(num_frames / frame_rate)
//   stage 1   half size, LTX2Scheduler sigmas, guided Euler on the video (the video guider; the
//             audio guider the positive-only default); the audio latent frozen (noise scale 0,
//             denoise mask 0, sigma 0): the video is generated to the given sound
//   upsample  x2 in latent space
//   stage 2   full size, stage-2 distilled sigmas (distilled LoRA fused by the caller), the
//             conditioned pass only; the audio frozen again
//   result    the stage-2 video latent; the output audio is the input waveform itself (the
//             reference muxes it, not a decode of the latent)
//
// Images (--image) condition both stages as in the two-stage pipeline. Noise: one generator for
// stage-1 video, stage-1 audio, stage-2 video, stage-2 audio (the frozen audio's draws are made
// and unused, as the reference's).
#include <cstdint>

#include "core/tensor.h"
#include "pipelines/pipeline.h"

namespace ltx::pipelines {

// A2Vid's checks on top of validate_request's common ones (called by it): the input audio
// ([C, N] floating, N > 0, a positive rate) and the audio encoder are given, and the input has the
// encoder's channel count.
void validate_a2vid_request(const GenerationRequest& request, const Components& components);

// The input audio's latent as the pipeline conditions on it: encode_audio(input) on the encoder's
// device, cut to the video's duration, in `dtype` on the CPU. Throws (naming --audio-path) when the
// audio is shorter than the video needs.
Tensor encode_input_audio(const GenerationRequest& request, const models::audio_vae::AudioEncoder& encoder,
                          DType dtype);

// The pipeline; contexts on the transformer's device (run_pipeline moves them).
GenerationResult run_a2vid(const GenerationRequest& request, const Components& components,
                           const TextContexts& contexts, const ProgressCallback& progress = {});

}  // namespace ltx::pipelines
