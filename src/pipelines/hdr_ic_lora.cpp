#include "pipelines/hdr_ic_lora.h"

#include <algorithm>
#include <cmath>

#include "core/dtype_bits.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "media/preprocess.h"
#include "ops/shape.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/denoisers.h"
#include "pipelines/ic_lora.h"
#include "pipelines/stages.h"
#include "sampling/noise.h"

namespace ltx::pipelines::hdr_ic_lora {

namespace {
constexpr int64_t kAlignment = 64;  // two stages: a x2 upsample of a 32-aligned latent size
}  // namespace

HdrLoraConfig read_hdr_lora_config(const std::string& lora_path, const std::string& flag) {
  const auto file = io::SafetensorsFile::open(lora_path);
  const auto& meta = file->metadata();
  const auto value = [&](const char* key) {
    const auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  const std::string transform = value("hdr_transform");
  LTX_CHECK(!transform.empty() || !value("use_hdr_transform").empty(), flag, " '", lora_path,
            "': the LoRA has no HDR metadata (hdr_transform or use_hdr_transform), so it is not an "
            "HDR IC-LoRA; pass the HDR IC-LoRA file, or use --pipeline ic-lora for other IC-LoRAs");
  HdrLoraConfig config;
  if (!transform.empty() && transform != "true")
    config.transfer = media::parse_hdr_transfer(
        transform, str(flag, " '", lora_path, "': metadata hdr_transform"));
  config.reference_downscale_factor =
      ic_lora::read_lora_factor(lora_path, "reference_downscale_factor", 1);
  return config;
}

HdrResolution align_resolution(int64_t height, int64_t width) {
  LTX_CHECK(height >= 1 && width >= 1, "HDR IC-LoRA: the size must be positive; got ", width, "x",
            height);
  HdrResolution r;
  r.gen_height = (height + kAlignment - 1) / kAlignment * kAlignment;
  r.gen_width = (width + kAlignment - 1) / kAlignment * kAlignment;
  r.crop_height = height;
  r.crop_width = width;
  return r;
}

int64_t generated_frames(int64_t num_frames, bool high_quality) {
  return high_quality ? 2 * num_frames - 1 : num_frames;
}

Tensor reference_video(const Tensor& frames, int64_t height, int64_t width, int64_t num_frames,
                       int64_t downscale, bool high_quality, DType dtype) {
  const char* who = "HDR IC-LoRA reference video";
  LTX_CHECK(frames.defined() && frames.dim() == 4 && frames.size(3) == 3 &&
                frames.dtype() == DType::U8 && frames.size(0) >= 1,
            who, ": expected u8 frames [F, H, W, 3] with F >= 1; got ",
            frames.defined() ? frames.describe() : std::string("an undefined tensor"));
  LTX_CHECK(num_frames >= 1 && downscale >= 1, who,
            ": num_frames and the downscale factor must "
            "be positive; got ",
            num_frames, " and ", downscale);
  LTX_CHECK(height % downscale == 0 && width % downscale == 0, who, ": the output size ", height,
            "x", width, " must be divisible by the LoRA's reference_downscale_factor ", downscale);
  const int64_t ref_h = height / downscale, ref_w = width / downscale;
  const int64_t cap = high_quality ? (num_frames + 1) / 2 : num_frames;
  const int64_t n = std::min(cap, frames.size(0));
  // [1, 3, n, h, w] on the 0..255 scale; then / 255, clamp, * 2 - 1 per element in f32.
  const Tensor fitted = media::resize_and_reflect_pad(frames.narrow(0, 0, n), ref_h, ref_w);
  Tensor out = Tensor::empty(fitted.shape(), DType::F32);
  const float* s = fitted.data<float>();
  float* d = out.data<float>();
  for (int64_t i = 0; i < fitted.numel(); ++i)
    d[i] = std::clamp(s[i] / 255.0f, 0.0f, 1.0f) * 2.0f - 1.0f;
  if (high_quality) {
    // repeat_interleave(2) along frames, then the first num_frames.
    std::vector<Tensor> twice;
    for (int64_t f = 0; f < n; ++f) {
      twice.push_back(out.narrow(2, f, 1));
      twice.push_back(out.narrow(2, f, 1));
    }
    out = ops::concat(twice, 2);
    out = out.narrow(2, 0, std::min(num_frames, out.size(2))).contiguous();
  }
  return out.to(dtype);
}

namespace tiling = models::tiling;

tiling::TileCountConfig default_stage2_tiling() {
  tiling::TileCountConfig c;
  c.frames = tiling::DimensionTilingConfig(2, 8);
  c.height = tiling::DimensionTilingConfig(2, 6);
  c.width = tiling::DimensionTilingConfig(2, 6);
  return c;
}

tiling::DimensionTilingConfig clamp_tile_count(const tiling::DimensionTilingConfig& c,
                                               int64_t size) {
  if (c.num_tiles <= 1) return c;
  if (size < c.num_tiles) return tiling::DimensionTilingConfig(1, 0);
  const int64_t max_overlap = size - c.num_tiles;
  if (c.overlap <= max_overlap) return c;
  return tiling::DimensionTilingConfig(c.num_tiles, max_overlap);
}

std::vector<tiling::Tile> stage2_tiles(int64_t frames, int64_t height, int64_t width,
                                       const tiling::TileCountConfig& config) {
  LTX_CHECK(frames >= 1 && height >= 1 && width >= 1, "HDR IC-LoRA stage 2: empty latent ", frames,
            "x", height, "x", width);
  tiling::TileCountConfig clamped;
  clamped.frames = clamp_tile_count(config.frames, frames);
  clamped.height = clamp_tile_count(config.height, height);
  clamped.width = clamp_tile_count(config.width, width);
  const tiling::Splitters s =
      clamped.to_splitters(tiling::kVideoScaleFactors, std::nullopt, /*causal_temporal=*/false);
  const tiling::MappingOperation identity = tiling::spatial_slice_mapping(1);
  const Shape shape{frames, height, width};
  return tiling::create_tiles(shape, {s[0], s[1], s[2]}, {identity, identity, identity}, shape);
}

TilePixelSize tile_pixel_size(const tiling::Tile& tile) {
  const auto& sf = tiling::kVideoScaleFactors;
  return {(tile.in[0].length() - 1) * sf.time + 1, tile.in[1].length() * sf.height,
          tile.in[2].length() * sf.width};
}

Tensor tile_reference_latent(const Tensor& reference, const tiling::Tile& tile, int64_t downscale) {
  LTX_CHECK(reference.defined() && reference.dim() == 5 && downscale >= 1,
            "tile_reference_latent: expected a latent [B, C, F, h, w] and a positive factor");
  const tiling::Range& f = tile.in[0];
  const int64_t h0 = tile.in[1].start / downscale, h1 = tile.in[1].stop / downscale;
  const int64_t w0 = tile.in[2].start / downscale, w1 = tile.in[2].stop / downscale;
  // Python slicing clamps to the extent.
  const auto clip = [](int64_t v, int64_t n) { return std::min(std::max<int64_t>(v, 0), n); };
  const int64_t F = reference.size(2), H = reference.size(3), W = reference.size(4);
  return reference.slice(2, clip(f.start, F), clip(f.stop, F))
      .slice(3, clip(h0, H), clip(h1, H))
      .slice(4, clip(w0, W), clip(w1, W));
}

void blend_tile(const Tensor& output, const Tensor& tile_latent, const tiling::Tile& tile,
                DType precision) {
  LTX_CHECK(precision == DType::F32 || precision == DType::BF16,
            "blend_tile: the blend runs in f32 or bf16; got ", dtype_name(precision));
  const bool bf16 = precision == DType::BF16;
  const auto round = [bf16](float x) {
    return bf16 ? dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(x)) : x;
  };
  LTX_CHECK(output.defined() && output.dim() == 5 && output.dtype() == DType::F32 &&
                output.device().is_cpu() && output.is_contiguous(),
            "blend_tile: the output must be a contiguous f32 CPU latent [B, C, F, H, W]");
  const int64_t tf = tile.in[0].length(), th = tile.in[1].length(), tw = tile.in[2].length();
  LTX_CHECK(tile_latent.defined() && tile_latent.dim() == 5 &&
                tile_latent.size(0) == output.size(0) && tile_latent.size(1) == output.size(1) &&
                tile_latent.size(2) == tf && tile_latent.size(3) == th && tile_latent.size(4) == tw,
            "blend_tile: a tile of ", tf, "x", th, "x", tw, " latent cells cannot take ",
            tile_latent.defined() ? tile_latent.describe() : std::string("an undefined tensor"));
  const Tensor src = tile_latent.to(Device::cpu(), DType::F32).contiguous();
  const int64_t B = output.size(0), C = output.size(1), F = output.size(2), H = output.size(3),
                W = output.size(4);
  const auto& m = tile.masks;
  const float* in = src.data<float>();
  float* out = output.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t f = 0; f < tf; ++f)
        for (int64_t h = 0; h < th; ++h)
          for (int64_t w = 0; w < tw; ++w) {
            const float weight = round((m[0][static_cast<size_t>(f)] * m[1][static_cast<size_t>(h)]) *
                                       m[2][static_cast<size_t>(w)]);
            const int64_t o =
                (((b * C + c) * F + tile.in[0].start + f) * H + tile.in[1].start + h) * W +
                tile.in[2].start + w;
            out[o] = round(out[o] + round(in[(((b * C + c) * tf + f) * th + h) * tw + w] * weight));
          }
}

