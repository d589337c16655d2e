#include "sampling/latent.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace ltx::sampling {
namespace {

Tensor clone_or_empty(const Tensor& t) { return t.defined() ? t.clone() : Tensor(); }

Tensor first_tokens(const Tensor& t, int64_t dim, int64_t n) { return t.narrow(dim, 0, n).contiguous(); }

// clear_conditioning's common part: the target's `n` first tokens (the appended conditioning
// tokens dropped) with an all-ones denoise mask; the keyframe layout and the frozen flag carried.
LatentState target_tokens(const LatentState& state, int64_t n) {
  LTX_CHECK(state.tokens() >= n, "clear_conditioning: the state has ", state.tokens(),
            " tokens, fewer than the target's ", n);
  LatentState s;
  s.latent = first_tokens(state.latent, 1, n);
  s.clean_latent = first_tokens(state.clean_latent, 1, n);
  s.denoise_mask = Tensor::full({state.batch(), n, 1}, 1.0, state.denoise_mask.dtype());
  s.positions = first_tokens(state.positions, 2, n);
  s.generated_keyframe_layout = state.generated_keyframe_layout;
  s.frozen = state.frozen;
  return s;
}

// create_initial_state before patchifying, on the host: the latent (`initial`, else zeros of
// `dtype`), a clean copy of it, an all-ones f32 denoise mask and `positions`. `Target` is
// VideoLatentShape or AudioLatentShape.
template <class Target>
LatentState unpatchified_initial_state(const Target& target, Tensor positions, DType dtype,
                                       const Tensor& initial) {
  LatentState s;
  if (initial.defined()) {
    LTX_CHECK(initial.shape() == target.shape(), "initial latent ", initial.describe(),
              " does not match the target ", target.str());
    s.latent = initial.to(Device::cpu()).contiguous();
  } else {
    s.latent = Tensor::zeros(target.shape(), dtype);
  }
  s.clean_latent = s.latent.clone();
  s.denoise_mask = Tensor::full(target.mask_shape().shape(), 1.0, DType::F32);
  s.positions = std::move(positions);
  return s;
}

// The same view of the same storage (what MaskLevels are keyed on).
bool same_view(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage() == b.storage() && a.raw_data() == b.raw_data() &&
         a.dtype() == b.dtype() && a.shape() == b.shape() && a.strides() == b.strides();
}

// The mask levels of `src`'s denoise mask, re-keyed to `mask` (a copy of it with the same
// values: moved or cloned). Read from the host when src's mask is there; null when unknown.
std::shared_ptr<const MaskLevels> levels_for(const Tensor& mask, const LatentState& src) {
  if (!mask.defined()) return nullptr;
  std::vector<MaskRuns> runs;
  if (src.mask_levels && same_view(src.mask_levels->mask, src.denoise_mask)) {
    runs = src.mask_levels->runs;
  } else if (src.denoise_mask.device().is_cpu()) {
    runs = mask_runs_of(src.denoise_mask);
  } else {
    return nullptr;
  }
  return std::make_shared<const MaskLevels>(MaskLevels{mask, std::move(runs)});
}

// [B, M, N] chunks of `chunk` bytes -> [B, N, M]: the patchifiers' (c, t) swaps as one blocked
// copy (a generic permute().contiguous() is far slower on these sizes).
Tensor swap_middle(const Tensor& x, int64_t b, int64_t m, int64_t n, int64_t chunk_elems, const Shape& out_shape) {
  const Tensor src_t = x.to(Device::cpu()).contiguous();
  Tensor out = Tensor::empty(out_shape, x.dtype());
  const size_t chunk = static_cast<size_t>(chunk_elems) * src_t.element_size();
  const auto* src = static_cast<const uint8_t*>(src_t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  constexpr int64_t kTile = 32;
  const int64_t tiles = (n + kTile - 1) / kTile;
  auto run = [&](auto copy) {
    parallel_for(0, b * tiles, 1, [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t bi = w / tiles, j0 = (w % tiles) * kTile, j1 = std::min(n, j0 + kTile);
        for (int64_t i0 = 0; i0 < m; i0 += kTile)
          for (int64_t j = j0; j < j1; ++j)
            for (int64_t i = i0; i < std::min(m, i0 + kTile); ++i)
              copy(dst + ((bi * n + j) * m + i) * chunk, src + ((bi * m + i) * n + j) * chunk);
      }
    });
  };
  // Fixed-size copies for the common element sizes; memcpy of `chunk` bytes otherwise.
  switch (chunk) {
    case 2: run([](uint8_t* d, const uint8_t* s) { std::memcpy(d, s, 2); }); break;
    case 4: run([](uint8_t* d, const uint8_t* s) { std::memcpy(d, s, 4); }); break;
    case 8: run([](uint8_t* d, const uint8_t* s) { std::memcpy(d, s, 8); }); break;
    default: run([chunk](uint8_t* d, const uint8_t* s) { std::memcpy(d, s, chunk); }); break;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------- shapes

VideoLatentShape VideoLatentShape::from_pixel_shape(const VideoPixelShape& p, int64_t latent_channels,
                                                    const SpatioTemporalScaleFactors& s) {
  LTX_CHECK(p.frames >= 1 && p.height >= 1 && p.width >= 1 && p.batch >= 1,
            "VideoLatentShape: pixel shape must be positive, got ", p.batch, "x", p.frames, "x", p.height,
            "x", p.width);
  return {p.batch, latent_channels, (p.frames - 1) / s.time + 1, p.height / s.height, p.width / s.width};
}

VideoLatentShape VideoLatentShape::from_shape(const Shape& s) {
  LTX_CHECK(s.size() == 5, "VideoLatentShape: expected a [B, C, F, H, W] shape, got ", s.str());
  return {s[0], s[1], s[2], s[3], s[4]};
}

VideoLatentShape VideoLatentShape::upscale(const SpatioTemporalScaleFactors& s) const {
  return {batch, 3, (frames - 1) * s.time + 1, height * s.height, width * s.width};
}

std::string VideoLatentShape::str() const {
  return ltx::str("video latent [B=", batch, ", C=", channels, ", F=", frames, ", H=", height, ", W=", width, "]");
}

AudioLatentShape AudioLatentShape::from_duration(int64_t batch, double duration, int64_t channels,
                                                 int64_t mel_bins, int64_t sample_rate, int64_t hop_length,
                                                 int64_t latent_downsample) {
  const double per_second = static_cast<double>(sample_rate) / static_cast<double>(hop_length) /
                            static_cast<double>(latent_downsample);
  // Python round(): half to even.
  return {batch, channels, static_cast<int64_t>(std::nearbyint(duration * per_second)), mel_bins};
}

AudioLatentShape AudioLatentShape::from_video_pixel_shape(const VideoPixelShape& p, int64_t channels,
                                                          int64_t mel_bins) {
  LTX_CHECK(p.fps > 0, "AudioLatentShape: fps must be > 0, got ", p.fps);
  return from_duration(p.batch, static_cast<double>(p.frames) / p.fps, channels, mel_bins);
}

AudioLatentShape AudioLatentShape::from_shape(const Shape& s) {
  LTX_CHECK(s.size() == 4, "AudioLatentShape: expected a [B, C, T, F] shape, got ", s.str());
  return {s[0], s[1], s[2], s[3]};
}

std::string AudioLatentShape::str() const {
  return ltx::str("audio latent [B=", batch, ", C=", channels, ", T=", frames, ", F=", mel_bins, "]");
}

LatentState LatentState::clone() const {
  LatentState s;
  s.latent = clone_or_empty(latent);
  s.denoise_mask = clone_or_empty(denoise_mask);
  s.positions = clone_or_empty(positions);
  s.clean_latent = clone_or_empty(clean_latent);
  s.attention_mask = clone_or_empty(attention_mask);
  s.keyframes_mask = clone_or_empty(keyframes_mask);
  s.generated_keyframe_layout = generated_keyframe_layout;
  s.generated_keyframes = clone_or_empty(generated_keyframes);
  s.frozen = frozen;
  s.mask_levels = levels_for(s.denoise_mask, *this);
  return s;
}

LatentState LatentState::to(Device device) const {
  LatentState s = *this;
  for (Tensor* t : {&s.latent, &s.denoise_mask, &s.positions, &s.clean_latent, &s.attention_mask, &s.keyframes_mask,
                    &s.generated_keyframes})
    if (t->defined()) *t = t->to(device);
  s.mask_levels = levels_for(s.denoise_mask, *this);
  return s;
}

LatentState LatentState::with_latent(const Tensor& new_latent) const {
  LTX_CHECK(!latent.defined() || new_latent.shape() == latent.shape(), "LatentState: new latent ",
            new_latent.describe(), " does not match the state's ", latent.describe());
  LatentState s = *this;
  s.latent = new_latent;
  return s;
}

// ---------------------------------------------------------------------------------- patchifiers

Tensor patchify_video(const Tensor& latent, int64_t p) {
  LTX_CHECK(latent.dim() == 5, "patchify_video: expected [B, C, F, H, W], got ", latent.describe());
  LTX_CHECK(p >= 1 && latent.size(3) % p == 0 && latent.size(4) % p == 0, "patchify_video: H and W of ",
            latent.describe(), " must be multiples of the patch size ", p);
  const int64_t b = latent.size(0), c = latent.size(1), f = latent.size(2), h = latent.size(3) / p,
                w = latent.size(4) / p;
  if (p == 1) return swap_middle(latent, b, c, f * h * w, 1, {b, f * h * w, c});
  return latent.contiguous()
      .view({b, c, f, h, p, w, p})
      .permute({0, 2, 3, 5, 1, 4, 6})
      .contiguous()
      .view({b, f * h * w, c * p * p});
}

Tensor unpatchify_video(const Tensor& tokens, const VideoLatentShape& s, int64_t p) {
  LTX_CHECK(tokens.dim() == 3, "unpatchify_video: expected [B, T, C] tokens, got ", tokens.describe());
  const int64_t f = s.frames, h = s.height / p, w = s.width / p;
  LTX_CHECK(tokens.size(1) == f * h * w && tokens.size(2) % (p * p) == 0, "unpatchify_video: tokens ",
            tokens.describe(), " do not fit ", s.str(), " with patch size ", p);
  const int64_t b = tokens.size(0), c = tokens.size(2) / (p * p);
  if (p == 1) return swap_middle(tokens, b, f * h * w, c, 1, {b, c, f, h, w});
  return tokens.contiguous()
      .view({b, f, h, w, c, p, p})
      .permute({0, 4, 1, 2, 5, 3, 6})
      .contiguous()
      .view({b, c, f, h * p, w * p});
}

Tensor patchify_audio(const Tensor& latent) {
  LTX_CHECK(latent.dim() == 4, "patchify_audio: expected [B, C, T, F], got ", latent.describe());
  const int64_t b = latent.size(0), c = latent.size(1), t = latent.size(2), f = latent.size(3);
  return swap_middle(latent, b, c, t, f, {b, t, c * f});
}

Tensor unpatchify_audio(const Tensor& tokens, const AudioLatentShape& s) {
  LTX_CHECK(tokens.dim() == 3 && tokens.size(2) == s.channels * s.mel_bins, "unpatchify_audio: tokens ",
            tokens.describe(), " do not fit ", s.str());
  const int64_t b = tokens.size(0), t = tokens.size(1);
  return swap_middle(tokens, b, t, s.channels, s.mel_bins, {b, s.channels, t, s.mel_bins});
}

Tensor video_patch_grid_bounds(const VideoLatentShape& s, int64_t p) {
  LTX_CHECK(s.batch > 0 && s.frames > 0 && s.height > 0 && s.width > 0, "video_patch_grid_bounds: ", s.str(),
            " must be positive");
  const int64_t gh = (s.height + p - 1) / p, gw = (s.width + p - 1) / p, t = s.frames * gh * gw;
  Tensor out = Tensor::empty({s.batch, 3, t, 2}, DType::I64);
  int64_t* d = out.data<int64_t>();
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    int64_t tok = 0;
    for (int64_t f = 0; f < s.frames; ++f)
      for (int64_t y = 0; y < gh; ++y)
        for (int64_t x = 0; x < gw; ++x, ++tok) {
          const int64_t start[3] = {f, y * p, x * p};
          const int64_t size[3] = {1, p, p};
          for (int a = 0; a < 3; ++a) {
            int64_t* e = d + ((bi * 3 + a) * t + tok) * 2;
            e[0] = start[a];
            e[1] = start[a] + size[a];
          }
        }
  }
  return out;
}

Tensor pixel_coords(const Tensor& latent_coords, const SpatioTemporalScaleFactors& s, bool causal_fix) {
  LTX_CHECK(latent_coords.dim() == 4 && latent_coords.size(1) == 3 && latent_coords.size(3) == 2,
            "pixel_coords: expected [B, 3, T, 2] bounds, got ", latent_coords.describe());
  Tensor out = latent_coords.to(DType::I64).contiguous().clone();
  int64_t* d = out.data<int64_t>();
  const int64_t b = out.size(0), t = out.size(2);
  const int64_t scale[3] = {s.time, s.height, s.width};
  for (int64_t bi = 0; bi < b; ++bi)
    for (int a = 0; a < 3; ++a)
      for (int64_t i = 0; i < t * 2; ++i) {
        int64_t& v = d[(bi * 3 + a) * t * 2 + i];
        v *= scale[a];
        if (causal_fix && a == 0) v = std::max<int64_t>(v + 1 - s.time, 0);
      }
  return out;
}

Tensor audio_patch_grid_bounds(int64_t batch, int64_t frames, int64_t shift) {
  LTX_CHECK(batch > 0 && frames >= 0, "audio_patch_grid_bounds: batch ", batch, " frames ", frames);
  constexpr int64_t kDownsample = 4, kHop = 160, kRate = 16000;
  auto seconds = [](int64_t latent_frame) {
    // float32: mel frame = k * 4, causal shift (+1 - 4, clamped at 0), then * hop / rate.
    float mel = static_cast<float>(latent_frame) * static_cast<float>(kDownsample);
    mel = std::max((mel + 1.0f) - static_cast<float>(kDownsample), 0.0f);
    return (mel * static_cast<float>(kHop)) / static_cast<float>(kRate);
  };
  Tensor out = Tensor::empty({batch, 1, frames, 2}, DType::F32);
  float* d = out.data<float>();
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < frames; ++i) {
      d[(bi * frames + i) * 2] = seconds(shift + i);
      d[(bi * frames + i) * 2 + 1] = seconds(shift + i + 1);
    }
  return out;
}

// ---------------------------------------------------------------------------------- video tools

Tensor VideoLatentTools::positions() const {
  Tensor pos = pixel_coords(video_patch_grid_bounds(target, patch_size), scale, causal_fix).to(DType::F32);
  float* d = pos.data<float>();
  const int64_t t = pos.size(2);
  const float f = static_cast<float>(fps);
  for (int64_t bi = 0; bi < pos.size(0); ++bi)
    for (int64_t i = 0; i < t * 2; ++i) d[bi * 3 * t * 2 + i] /= f;
  return pos;
}

LatentState VideoLatentTools::create_initial_state(DType dtype, const Tensor& initial_latent) const {
  LatentState s = patchify(unpatchified_initial_state(target, positions(), dtype, initial_latent));
  Tensor kf = Tensor::zeros(s.denoise_mask.shape(), DType::F32);
  kf.narrow(1, 0, tokens_per_latent_frame()).fill(1.0);
  s.keyframes_mask = kf;
  return s;
}

LatentState VideoLatentTools::patchify(const LatentState& u) const {
  LTX_CHECK(u.latent.shape() == target.shape(), "VideoLatentTools::patchify: latent ", u.latent.describe(),
            " is not the target ", target.str());
  LatentState s = u;
  s.latent = patchify_video(u.latent, patch_size);
  s.clean_latent = patchify_video(u.clean_latent, patch_size);
  s.denoise_mask = patchify_video(u.denoise_mask, patch_size);
  if (u.keyframes_mask.defined()) s.keyframes_mask = patchify_video(u.keyframes_mask, patch_size);
  return s;
}

LatentState VideoLatentTools::unpatchify(const LatentState& p) const {
  LatentState s = p;
  s.latent = unpatchify_video(p.latent, target, patch_size);
  s.clean_latent = unpatchify_video(p.clean_latent, target, patch_size);
  s.denoise_mask = unpatchify_video(p.denoise_mask, target.mask_shape(), patch_size);
  if (p.keyframes_mask.defined())
    s.keyframes_mask = unpatchify_video(p.keyframes_mask, target.mask_shape(), patch_size);
  return s;
}

Tensor VideoLatentTools::extract_generated_keyframes(const LatentState& state) const {
  if (!state.generated_keyframe_layout) return Tensor();
  const GeneratedKeyframeLayout& l = *state.generated_keyframe_layout;
  LTX_CHECK(l.first_token + l.num_tokens() <= state.tokens(), "generated keyframe layout spans tokens [",
            l.first_token, ", ", l.first_token + l.num_tokens(), ") but the state has only ", state.tokens(),
            " tokens; the layout belongs to another token sequence");
  LTX_CHECK(l.tokens_per_keyframe == tokens_per_latent_frame(), "generated keyframe layout has ",
            l.tokens_per_keyframe, " tokens per keyframe but the target uses ", tokens_per_latent_frame(),
            "; the layout belongs to another resolution");
  std::vector<Tensor> frames;
  for (int64_t k = 0; k < l.num_keyframes(); ++k) {
    Tensor tok = state.latent.narrow(1, l.first_token + k * l.tokens_per_keyframe, l.tokens_per_keyframe);
    frames.push_back(unpatchify_video(tok, target.with_frames(1), patch_size));
  }
  return ops::concat(frames, 2);
}

LatentState VideoLatentTools::clear_conditioning(const LatentState& state) const {
  Tensor keyframes = extract_generated_keyframes(state);
  LatentState s = target_tokens(state, token_count());
  s.generated_keyframes = std::move(keyframes);
  return s;
}

// ---------------------------------------------------------------------------------- audio tools

Tensor AudioLatentTools::positions() const { return audio_patch_grid_bounds(target.batch, target.frames, shift); }

LatentState AudioLatentTools::create_initial_state(DType dtype, const Tensor& initial_latent) const {
  return patchify(unpatchified_initial_state(target, positions(), dtype, initial_latent));
}

LatentState AudioLatentTools::patchify(const LatentState& u) const {
  LTX_CHECK(u.latent.shape() == target.shape(), "AudioLatentTools::patchify: latent ", u.latent.describe(),
            " is not the target ", target.str());
  LatentState s = u;
  s.latent = patchify_audio(u.latent);
  s.clean_latent = patchify_audio(u.clean_latent);
  s.denoise_mask = patchify_audio(u.denoise_mask);
  if (u.keyframes_mask.defined()) s.keyframes_mask = patchify_audio(u.keyframes_mask);
  return s;
}

LatentState AudioLatentTools::unpatchify(const LatentState& p) const {
  LatentState s = p;
  s.latent = unpatchify_audio(p.latent, target);
  s.clean_latent = unpatchify_audio(p.clean_latent, target);
  s.denoise_mask = unpatchify_audio(p.denoise_mask, target.mask_shape());
  if (p.keyframes_mask.defined()) s.keyframes_mask = unpatchify_audio(p.keyframes_mask, target.mask_shape());
  return s;
}

LatentState AudioLatentTools::clear_conditioning(const LatentState& state) const {
  return target_tokens(state, token_count());
}

// ---------------------------------------------------------------------------------- helpers

Tensor post_process_latent(const Tensor& denoised, const Tensor& mask_t, const Tensor& clean_t) {
  LTX_CHECK(denoised.dim() == 3 && clean_t.shape() == denoised.shape(), "post_process_latent: denoised ",
            denoised.describe(), " and clean ", clean_t.describe(), " must both be [B, T, C]");
  LTX_CHECK(mask_t.dim() == 3 && mask_t.size(0) == denoised.size(0) && mask_t.size(1) == denoised.size(1) &&
                mask_t.size(2) == 1,
            "post_process_latent: mask ", mask_t.describe(), " must be [B, T, 1] for ", denoised.describe());
  // d * m + clean * (1 - m), ops on the tensors' device with one rounding each, in f32; an f64
  // denoised (the res_2s loop) keeps d * m and the sum in f64 while clean * (1 - m) stays f32, as
  // the reference's clean.float() * (1 - mask).
  const Tensor m = mask_t.to(DType::F32);
  const Tensor keep = ops::add(ops::neg(m), 1.0);  // -m + 1 == 1 - m exactly
  const Tensor d = denoised.dtype() == DType::F64 ? denoised : denoised.to(DType::F32);
  return ops::add(ops::mul(d, m), ops::mul(clean_t.to(DType::F32), keep)).to(denoised.dtype());
}

Tensor timesteps_from_mask(const Tensor& denoise_mask, double sigma) {
  return ops::mul(denoise_mask.to(DType::F32), static_cast<float>(sigma));
}

std::vector<MaskRuns> mask_runs_of(const Tensor& denoise_mask) {
  LTX_CHECK(denoise_mask.defined() && denoise_mask.dim() >= 1, "mask_runs_of: the denoise mask must be [B, T, 1], got ",
            denoise_mask.defined() ? denoise_mask.describe() : "nothing");
  const int64_t b = denoise_mask.size(0);
  const std::vector<float> v = denoise_mask.to_float_vector();
  const size_t per = b > 0 ? v.size() / static_cast<size_t>(b) : 0;
  std::vector<MaskRuns> out(static_cast<size_t>(b));
  for (size_t i = 0; i < out.size(); ++i) {
    const float* row = v.data() + i * per;
    MaskRuns& runs = out[i];
    for (size_t t = 0; t < per; ++t) {
      // Compared as bits, so -0 and 0 are two runs; a product with sigma keeps what the per-token
      // values would hold.
      if (runs.empty() || std::memcmp(&row[t], &runs.back().value, sizeof(float)) != 0) {
        if (runs.size() == kMaxMaskRuns) {
          runs.clear();
          break;
        }
        runs.push_back({row[t], 0});
      }
      ++runs.back().length;
    }
  }
  return out;
}

std::optional<std::vector<MaskRuns>> mask_runs(const LatentState& state) {
  if (!state.denoise_mask.defined()) return std::nullopt;
  std::vector<MaskRuns> runs;
  if (state.denoise_mask.device().is_cpu()) {
    runs = mask_runs_of(state.denoise_mask);
  } else if (state.mask_levels && same_view(state.mask_levels->mask, state.denoise_mask)) {
    runs = state.mask_levels->runs;
  } else {
    return std::nullopt;
  }
  for (const MaskRuns& r : runs)
    if (r.empty()) return std::nullopt;
  return runs;
}

void refresh_mask_levels(LatentState& state) {
  state.mask_levels =
      state.denoise_mask.defined()
          ? std::make_shared<const MaskLevels>(MaskLevels{state.denoise_mask, mask_runs_of(state.denoise_mask)})
          : nullptr;
}

std::optional<std::vector<float>> uniform_values(const std::vector<MaskRuns>& runs) {
  std::vector<float> out;
  for (const MaskRuns& r : runs) {
    if (r.size() != 1) return std::nullopt;
    out.push_back(r.front().value);
  }
  return out;
}

std::optional<std::vector<float>> uniform_mask_values(const LatentState& state) {
  const std::optional<std::vector<MaskRuns>> runs = mask_runs(state);
  return runs ? uniform_values(*runs) : std::nullopt;
}

}  // namespace ltx::sampling
