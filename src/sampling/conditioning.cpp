#include "sampling/conditioning.h"

#include <cmath>

#include "core/error.h"
#include "ops/shape.h"
#include "sampling/schedulers.h"

namespace ltx::sampling {
namespace {

// torch's result dtype for cat / binary ops of two floating tensors.
DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::F64 || b == DType::F64) return DType::F64;
  return DType::F32;
}

Tensor cat2(const Tensor& a, const Tensor& b, int64_t dim) {
  const DType dt = promote(a.dtype(), b.dtype());
  return ops::concat({a.to(Device::cpu(), dt), b.to(Device::cpu(), dt)}, dim);
}

// A scalar as the given dtype would store it (torch.full(..., dtype)).
double round_to(double v, DType dt) { return Tensor::full({1}, v, dt).item(); }

Tensor cpu(const Tensor& t) { return t.to(Device::cpu()); }

// Appends `tokens` (clean content) with mask `1 - strength` in `mask_dtype` and the given
// positions; shared by every appending item.
LatentState append_tokens(const LatentState& s, const Tensor& tokens, const Tensor& positions, double strength,
                          DType mask_dtype, const Tensor& attention_mask) {
  LTX_CHECK(tokens.dim() == 3 && tokens.size(0) == s.batch() && tokens.size(2) == s.latent.size(2),
            "conditioning: appended tokens ", tokens.describe(), " do not fit the state's latent ",
            s.latent.describe());
  LatentState out;
  out.latent = cat2(s.latent, Tensor::zeros(tokens.shape(), tokens.dtype()), 1);
  out.denoise_mask = cat2(s.denoise_mask, Tensor::full({tokens.size(0), tokens.size(1), 1}, 1.0 - strength, mask_dtype), 1);
  out.positions = cat2(s.positions, positions, 2);
  out.clean_latent = cat2(s.clean_latent, cpu(tokens), 1);
  out.attention_mask = attention_mask;
  out.keyframes_mask = extend_keyframes_mask(s, tokens.size(1), false);
  out.generated_keyframe_layout = s.generated_keyframe_layout;
  out.generated_keyframes = s.generated_keyframes;
  out.frozen = s.frozen;
  return out;
}

float* f32_data(Tensor& t) { return t.data<float>(); }

}  // namespace

LatentState ConditioningItem::apply(const LatentState&, const VideoLatentTools&) const {
  fail(name(), " is an audio conditioning item; it cannot be applied to a video latent");
}
LatentState ConditioningItem::apply(const LatentState&, const AudioLatentTools&) const {
  fail(name(), " is a video conditioning item; it cannot be applied to an audio latent");
}

// ---------------------------------------------------------------------------------- mask utils

Tensor extend_keyframes_mask(const LatentState& s, int64_t num_new, bool marked) {
  Tensor existing = s.keyframes_mask;
  if (!existing.defined() && !marked) return Tensor();
  if (!existing.defined()) existing = Tensor::zeros(s.denoise_mask.shape(), s.denoise_mask.dtype());
  Tensor pad = Tensor::full({existing.size(0), num_new, existing.size(2)}, marked ? 1.0 : 0.0, existing.dtype());
  return ops::concat({cpu(existing), pad}, 1);
}