namespace {

// The reference videos as VideoConditionByReferenceLatent items at one stage's size.
std::vector<Tensor> encode_references(const GenerationRequest& r, const Components& c,
                                      int64_t height, int64_t width, int64_t frames,
                                      const HdrIcLoraOptions& o) {
  std::vector<Tensor> latents;
  for (const VideoConditioning& v : r.video_conditionings) {
    const Tensor pixels = reference_video(v.frames, height, width, frames,
                                          o.lora.reference_downscale_factor, o.high_quality, r.dtype);
    latents.push_back((*c.video_encoder)(pixels.to(c.device, DType::F32)).to(Device::cpu(), r.dtype));
  }
  return latents;
}

}  // namespace

void validate_request(const GenerationRequest& r, const Components& c, const TextContexts* contexts) {
  constexpr const char* kName = "pipeline hdr-ic-lora";
  LTX_CHECK(r.num_frames >= 1 && (r.num_frames - 1) % 8 == 0, kName, ": num_frames ", r.num_frames,
            " is not 8k + 1 (e.g. 9, 17, ..., 161): pass --num-frames ",
            std::max<int64_t>(1, (r.num_frames - 1) / 8 * 8 + 1));
  LTX_CHECK(r.height > 0 && r.width > 0, kName, ": resolution ", r.height, "x", r.width,
            " (height x width) must be positive");
  LTX_CHECK(r.frame_rate > 0 && std::isfinite(r.frame_rate), kName, ": frame rate ", r.frame_rate,
            " must be a positive number");
  LTX_CHECK(r.dtype == DType::BF16 || r.dtype == DType::F32, kName, ": latent dtype ",
            dtype_name(r.dtype), " is not supported (bf16 or f32)");
  LTX_CHECK(!r.video_conditionings.empty(), kName,
            ": no reference video: pass --video-conditioning PATH (the SDR clip to turn into HDR)");
  for (const VideoConditioning& v : r.video_conditionings) {
    LTX_CHECK(v.strength >= 0.0 && v.strength <= 1.0, kName, ": --video-conditioning '", v.path,
              "': STRENGTH ", v.strength, " must be in [0, 1]");
    LTX_CHECK(v.frames.defined() && v.frames.dim() == 4 && v.frames.size(0) > 0 &&
                  v.frames.dtype() == DType::U8,
              kName, ": --video-conditioning '", v.path, "': no u8 [F, H, W, 3] frames");
  }
  LTX_CHECK(r.images.empty() && !r.retake && !r.dubit && !r.conditioning_attention_mask.defined() &&
                !r.skip_stage_2 && r.temporal_upsample_rounds == 0 &&
                r.num_generated_keyframes == 0 && r.generated_keyframe_positions.empty(),
            kName, ": takes only reference videos (no images, source clip, attention mask, "
            "skipped stage, temporal rounds or generated keyframes)");
  LTX_CHECK(c.transformer || c.stage_transformer, kName,
            ": no transformer given (load one with --distilled-checkpoint-path or --checkpoint-path)");
  LTX_CHECK(c.video_encoder && c.spatial_upsampler, kName,
            ": needs the video VAE encoder and the spatial upsampler (pass --spatial-upsampler-path)");
  if (contexts)
    LTX_CHECK(contexts->video_positive.defined(), kName, ": the prompt's video context is missing");
}

