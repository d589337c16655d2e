#pragma once
// Conditioning items (ltx_core.conditioning) and the Gaussian noiser: they edit a PATCHIFIED
// LatentState before denoising. Items either replace tokens in place (mask 1 - strength, clean =
// the given latent) or append tokens at the end (zeros in the latent, the given content as clean,
// mask 1 - strength; a mask of 0 means "kept clean", i.e. timestep 0 for those tokens).
// Appended masks take the item latent's dtype first (bf16 rounds 1 - strength), as in the reference.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "sampling/latent.h"
#include "sampling/noise.h"

namespace ltx::sampling {

class ConditioningItem {
 public:
  virtual ~ConditioningItem() = default;
  virtual std::string name() const = 0;
  // Video items override the first, audio items the second; the other throws naming the item.
  virtual LatentState apply(const LatentState& state, const VideoLatentTools& tools) const;
  virtual LatentState apply(const LatentState& state, const AudioLatentTools& tools) const;
};
using ConditioningItems = std::vector<std::shared_ptr<const ConditioningItem>>;

// Image (or latent frames) replacing the target's latent frames from `latent_idx` on (I2V frame 0).
// latent: [B, C, F', H, W] with the target's B, C, H, W.
class VideoConditionByLatentIndex final : public ConditioningItem {
 public:
  VideoConditionByLatentIndex(Tensor latent, double strength, int64_t latent_idx)
      : latent_(std::move(latent)), strength_(strength), latent_idx_(latent_idx) {}
  std::string name() const override { return "VideoConditionByLatentIndex"; }
  using ConditioningItem::apply;
  LatentState apply(const LatentState& state, const VideoLatentTools& tools) const override;

 private:
  Tensor latent_;
  double strength_;
  int64_t latent_idx_;
};

// Keyframe latents appended as guiding tokens at pixel frame `frame_idx` (images at frames > 0).
// Positions: the keyframe grid's pixel bounds (causal fix only at frame 0) + frame_idx, the time
// end narrowed to start + 1 for a single-frame keyframe, time / fps. Not marked as keyframes.
class VideoConditionByKeyframeIndex final : public ConditioningItem {
 public:
  VideoConditionByKeyframeIndex(Tensor keyframes, int64_t frame_idx, double strength, int64_t num_pixel_frames = 1)
      : keyframes_(std::move(keyframes)), frame_idx_(frame_idx), strength_(strength),
        num_pixel_frames_(num_pixel_frames) {}
  std::string name() const override { return "VideoConditionByKeyframeIndex"; }
  using ConditioningItem::apply;
  LatentState apply(const LatentState& state, const VideoLatentTools& tools) const override;

 private:
  Tensor keyframes_;
  int64_t frame_idx_;
  double strength_;
  int64_t num_pixel_frames_;
};

// LTX-2.5 generated keyframe slots: one latent frame of tokens per pixel-frame index, mask 1,
// time [idx, idx + 1) / fps, marked in keyframes_mask, recorded in generated_keyframe_layout.
class VideoGeneratedKeyframeSlots final : public ConditioningItem {
 public:
  // Indices non-empty, >= 0, strictly increasing; initial_keyframes (optional) [B, C, K, H, W].
  explicit VideoGeneratedKeyframeSlots(std::vector<int64_t> pixel_frame_indices, Tensor initial_keyframes = Tensor());
  std::string name() const override { return "VideoGeneratedKeyframeSlots"; }
  using ConditioningItem::apply;
  LatentState apply(const LatentState& state, const VideoLatentTools& tools) const override;

 private:
  std::vector<int64_t> indices_;
  Tensor initial_;
};

// Masked replacement: mask [B, F, H, W] on the latent grid (1 = take `latent`, mask 1 - strength).
class VideoConditionByMask final : public ConditioningItem {
 public:
  VideoConditionByMask(Tensor latent, Tensor mask, double strength = 1.0)
      : latent_(std::move(latent)), mask_(std::move(mask)), strength_(strength) {}
  std::string name() const override { return "VideoConditionByMask"; }
  using ConditioningItem::apply;
  LatentState apply(const LatentState& state, const VideoLatentTools& tools) const override;

 private:
  Tensor latent_, mask_;
  double strength_;
};

// IC-LoRA reference video appended as clean tokens; time positions on the reference's own
// spacing (fps / temporal_scale_factor, shifted back and clamped at 0 when != 1), y/x scaled by
// downscale_factor.
class VideoConditionByReferenceLatent final : public ConditioningItem {
 public:
  VideoConditionByReferenceLatent(Tensor latent, int64_t downscale_factor = 1, int64_t temporal_scale_factor = 1,
                                  double strength = 1.0)
      : latent_(std::move(latent)), downscale_(downscale_factor), temporal_scale_(temporal_scale_factor),
        strength_(strength) {}
  std::string name() const override { return "VideoConditionByReferenceLatent"; }
  using ConditioningItem::apply;
  LatentState apply(const LatentState& state, const VideoLatentTools& tools) const override;