Tensor build_attention_mask(const Tensor& existing, int64_t num_noisy, int64_t num_new, int64_t num_existing,
                            const Tensor& cross_t, DType dtype) {
  LTX_CHECK(cross_t.dim() == 2 && cross_t.size(1) == num_new, "build_attention_mask: cross mask ",
            cross_t.describe(), " must be [B, ", num_new, "]");
  LTX_CHECK(num_noisy <= num_existing, "build_attention_mask: ", num_noisy, " noisy tokens but only ",
            num_existing, " tokens exist");
  const int64_t b = cross_t.size(0), total = num_existing + num_new;
  std::vector<float> m(static_cast<size_t>(b * total * total), 0.0f);
  const std::vector<float> cross = cross_t.to_float_vector();
  std::vector<float> ex;
  if (existing.defined()) {
    LTX_CHECK(existing.dim() == 3 && existing.size(0) == b && existing.size(1) == num_existing &&
                  existing.size(2) == num_existing,
              "build_attention_mask: existing mask ", existing.describe(), " must be [", b, ", ", num_existing,
              ", ", num_existing, "]");
    ex = existing.to_float_vector();
  }
  for (int64_t bi = 0; bi < b; ++bi) {
    float* mb = m.data() + bi * total * total;
    for (int64_t i = 0; i < num_existing; ++i)
      for (int64_t j = 0; j < num_existing; ++j)
        mb[i * total + j] = ex.empty() ? 1.0f : ex[static_cast<size_t>((bi * num_existing + i) * num_existing + j)];
    for (int64_t i = num_existing; i < total; ++i)
      for (int64_t j = num_existing; j < total; ++j) mb[i * total + j] = 1.0f;
    for (int64_t k = 0; k < num_new; ++k) {
      const float c = cross[static_cast<size_t>(bi * num_new + k)];
      for (int64_t i = 0; i < num_noisy; ++i) {
        mb[i * total + num_existing + k] = c;  // noisy -> new
        mb[(num_existing + k) * total + i] = c;  // new -> noisy
      }
    }
  }
  return Tensor::from_vector(m, Shape{b, total, total}).to(dtype);
}

Tensor update_attention_mask(const LatentState& s, const std::optional<CrossAttentionMask>& spec, int64_t num_noisy,
                             int64_t num_new, int64_t batch, DType dtype) {
  Tensor cross;
  if (!spec) {
    if (!s.attention_mask.defined()) return Tensor();
    cross = Tensor::full({batch, num_new}, 1.0, dtype);
  } else if (std::holds_alternative<double>(*spec)) {
    cross = Tensor::full({batch, num_new}, std::get<double>(*spec), dtype);
  } else {
    Tensor m = std::get<Tensor>(*spec).to(Device::cpu(), dtype);
    if (m.dim() == 0) {
      cross = Tensor::full({batch, num_new}, m.item(), dtype);
    } else if (m.dim() == 1) {
      LTX_CHECK(m.size(0) == num_new, "attention mask: a 1-D mask must have one value per new token (",
                num_new, "), got ", m.describe());
      cross = m.unsqueeze(0).expand({batch, num_new}).contiguous();
    } else if (m.dim() == 2) {
      LTX_CHECK(m.size(1) == num_new, "attention mask: a 2-D mask must be [B, ", num_new, "], got ", m.describe());
      LTX_CHECK(m.size(0) == batch || m.size(0) == 1, "attention mask: batch of ", m.describe(), " must be ",
                batch, " or 1");
      cross = m.expand({batch, num_new}).contiguous();
    } else {
      fail("attention mask: must be a scalar, [M] or [B, M] tensor, got ", m.describe());
    }
  }
  return build_attention_mask(s.attention_mask, num_noisy, num_new, s.tokens(), cross, dtype);
}

// ---------------------------------------------------------------------------------- items

LatentState VideoConditionByLatentIndex::apply(const LatentState& state, const VideoLatentTools& tools) const {
  const VideoLatentShape& t = tools.target;
  LTX_CHECK(latent_.dim() == 5 && latent_.size(0) == t.batch && latent_.size(1) == t.channels &&
                latent_.size(3) == t.height && latent_.size(4) == t.width,
            "VideoConditionByLatentIndex: conditioning latent ", latent_.describe(), " does not match ", t.str(),
            "; the image and the video must have the same spatial size");
  const Tensor tokens = patchify_video(cpu(latent_), tools.patch_size);
  const int64_t start = latent_idx_ * t.height * t.width / (tools.patch_size * tools.patch_size);
  const int64_t stop = start + tokens.size(1);
  LTX_CHECK(latent_idx_ >= 0 && stop <= state.tokens(), "VideoConditionByLatentIndex: latent frames [",
            latent_idx_, ", ", latent_idx_ + latent_.size(2), ") do not fit the ", t.frames, "-frame target");
  LatentState s = state.clone();
  s.clean_latent.narrow(1, start, stop - start).copy_from(tokens);
  s.denoise_mask.narrow(1, start, stop - start).fill(1.0 - strength_);
  refresh_mask_levels(s);
  return s;
}