HdrIcLoraLatent run_hdr_ic_lora(const GenerationRequest& r, const Components& c,
                                const TextContexts& ctx, const HdrIcLoraOptions& o,
                                const ProgressCallback& progress) {
  LTX_CHECK(!r.video_conditionings.empty(),
            "pipeline hdr-ic-lora: no reference video: pass --video-conditioning PATH STRENGTH "
            "(the SDR clip to turn into HDR)");
  LTX_CHECK(c.video_encoder && c.spatial_upsampler,
            "pipeline hdr-ic-lora: needs the video VAE encoder and the spatial upsampler");
  for (const VideoConditioning& v : r.video_conditionings)
    LTX_CHECK(v.strength >= 0.0 && v.strength <= 1.0, "pipeline hdr-ic-lora: --video-conditioning '",
              v.path, "': STRENGTH ", v.strength, " must be in [0, 1]");
  HdrIcLoraLatent res;
  res.size = align_resolution(r.height, r.width);
  res.generated_frames = generated_frames(r.num_frames, o.high_quality);
  const int64_t df = o.lora.reference_downscale_factor;
  // Video only: the positive video context, moved to the transformer's device once.
  const Tensor video_ctx = ctx.video_positive.to(c.device);
  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise1 = r.noise ? *r.noise : static_cast<sampling::NoiseSource&>(seeded);

  // ---- stage 1: half the generation size, the references at that size.
  if (progress) progress("video conditioning", 0, 1);
  const models::transformer::LTXModel& model1 = stage_model(c, Stage::One);
  StageConfig s1 = first_stage_config(r, c, model1, res.size.gen_height / 2,
                                      res.size.gen_width / 2, res.generated_frames);
  s1.sigmas = sigmas_or(r.stage_1_sigmas, sampling::distilled_sigmas());
  ModalityInput video1;
  const std::vector<Tensor> refs1 =
      encode_references(r, c, s1.height, s1.width, res.generated_frames, o);
  for (size_t i = 0; i < refs1.size(); ++i)
    video1.conditionings.push_back(std::make_shared<sampling::VideoConditionByReferenceLatent>(
        refs1[i], df, 1, r.video_conditionings[i].strength));
  if (progress) progress("video conditioning", 1, 1);
  StageOutput out1;
  {
    const SimpleDenoiser d(model1, video_ctx, Tensor());
    out1 = run_diffusion_stage(s1, video1, std::nullopt, d.callback(), noise1, progress);
  }

  // ---- stage 2: x2 upsample, then the tiles, each refined alone and blended back.
  if (progress) progress("upsample", 0, 1);
  const Tensor upscaled =
      upsample_on_device(out1.video_latent.narrow(0, 0, 1).contiguous(), latent_statistics(c),
                         *c.spatial_upsampler, r.dtype, c.device);
  if (progress) progress("upsample", 1, 1);
  const std::vector<Tensor> refs2 = encode_references(r, c, res.size.gen_height,
                                                      res.size.gen_width, res.generated_frames, o);
  const sampling::Sigmas& s2 = sampling::stage2_distilled_sigmas();
  const sampling::Sigmas sigmas2 = sigmas_or(r.stage_2_sigmas, {s2[0], s2[1], 0.0f});
  const models::transformer::LTXModel& model2 = stage_model(c, Stage::Two);
  const auto tiles = stage2_tiles(upscaled.size(2), upscaled.size(3), upscaled.size(4),
                                  default_stage2_tiling());
  const Tensor blended = Tensor::zeros(upscaled.shape(), DType::F32);
  const SimpleDenoiser d2(model2, video_ctx, Tensor());
  for (size_t t = 0; t < tiles.size(); ++t) {
    const tiling::Tile& tile = tiles[t];
    const TilePixelSize px = tile_pixel_size(tile);
    StageConfig st = first_stage_config(r, c, model2, px.height, px.width, px.frames);
    st.name = str("stage 2 tile ", t + 1, "/", tiles.size());
    st.sigmas = sigmas2;
    ModalityInput v;
    v.noise_scale = sigmas2.front();
    v.initial_latent = tiling::slice_ranges(upscaled, {{0, upscaled.size(0)},
                                                       {0, upscaled.size(1)},
                                                       tile.in[0],
                                                       tile.in[1],
                                                       tile.in[2]})
                           .contiguous();
    for (size_t i = 0; i < refs2.size(); ++i)
      v.conditionings.push_back(std::make_shared<sampling::VideoConditionByReferenceLatent>(
          tile_reference_latent(refs2[i], tile, df).contiguous(), df, 1,
          r.video_conditionings[i].strength));
    sampling::TorchCpuGenerator tile_seeded(r.seed + static_cast<int64_t>(t));
    sampling::NoiseSource& tile_noise =
        r.noise ? *r.noise : static_cast<sampling::NoiseSource&>(tile_seeded);
    const StageOutput out =
        run_diffusion_stage(st, v, std::nullopt, d2.callback(), tile_noise, progress);
    blend_tile(blended, out.video_latent, tile, r.dtype == DType::BF16 ? DType::BF16 : DType::F32);
  }
  res.video_latent = blended.to(r.dtype);
  return res;
}

Tensor linear_frames(const Tensor& decoded, const HdrResolution& size, bool high_quality,
                     media::HdrTransfer transfer) {
  LTX_CHECK(decoded.defined() && decoded.dim() == 4 && decoded.size(3) == 3 &&
                decoded.size(1) >= size.crop_height && decoded.size(2) >= size.crop_width,
            "HDR IC-LoRA: expected decoded frames [F, H, W, 3] of at least ", size.crop_height, "x",
            size.crop_width, "; got ",
            decoded.defined() ? decoded.describe() : std::string("an undefined tensor"));
  const Tensor cropped = decoded.narrow(1, 0, size.crop_height)
                             .narrow(2, 0, size.crop_width)
                             .slice(0, 0, decoded.size(0), high_quality ? 2 : 1);
  return media::hdr_to_linear(cropped, transfer);
}

}  // namespace ltx::pipelines::hdr_ic_lora
