// The keyframe-interpolation and retake pipelines on the tiny LTX-2.3 model set
// (tests/fixtures/e2e/): final latents and decoded frames against the reference's own pipelines
// (e2e_{keyframe_interpolation,retake}.io, made by tools/parity/gen_e2e.py --pipelines
// keyframe_interpolation,retake), plus what each pipeline must do on its own: keyframe tokens instead of a pinned frame 0, the retake window regenerated and the rest of
// the clip kept, and the retake request's errors.
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>

#include "io/safetensors.h"
#include "io/weights.h"
#include "media/preprocess.h"
#include "models/audio_vae/audio_vae.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/tiling.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_decoder.h"
#include "models/video_vae/video_vae.h"
#include "ops/shape.h"
#include "pipelines/keyframe_interpolation.h"
#include "pipelines/pipeline.h"
#include "pipelines/retake.h"
#include "support/e2e_compare.h"
#include "support/test_support.h"

namespace ltx::keyframe_retake_e2e_test {
namespace {

namespace mt = models::transformer;
using pipelines::PipelineKind;
using e2e_fixture::decode_frames;
using e2e_fixture::e2e;
using e2e_fixture::kFramesMinPsnrDb;
using e2e_fixture::psnr_db;
using e2e_fixture::rel_l2;

constexpr double kLatentTol = 1e-5;         // issue 33 item 3: final latents, relative L2

// The checkpoint's transformer with the distilled LoRA fused by the library (as `ltx generate`).
mt::LTXModel load_transformer(std::optional<double> lora_strength) {
  auto file = io::SafetensorsFile::open(e2e("ltx23_tiny.safetensors"));
  const mt::LTXModelConfig config = mt::LTXModelConfig::from_file(*file, mt::LTXModelType::AudioVideo);
  io::WeightMap w({file}, mt::transformer_key_map(mt::LTXModelType::AudioVideo));
  if (lora_strength)
    lora::fuse_into(w, lora::LoraSet{{lora::LoraFile::open(e2e("ltx23_tiny_distilled_lora.safetensors")), *lora_strength}});
  return mt::LTXModel::load(w, config);
}

struct Models {
  mt::LTXModel transformer = load_transformer(std::nullopt);
  mt::LTXModel transformer_lora = load_transformer(1.0);
  models::video_vae::VideoEncoder encoder = models::video_vae::VideoEncoder::from_file(e2e("ltx23_tiny.safetensors"));
  models::audio_vae::AudioEncoder audio_encoder =
      models::audio_vae::AudioEncoder::from_file(io::SafetensorsFile::open(e2e("ltx23_tiny.safetensors")));
  models::upsampler::LatentUpsampler upsampler =
      models::upsampler::LatentUpsampler::from_file(e2e("ltx23_tiny_upsampler_x2.safetensors"));
  pipelines::TextContexts contexts;

  Models() {
    auto text = io::SafetensorsFile::open(test::fixture("e2e_text.io.safetensors"));
    contexts.video_positive = text->tensor("out.text.positive.video_encoding").contiguous();
    contexts.audio_positive = text->tensor("out.text.positive.audio_encoding").contiguous();
    contexts.video_negative = text->tensor("out.text.negative.video_encoding").contiguous();
    contexts.audio_negative = text->tensor("out.text.negative.audio_encoding").contiguous();
  }
  // Stage 2 with the distilled LoRA (keyframe interpolation); the plain model everywhere else.
  pipelines::Components components() const {
    pipelines::Components c;
    c.transformer = &transformer;
    c.video_encoder = &encoder;
    c.audio_encoder = &audio_encoder;
    c.spatial_upsampler = &upsampler;
    c.model_version = "2.3.0";
    c.stage_transformer = [this](pipelines::Stage s) -> const mt::LTXModel& {
      return s == pipelines::Stage::Two ? transformer_lora : transformer;
    };
    return c;
  }
};

const Models& models_() {
  static const Models m;
  return m;
}

// The recordings' request (DEVELOPERS.md "End-to-end parity"): seed 42, 9 frames at 24 fps, f32.
pipelines::GenerationRequest e2e_request(PipelineKind kind) {
  pipelines::GenerationRequest r = pipelines::default_request(kind, "2.3.0");
  r.seed = 42;
  r.num_frames = 9;
  r.frame_rate = 24.0;
  r.height = 128;
  r.width = 64;
  r.num_inference_steps = 4;
  r.video_guider.stg_blocks = {1};
  r.audio_guider.stg_blocks = {1};
  r.max_batch_size = 1;
  r.dtype = DType::F32;
  return r;
}

Tensor gradient_image(int64_t h, int64_t w, int seed) {
  std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * (31 + seed) + seed * 17) % 251);
  return Tensor::from_vector(px, Shape{h, w, 3});
}