 private:
  Tensor latent_;
  int64_t downscale_, temporal_scale_;
  double strength_;
};

// Reference audio tokens [B, T_ref, C] appended with the given positions [B, 1, T_ref, 2].
class AudioConditionByReferenceLatent final : public ConditioningItem {
 public:
  AudioConditionByReferenceLatent(Tensor patchified, Tensor positions, double strength = 1.0)
      : tokens_(std::move(patchified)), positions_(positions.to(DType::F32)), strength_(strength) {}
  std::string name() const override { return "AudioConditionByReferenceLatent"; }
  using ConditioningItem::apply;
  LatentState apply(const LatentState& state, const AudioLatentTools& tools) const override;

 private:
  Tensor tokens_, positions_;
  double strength_;
};

// Retake: mask = 1 for target tokens whose time span overlaps [start_time, end_time), else 0
// (video spans from the causal pixel bounds / fps; audio spans in seconds). Video and audio.
class TemporalRegionMask final : public ConditioningItem {
 public:
  TemporalRegionMask(double start_time, double end_time, double fps)
      : start_(start_time), end_(end_time), fps_(fps) {}
  std::string name() const override { return "TemporalRegionMask"; }
  using ConditioningItem::apply;
  LatentState apply(const LatentState& state, const VideoLatentTools& tools) const override;
  LatentState apply(const LatentState& state, const AudioLatentTools& tools) const override;

 private:
  double start_, end_, fps_;
};

// Per-token cross attention weight between appended tokens and the target's tokens: a scalar, a
// [M] or a [B or 1, M] tensor, values in [0, 1].
using CrossAttentionMask = std::variant<double, Tensor>;

// Wraps an appending item and builds the (B, N+M, N+M) self-attention mask for its tokens:
// existing block kept (1 when there was none), new block 1, noisy <-> new = cross values,
// earlier references <-> new = 0.
class AttentionStrengthWrapper final : public ConditioningItem {
 public:
  AttentionStrengthWrapper(std::shared_ptr<const ConditioningItem> inner, CrossAttentionMask attention_mask)
      : inner_(std::move(inner)), mask_(std::move(attention_mask)) {}
  std::string name() const override { return "AttentionStrengthWrapper(" + inner_->name() + ")"; }
  using ConditioningItem::apply;
  LatentState apply(const LatentState& state, const VideoLatentTools& tools) const override;
  LatentState apply(const LatentState& state, const AudioLatentTools& tools) const override;

 private:
  std::shared_ptr<const ConditioningItem> inner_;
  CrossAttentionMask mask_;
};

// ---- mask utilities (exposed for tests and other items) ----
// keyframes_mask extended by `num_new` tokens (1 if marked); undefined when there was none and
// the new tokens are unmarked.
Tensor extend_keyframes_mask(const LatentState& state, int64_t num_new, bool marked);
// The attention mask after appending `num_new` tokens; `cross` = nullopt keeps an existing mask
// consistent (new tokens get weight 1) and returns undefined when there is no mask.
Tensor update_attention_mask(const LatentState& state, const std::optional<CrossAttentionMask>& cross,
                             int64_t num_noisy, int64_t num_new, int64_t batch, DType dtype);
Tensor build_attention_mask(const Tensor& existing, int64_t num_noisy, int64_t num_new, int64_t num_existing,
                            const Tensor& cross /* [B, M] */, DType dtype);

// ---- noise ----
// GaussianNoiser: n = randn(latent shape, latent dtype); x = lerp(latent, n, noise_scale);
// x = lerp(clean, x, denoise_mask); in f32, stored in the latent's dtype.
LatentState noise_state(const LatentState& state, NoiseSource& generator, double noise_scale = 1.0);
// create_noised_state for video / audio: initial state, the items in order, then the noise.
LatentState create_noised_state(const VideoLatentTools& tools, const ConditioningItems& items,
                                NoiseSource& generator, DType dtype, double noise_scale = 1.0,
                                const Tensor& initial_latent = Tensor());
LatentState create_noised_state(const AudioLatentTools& tools, const ConditioningItems& items,
                                NoiseSource& generator, DType dtype, double noise_scale = 1.0,
                                const Tensor& initial_latent = Tensor());

// Interior pixel-frame positions of `num_keyframes` evenly spaced generated keyframes:
// round(linspace(0, num_frames - 1, K + 2))[1:-1] (float32 linspace, half to even).
std::vector<int64_t> evenly_spaced_keyframe_positions(int64_t num_keyframes, int64_t num_frames);

}  // namespace ltx::sampling
