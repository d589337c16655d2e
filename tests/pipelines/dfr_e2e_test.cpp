// The DFR pipeline end to end on tiny models: the LTX-2.5 transformer fixture (keyframe embedding)
// with random 24-channel spatial / temporal upsamplers for frames, fps, keyframes and determinism
// per temporal round; the tiny LTX-2.3 set with a keyframe embedding added for image conditioning
// (the pinned first frame stays the encoded image through the rounds) and the detailing reference;
// generated keyframes in the distilled pipeline.
#include <cmath>
#include <set>

#include "io/safetensors.h"
#include "io/weights.h"
#include "media/preprocess.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/dfr.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace mt = models::transformer;
namespace up = models::upsampler;
using pipelines::PipelineKind;
using pipelines::Stage;

// A latent upsampler with random weights (1 block per stage, 32 mid channels), spatial x2 or
// temporal x2, for `channels` latent channels.
up::LatentUpsampler random_upsampler(int64_t channels, bool temporal, uint64_t seed) {
  up::LatentUpsamplerConfig cfg;
  cfg.in_channels = channels;
  cfg.mid_channels = 32;
  cfg.num_blocks_per_stage = 1;
  cfg.spatial_upsample = !temporal;
  cfg.temporal_upsample = temporal;
  cfg.spatial_scale = temporal ? 1.0 : 2.0;
  const int64_t mid = cfg.mid_channels;
  io::WeightMap w;
  auto conv = [&](const std::string& name, int64_t in, int64_t out, bool conv2d = false) {
    const Shape shape = conv2d ? Shape{out, in, 3, 3} : Shape{out, in, 3, 3, 3};
    w.add(name + ".weight", test::random_tensor(shape, seed++, -0.05f, 0.05f));
    w.add(name + ".bias", test::random_tensor({out}, seed++, -0.05f, 0.05f));
  };
  auto norm = [&](const std::string& name) {
    w.add(name + ".weight", test::random_tensor({mid}, seed++, 0.8f, 1.2f));
    w.add(name + ".bias", test::random_tensor({mid}, seed++, -0.1f, 0.1f));
  };
  auto block = [&](const std::string& p) {
    conv(p + "conv1", mid, mid);
    conv(p + "conv2", mid, mid);
    norm(p + "norm1");
    norm(p + "norm2");
  };
  conv("initial_conv", channels, mid);
  norm("initial_norm");
  block("res_blocks.0.");
  if (temporal)
    conv("upsampler.0", mid, 2 * mid);
  else
    conv("upsampler.0", mid, 4 * mid, true);
  block("post_upsample_res_blocks.0.");
  conv("final_conv", mid, channels);
  up::LatentUpsampler u = up::LatentUpsampler::load(w, cfg);
  w.finish("random latent upsampler");
  return u;
}

models::video_vae::PerChannelStatistics random_statistics(int64_t channels, uint64_t seed) {
  return {test::random_tensor({channels}, seed, -0.2f, 0.2f), test::random_tensor({channels}, seed + 1, 0.5f, 1.5f)};
}

// The LTX-2.5 transformer fixture (24 latent channels, 1 x 16 audio, contexts 64 / 32 wide).
struct Ltx25Set {
  mt::LTXModel transformer =
      mt::LTXModel::from_files({test::fixture("ltx25.weights.safetensors")}, mt::LTXModelType::AudioVideo);
  up::LatentUpsampler spatial = random_upsampler(24, false, 100);
  up::LatentUpsampler temporal = random_upsampler(24, true, 200);
  models::video_vae::PerChannelStatistics stats = random_statistics(24, 300);
  pipelines::TextContexts contexts;
  Ltx25Set() {
    contexts.video_positive = test::random_tensor({1, 8, 64}, 400);
    contexts.audio_positive = test::random_tensor({1, 8, 32}, 401);
  }
  pipelines::Components components() const {
    pipelines::Components c;
    c.transformer = &transformer;
    c.spatial_upsampler = &spatial;
    c.temporal_upsampler = &temporal;
    c.latent_statistics = &stats;
    c.model_version = "2.5.0";
    return c;
  }
};

const Ltx25Set& ltx25() {
  static const Ltx25Set s;
  return s;
}

pipelines::GenerationRequest dfr_request(int64_t rounds) {
  auto r = pipelines::default_request(PipelineKind::Dfr, "2.5.0");
  r.seed = 7;
  r.height = 64;
  r.width = 64;
  r.num_frames = 17;  // canvas 25: one 24-frame segment, trimmed back to 17 (3 latents)
  r.temporal_upsample_rounds = rounds;
  return r;
}

