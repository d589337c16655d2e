#pragma once
// Latent shapes, the patchified latent state the samplers work on, patchifiers and position
// grids (ltx_core.types, ltx_core.components.patchifiers, ltx_core.tools).
//
// A LatentState holds PATCHIFIED tensors: latent / clean_latent [B, T, C] (the model dtype),
// denoise_mask [B, T, 1] f32 (1 = generate, 0 = keep clean), positions f32 ([B, 3, T, 2] video:
// [start, end) per (time in seconds, y, x in pixels); [B, 1, T, 2] audio: seconds). Video tokens
// are ordered (f, h, w) row-major; conditioning items append tokens at the end.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ltx::sampling {

struct VideoPixelShape {
  int64_t batch = 1;
  int64_t frames = 121;
  int64_t height = 512;
  int64_t width = 768;
  double fps = 24.0;
};

// Pixel -> latent downscaling per axis (time, height, width); 8 x 32 x 32 for every LTX-2 VAE.
struct SpatioTemporalScaleFactors {
  int64_t time = 8;
  int64_t height = 32;
  int64_t width = 32;
  bool operator==(const SpatioTemporalScaleFactors&) const = default;
};

struct VideoLatentShape {
  int64_t batch = 1;
  int64_t channels = 128;
  int64_t frames = 1;
  int64_t height = 1;
  int64_t width = 1;

  Shape shape() const { return {batch, channels, frames, height, width}; }
  int64_t token_count() const { return frames * height * width; }
  VideoLatentShape mask_shape() const { return {batch, 1, frames, height, width}; }
  VideoLatentShape with_frames(int64_t f) const { return {batch, channels, f, height, width}; }
  // frames (F - 1) / 8 + 1, height H / 32, width W / 32.
  static VideoLatentShape from_pixel_shape(const VideoPixelShape& pixel, int64_t latent_channels = 128,
                                           const SpatioTemporalScaleFactors& scale = {});
  static VideoLatentShape from_shape(const Shape& s);  // a [B, C, F, H, W] shape
  // The pixel shape this latent decodes to: frames (F - 1) * 8 + 1, channels 3.
  VideoLatentShape upscale(const SpatioTemporalScaleFactors& scale = {}) const;
  std::string str() const;
};

struct AudioLatentShape {
  int64_t batch = 1;
  int64_t channels = 8;
  int64_t frames = 1;
  int64_t mel_bins = 16;

  Shape shape() const { return {batch, channels, frames, mel_bins}; }
  int64_t token_count() const { return frames; }
  AudioLatentShape mask_shape() const { return {batch, 1, frames, 1}; }
  // frames = round-half-even(duration * 16000 / 160 / 4).
  static AudioLatentShape from_duration(int64_t batch, double duration, int64_t channels = 8,
                                        int64_t mel_bins = 16, int64_t sample_rate = 16000,
                                        int64_t hop_length = 160, int64_t latent_downsample = 4);
  static AudioLatentShape from_video_pixel_shape(const VideoPixelShape& pixel, int64_t channels = 8,
                                                 int64_t mel_bins = 16);
  static AudioLatentShape from_shape(const Shape& s);  // a [B, C, T, F] shape
  std::string str() const;
};

// Where generated keyframe slots sit in the token sequence (LTX-2.5 keyframe generation).
struct GeneratedKeyframeLayout {
  std::vector<int64_t> pixel_frame_indices;
  int64_t tokens_per_keyframe = 0;
  int64_t first_token = 0;
  int64_t num_keyframes() const { return static_cast<int64_t>(pixel_frame_indices.size()); }
  int64_t num_tokens() const { return num_keyframes() * tokens_per_keyframe; }
};

// A run of tokens whose denoise-mask values are bit-equal, in token order.
struct MaskRun {
  float value = 0.f;
  int64_t length = 0;
  bool operator==(const MaskRun&) const = default;
};
using MaskRuns = std::vector<MaskRun>;  // one sample's mask, run by run (lengths sum to T)

// A sample's mask is described by runs when it has at most this many (an image at frame 0: two; a
// few keyframes: a few more); beyond it the per-token forms are used.
inline constexpr size_t kMaxMaskRuns = 8;

// Host facts about one denoise mask, so that a step on a GPU needs no device read: per sample its
// values as runs (empty: more than kMaxMaskRuns of them). They describe `mask`, the exact view they
// were read from; a state whose denoise_mask is another tensor ignores them (masks are not written
// in place once a state is made: conditioning writes into clones).
struct MaskLevels {
  Tensor mask;
  std::vector<MaskRuns> runs;
};

struct LatentState {
  Tensor latent;          // [B, T, C]
  Tensor denoise_mask;    // [B, T, 1] f32
  Tensor positions;       // [B, n_axes, T, 2] f32
  Tensor clean_latent;    // [B, T, C]
  Tensor attention_mask;  // optional [B, T, T] in [0, 1] (undefined = full attention)
  Tensor keyframes_mask;  // optional [B, T, 1]: tokens encoding a single pixel frame
  std::optional<GeneratedKeyframeLayout> generated_keyframe_layout;
  Tensor generated_keyframes;  // optional [B, C, K, H, W], filled by clear_conditioning
  bool frozen = false;         // held fixed: mask all zeros and the modality's sigma forced to 0
  // Set by to() when the mask leaves the host, kept by with_latent() and clone(); see MaskLevels.
  std::shared_ptr<const MaskLevels> mask_levels;

