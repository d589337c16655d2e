// Batching several requests into one denoising run (run_pipeline_batch): on the CPU every result
// has the bits of the same request run alone (run_pipeline), whatever its batch mates' prompts,
// seeds, guidance scales and images; batch_key separates what cannot share a run. On the tiny
// LTX-2.3 model set of the end-to-end tests (tests/fixtures/e2e/).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <unistd.h>

#include "generate/demo_bundle.h"
#include "io/safetensors.h"
#include "models/text/prompt_encoder.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "ops/elementwise.h"
#include "pipelines/pipeline.h"
#include "support/e2e_compare.h"
#include "support/test_support.h"

namespace ltx::batch_test {
namespace {

namespace mt = models::transformer;
using pipelines::GenerationRequest;
using pipelines::GenerationResult;
using e2e_fixture::e2e;
using pipelines::PipelineKind;
using pipelines::TextContexts;

// Elements whose bits differ (-1 when shape or dtype differ).
int64_t differing_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return -1;
  if (!a.defined()) return 0;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return -1;
  const Tensor x = a.contiguous(), y = b.contiguous();
  const auto size = static_cast<int64_t>(x.element_size());
  const auto* px = static_cast<const unsigned char*>(x.raw_data());
  const auto* py = static_cast<const unsigned char*>(y.raw_data());
  int64_t diff = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    diff += std::memcmp(px + i * size, py + i * size, static_cast<size_t>(size)) != 0;
  return diff;
}

struct Models {
  mt::LTXModel transformer = mt::LTXModel::from_files({e2e("ltx23_tiny.safetensors")}, mt::LTXModelType::AudioVideo);
  models::video_vae::VideoEncoder encoder = models::video_vae::VideoEncoder::from_file(e2e("ltx23_tiny.safetensors"));
  models::upsampler::LatentUpsampler upsampler =
      models::upsampler::LatentUpsampler::from_file(e2e("ltx23_tiny_upsampler_x2.safetensors"));
  TextContexts base;

  Models() {
    auto text = io::SafetensorsFile::open(test::fixture("e2e_text.io.safetensors"));
    base.video_positive = text->tensor("out.text.positive.video_encoding").contiguous();
    base.audio_positive = text->tensor("out.text.positive.audio_encoding").contiguous();
    base.video_negative = text->tensor("out.text.negative.video_encoding").contiguous();
    base.audio_negative = text->tensor("out.text.negative.audio_encoding").contiguous();
  }
  pipelines::Components components(const std::string& model_version = "2.3.0") const {
    pipelines::Components c;
    c.transformer = &transformer;
    c.video_encoder = &encoder;
    c.spatial_upsampler = &upsampler;
    c.model_version = model_version;
    return c;
  }
  // Sample k's "prompt": its own positive contexts (k = 0: the fixture's), the shared negative one.
  TextContexts contexts(int k) const {
    TextContexts t = base;
    if (k == 0) return t;
    const auto vary = [&](const Tensor& x, uint64_t seed) {
      return ops::add(ops::mul(x, 1.f - 0.2f * static_cast<float>(k)), test::random_tensor(x.shape(), seed, -0.5f, 0.5f));
    };
    t.video_positive = vary(base.video_positive, 10 + static_cast<uint64_t>(k));
    t.audio_positive = vary(base.audio_positive, 20 + static_cast<uint64_t>(k));
    return t;
  }
};

const Models& models_() {
  static const Models m;
  return m;
}

// The e2e fixtures' request (tiny: 9 frames, 2 steps) with sample k's seed and guidance scales.
GenerationRequest request(PipelineKind kind, int k) {
  GenerationRequest r = pipelines::default_request(kind, "2.3.0");
  r.seed = 42 + 1000 * k;
  r.num_frames = 9;
  r.height = kind == PipelineKind::OneStage ? 64 : 128;
  r.width = 64;
  r.num_inference_steps = 2;
  r.video_guider.stg_blocks = {1};
  r.audio_guider.stg_blocks = {1};
  if (pipelines::uses_guidance(kind)) {
    // Other scales, the same passes (CFG, STG and isolated modality all on).
    r.video_guider.cfg_scale += 0.5 * k;
    r.video_guider.stg_scale += 0.25 * k;
    r.video_guider.rescale_scale = k == 2 ? 0.0 : r.video_guider.rescale_scale;
    r.audio_guider.cfg_scale -= 0.75 * k;
    r.audio_guider.modality_scale += 0.5 * k;
  }
  return r;
}

// An image as u8 [h, w, 3] (no CRF re-encode: that needs FFmpeg).
pipelines::ImageConditioning image(int k, int64_t frame_index = 0) {
  std::vector<uint8_t> px(40 * 50 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * (37 + 6 * k) + 11 * k) % 251);
  pipelines::ImageConditioning im;
  im.image = Tensor::from_vector(px, Shape{40, 50, 3});
  im.frame_index = frame_index;
  im.crf = 0;
  return im;
}