void expect_matches(const pipelines::GenerationResult& out, const io::SafetensorsFile& ref) {
  const Tensor video = ref.tensor("out.video.latent").contiguous();
  ASSERT_EQ(out.video_latent.shape(), video.shape());
  EXPECT_LE(rel_l2(out.video_latent, video), kLatentTol);
  const Tensor audio = ref.tensor("out.audio.latent").contiguous();
  ASSERT_EQ(out.audio_latent.shape(), audio.shape());
  EXPECT_LE(rel_l2(out.audio_latent, audio), kLatentTol);
  const Tensor frames = decode_frames(out.video_latent), ref_frames = ref.tensor("out.video.frames").contiguous();
  ASSERT_EQ(frames.shape(), ref_frames.shape());
  EXPECT_GE(psnr_db(frames, ref_frames), kFramesMinPsnrDb);
}

// ---------------------------------------------------------------------- keyframe interpolation

TEST(KeyframeInterpolationE2E, MatchesTheReferencePipeline) {
  const Models& m = models_();
  auto ref = io::SafetensorsFile::open(test::fixture("e2e_keyframe_interpolation.io.safetensors"));
  auto r = e2e_request(PipelineKind::KeyframeInterpolation);
  const auto request = ref->metadata_json("request");
  r.seed = request.at("seed").get<int64_t>();
  for (const auto& im : request.at("images")) {
    pipelines::ImageConditioning c;
    c.image = ref->tensor(im.at("tensor").get<std::string>()).contiguous();
    c.frame_index = im.at("frame_idx").get<int64_t>();
    c.strength = im.at("strength").get<double>();
    c.crf = im.at("crf").get<int>();
    r.images.push_back(c);
  }
  ASSERT_EQ(r.images.size(), 2u);
  expect_matches(pipelines::run_pipeline(PipelineKind::KeyframeInterpolation, r, m.components(), m.contexts), *ref);
}

TEST(KeyframeInterpolationE2E, EveryImageIsAGuidingKeyframeAndStage2AudioIsKept) {
  const Models& m = models_();
  auto r = e2e_request(PipelineKind::KeyframeInterpolation);
  r.num_inference_steps = 1;
  r.stage_2_sigmas = std::vector<float>{0.9f, 0.0f};
  pipelines::ImageConditioning first, last;
  first.image = gradient_image(128, 64, 1);
  first.crf = 0;
  last.image = gradient_image(128, 64, 2);
  last.crf = 0;
  last.frame_index = 8;
  last.strength = 0.9;
  r.images = {first, last};
  const auto kf = pipelines::run_pipeline(PipelineKind::KeyframeInterpolation, r, m.components(), m.contexts);
  ASSERT_EQ(kf.video_latent.shape(), (Shape{1, 16, 2, 4, 2}));
  ASSERT_EQ(kf.audio_latent.shape(), (Shape{1, 2, 9, 16}));
  const auto again = pipelines::run_pipeline(PipelineKind::KeyframeInterpolation, r, m.components(), m.contexts);
  EXPECT_EQ(test::max_abs_diff(kf.video_latent, again.video_latent), 0.0);

  // The two-stage pipeline on the same request pins latent frame 0 to the encoded image; keyframe
  // interpolation only guides it, so its frame 0 is generated.
  pipelines::GenerationRequest two = r;
  two.distilled_lora_strengths = pipelines::default_request(PipelineKind::TwoStage).distilled_lora_strengths;
  const auto ts = pipelines::run_pipeline(PipelineKind::TwoStage, two, m.components(), m.contexts);
  const Tensor encoded = m.encoder(media::normalize_to_unit_range(media::resize_and_center_crop(first.image, 128, 64)));
  EXPECT_EQ(test::max_abs_diff(ts.video_latent.narrow(2, 0, 1), encoded), 0.0);
  EXPECT_GT(test::max_abs_diff(kf.video_latent.narrow(2, 0, 1), encoded), 1e-3);
  // Two-stage keeps the stage-1 audio; keyframe interpolation the refined one.
  EXPECT_GT(test::max_abs_diff(kf.audio_latent, ts.audio_latent), 1e-3);

  pipelines::GenerationRequest bad = r;
  bad.num_generated_keyframes = 1;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::KeyframeInterpolation, bad, m.components()),
                   "generated keyframes are not an option");
  EXPECT_EQ(pipelines::parse_pipeline_kind("keyframe_interpolation"), PipelineKind::KeyframeInterpolation);
  EXPECT_EQ(*pipelines::distilled_lora_strength(PipelineKind::KeyframeInterpolation, pipelines::Stage::Two, r), 1.0);
  EXPECT_FALSE(pipelines::distilled_lora_strength(PipelineKind::KeyframeInterpolation, pipelines::Stage::One, r));
}

