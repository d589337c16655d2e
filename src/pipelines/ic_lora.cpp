#include "pipelines/ic_lora.h"

#include <cmath>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "media/preprocess.h"
#include "models/video_vae/video_vae.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/resample.h"
#include "ops/shape.h"
#include "pipelines/denoisers.h"
#include "pipelines/stages.h"
#include "sampling/params.h"

namespace ltx::pipelines {

namespace ic_lora {

int64_t read_lora_factor(const std::string& lora_path, const std::string& key, int64_t fallback) {
  const auto file = io::SafetensorsFile::open(lora_path);
  const auto& meta = file->metadata();
  const auto it = meta.find(key);
  if (it == meta.end()) return fallback;
  size_t used = 0;
  int64_t factor = 0;
  try {
    factor = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LTX_CHECK(used == it->second.size() && used > 0 && factor >= 1, "LoRA ", lora_path, ": metadata ", key, " '",
            it->second, "' is not a positive integer; fix or remove the key");
  return factor;
}

ReferenceScaleFactors read_reference_scale_factors(const std::string& lora_path) {
  return {read_lora_factor(lora_path, "reference_downscale_factor", 1),
          read_lora_factor(lora_path, "reference_temporal_scale_factor", 1)};
}

ReferenceScaleFactors combine_reference_scale_factors(const std::vector<std::string>& lora_paths,
                                                      const std::string& flag) {
  ReferenceScaleFactors out;
  std::string downscale_from, temporal_from;
  for (const std::string& path : lora_paths) {
    const ReferenceScaleFactors f = read_reference_scale_factors(path);
    if (f.downscale != 1) {
      LTX_CHECK(out.downscale == 1 || out.downscale == f.downscale, flag, ": the IC-LoRAs disagree on "
                "reference_downscale_factor (", downscale_from, ": ", out.downscale, ", ", path, ": ", f.downscale,
                "); LoRAs trained at different reference scales cannot be combined");
      out.downscale = f.downscale;
      downscale_from = path;
    }
    if (f.temporal != 1) {
      LTX_CHECK(out.temporal == 1 || out.temporal == f.temporal, flag, ": the IC-LoRAs disagree on "
                "reference_temporal_scale_factor (", temporal_from, ": ", out.temporal, ", ", path, ": ", f.temporal,
                "); LoRAs trained at different reference frame rates cannot be combined");
      out.temporal = f.temporal;
      temporal_from = path;
    }
  }
  return out;
}

Tensor downsample_mask_to_latent(const Tensor& mask, int64_t frames, int64_t height, int64_t width) {
  LTX_CHECK(mask.dim() == 5 && mask.size(1) == 1, "IC-LoRA attention mask: expected [B, 1, F, H, W], got ",
            mask.shape().str());
  const int64_t b = mask.size(0), f_pix = mask.size(2);
  // Computed in f32; each step rounds to the mask's dtype as the reference's ops on that dtype do.
  const DType dtype = mask.dtype();
  const auto rounded = [dtype](const Tensor& t) { return dtype == DType::F32 ? t : t.to(dtype).to(DType::F32); };
  // [B, 1, F, H, W] -> [(B F), 1, H, W], area-averaged per frame.
  const Tensor frames_first = mask.to(Device::cpu(), DType::F32).permute({0, 2, 1, 3, 4}).reshape(
      {b * f_pix, 1, mask.size(3), mask.size(4)});
  const Tensor down = rounded(ops::interpolate(frames_first, {height, width}, ops::InterpMode::Area))
                          .reshape({b, f_pix, height, width});
  Tensor latent = down.narrow(1, 0, 1);
  if (f_pix > 1 && frames > 1) {
    LTX_CHECK((f_pix - 1) % (frames - 1) == 0, "IC-LoRA attention mask: ", f_pix, " mask frames do not fit ",
              frames, " latent frames ((frames - 1) must be a multiple of ", frames - 1,
              "); give the mask as many frames as the reference video");
    const int64_t t = (f_pix - 1) / (frames - 1);
    const Tensor rest =
        rounded(ops::mean(down.narrow(1, 1, f_pix - 1).reshape({b, frames - 1, t, height, width}), {2}));
    latent = ops::concat({latent, rest}, 1);
  }
  return latent.reshape({b, latent.size(1) * height * width});
}

Tensor temporal_subsample(const Tensor& video, int64_t factor) {
  std::vector<int64_t> idx = {0};
  for (int64_t i = 1; i < video.size(2); i += factor) idx.push_back(i);
  return ops::index_select(video, 2, Tensor::from_vector(idx, {static_cast<int64_t>(idx.size())}));
}

namespace {

Tensor first_frames(const Tensor& frames, int64_t max_frames, const char* what, bool allow_float = false) {
  LTX_CHECK(frames.dim() == 4 && frames.size(3) == 3 &&
                (frames.dtype() == DType::U8 || (allow_float && frames.dtype() == DType::F32)),
            what, ": frames must be u8 [F, H, W, 3]", allow_float ? " (or an EXR folder's f32 frames)" : "", ", got ",
            dtype_name(frames.dtype()), " ", frames.shape().str());
  LTX_CHECK(frames.size(0) >= 1, what, ": the video has no frames");
  return max_frames > 0 && frames.size(0) > max_frames ? frames.narrow(0, 0, max_frames) : frames;
}

}  // namespace

Tensor preprocess_reference_video(const Tensor& frames, int64_t height, int64_t width, int64_t max_frames,
                                  DType dtype, std::optional<media::HdrColorSpace> hdr) {
  const Tensor used = first_frames(frames, max_frames, "IC-LoRA reference video", true);
  if (used.dtype() != DType::U8) {
    LTX_CHECK(hdr, "IC-LoRA reference video: EXR input requires --hdr ", media::hdr_color_space_choices(),
              " to declare the source colour space");
    return media::prepare_hdr_frames(used, height, width, *hdr, media::ResizeMode::ReflectPad, dtype);
  }
  return media::normalize_to_unit_range(media::resize_and_center_crop(used, height, width), dtype);
}

Tensor mask_from_frames(const Tensor& frames, int64_t height, int64_t width, int64_t max_frames) {
  const Tensor used = first_frames(frames, max_frames, "--conditioning-attention-mask");
  // The reference prepares the mask clip in bf16: each step below rounds to bf16 as its ops do.
  const Tensor unit = media::normalize_to_unit_range(media::resize_and_center_crop(used, height, width), DType::BF16)
                          .to(DType::F32);
  const Tensor gray = ops::mean(unit, {1}, true).to(DType::BF16).to(DType::F32);
  const Tensor shifted = ops::add(gray, 1.0).to(DType::BF16).to(DType::F32);
  return ops::clamp(ops::mul(shifted, 0.5), 0.0, 1.0).to(DType::BF16);
}

void append_reference_video_conditionings(sampling::ConditioningItems& items,
                                          const std::vector<VideoConditioning>& videos,
                                          const models::video_vae::VideoEncoder& encoder,
                                          const ReferenceVideoOptions& o) {
  const int64_t scale = o.factors.downscale;
  LTX_CHECK(scale >= 1 && o.factors.temporal >= 1, "IC-LoRA: reference scale factors must be >= 1 (got ", scale,
            ", ", o.factors.temporal, ")");
  LTX_CHECK(o.height % scale == 0 && o.width % scale == 0, "IC-LoRA: the stage size ", o.height, "x", o.width,
            " (height x width) must be divisible by the IC-LoRA's reference_downscale_factor ", scale,
            "; pick --height / --width so that half of each is a multiple of ", scale);
  const int64_t ref_height = o.height / scale, ref_width = o.width / scale;
  const auto vae = encoder.video_scale_factors();
  LTX_CHECK(ref_height % vae.height == 0 && ref_width % vae.width == 0, "IC-LoRA: the reference videos are prepared at ",
            ref_height, "x", ref_width, " (stage size / reference_downscale_factor ", scale,
            "), which the video VAE's x", vae.height, " grid does not divide; pick --height / --width so that ",
            "each divided by ", 2 * scale, " is a multiple of ", vae.height);
  for (const VideoConditioning& v : videos) {
    Tensor pixels = preprocess_reference_video(v.frames, ref_height, ref_width, o.num_frames, o.dtype, o.hdr);
    if (o.factors.temporal > 1) pixels = temporal_subsample(pixels, o.factors.temporal);
    const Tensor on_device = pixels.to(o.device, DType::F32);
    const Tensor latent =
        (o.encode_tiling ? encoder.tiled_encode(on_device, o.encode_tiling) : encoder(on_device)).to(Device::cpu(), o.dtype);
    std::shared_ptr<const sampling::ConditioningItem> item =
        std::make_shared<sampling::VideoConditionByReferenceLatent>(latent, scale, o.factors.temporal, v.strength);
    std::optional<sampling::CrossAttentionMask> attention;
    if (o.attention_mask.defined()) {
      const Tensor weights = downsample_mask_to_latent(o.attention_mask, latent.size(2), latent.size(3), latent.size(4));
      // The weights times the strength, rounded to the mask's dtype (a mask clip's is bf16).
      const DType md = o.attention_mask.dtype();
      const Tensor scaled = ops::mul(weights, o.attention_strength);
      attention = md == DType::F32 ? scaled : scaled.to(md).to(DType::F32);
    } else if (o.attention_strength < 1.0) {
      attention = o.attention_strength;
    }
    if (attention) item = std::make_shared<sampling::AttentionStrengthWrapper>(item, *attention);
    items.push_back(std::move(item));
  }
}

}  // namespace ic_lora

void validate_ic_lora_request(const GenerationRequest& r, const Components& c) {
  LTX_CHECK(!r.video_conditionings.empty(), "pipeline ic-lora: no reference video: pass --video-conditioning PATH "
            "STRENGTH (the control video the IC-LoRA was trained on, e.g. a depth or pose clip)");
  for (size_t i = 0; i < r.video_conditionings.size(); ++i) {
    const VideoConditioning& v = r.video_conditionings[i];
    const std::string which = v.path.empty() ? str("reference video ", i + 1) : str("--video-conditioning '", v.path, "'");
    LTX_CHECK(v.frames.defined() && v.frames.dim() == 4 && v.frames.size(0) >= 1 && v.frames.size(3) == 3 &&
                  (v.frames.dtype() == DType::U8 || v.frames.dtype() == DType::F32),
              "pipeline ic-lora: ", which, " has no decoded u8 [F, H, W, 3] frames (or f32 EXR frames)");
    LTX_CHECK(v.frames.dtype() == DType::U8 || r.hdr, "pipeline ic-lora: ", which,
              " is an EXR folder: EXR input requires --hdr ", media::hdr_color_space_choices(),
              " to declare the source colour space");
    LTX_CHECK(v.strength >= 0.0 && v.strength <= 1.0, "pipeline ic-lora: ", which, ": STRENGTH ", v.strength,
              " must be in [0, 1]");
  }
  LTX_CHECK(r.conditioning_attention_strength >= 0.0 && r.conditioning_attention_strength <= 1.0,
            "pipeline ic-lora: --conditioning-attention-mask STRENGTH ", r.conditioning_attention_strength,
            " must be in [0, 1]");
  if (r.conditioning_attention_mask.defined())
    LTX_CHECK(r.conditioning_attention_mask.dim() == 5 && r.conditioning_attention_mask.size(1) == 1,
              "pipeline ic-lora: the attention mask must be [B, 1, F, H, W], got ",
              r.conditioning_attention_mask.shape().str());
  LTX_CHECK(r.reference_downscale_factor >= 1 && r.reference_temporal_scale_factor >= 1,
            "pipeline ic-lora: the IC-LoRA's reference scale factors must be >= 1 (got ", r.reference_downscale_factor,
            ", ", r.reference_temporal_scale_factor, ")");
  const int64_t f = r.reference_downscale_factor;
  LTX_CHECK((r.height / 2) % f == 0 && (r.width / 2) % f == 0, "pipeline ic-lora: stage 1 runs at ", r.height / 2, "x",
            r.width / 2, ", which the IC-LoRA's reference_downscale_factor ", f,
            " does not divide; pick --height / --width whose halves are multiples of ", f);
  LTX_CHECK(c.video_encoder, "pipeline ic-lora: the reference videos need the video VAE encoder (pass "
            "--video-vae-path or a full checkpoint)");
}

GenerationResult run_ic_lora(const GenerationRequest& r, const Components& c, const TextContexts& ctx,
                             const ProgressCallback& progress) {
  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise = r.noise ? *r.noise : static_cast<sampling::NoiseSource&>(seeded);
  const Tensor audio_ctx = r.audio ? ctx.audio_positive : Tensor();

  std::vector<PreparedImage> images;
  if (progress) progress("image conditioning", 0, 1);
  if (!r.images.empty())
    images = prepare_images(r.images, static_cast<int>(sampling::detect_params(c.model_version).default_image_crf),
                            r.hdr);
  auto image_items = [&](int64_t h, int64_t w) {
    return images.empty() ? sampling::ConditioningItems{}
                          : image_conditionings(images, h, w, *c.video_encoder, r.dtype, c.device);
  };

  // ---- stage 1: half size with the reference videos (the IC-LoRA is fused into this stage only).
  const models::transformer::LTXModel& model1 = stage_model(c, Stage::One);
  StageConfig s1 = first_stage_config(r, c, model1, r.height / 2, r.width / 2, r.num_frames);
  s1.sigmas = sigmas_or(r.stage_1_sigmas, sampling::distilled_sigmas());
  ModalityInput video1;
  video1.conditionings = image_items(s1.height, s1.width);
  ic_lora::ReferenceVideoOptions ro;
  ro.height = s1.height;
  ro.width = s1.width;
  ro.num_frames = r.num_frames;
  ro.factors = {r.reference_downscale_factor, r.reference_temporal_scale_factor};
  ro.attention_strength = r.conditioning_attention_strength;
  ro.attention_mask = r.conditioning_attention_mask;
  ro.dtype = r.dtype;
  ro.device = c.device;
  ro.hdr = r.hdr;
  ic_lora::append_reference_video_conditionings(video1.conditionings, r.video_conditionings, *c.video_encoder, ro);
  if (progress) progress("image conditioning", 1, 1);
  std::optional<ModalityInput> audio1;
  if (r.audio) audio1 = ModalityInput{};
  StageOutput out1;
  {
    const SimpleDenoiser d(model1, ctx.video_positive, audio_ctx);
    out1 = run_diffusion_stage(s1, video1, audio1, d.callback(), noise, progress);
  }

  GenerationResult res;
  res.frame_rate = r.frame_rate;
  res.num_frames = r.num_frames;
  if (r.skip_stage_2) {
    res.height = s1.height;
    res.width = s1.width;
    res.video_latent = out1.video_latent;
    res.audio_latent = out1.audio_latent;
    return res;
  }

  // ---- stage 2: x2 upsample, refine with the base weights; the images at full size, no reference.
  if (progress) progress("upsample", 0, 1);
  const Tensor upscaled = upsample_on_device(out1.video_latent.narrow(0, 0, 1).contiguous(), latent_statistics(c),
                                             *c.spatial_upsampler, r.dtype, c.device);
  if (progress) progress("upsample", 1, 1);
  const models::transformer::LTXModel& model2 = stage_model(c, Stage::Two);
  RefinementStage s2 = refinement_stage(s1, r, model2, upscaled, out1.audio_latent);
  s2.video.conditionings = image_items(s2.config.height, s2.config.width);
  StageOutput out2;
  {
    const SimpleDenoiser d(model2, ctx.video_positive, audio_ctx);
    out2 = run_diffusion_stage(s2.config, s2.video, s2.audio, d.callback(), noise, progress);
  }
  res.height = r.height;
  res.width = r.width;
  res.video_latent = out2.video_latent;
  res.audio_latent = out2.audio_latent;
  return res;
}

}  // namespace ltx::pipelines