LatentState VideoConditionByKeyframeIndex::apply(const LatentState& state, const VideoLatentTools& tools) const {
  LTX_CHECK(keyframes_.dim() == 5, "VideoConditionByKeyframeIndex: keyframes must be [B, C, F, H, W], got ",
            keyframes_.describe());
  const Tensor tokens = patchify_video(cpu(keyframes_), tools.patch_size);
  Tensor px = pixel_coords(video_patch_grid_bounds(VideoLatentShape::from_shape(keyframes_.shape()), tools.patch_size),
                           tools.scale, frame_idx_ == 0 ? tools.causal_fix : false);
  int64_t* d = px.data<int64_t>();
  const int64_t b = px.size(0), n = px.size(2);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t i = 0; i < n; ++i) {
      int64_t* e = d + (bi * 3 * n + i) * 2;  // time axis
      e[0] += frame_idx_;
      e[1] += frame_idx_;
      if (num_pixel_frames_ == 1) e[1] = e[0] + 1;
    }
  Tensor pos = px.to(DType::F32);
  float* p = f32_data(pos);
  const float fps = static_cast<float>(tools.fps);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t i = 0; i < n * 2; ++i) p[bi * 3 * n * 2 + i] /= fps;
  const Tensor attn = update_attention_mask(state, std::nullopt, tools.target.token_count(), tokens.size(1),
                                            tokens.size(0), keyframes_.dtype());
  return append_tokens(state, tokens, pos, strength_, keyframes_.dtype(), attn);
}

VideoGeneratedKeyframeSlots::VideoGeneratedKeyframeSlots(std::vector<int64_t> indices, Tensor initial)
    : indices_(std::move(indices)), initial_(std::move(initial)) {
  LTX_CHECK(!indices_.empty(), "VideoGeneratedKeyframeSlots: pixel_frame_indices must be non-empty");
  for (size_t i = 0; i < indices_.size(); ++i) {
    LTX_CHECK(indices_[i] >= 0, "VideoGeneratedKeyframeSlots: pixel frame indices must be >= 0, got ", indices_[i]);
    LTX_CHECK(i == 0 || indices_[i] > indices_[i - 1],
              "VideoGeneratedKeyframeSlots: pixel frame indices must be strictly increasing");
  }
  if (initial_.defined()) {
    LTX_CHECK(initial_.dim() == 5, "VideoGeneratedKeyframeSlots: initial_keyframes must be [B, C, K, H, W], got ",
              initial_.describe());
    LTX_CHECK(initial_.size(2) == static_cast<int64_t>(indices_.size()), "VideoGeneratedKeyframeSlots: initial_keyframes K=",
              initial_.size(2), " must match the ", indices_.size(), " pixel frame indices");
  }
}

LatentState VideoGeneratedKeyframeSlots::apply(const LatentState& state, const VideoLatentTools& tools) const {
  const int64_t pixel_frames = tools.target.upscale(tools.scale).frames;
  LTX_CHECK(indices_.back() < pixel_frames, "VideoGeneratedKeyframeSlots: keyframe at pixel frame ", indices_.back(),
            " is outside the target's ", pixel_frames, " frames");
  LTX_CHECK(!state.generated_keyframe_layout,
            "VideoGeneratedKeyframeSlots: slots were already applied to this state; use a single item");
  const VideoLatentShape frame = tools.target.with_frames(1);
  const int64_t per = tools.tokens_per_latent_frame();
  const int64_t b = state.batch(), n_new = per * static_cast<int64_t>(indices_.size());
  std::vector<Tensor> positions;
  const Tensor grid = pixel_coords(video_patch_grid_bounds(frame, tools.patch_size), tools.scale, false).to(DType::F32);
  const float fps = static_cast<float>(tools.fps);
  for (int64_t idx : indices_) {
    Tensor pos = grid.clone();
    float* p = f32_data(pos);
    const int64_t n = pos.size(2);
    for (int64_t bi = 0; bi < pos.size(0); ++bi)
      for (int64_t i = 0; i < n; ++i) {
        float* e = p + (bi * 3 * n + i) * 2;
        e[0] = static_cast<float>(idx) / fps;
        e[1] = (static_cast<float>(idx) + 1.0f) / fps;
      }
    positions.push_back(pos);
  }
  Tensor slot_tokens;
  if (!initial_.defined()) {
    slot_tokens = Tensor::zeros({b, n_new, state.latent.size(2)}, state.latent.dtype());
  } else {
    Tensor init = initial_.to(Device::cpu(), state.latent.dtype());
    LTX_CHECK(init.size(0) == b, "VideoGeneratedKeyframeSlots: initial_keyframes batch ", init.size(0),
              " does not match the latent batch ", b);
    LTX_CHECK(init.size(3) == tools.target.height && init.size(4) == tools.target.width,
              "VideoGeneratedKeyframeSlots: initial_keyframes spatial size ", init.size(3), "x", init.size(4),
              " does not match the target's ", tools.target.height, "x", tools.target.width);
    std::vector<Tensor> parts;
    for (int64_t k = 0; k < init.size(2); ++k)
      parts.push_back(patchify_video(init.narrow(2, k, 1).contiguous(), tools.patch_size));
    slot_tokens = ops::concat(parts, 1);
  }
  LatentState out;
  out.latent = cat2(state.latent, slot_tokens, 1);
  out.denoise_mask = cat2(state.denoise_mask, Tensor::full({b, n_new, 1}, 1.0, state.denoise_mask.dtype()), 1);
  positions.insert(positions.begin(), cpu(state.positions));
  out.positions = ops::concat(positions, 2);
  out.clean_latent = cat2(state.clean_latent, Tensor::zeros(slot_tokens.shape(), slot_tokens.dtype()), 1);
  out.keyframes_mask = extend_keyframes_mask(state, n_new, true);
  out.attention_mask = update_attention_mask(state, std::nullopt, tools.target.token_count(), n_new, b,
                                             state.latent.dtype());
  out.generated_keyframe_layout = GeneratedKeyframeLayout{indices_, per, state.tokens()};
  out.generated_keyframes = state.generated_keyframes;
  out.frozen = state.frozen;
  return out;
}

