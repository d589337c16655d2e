#pragma once
// The DFR pipeline (reference: ltx_pipelines/dfr_pipeline.py, "Diffusion Fidelity Rendering"), for
// LTX-2.5 checkpoints with the keyframe absolute-position embedding. Run it through
// run_pipeline(PipelineKind::Dfr, ...); this header holds its entry points and the helpers it is
// built from (exposed for tests).
//
//   stage 1  half size, distilled sigmas, Euler; the canvas padded to a 24/32-frame segment grid
//            (dfr_layout.h) with a generated keyframe slot at every segment end
//   upsample the half-size video and its keyframes x2 in latent space (the half-size video is kept
//            as the detailing IC-LoRA's reference)
//   stage 2  full size, stage-2 distilled sigmas, Euler, slots seeded with the upsampled keyframes,
//            + VideoConditionByReferenceLatent(half-size video) when a detailing LoRA is fused
//   rounds   0-2 temporal x2 rounds: temporal upsample, 2^round keyframe-seam tiles (each: tile-local
//            images, the carried keyframes as anchors at strength 0.95, fresh mid-segment slots,
//            distilled sigmas [4:], ancestral Euler eta 0.5 seeded seed + 1000 * round + tile,
//            conditioning fps capped at 60), stitched; the keyframes carry to the next round
//   trim     to (num_frames - 1) * 2^rounds + 1 frames at frame_rate * 2^rounds; audio = stage 1's,
//            cut to the video's duration after decoding (GenerationResult::audio_max_seconds)
//
// Models per stage come from Components::stage_transformer: Stage::One and Stage::Temporal = base +
// distilled LoRA, Stage::Two = + the detailing IC-LoRA (when GenerationRequest::detailing_lora_strength
// is set). Noise: one generator for stage-1 video, stage-1 audio, stage-2 video, stage-2 audio,
// then each tile's initial noise in order; the tiles' ancestral noise from their own generators.
#include <cstdint>
#include <string>
#include <vector>

#include "models/lora/lora.h"
#include "pipelines/dfr_layout.h"
#include "pipelines/pipeline.h"
#include "pipelines/stages.h"
#include "sampling/conditioning.h"
#include "sampling/schedulers.h"

namespace ltx::pipelines {

// DFR's checks on top of validate_request's common ones (called by it): temporal_upsample_rounds
// in {0, 1, 2}; rounds > 0 need a temporal (time-only) upsampler; no generated-keyframe request
// (DFR places its own slots); num_frames >= 9; a positive detailing downscale factor; a
// transformer with the keyframe embedding (when given as Components::transformer).
void validate_dfr_request(const GenerationRequest& request, const Components& components);

// The pipeline (run_pipeline calls it after validate_request).
GenerationResult run_dfr(const GenerationRequest& request, const Components& components,
                         const TextContexts& contexts, const ProgressCallback& progress = {});

namespace dfr {

// Anchor keyframes carried between temporal rounds: just short of clean, so a tile can still
// settle its seam frame.
inline constexpr double kAnchorKeyframeStrength = 0.95;
inline constexpr double kTemporalAncestralEta = 0.5;
// RoPE time is pixel_frame / fps: above ~60 fps the model cannot lay out 8 pixel frames in one
// latent, so the rounds condition at min(fps, 60); the playback rate is only for decoding.
inline constexpr double kMaxConditioningFps = 60.0;
// Ancestral seed of tile t in round r: seed + kRoundSeedStride * r + t (tiles are positionally
// identical, a shared seed would inject the same noise into each).
inline constexpr int64_t kRoundSeedStride = 1000;

// The temporal rounds' sigmas: the distilled list from index 4 on.
sampling::Sigmas temporal_sigmas();

// The detailing IC-LoRA's target / reference size ratio: the safetensors metadata key
// "reference_downscale_factor" of the LoRA file when present, else 2 (x2 spatial detailing).
int64_t read_detailing_downscale_factor(const std::string& lora_path);

// The LoRAs a DFR stage's transformer fuses, in the reference's order (the order matters at the bit
// level, see lora/fuse.h): Stage::One and Stage::Temporal = user + distilled; Stage::Two = user +
// distilled + detailing. For Components::stage_transformer (e.g. with lora::Fuser::apply).
lora::LoraSet stage_loras(Stage stage, const lora::LoraSet& user, const lora::LoraSet& distilled,
                          const lora::LoraSet& detailing);

// (num_frames - 1) * 2^rounds + 1.
int64_t output_num_frames(int64_t num_frames, int64_t rounds);

// The images a tile re-attaches: all of them on a tile starting at frame 0, else those with
// pixel_start <= frame <= pixel_end, moved to tile-local frames (frame 0 of a tile is the tile's
// first frame; re-pinning the opening image there would pin the wrong frame onto the seam).
// As in the reference, image frames stay on the base frame grid in every round.
std::vector<PreparedImage> tile_images(const std::vector<PreparedImage>& images, const TileRange& tile);

// VideoConditionByKeyframeIndex per keyframe of `keyframes` [B, C, K, H, W] at `positions` (K of them).
sampling::ConditioningItems keyframe_conditionings_from_latents(const Tensor& keyframes,
                                                                const std::vector<int64_t>& positions,
                                                                double strength);

// Slot seeds [B, C, K, H, W]: for each position the video latent frame round(position / scale),
// clamped to the latent's frames.
Tensor slot_initials_from_video(const Tensor& video_latent, const std::vector<int64_t>& positions,
                                int64_t temporal_scale = 8);

struct KeyframeBag {
  std::vector<int64_t> positions;  // sorted
  Tensor latents;                  // [B, C, K, H, W] in that order
};
// The next round's anchors: the carried keyframes plus this round's slots (a slot wins a shared
// position). Latents may be undefined only with no positions; throws when the bag is empty.
KeyframeBag merge_carry_forward_keyframes(const std::vector<int64_t>& anchor_positions, const Tensor& anchor_latents,
                                          const std::vector<int64_t>& slot_positions, const Tensor& slot_latents);

}  // namespace dfr
}  // namespace ltx::pipelines