// Runs the requests alone and as one batch; every result must have its solo bits, and the
// samples must differ from each other (else the test could not see a mix-up).
void expect_batch_equals_solo(PipelineKind kind, const std::vector<GenerationRequest>& reqs,
                              const pipelines::Components& c) {
  const Models& m = models_();
  std::vector<TextContexts> ctx;
  for (size_t k = 0; k < reqs.size(); ++k) ctx.push_back(m.contexts(static_cast<int>(k)));
  std::vector<std::string> stages;
  const std::vector<GenerationResult> batched = pipelines::run_pipeline_batch(
      kind, reqs, c, ctx, [&](const std::string& stage, int64_t step, int64_t) {
        if (step == 0) stages.push_back(stage);
      });
  ASSERT_EQ(batched.size(), reqs.size());
  // One denoising run per stage for the whole batch.
  EXPECT_EQ(std::count(stages.begin(), stages.end(), "stage 1"), 1);
  for (size_t k = 0; k < reqs.size(); ++k) {
    SCOPED_TRACE(testing::Message() << pipelines::pipeline_name(kind) << " sample " << k);
    const GenerationResult solo = pipelines::run_pipeline(kind, reqs[k], c, ctx[k]);
    ASSERT_TRUE(batched[k].video_latent.defined());
    EXPECT_EQ(differing_bits(batched[k].video_latent, solo.video_latent), 0);
    EXPECT_EQ(batched[k].audio_latent.defined(), reqs[k].audio);
    EXPECT_EQ(differing_bits(batched[k].audio_latent, solo.audio_latent), 0);
    EXPECT_EQ(batched[k].num_frames, solo.num_frames);
    if (k > 0) {
      EXPECT_GT(test::max_abs_diff(batched[k].video_latent, batched[0].video_latent), 1e-3);
    }
  }
}

TEST(PipelineBatch, OneStageFourRequestsEqualTheirSoloRunsBitwise) {
  std::vector<GenerationRequest> reqs;
  for (int k = 0; k < 4; ++k) reqs.push_back(request(PipelineKind::OneStage, k));
  expect_batch_equals_solo(PipelineKind::OneStage, reqs, models_().components());
}

TEST(PipelineBatch, OneStageAtTheDemoSizeEqualsItsSoloRunsBitwise) {
  // 320x192, 25 frames: 240 video tokens per sample, so the ops' thread splits and GEMM tiles
  // differ from the 64x64 case's.
  std::vector<GenerationRequest> reqs;
  for (int k = 0; k < 3; ++k) {
    reqs.push_back(request(PipelineKind::OneStage, k));
    reqs.back().width = 320;
    reqs.back().height = 192;
    reqs.back().num_frames = 25;
    reqs.back().num_inference_steps = 1;
  }
  expect_batch_equals_solo(PipelineKind::OneStage, reqs, models_().components());
}