TEST(DfrE2E, FramesFpsAndKeyframesPerTemporalRound) {
  const Ltx25Set& m = ltx25();
  struct Expect {
    int64_t frames, latents;
    double fps;
    std::vector<int64_t> keyframes;
    std::set<std::string> tiles;
  };
  // Round 1: seams [48], one tile, slot 24. Round 2: seams [48, 96], two tiles, slots 24 and 24, 72.
  const std::vector<Expect> expect = {
      {17, 3, 24.0, {24}, {}},
      {33, 5, 48.0, {24, 48}, {"temporal round 1 tile 0"}},
      {65, 9, 96.0, {24, 48, 72, 96}, {"temporal round 1 tile 0", "temporal round 2 tile 0", "temporal round 2 tile 1"}},
  };
  for (int64_t rounds = 0; rounds <= 2; ++rounds) {
    SCOPED_TRACE("rounds " + std::to_string(rounds));
    const Expect& e = expect[static_cast<size_t>(rounds)];
    std::vector<Stage> stages;
    pipelines::Components c = m.components();
    c.stage_transformer = [&](Stage s) -> const mt::LTXModel& {
      stages.push_back(s);
      return m.transformer;
    };
    std::set<std::string> tiles;
    const auto out = pipelines::run_pipeline(PipelineKind::Dfr, dfr_request(rounds), c, m.contexts,
                                             [&](const std::string& stage, int64_t, int64_t) {
                                               if (stage.rfind("temporal round", 0) == 0) tiles.insert(stage);
                                             });
    EXPECT_EQ(out.num_frames, e.frames);
    EXPECT_DOUBLE_EQ(out.frame_rate, e.fps);
    EXPECT_EQ(out.video_latent.shape(), (Shape{1, 24, e.latents, 2, 2}));
    EXPECT_EQ(out.video_latent.dtype(), DType::BF16);
    // Audio is stage 1's, made for the 25-frame canvas (round(25 / 24 * 25) = 26 latent frames),
    // to be cut to the video's duration after decoding.
    EXPECT_EQ(out.audio_latent.shape(), (Shape{1, 1, 26, 16}));
    EXPECT_DOUBLE_EQ(out.audio_max_seconds, static_cast<double>(e.frames) / e.fps);
    EXPECT_EQ(pipelines::audio_samples_to_keep(out, 100000, 48000.0),
              static_cast<int64_t>(std::nearbyint(static_cast<double>(e.frames) / e.fps * 48000.0)));
    EXPECT_EQ(out.generated_keyframe_positions, e.keyframes);
    EXPECT_EQ(out.generated_keyframes.shape(), (Shape{1, 24, static_cast<int64_t>(e.keyframes.size()), 2, 2}));
    EXPECT_EQ(tiles, e.tiles);
    std::vector<Stage> expected_stages = {Stage::One, Stage::Two};
    if (rounds > 0) expected_stages.push_back(Stage::Temporal);
    EXPECT_EQ(stages, expected_stages);
  }
}

TEST(DfrE2E, IsDeterministicAndFollowsTheSeed) {
  const Ltx25Set& m = ltx25();
  auto r = dfr_request(1);
  const auto a = pipelines::run_pipeline(PipelineKind::Dfr, r, m.components(), m.contexts);
  const auto b = pipelines::run_pipeline(PipelineKind::Dfr, r, m.components(), m.contexts);
  EXPECT_EQ(test::max_abs_diff(a.video_latent, b.video_latent), 0.0);
  EXPECT_EQ(test::max_abs_diff(a.audio_latent, b.audio_latent), 0.0);
  EXPECT_EQ(test::max_abs_diff(a.generated_keyframes, b.generated_keyframes), 0.0);
  r.seed = 8;
  const auto c = pipelines::run_pipeline(PipelineKind::Dfr, r, m.components(), m.contexts);
  EXPECT_GT(test::max_abs_diff(a.video_latent, c.video_latent), 1e-3);
}

TEST(DfrE2E, DetailingAddsTheHalfSizeReferenceToStage2) {
  const Ltx25Set& m = ltx25();
  auto r = dfr_request(0);
  const auto plain = pipelines::run_pipeline(PipelineKind::Dfr, r, m.components(), m.contexts);
  r.detailing_lora_strength = 1.0;
  const auto detailed = pipelines::run_pipeline(PipelineKind::Dfr, r, m.components(), m.contexts);
  // Stage 2 attends to the reference tokens too (stage 1, and so the audio, is unchanged).
  EXPECT_GT(test::max_abs_diff(plain.video_latent, detailed.video_latent), 1e-4);
  EXPECT_EQ(test::max_abs_diff(plain.audio_latent, detailed.audio_latent), 0.0);
  // The reference's positions are scaled by the downscale factor: another factor, another result.
  r.detailing_downscale_factor = 1;
  const auto unscaled = pipelines::run_pipeline(PipelineKind::Dfr, r, m.components(), m.contexts);
  EXPECT_GT(test::max_abs_diff(unscaled.video_latent, detailed.video_latent), 1e-5);
}