LatentState VideoConditionByMask::apply(const LatentState& state, const VideoLatentTools& tools) const {
  LTX_CHECK(latent_.shape() == tools.target.shape(), "VideoConditionByMask: latent ", latent_.describe(),
            " must be the target ", tools.target.str());
  LTX_CHECK(mask_.dim() == 4 && mask_.size(0) == tools.target.batch && mask_.size(1) == tools.target.frames &&
                mask_.size(2) == tools.target.height && mask_.size(3) == tools.target.width,
            "VideoConditionByMask: mask ", mask_.describe(), " must be [B, F, H, W] on the latent grid of ",
            tools.target.str());
  const std::vector<float> tok = patchify_video(cpu(latent_), tools.patch_size).to_float_vector();
  const DType dt = state.latent.dtype();
  // The mask is cast to the latent's dtype; (1 - strength) * m is formed in that dtype too.
  const std::vector<float> m = patchify_video(cpu(mask_).unsqueeze(1), tools.patch_size).to(dt).to_float_vector();
  const float keep_value = static_cast<float>(round_to(1.0 - strength_, dt));
  LTX_CHECK(state.tokens() * state.latent.size(2) >= static_cast<int64_t>(tok.size()),
            "VideoConditionByMask: the state is smaller than the target");
  LTX_CHECK(state.tokens() == tools.token_count(), "VideoConditionByMask: apply it before any item that appends tokens");
  std::vector<float> clean = state.clean_latent.to_float_vector(), mask = state.denoise_mask.to_float_vector();
  const size_t c = static_cast<size_t>(state.latent.size(2));
  for (size_t i = 0; i < clean.size(); ++i) {
    const float mi = m[i / c];
    clean[i] = clean[i] * (1.0f - mi) + tok[i] * mi;
  }
  for (size_t t = 0; t < mask.size(); ++t) mask[t] = mask[t] * (1.0f - m[t]) + keep_value * m[t];
  LatentState s = state;
  s.clean_latent = Tensor::from_vector(clean, state.clean_latent.shape()).to(state.clean_latent.dtype());
  s.denoise_mask = Tensor::from_vector(mask, state.denoise_mask.shape()).to(state.denoise_mask.dtype());
  return s;
}

