#pragma once
// Retake (reference: ltx_pipelines/retake.py RetakePipeline, as its CLI builds it: distilled=True):
// regenerates the window [start_time, end_time) of a source clip and keeps the rest. One stage at
// the clip's size and frame count: the clip's frames -> video encoder (tiled with the default
// tile sizes) and its audio track (the first frames / fps seconds) -> audio encoder are the
// initial latents; TemporalRegionMask(start, end, fps) marks the tokens whose time span overlaps
// the window for regeneration (video, and audio when the clip has a track; without one the audio
// is generated from noise); the distilled sigmas, conditioned pass only (SimpleDenoiser), Euler.
#include "pipelines/pipeline.h"

namespace ltx::pipelines {

// The checks of a retake request's source (before any work), naming the flag to fix: a source is
// given, frames u8 [F, H, W, 3] with F = 8k + 1 and H, W positive multiples of 32,
// start_time >= 0, end_time > start_time, end_time <= F / frame_rate, an audio track with
// a sample rate > 0 and at least one sample; with `components`, the video encoder (and with an
// audio track the audio encoder) loaded. Callers check the clip alone (nullptr) before loading
// models.
void validate_retake_source(const GenerationRequest& request, const Components* components);

// `request` with height, width and num_frames set from its retake source's frames.
GenerationRequest with_retake_shape(const GenerationRequest& request);

// The pipeline on a validated request (run_pipeline validates first); contexts on c.device.
GenerationResult run_retake(const GenerationRequest& request, const Components& components,
                            const TextContexts& contexts, const ProgressCallback& progress);

}  // namespace ltx::pipelines