TEST(PipelineBatch, OneStageImagesOfOneLayoutBatchAndEqualTheirSoloRuns) {
  // Three requests with an image at frame 0 (other pixels, prompts, seeds and guidance), then three
  // with a guiding keyframe at pixel frame 8 (appended tokens).
  for (int64_t frame : {int64_t{0}, int64_t{8}}) {
    SCOPED_TRACE(frame);
    std::vector<GenerationRequest> reqs;
    for (int k = 0; k < 3; ++k) {
      reqs.push_back(request(PipelineKind::OneStage, k));
      reqs.back().images.push_back(image(k, frame));
    }
    expect_batch_equals_solo(PipelineKind::OneStage, reqs, models_().components());
  }
}

TEST(PipelineBatch, DistilledFourRequestsEqualTheirSoloRunsBitwise) {
  // Stage 1 at half size, the x2 upsample per sample, stage 2 from each sample's own generator.
  std::vector<GenerationRequest> reqs;
  for (int k = 0; k < 4; ++k) reqs.push_back(request(PipelineKind::Distilled, k));
  expect_batch_equals_solo(PipelineKind::Distilled, reqs, models_().components());
  // From 2.5 on the distilled stage 1 is ancestral: each sample's step noise from its own seed.
  expect_batch_equals_solo(PipelineKind::Distilled, reqs, models_().components("2.5.0"));
}

TEST(PipelineBatch, TwoStageAndVideoOnlyRequestsEqualTheirSoloRunsBitwise) {
  std::vector<GenerationRequest> reqs;
  for (int k = 0; k < 2; ++k) reqs.push_back(request(PipelineKind::TwoStage, k));
  expect_batch_equals_solo(PipelineKind::TwoStage, reqs, models_().components());
  for (GenerationRequest& r : reqs) r.audio = false;
  expect_batch_equals_solo(PipelineKind::TwoStage, reqs, models_().components());
}