// ---------------------------------------------------------------------- retake

// A 9-frame 64x96 clip (moving bar over a gradient) with a 0.5 s stereo track at 48 kHz.
pipelines::RetakeSource synthetic_clip(bool with_audio) {
  pipelines::RetakeSource s;
  const int64_t f = 9, h = 64, w = 96;
  std::vector<uint8_t> px(static_cast<size_t>(f * h * w * 3));
  for (int64_t t = 0; t < f; ++t)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t ch = 0; ch < 3; ++ch) {
          const bool bar = x >= t * 8 && x < t * 8 + 12;
          px[static_cast<size_t>(((t * h + y) * w + x) * 3 + ch)] =
              static_cast<uint8_t>(bar ? 230 - 40 * ch : (x * 2 + y * (ch + 1) + 7 * t) % 200);
        }
  s.frames = Tensor::from_vector(px, Shape{f, h, w, 3});
  if (with_audio) {
    const int64_t n = 24000;
    std::vector<float> a(static_cast<size_t>(2 * n));
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = static_cast<float>(0.3 * std::sin(2 * M_PI * 440.0 * i / 48000.0));
      a[static_cast<size_t>(n + i)] = static_cast<float>(0.2 * std::sin(2 * M_PI * 660.0 * i / 48000.0 + 0.5));
    }
    s.waveform = Tensor::from_vector(a, Shape{2, n});
    s.sample_rate = 48000;
  }
  s.start_time = 0.1;
  s.end_time = 0.3;
  return s;
}

pipelines::GenerationRequest retake_request(pipelines::RetakeSource source) {
  pipelines::GenerationRequest r = pipelines::default_request(PipelineKind::Retake, "2.3.0");
  r.seed = 42;
  r.frame_rate = 24.0;
  r.dtype = DType::F32;
  r.retake = std::move(source);
  return r;
}

TEST(RetakeE2E, MatchesTheReferencePipeline) {
  const std::string name = "e2e_retake.io.safetensors";
  const Models& m = models_();
  auto ref = io::SafetensorsFile::open(test::fixture(name));
  const auto request = ref->metadata_json("request");
  pipelines::RetakeSource src;
  src.frames = ref->tensor("in.source.frames").contiguous();
  src.start_time = request.at("start_time").get<double>();
  src.end_time = request.at("end_time").get<double>();
  if (request.contains("source_audio") && request.at("source_audio").is_object()) {
    src.waveform = ref->tensor("in.source.waveform").contiguous();
    src.sample_rate = request.at("source_audio").at("sampling_rate").get<int64_t>();
  }
  auto r = retake_request(src);
  r.seed = request.at("seed").get<int64_t>();
  r.frame_rate = request.at("frame_rate").get<double>();
  pipelines::TextContexts ctx = m.contexts;  // the io file has its own when they differ
  if (ref->contains("out.text.positive.video_encoding")) {
    ctx.video_positive = ref->tensor("out.text.positive.video_encoding").contiguous();
    ctx.audio_positive = ref->tensor("out.text.positive.audio_encoding").contiguous();
  }
  pipelines::Components c = m.components();
  c.stage_transformer = nullptr;  // no LoRA: the recording's RetakePipeline(loras=())
  const auto out = pipelines::run_pipeline(PipelineKind::Retake, r, c, ctx);
  if (ref->contains("inter.source.video_latent")) {
    // The encoded clip is the kept part of the result: check the encoding on its own too.
    const Tensor pixels = media::normalize_to_unit_range(media::resize_and_center_crop(src.frames, src.frames.size(1), src.frames.size(2)));
    const Tensor enc = m.encoder.tiled_encode(pixels, models::tiling::TileSizeConfig::default_config());
    EXPECT_LE(rel_l2(enc, ref->tensor("inter.source.video_latent").contiguous()), kLatentTol);
  }
  expect_matches(out, *ref);
}