LatentState VideoConditionByReferenceLatent::apply(const LatentState& state, const VideoLatentTools& tools) const {
  LTX_CHECK(latent_.dim() == 5, "VideoConditionByReferenceLatent: latent must be [B, C, F, H, W], got ",
            latent_.describe());
  const Tensor tokens = patchify_video(cpu(latent_), tools.patch_size);
  Tensor pos = pixel_coords(video_patch_grid_bounds(VideoLatentShape::from_shape(latent_.shape()), tools.patch_size),
                            tools.scale, tools.causal_fix)
                   .to(DType::F32);
  float* p = f32_data(pos);
  const int64_t b = pos.size(0), n = pos.size(2);
  const float spacing = static_cast<float>(tools.fps / static_cast<double>(temporal_scale_));
  const std::vector<float> target_pos = state.positions.to_float_vector();
  const int64_t nt = state.positions.size(2);
  for (int64_t bi = 0; bi < b; ++bi) {
    // The target's first token ends at 1 / fps; the reference is shifted back by (S - 1) of those.
    const float t_first = target_pos[static_cast<size_t>((bi * state.positions.size(1) * nt) * 2 + 1)];
    for (int64_t i = 0; i < n * 2; ++i) {
      float& v = p[bi * 3 * n * 2 + i];
      v /= spacing;
      if (temporal_scale_ != 1)
        v = std::max(v - static_cast<float>(temporal_scale_ - 1) * t_first, 0.0f);
    }
    if (downscale_ != 1)
      for (int64_t a = 1; a < 3; ++a)
        for (int64_t i = 0; i < n * 2; ++i) p[(bi * 3 + a) * n * 2 + i] *= static_cast<float>(downscale_);
  }
  const Tensor attn = update_attention_mask(state, std::nullopt, tools.target.token_count(), tokens.size(1),
                                            tokens.size(0), latent_.dtype());
  return append_tokens(state, tokens, pos, strength_, latent_.dtype(), attn);
}

LatentState AudioConditionByReferenceLatent::apply(const LatentState& state, const AudioLatentTools& tools) const {
  LTX_CHECK(tokens_.dim() == 3 && positions_.dim() == 4 && positions_.size(1) == 1 &&
                positions_.size(2) == tokens_.size(1) && positions_.size(0) == tokens_.size(0),
            "AudioConditionByReferenceLatent: tokens ", tokens_.describe(), " need positions [B, 1, T_ref, 2], got ",
            positions_.describe());
  const Tensor attn = update_attention_mask(state, std::nullopt, tools.token_count(), tokens_.size(1), tokens_.size(0),
                                            tokens_.dtype());
  return append_tokens(state, tokens_, positions_, strength_, tokens_.dtype(), attn);
}

namespace {

LatentState region_mask(const LatentState& state, const Tensor& spans /* f32 [B, T, 2] */, double start, double end,
                        const char* what) {
  LTX_CHECK(spans.size(1) == state.tokens(), "TemporalRegionMask: the ", what, " state has ", state.tokens(),
            " tokens but the target has ", spans.size(1), "; apply it before items that append tokens");
  const std::vector<float> t = spans.to_float_vector();
  const float s = static_cast<float>(start), e = static_cast<float>(end);
  std::vector<float> m(static_cast<size_t>(spans.size(0) * spans.size(1)));
  for (size_t i = 0; i < m.size(); ++i) m[i] = (t[i * 2 + 1] > s && t[i * 2] < e) ? 1.0f : 0.0f;
  LatentState out = state.clone();
  out.denoise_mask.copy_from(Tensor::from_vector(m, out.denoise_mask.shape()));
  refresh_mask_levels(out);
  return out;
}

}  // namespace

LatentState TemporalRegionMask::apply(const LatentState& state, const VideoLatentTools& tools) const {
  const Tensor px = pixel_coords(video_patch_grid_bounds(tools.target, tools.patch_size), tools.scale, tools.causal_fix);
  const int64_t b = px.size(0), n = px.size(2);
  const std::vector<int64_t> v = px.to_int_vector();
  std::vector<float> spans(static_cast<size_t>(b * n * 2));
  const float fps = static_cast<float>(fps_);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t i = 0; i < n * 2; ++i)
      spans[static_cast<size_t>(bi * n * 2 + i)] = static_cast<float>(v[static_cast<size_t>(bi * 3 * n * 2 + i)]) / fps;
  return region_mask(state, Tensor::from_vector(spans, Shape{b, n, 2}), start_, end_, "video");
}