// The built-in demo bundle (what `ltx serve` runs without model flags), with contexts from its own
// text encoder for four different prompts.
TEST(PipelineBatch, DemoBundleRequestsWithTheirOwnPromptsEqualTheirSoloRunsBitwise) {
  static const std::string dir =
      (std::filesystem::temp_directory_path() / ("ltx_batch_test_demo_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  const generate::DemoBundle bundle = generate::ensure_demo_bundle(dir);
  std::atexit([] { std::filesystem::remove_all(dir); });

  const mt::LTXModel transformer = mt::LTXModel::from_files({bundle.checkpoint}, mt::LTXModelType::AudioVideo);
  const auto encoder = models::video_vae::VideoEncoder::from_file(bundle.checkpoint);
  const auto upsampler = models::upsampler::LatentUpsampler::from_file(bundle.spatial_upsampler);
  text::PromptEncoder prompts(bundle.text_encoder, {bundle.checkpoint});
  const std::vector<std::string> texts = {"a red ball bouncing on a wooden floor", "waves at night",
                                          "a city street in the rain, people with umbrellas", "a cat"};
  std::vector<std::string> all = texts;
  all.push_back("blurry, low quality");  // the negative prompt of every request
  const std::vector<text::PromptContext> pc = prompts.encode(all);
  std::vector<TextContexts> ctx;
  for (size_t k = 0; k < texts.size(); ++k) ctx.push_back({pc[k].video, pc[k].audio, pc.back().video, pc.back().audio});
  pipelines::Components c;
  c.transformer = &transformer;
  c.video_encoder = &encoder;
  c.spatial_upsampler = &upsampler;
  c.model_version = "2.3.0";

  for (PipelineKind kind : {PipelineKind::OneStage, PipelineKind::Distilled}) {
    std::vector<GenerationRequest> reqs;
    for (int k = 0; k < 4; ++k) {
      GenerationRequest r = request(kind, k);
      r.video_guider.stg_blocks = r.audio_guider.stg_blocks = {1};
      reqs.push_back(r);
    }
    const std::vector<GenerationResult> batched = pipelines::run_pipeline_batch(kind, reqs, c, ctx);
    for (size_t k = 0; k < reqs.size(); ++k) {
      SCOPED_TRACE(testing::Message() << pipelines::pipeline_name(kind) << " sample " << k);
      const GenerationResult solo = pipelines::run_pipeline(kind, reqs[k], c, ctx[k]);
      EXPECT_EQ(differing_bits(batched[k].video_latent, solo.video_latent), 0);
      EXPECT_EQ(differing_bits(batched[k].audio_latent, solo.audio_latent), 0);
      if (k > 0) {
        EXPECT_GT(test::max_abs_diff(batched[k].video_latent, batched[0].video_latent), 1e-3);
      }
    }
  }
}

TEST(PipelineBatch, BatchKeySeparatesWhatCannotShareARun) {
  const GenerationRequest a = request(PipelineKind::OneStage, 0);
  const std::string key = pipelines::batch_key(PipelineKind::OneStage, a);
  // Per-request things: seed, guidance scales (same passes), image pixels.
  EXPECT_EQ(pipelines::batch_key(PipelineKind::OneStage, request(PipelineKind::OneStage, 3)), key);
  GenerationRequest with_image = a;
  with_image.images.push_back(image(0));
  GenerationRequest other_image = a;
  other_image.images.push_back(image(2));
  EXPECT_EQ(pipelines::batch_key(PipelineKind::OneStage, with_image),
            pipelines::batch_key(PipelineKind::OneStage, other_image));
  // Shared things: each change gives another key.
  std::vector<GenerationRequest> others(12, a);
  others[0].width = 128;
  others[1].height = 128;
  others[2].num_frames = 17;
  others[3].frame_rate = 25.0;
  others[4].num_inference_steps = 3;
  others[5].audio = false;
  others[6].video_guider.cfg_scale = 1.0;  // no uncond pass
  others[7].audio_guider.stg_scale = 0.0;  // no perturbed pass
  others[8].video_guider.stg_blocks = {0};
  others[9].images.push_back(image(0));
  others[10] = with_image;
  others[10].images[0].frame_index = 8;
  others[11].stage_1_sigmas = std::vector<float>{1.f, 0.5f, 0.f};
  for (size_t i = 0; i < others.size(); ++i)
    EXPECT_NE(pipelines::batch_key(PipelineKind::OneStage, others[i]), key) << i;
  EXPECT_NE(pipelines::batch_key(PipelineKind::TwoStage, a), key);
  EXPECT_NE(pipelines::batch_key(PipelineKind::OneStage, a, "lora=x@0.5"), key);

  EXPECT_TRUE(pipelines::supports_batching(PipelineKind::Distilled));
  EXPECT_TRUE(pipelines::supports_batching(PipelineKind::OneStage));
  EXPECT_TRUE(pipelines::supports_batching(PipelineKind::TwoStage));
  EXPECT_FALSE(pipelines::supports_batching(PipelineKind::TwoStageHQ));
  EXPECT_FALSE(pipelines::supports_batching(PipelineKind::Dfr));
}

TEST(PipelineBatch, RefusesRequestsOfDifferentKeysAndPipelinesThatDoNotBatch) {
  const Models& m = models_();
  const std::vector<TextContexts> ctx = {m.contexts(0), m.contexts(1)};
  std::vector<GenerationRequest> reqs = {request(PipelineKind::OneStage, 0), request(PipelineKind::OneStage, 1)};
  reqs[1].width = 128;
  EXPECT_ERROR_HAS(pipelines::run_pipeline_batch(PipelineKind::OneStage, reqs, m.components(), ctx),
                   "request 1 cannot share a run with request 0");
  reqs[1] = request(PipelineKind::OneStage, 1);
  EXPECT_ERROR_HAS(pipelines::run_pipeline_batch(PipelineKind::OneStage, reqs, m.components(), {ctx.data(), 1}),
                   "2 requests but 1 text contexts");
  std::vector<GenerationRequest> hq = {pipelines::default_request(PipelineKind::TwoStageHQ),
                                       pipelines::default_request(PipelineKind::TwoStageHQ)};
  EXPECT_ERROR_HAS(pipelines::run_pipeline_batch(PipelineKind::TwoStageHQ, hq, m.components(), ctx),
                   "runs one request at a time");
}

}  // namespace
}  // namespace ltx::batch_test