TEST(RetakeE2E, RegeneratesTheWindowAndKeepsTheRest) {
  const Models& m = models_();
  pipelines::Components c = m.components();
  c.stage_transformer = nullptr;
  auto r = retake_request(synthetic_clip(true));
  r.stage_1_sigmas = std::vector<float>{1.0f, 0.6f, 0.0f};
  const auto out = pipelines::run_pipeline(PipelineKind::Retake, r, c, m.contexts);
  EXPECT_EQ(out.num_frames, 9);
  EXPECT_EQ(out.height, 64);
  EXPECT_EQ(out.width, 96);
  ASSERT_EQ(out.video_latent.shape(), (Shape{1, 16, 2, 2, 3}));
  ASSERT_EQ(out.audio_latent.shape(), (Shape{1, 2, 9, 16}));

  // Latent frame 0 (pixel frame 0, [0, 1/24) s) lies before the window: kept as encoded; frame 1
  // (frames 1-8) overlaps it: regenerated.
  const Tensor pixels = media::normalize_to_unit_range(media::resize_and_center_crop(r.retake->frames, 64, 96));
  const Tensor enc = m.encoder.tiled_encode(pixels, models::tiling::TileSizeConfig::default_config());
  EXPECT_EQ(test::max_abs_diff(out.video_latent.narrow(2, 0, 1), enc.narrow(2, 0, 1)), 0.0);
  EXPECT_GT(test::max_abs_diff(out.video_latent.narrow(2, 1, 1), enc.narrow(2, 1, 1)), 1e-3);

  // Audio: the encoded first 0.375 s of the track; latents outside the window kept, inside regenerated.
  const Tensor wave = r.retake->waveform.narrow(1, 0, 18000).unsqueeze(0).contiguous();
  const Tensor audio_enc = models::audio_vae::conform_latent_length(
      models::audio_vae::encode_audio({wave, 48000}, m.audio_encoder), 9);
  int kept = 0, changed = 0;
  for (int64_t t = 0; t < 9; ++t) {
    const double d = test::max_abs_diff(out.audio_latent.narrow(2, t, 1), audio_enc.narrow(2, t, 1));
    kept += d == 0.0;
    changed += d > 1e-3;
  }
  EXPECT_GE(kept, 2);
  EXPECT_GE(changed, 2);
  EXPECT_EQ(kept + changed, 9);

  // Without an audio track the audio is generated from noise.
  auto silent = retake_request(synthetic_clip(false));
  silent.stage_1_sigmas = r.stage_1_sigmas;
  const auto out2 = pipelines::run_pipeline(PipelineKind::Retake, silent, c, m.contexts);
  EXPECT_EQ(out2.audio_latent.shape(), out.audio_latent.shape());
  EXPECT_EQ(test::max_abs_diff(out2.video_latent.narrow(2, 0, 1), enc.narrow(2, 0, 1)), 0.0);
}

TEST(RetakeE2E, BadRequestsNameTheFlag) {
  const Models& m = models_();
  const pipelines::Components c = m.components();
  auto check = [&](pipelines::GenerationRequest r, const std::string& text) {
    EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Retake, r, c), text);
  };
  auto r = retake_request(synthetic_clip(true));
  pipelines::validate_request(PipelineKind::Retake, r, c);  // the good one passes

  auto none = r;
  none.retake.reset();
  check(none, "--video-path");
  auto reversed = r;
  reversed.retake->end_time = 0.05;
  check(reversed, "--end-time 0.05 must be greater than --start-time 0.1");
  auto equal = r;
  equal.retake->end_time = 0.1;
  check(equal, "--end-time");
  auto negative = r;
  negative.retake->start_time = -0.1;
  check(negative, "--start-time");
  auto past = r;
  past.retake->end_time = 0.5;  // the clip lasts 9 / 24 = 0.375 s
  check(past, "past the end of the clip");
  auto frames = r;
  frames.retake->frames = r.retake->frames.narrow(0, 0, 8).contiguous();
  check(frames, "8k + 1");
  auto size = r;
  size.retake->frames = r.retake->frames.narrow(2, 0, 80).contiguous();
  check(size, "multiples of 32");
  auto empty_audio = r;
  empty_audio.retake->waveform = r.retake->waveform.narrow(1, 0, 0).contiguous();
  check(empty_audio, "audio track");
  auto mono = r;
  mono.retake->waveform = r.retake->waveform.narrow(0, 0, 1).contiguous();
  check(mono, "1 channel(s); the audio encoder takes 2");
  pipelines::Components no_audio_encoder = c;
  no_audio_encoder.audio_encoder = nullptr;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Retake, r, no_audio_encoder), "audio VAE encoder");
  auto images = r;
  images.images.push_back(pipelines::ImageConditioning{});
  images.images.back().image = gradient_image(64, 96, 3);
  check(images, "retake takes no --image");
  auto elsewhere = e2e_request(PipelineKind::TwoStage);
  elsewhere.retake = r.retake;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::TwoStage, elsewhere, c), "retake option");
}

}  // namespace
}  // namespace ltx::keyframe_retake_e2e_test