TEST(DfrE2E, KeyframeSlotsRequireTheKeyframeEmbedding) {
  const Ltx25Set& m = ltx25();
  const mt::LTXModel plain =
      mt::LTXModel::from_files({test::fixture("e2e/ltx23_tiny.safetensors")}, mt::LTXModelType::AudioVideo);
  pipelines::Components c = m.components();
  // Checked on the model each stage gets, before any denoising.
  c.stage_transformer = [&](Stage) -> const mt::LTXModel& { return plain; };
  EXPECT_ERROR_HAS(pipelines::run_pipeline(PipelineKind::Dfr, dfr_request(0), c, m.contexts),
                   "use_keyframes_abs_pos_embedding");
}

TEST(DfrE2E, DistilledPipelineGeneratesInteriorKeyframesInStage1) {
  const Ltx25Set& m = ltx25();
  auto r = pipelines::default_request(PipelineKind::Distilled, "2.5.0");
  r.seed = 3;
  r.height = 64;
  r.width = 64;
  r.num_frames = 9;
  const auto plain = pipelines::run_pipeline(PipelineKind::Distilled, r, m.components(), m.contexts);
  EXPECT_FALSE(plain.generated_keyframes.defined());
  r.num_generated_keyframes = 1;  // round(linspace(0, 8, 3))[1:-1] = [4]
  const auto kf = pipelines::run_pipeline(PipelineKind::Distilled, r, m.components(), m.contexts);
  EXPECT_EQ(kf.generated_keyframe_positions, (std::vector<int64_t>{4}));
  EXPECT_EQ(kf.generated_keyframes.shape(), (Shape{1, 24, 1, 1, 1}));  // stage-1 size (32 x 32)
  EXPECT_EQ(kf.video_latent.shape(), plain.video_latent.shape());
  EXPECT_GT(test::max_abs_diff(kf.video_latent, plain.video_latent), 1e-3);
}

// The tiny LTX-2.3 set with a random keyframe embedding switched on (its VAE encodes images).
mt::LTXModel ltx23_with_keyframe_embedding() {
  auto file = io::SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  mt::LTXModelConfig config = mt::LTXModelConfig::from_file(*file, mt::LTXModelType::AudioVideo);
  config.use_keyframes_abs_pos_embedding = true;
  io::WeightMap w({file}, mt::transformer_key_map(mt::LTXModelType::AudioVideo));
  w.add("keyframes_abs_pos_embedding", test::random_tensor({1, config.inner_dim()}, 500, -0.5f, 0.5f));
  return mt::LTXModel::load(w, config);
}

TEST(DfrE2E, PinnedFirstFrameStaysTheEncodedImageThroughTemporalRounds) {
  const mt::LTXModel transformer = ltx23_with_keyframe_embedding();
  const auto encoder = models::video_vae::VideoEncoder::from_file(test::fixture("e2e/ltx23_tiny.safetensors"));
  const auto spatial = up::LatentUpsampler::from_file(test::fixture("e2e/ltx23_tiny_upsampler_x2.safetensors"));
  const auto temporal = random_upsampler(16, true, 600);
  pipelines::TextContexts ctx;
  {
    auto text = io::SafetensorsFile::open(test::fixture("e2e_text.io.safetensors"));
    ctx.video_positive = text->tensor("out.text.positive.video_encoding").contiguous();
    ctx.audio_positive = text->tensor("out.text.positive.audio_encoding").contiguous();
  }
  pipelines::Components c;
  c.transformer = &transformer;
  c.video_encoder = &encoder;
  c.spatial_upsampler = &spatial;
  c.temporal_upsampler = &temporal;
  c.model_version = "2.3.0";

  auto r = pipelines::default_request(PipelineKind::Dfr, "2.3.0");
  r.seed = 42;
  r.height = 128;
  r.width = 64;
  r.num_frames = 9;
  r.temporal_upsample_rounds = 1;
  r.dtype = DType::F32;
  std::vector<uint8_t> px(40 * 50 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) % 251);
  pipelines::ImageConditioning im;
  im.image = Tensor::from_vector(px, Shape{40, 50, 3});
  im.crf = 0;  // no CRF re-encode (needs FFmpeg)
  r.images.push_back(im);
  r.detailing_lora_strength = 1.0;  // the half-size video joins stage 2 as the IC-LoRA reference

  const auto out = pipelines::run_pipeline(PipelineKind::Dfr, r, c, ctx);
  ASSERT_EQ(out.video_latent.shape(), (Shape{1, 16, 3, 4, 2}));  // (9 - 1) * 2 + 1 = 17 frames
  EXPECT_EQ(out.num_frames, 17);
  const Tensor pixels = media::normalize_to_unit_range(media::resize_and_center_crop(im.image, 128, 64));
  const Tensor expected = encoder(pixels);  // [1, 16, 1, 4, 2]
  EXPECT_EQ(test::max_abs_diff(out.video_latent.narrow(2, 0, 1), expected), 0.0);
  EXPECT_GT(test::max_abs_diff(out.video_latent.narrow(2, 1, 1), expected), 1e-2);
}

}  // namespace
}  // namespace ltx
