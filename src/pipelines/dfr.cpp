#include "pipelines/dfr.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "ops/shape.h"
#include "pipelines/denoisers.h"
#include "pipelines/ic_lora.h"
#include "sampling/params.h"

namespace ltx::pipelines {

namespace dfr {

sampling::Sigmas temporal_sigmas() {
  const sampling::Sigmas& all = sampling::distilled_sigmas();
  return sampling::Sigmas(all.begin() + 4, all.end());
}

int64_t read_detailing_downscale_factor(const std::string& lora_path) {
  return ic_lora::read_lora_factor(lora_path, "reference_downscale_factor", 2);
}

lora::LoraSet stage_loras(Stage stage, const lora::LoraSet& user, const lora::LoraSet& distilled,
                          const lora::LoraSet& detailing) {
  lora::LoraSet set = user;
  set.insert(set.end(), distilled.begin(), distilled.end());
  if (stage == Stage::Two) set.insert(set.end(), detailing.begin(), detailing.end());
  return set;
}

int64_t output_num_frames(int64_t num_frames, int64_t rounds) { return (num_frames - 1) * (int64_t{1} << rounds) + 1; }

std::vector<PreparedImage> tile_images(const std::vector<PreparedImage>& images, const TileRange& tile) {
  if (tile.pixel_start == 0) return images;
  std::vector<PreparedImage> out;
  for (const PreparedImage& im : images) {
    if (im.frame_index < tile.pixel_start || im.frame_index > tile.pixel_end) continue;
    PreparedImage local = im;
    local.frame_index = im.frame_index - tile.pixel_start;
    out.push_back(std::move(local));
  }
  return out;
}

sampling::ConditioningItems keyframe_conditionings_from_latents(const Tensor& keyframes,
                                                                const std::vector<int64_t>& positions,
                                                                double strength) {
  LTX_CHECK(keyframes.dim() == 5, "dfr: keyframes must be [B, C, K, H, W], got ", keyframes.describe());
  LTX_CHECK(keyframes.size(2) == static_cast<int64_t>(positions.size()), "dfr: expected ", positions.size(),
            " keyframe latents, got K=", keyframes.size(2));
  sampling::ConditioningItems items;
  for (size_t i = 0; i < positions.size(); ++i)
    items.push_back(std::make_shared<sampling::VideoConditionByKeyframeIndex>(
        keyframes.narrow(2, static_cast<int64_t>(i), 1).contiguous(), positions[i], strength));
  return items;
}

Tensor slot_initials_from_video(const Tensor& video, const std::vector<int64_t>& positions, int64_t scale) {
  LTX_CHECK(video.dim() == 5, "dfr: video latent must be [B, C, F, H, W], got ", video.describe());
  LTX_CHECK(!positions.empty(), "dfr: no slot positions to seed");
  std::vector<Tensor> frames;
  for (int64_t p : positions) {
    // Python's round(): half to even.
    const auto nearest = static_cast<int64_t>(std::nearbyint(static_cast<double>(p) / static_cast<double>(scale)));
    const int64_t index = std::min(std::max<int64_t>(nearest, 0), video.size(2) - 1);
    frames.push_back(video.narrow(2, index, 1));
  }
  return ops::concat(frames, 2);
}

KeyframeBag merge_carry_forward_keyframes(const std::vector<int64_t>& anchor_positions, const Tensor& anchor_latents,
                                          const std::vector<int64_t>& slot_positions, const Tensor& slot_latents) {
  std::map<int64_t, Tensor> by_position;
  const auto add = [&](const std::vector<int64_t>& positions, const Tensor& latents, const char* label) {
    if (positions.empty()) return;
    LTX_CHECK(latents.defined(), "dfr: missing ", label, " keyframe latents for the carry-forward merge");
    LTX_CHECK(latents.dim() == 5 && latents.size(2) == static_cast<int64_t>(positions.size()), "dfr: ", label,
              " latents ", latents.describe(), " do not hold ", positions.size(), " keyframes");
    for (size_t i = 0; i < positions.size(); ++i)
      by_position[positions[i]] = latents.narrow(2, static_cast<int64_t>(i), 1);
  };
  add(anchor_positions, anchor_latents, "anchor");
  add(slot_positions, slot_latents, "slot");
  LTX_CHECK(!by_position.empty(), "dfr: the carry-forward keyframe bag is empty");
  KeyframeBag bag;
  std::vector<Tensor> parts;
  for (const auto& [position, latent] : by_position) {
    bag.positions.push_back(position);
    parts.push_back(latent);
  }
  bag.latents = ops::concat(parts, 2);
  return bag;
}

}  // namespace dfr

void validate_dfr_request(const GenerationRequest& r, const Components& c) {
  const int64_t rounds = r.temporal_upsample_rounds;
  LTX_CHECK(rounds >= 0 && rounds <= 2, "pipeline dfr: --temporal-upsample-rounds must be 0, 1 or 2, got ", rounds);
  LTX_CHECK(rounds == 0 || c.temporal_upsampler, "pipeline dfr: --temporal-upsample-rounds ", rounds,
            " needs the temporal x2 upsampler (pass --temporal-upsampler-path)");
  if (rounds > 0) {
    const auto& cfg = c.temporal_upsampler->config();
    LTX_CHECK(cfg.temporal_upsample && !cfg.spatial_upsample, "pipeline dfr: the temporal upsampler must upsample "
              "time only (its config has spatial_upsample=", cfg.spatial_upsample, ", temporal_upsample=",
              cfg.temporal_upsample, "); pass the temporal x2 upscaler file to --temporal-upsampler-path");
  }
  if (c.spatial_upsampler)
    LTX_CHECK(!c.spatial_upsampler->config().temporal_upsample, "pipeline dfr: the spatial upsampler also "
              "upsamples time; pass the spatial x2 upscaler file to --spatial-upsampler-path");
  LTX_CHECK(r.num_generated_keyframes == 0 && r.generated_keyframe_positions.empty(),
            "pipeline dfr: DFR places its keyframe slots on its own segment grid; drop --num-generated-keyframes");
  (void)dfr::resolve_canvas(r.num_frames);
  LTX_CHECK(r.detailing_downscale_factor >= 1, "pipeline dfr: the detailing downscale factor ",
            r.detailing_downscale_factor, " must be >= 1");
  if (r.detailing_lora_strength)
    LTX_CHECK(std::isfinite(*r.detailing_lora_strength), "pipeline dfr: the detailing LoRA strength must be finite");
  if (c.transformer && !c.stage_transformer) require_keyframe_embedding(c.transformer->config(), "dfr");
}

namespace {

const models::transformer::LTXModel& model_for(const Components& c, Stage stage) {
  const models::transformer::LTXModel& m = stage_model(c, stage);
  require_keyframe_embedding(m.config(), "dfr");
  return m;
}

}  // namespace

GenerationResult run_dfr(const GenerationRequest& r, const Components& c, const TextContexts& ctx,
                         const ProgressCallback& progress) {
  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise = r.noise ? *r.noise : static_cast<sampling::NoiseSource&>(seeded);
  const Tensor audio_ctx = r.audio ? ctx.audio_positive : Tensor();
  const models::video_vae::PerChannelStatistics& stats = latent_statistics(c);
  const sampling::SpatioTemporalScaleFactors scale = latent_scale_factors(c);
  const dfr::Canvas canvas = dfr::resolve_canvas(r.num_frames, scale.time);

  std::vector<PreparedImage> images;
  if (!r.images.empty()) {
    if (progress) progress("image conditioning", 0, 1);
    images = prepare_images(r.images, static_cast<int>(sampling::detect_params(c.model_version).default_image_crf),
                            r.hdr);
    if (progress) progress("image conditioning", 1, 1);
  }
  auto conditionings = [&](const std::vector<PreparedImage>& ims, int64_t h, int64_t w) {
    return ims.empty() ? sampling::ConditioningItems{} : image_conditionings(ims, h, w, *c.video_encoder, r.dtype, c.device);
  };

  // ---- stage 1: half size, keyframe slots at every segment end.
  const models::transformer::LTXModel& model1 = model_for(c, Stage::One);
  StageConfig s1 = first_stage_config(r, c, model1, r.height / 2, r.width / 2, canvas.num_frames);
  s1.sigmas = sigmas_or(r.stage_1_sigmas, sampling::distilled_sigmas());
  ModalityInput video1;
  video1.conditionings = conditionings(images, s1.height, s1.width);
  video1.conditionings.push_back(std::make_shared<sampling::VideoGeneratedKeyframeSlots>(canvas.positions));
  std::optional<ModalityInput> audio1;
  if (r.audio) audio1 = ModalityInput{};
  StageOutput out1;
  {
    const SimpleDenoiser d(model1, ctx.video_positive, audio_ctx);
    out1 = run_diffusion_stage(s1, video1, audio1, d.callback(), noise, progress);
  }
  LTX_CHECK(out1.generated_keyframes.defined(), "pipeline dfr: stage 1 returned no generated keyframes");

  // ---- upsample: the half-size video stays the detailing reference.
  if (progress) progress("upsample", 0, 1);
  const Tensor half_size_video = out1.video_latent.narrow(0, 0, 1).contiguous();
  const Tensor upsampled_keyframes =
      upsample_on_device(out1.generated_keyframes, stats, *c.spatial_upsampler, r.dtype, c.device);
  const Tensor upscaled = upsample_on_device(half_size_video, stats, *c.spatial_upsampler, r.dtype, c.device);
  if (progress) progress("upsample", 1, 1);

  // ---- stage 2: full-size detailing pass (its audio is discarded: stage 1's ships).
  const models::transformer::LTXModel& model2 = model_for(c, Stage::Two);
  RefinementStage s2 = refinement_stage(s1, r, model2, upscaled, out1.audio_latent);
  sampling::ConditioningItems& video2 = s2.video.conditionings;
  video2 = conditionings(images, s2.config.height, s2.config.width);
  video2.push_back(
      std::make_shared<sampling::VideoGeneratedKeyframeSlots>(canvas.positions, upsampled_keyframes));
  if (r.detailing_lora_strength)
    video2.push_back(std::make_shared<sampling::VideoConditionByReferenceLatent>(
        half_size_video, r.detailing_downscale_factor, 1, 1.0));
  StageOutput out2;
  {
    const SimpleDenoiser d(model2, ctx.video_positive, audio_ctx);
    out2 = run_diffusion_stage(s2.config, s2.video, s2.audio, d.callback(), noise, progress);
  }

  // ---- temporal x2 rounds: stage 2's keyframes are the first round's anchors.
  Tensor video = out2.video_latent;
  dfr::KeyframeBag carry{canvas.positions, out2.generated_keyframes};
  int64_t frames = canvas.num_frames;
  double fps = r.frame_rate;
  const sampling::Sigmas t_sigmas = dfr::temporal_sigmas();
  const models::transformer::LTXModel* model_t = r.temporal_upsample_rounds > 0 ? &model_for(c, Stage::Temporal) : nullptr;
  for (int64_t round = 1; round <= r.temporal_upsample_rounds; ++round) {
    LTX_CHECK(carry.latents.defined() && !carry.positions.empty(), "pipeline dfr: temporal round ", round,
              " has no carried keyframes");
    if (progress) progress("temporal upsample", 0, 1);
    const Tensor upsampled =
        upsample_on_device(video.narrow(0, 0, 1).contiguous(), stats, *c.temporal_upsampler, r.dtype, c.device);
    if (progress) progress("temporal upsample", 1, 1);
    frames = 2 * (frames - 1) + 1;
    fps *= 2.0;
    // Carried keyframes are single frames: only their positions move to the new grid.
    std::vector<int64_t> seams;
    for (int64_t p : carry.positions) seams.push_back(2 * p);
    const std::vector<dfr::TileRange> tiles = dfr::tile_ranges(seams, frames, int64_t{1} << round, scale.time);

    std::vector<Tensor> tile_latents;
    std::vector<int64_t> slot_positions;
    std::vector<Tensor> slot_latents;
    for (size_t ti = 0; ti < tiles.size(); ++ti) {
      const dfr::TileRange& tile = tiles[ti];
      const Tensor tile_video = upsampled.narrow(2, tile.latent_start, tile.latent_frames()).contiguous();
      ModalityInput v;
      v.conditionings = conditionings(dfr::tile_images(images, tile), r.height, r.width);
      // Every seam in the window is an anchor, the one at local frame 0 included.
      if (!tile.anchors.empty()) {
        std::vector<Tensor> anchors;
        for (int64_t p : tile.anchors) {
          const auto it = std::find(seams.begin(), seams.end(), p);
          LTX_CHECK(it != seams.end(), "pipeline dfr: anchor seam ", p, " is missing from the carried keyframes");
          anchors.push_back(carry.latents.narrow(2, it - seams.begin(), 1));
        }
        const auto items = dfr::keyframe_conditionings_from_latents(
            ops::concat(anchors, 2), dfr::remap_positions_to_local(tile.anchors, tile.pixel_start),
            dfr::kAnchorKeyframeStrength);
        v.conditionings.insert(v.conditionings.end(), items.begin(), items.end());
      }
      if (!tile.slots.empty()) {
        const std::vector<int64_t> local = dfr::remap_positions_to_local(tile.slots, tile.pixel_start);
        v.conditionings.push_back(std::make_shared<sampling::VideoGeneratedKeyframeSlots>(
            local, dfr::slot_initials_from_video(tile_video, local, scale.time)));
      }
      v.noise_scale = static_cast<double>(t_sigmas.front());
      v.initial_latent = tile_video;

      StageConfig st = s2.config;
      st.name = "temporal round " + std::to_string(round) + " tile " + std::to_string(ti);
      st.num_frames = tile.local_frames(scale.time);
      st.frame_rate = std::min(fps, dfr::kMaxConditioningFps);
      st.widths = latent_widths(model_t->config());
      st.sigmas = t_sigmas;
      st.sampler = Sampler::EulerAncestral;
      st.ancestral_eta = dfr::kTemporalAncestralEta;
      st.ancestral_seed = r.seed + dfr::kRoundSeedStride * round + static_cast<int64_t>(ti);
      const SimpleDenoiser d(*model_t, ctx.video_positive, Tensor());
      const StageOutput out = run_diffusion_stage(st, v, std::nullopt, d.callback(), noise, progress);
      tile_latents.push_back(out.video_latent.narrow(0, 0, 1));
      if (!tile.slots.empty()) {
        LTX_CHECK(out.generated_keyframes.defined(), "pipeline dfr: temporal round ", round, " tile ", ti,
                  " produced no keyframe slots");
        slot_positions.insert(slot_positions.end(), tile.slots.begin(), tile.slots.end());
        slot_latents.push_back(out.generated_keyframes);
      }
    }
    video = dfr::stitch_tile_latents(tile_latents, tiles);
    const int64_t expected_t = (frames - 1) / scale.time + 1;
    LTX_CHECK(video.size(2) == expected_t, "pipeline dfr: stitched latent T=", video.size(2), " != expected ",
              expected_t);

    // A lead-in repeats the previous tile's slot: the earlier tile's version wins.
    std::vector<int64_t> unique_positions;
    std::vector<Tensor> unique_latents;
    if (!slot_positions.empty()) {
      const Tensor all = ops::concat(slot_latents, 2);
      std::map<int64_t, int64_t> first;
      for (size_t i = 0; i < slot_positions.size(); ++i) first.emplace(slot_positions[i], static_cast<int64_t>(i));
      for (const auto& [position, index] : first) {
        unique_positions.push_back(position);
        unique_latents.push_back(all.narrow(2, index, 1));
      }
    }
    carry = dfr::merge_carry_forward_keyframes(seams, carry.latents, unique_positions,
                                               unique_latents.empty() ? Tensor() : ops::concat(unique_latents, 2));
  }

  // ---- trim the padded tail: (requested - 1) * 2^rounds + 1 frames, on a latent boundary.
  const int64_t target = dfr::output_num_frames(r.num_frames, r.temporal_upsample_rounds);
  LTX_CHECK(target <= frames, "pipeline dfr: target ", target, " frames exceeds the generated canvas ", frames);
  if (target != frames) video = video.narrow(2, 0, (target - 1) / scale.time + 1);

  GenerationResult res;
  res.video_latent = video.contiguous();
  res.audio_latent = out1.audio_latent;
  res.height = r.height;
  res.width = r.width;
  res.num_frames = target;
  res.frame_rate = r.frame_rate * static_cast<double>(int64_t{1} << r.temporal_upsample_rounds);
  // The audio was generated for the padded canvas: cut it to the video's duration.
  if (res.audio_latent.defined()) res.audio_max_seconds = static_cast<double>(target) / res.frame_rate;
  res.generated_keyframes = carry.latents;
  res.generated_keyframe_positions = carry.positions;
  return res;
}

}  // namespace ltx::pipelines
