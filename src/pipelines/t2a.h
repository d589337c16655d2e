#pragma once
// The text-to-audio pipeline (reference: ltx_pipelines/t2a_one_stage.py, T2AOneStagePipeline). Run
// it through run_pipeline(PipelineKind::T2A, ...); this header holds its entry points.
//
//   one stage  audio only (no video state: the transformer's video stream is not run), the audio
//              latent for num_frames / frame_rate seconds, LTX2Scheduler sigmas (or the request's
//              stage-1 override), Euler, the audio guider (CFG / STG / rescale; modality guidance
//              off, as there is no video) with the negative prompt's audio context
//   result     GenerationResult::audio_latent (decode with the audio decoder + vocoder); no video
//
// The reference builds an audio-only transformer from the checkpoint; an audio-video model with no
// video state computes the same audio stream (the cross-modal layers only run with both streams).
// Noise: one generator seeded with the request's seed, one draw (the audio latent).
#include "pipelines/pipeline.h"

namespace ltx::pipelines {

// T2A's checks (validate_request calls it): num_frames 8k + 1, a positive frame rate, steps or a
// sigma override, no images, audio on, a transformer with an audio stream, the positive audio
// context (and the negative one when CFG is on).
void validate_t2a_request(const GenerationRequest& request, const Components& components,
                          const TextContexts* contexts = nullptr);

// The pipeline; contexts on the transformer's device (run_pipeline moves them).
GenerationResult run_t2a(const GenerationRequest& request, const Components& components, const TextContexts& contexts,
                         const ProgressCallback& progress = {});

}  // namespace ltx::pipelines