  int64_t batch() const { return latent.size(0); }
  int64_t tokens() const { return latent.size(1); }
  LatentState clone() const;  // deep copy of every tensor
  // Every tensor moved to `device` (tensors already there are shared, not copied).
  LatentState to(Device device) const;
  // Same state with `new_latent` as the latent.
  LatentState with_latent(const Tensor& new_latent) const;
};

// ---- patchifiers (patch size 1 in every pipeline) ----
// b c (f 1) (h p) (w p) -> b (f h w) (c p p).
Tensor patchify_video(const Tensor& latent, int64_t patch_size = 1);
// b (f h w) (c p q) -> b c f (h p) (w q) for the given (unpatchified) output shape.
Tensor unpatchify_video(const Tensor& tokens, const VideoLatentShape& shape, int64_t patch_size = 1);
// b c t f -> b t (c f).
Tensor patchify_audio(const Tensor& latent);
Tensor unpatchify_audio(const Tensor& tokens, const AudioLatentShape& shape);

// Latent-grid bounds [start, end) per token, i64 [B, 3, T, 2] on (frame, y, x).
Tensor video_patch_grid_bounds(const VideoLatentShape& shape, int64_t patch_size = 1);
// Latent bounds -> pixel bounds (i64): times the scale factors; with causal_fix the time axis is
// shifted by 1 - time_scale and clamped at 0 (the causal VAE's first frame covers one pixel frame).
Tensor pixel_coords(const Tensor& latent_coords, const SpatioTemporalScaleFactors& scale, bool causal_fix);
// Audio token times in seconds, f32 [B, 1, T, 2] (mel hop 160 at 16 kHz, latent downsample 4,
// causal shift), for latent frames [shift, shift + frames).
Tensor audio_patch_grid_bounds(int64_t batch, int64_t frames, int64_t shift = 0);

// VideoLatentTools: the target grid, fps and how positions are made.
struct VideoLatentTools {
  VideoLatentShape target;
  double fps = 24.0;
  SpatioTemporalScaleFactors scale;
  bool causal_fix = true;
  int64_t patch_size = 1;

  int64_t token_count() const { return target.token_count() / (patch_size * patch_size); }
  int64_t tokens_per_latent_frame() const { return target.height * target.width / (patch_size * patch_size); }
  // f32 [B, 3, T, 2]: pixel bounds with the causal fix, time divided by fps.
  Tensor positions() const;
  // Initial state: latent = initial_latent (must be the target shape) or zeros of `dtype`, clean =
  // a copy, mask ones, positions, and keyframes_mask marking the first latent frame's tokens.
  LatentState create_initial_state(DType dtype, const Tensor& initial_latent = Tensor()) const;
  // Unpatchified state (latent etc. [B, C, F, H, W]) -> patchified, and back.
  LatentState patchify(const LatentState& unpatchified) const;
  LatentState unpatchify(const LatentState& patchified) const;
  // Drops appended tokens (keeps the first token_count()), resets the mask to ones and the
  // attention/keyframe masks, and extracts generated keyframe slots into generated_keyframes.
  LatentState clear_conditioning(const LatentState& state) const;
  // The generated keyframe slots as [B, C, K, H, W], or an undefined tensor without slots.
  Tensor extract_generated_keyframes(const LatentState& state) const;
};

struct AudioLatentTools {
  AudioLatentShape target;
  int64_t shift = 0;

  int64_t token_count() const { return target.frames; }
  Tensor positions() const;  // f32 [B, 1, T, 2] seconds
  LatentState create_initial_state(DType dtype, const Tensor& initial_latent = Tensor()) const;
  LatentState patchify(const LatentState& unpatchified) const;
  LatentState unpatchify(const LatentState& patchified) const;
  LatentState clear_conditioning(const LatentState& state) const;
};

// x0 * mask + clean * (1 - mask), the reference's post_process_latent: float32 maths as tensor ops
// on the inputs' device, result in denoised's dtype (f64 denoised, the res_2s loop's path: the
// clean term is formed in f32, then added in f64).
Tensor post_process_latent(const Tensor& denoised, const Tensor& denoise_mask, const Tensor& clean);
// denoise_mask * sigma (per-token timesteps), f32 on the mask's device.
Tensor timesteps_from_mask(const Tensor& denoise_mask, double sigma);
// Per sample the runs of `denoise_mask` [B, T, 1] (values compared as bits, so -0 and 0 are two
// values); empty for a sample with more than kMaxMaskRuns. Reads the mask on the host (a device mask
// is copied back: call it where a sync is harmless).
std::vector<MaskRuns> mask_runs_of(const Tensor& denoise_mask);
// The state's mask runs for every sample, known without a device read: from the mask itself when
// it is on the host, else from state.mask_levels when they describe it; nullopt when unknown or
// when a sample has more than kMaxMaskRuns.
std::optional<std::vector<MaskRuns>> mask_runs(const LatentState& state);
// After a write into state.denoise_mask in place (a conditioning item on its clone): mask_levels
// describe the new values again (read from the mask; a device mask is copied back). Levels a
// clone carried over would otherwise follow the mask to the device describing the old values.
void refresh_mask_levels(LatentState& state);
// The mask value per sample when every sample is one run; nullopt otherwise.
std::optional<std::vector<float>> uniform_values(const std::vector<MaskRuns>& runs);
// The state's mask value per sample when every sample's tokens share one value (uniform_values of
// mask_runs); nullopt otherwise (the caller then uses per-token values).
std::optional<std::vector<float>> uniform_mask_values(const LatentState& state);

}  // namespace ltx::sampling