LatentState TemporalRegionMask::apply(const LatentState& state, const AudioLatentTools& tools) const {
  const Tensor pos = tools.positions();  // [B, 1, T, 2] seconds
  return region_mask(state, pos.view({pos.size(0), pos.size(2), 2}), start_, end_, "audio");
}

LatentState AttentionStrengthWrapper::apply(const LatentState& state, const VideoLatentTools& tools) const {
  LatentState out = inner_->apply(state, tools);
  const int64_t n_new = out.tokens() - state.tokens();
  if (n_new == 0) return out;
  out.attention_mask = update_attention_mask(state, mask_, tools.target.token_count(), n_new, out.batch(),
                                             out.latent.dtype());
  return out;
}

LatentState AttentionStrengthWrapper::apply(const LatentState& state, const AudioLatentTools& tools) const {
  LatentState out = inner_->apply(state, tools);
  const int64_t n_new = out.tokens() - state.tokens();
  if (n_new == 0) return out;
  out.attention_mask = update_attention_mask(state, mask_, tools.target.token_count(), n_new, out.batch(),
                                             out.latent.dtype());
  return out;
}

// ---------------------------------------------------------------------------------- noise

LatentState noise_state(const LatentState& state, NoiseSource& generator, double noise_scale) {
  const Tensor noise_t = generator.randn(state.latent.shape(), state.latent.dtype());
  const std::vector<float> x = state.latent.to_float_vector(), n = noise_t.to_float_vector(),
                           clean = state.clean_latent.to_float_vector(), mask = state.denoise_mask.to_float_vector();
  LTX_CHECK(clean.size() == x.size() && mask.size() * static_cast<size_t>(state.latent.size(2)) == x.size(),
            "noise_state: latent ", state.latent.describe(), ", clean ", state.clean_latent.describe(), " and mask ",
            state.denoise_mask.describe(), " do not fit together");
  // torch.lerp: start + w * (end - start) for |w| < 0.5, else end + (w - 1) * (end - start), fused.
  auto lerp = [](float start, float end, float w) {
    return std::fabs(w) < 0.5f ? std::fma(w, end - start, start) : std::fma(w - 1.0f, end - start, end);
  };
  const float scale = static_cast<float>(noise_scale);
  const size_t c = static_cast<size_t>(state.latent.size(2));
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = lerp(clean[i], lerp(x[i], n[i], scale), mask[i / c]);
  return state.with_latent(Tensor::from_vector(out, state.latent.shape()).to(state.latent.dtype()));
}

namespace {
template <typename Tools>
LatentState noised(const Tools& tools, const ConditioningItems& items, NoiseSource& generator, DType dtype,
                   double noise_scale, const Tensor& initial) {
  LatentState s = tools.create_initial_state(dtype, initial);
  for (const auto& item : items) {
    LTX_CHECK(item != nullptr, "create_noised_state: null conditioning item");
    s = item->apply(s, tools);
  }
  return noise_state(s, generator, noise_scale);
}
}  // namespace

LatentState create_noised_state(const VideoLatentTools& tools, const ConditioningItems& items, NoiseSource& generator,
                                DType dtype, double noise_scale, const Tensor& initial_latent) {
  return noised(tools, items, generator, dtype, noise_scale, initial_latent);
}
LatentState create_noised_state(const AudioLatentTools& tools, const ConditioningItems& items, NoiseSource& generator,
                                DType dtype, double noise_scale, const Tensor& initial_latent) {
  return noised(tools, items, generator, dtype, noise_scale, initial_latent);
}

std::vector<int64_t> evenly_spaced_keyframe_positions(int64_t num_keyframes, int64_t num_frames) {
  LTX_CHECK(num_keyframes >= 0, "generated keyframes: the count must be >= 0, got ", num_keyframes);
  if (num_keyframes == 0) return {};
  LTX_CHECK(num_frames >= num_keyframes + 2, "generated keyframes: need at least num_keyframes + 2 frames, got ",
            num_keyframes, " keyframes for ", num_frames, " frames");
  const std::vector<float> x = linspace_f32(0.0f, static_cast<float>(num_frames - 1), num_keyframes + 2);
  std::vector<int64_t> out;
  for (size_t i = 1; i + 1 < x.size(); ++i) out.push_back(static_cast<int64_t>(std::nearbyint(x[i])));
  return out;
}

}  // namespace ltx::sampling
