// The memory planner (generate/offload_plan.h) as a pure function: sizes of the published 22B
// transformer and Gemma 3 12B, budgets of 80 / 48 / 24 / 16 GiB, the run's shape -> which blocks
// stay resident; the up-front error; the activation model; the sizes read from a file's header.
#include "generate/offload_plan.h"

#include <gtest/gtest.h>

#include "generate/generate.h"
#include "generate/generate_test_util.h"
#include "generate/progress.h"
#include "io/safetensors.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma_assets.h"
#include "models/transformer/config.h"
#include "quantization/nvfp4.h"
#include "support/test_support.h"

namespace ltx::offload_plan_test {
namespace {

using generate::ModelOffload;
using generate::Offload;
using generate::StreamableModel;

constexpr int64_t kGiB = int64_t{1} << 30;

// LTX-2.3 22B (inner dim 4096, audio 2048, 48 blocks): ~36.5 GiB in bf16, nearly all in the blocks
// (0.75 GiB each); fp8-cast stores the blocks' Linears in one byte (about half a block).
// Companions of the denoising stage: the video encoder and the spatial upsampler, ~1 GiB.
StreamableModel transformer_22b(int64_t width, int64_t height, int64_t frames, int64_t passes,
                                bool fp8 = false) {
  StreamableModel m{"transformer", "denoising", kGiB / 2, fp8 ? 3 * kGiB / 8 : 3 * kGiB / 4, 48};
  m.companion_bytes = kGiB;
  m.activation_bytes = generate::estimate_transformer_activations(
      generate::video_token_rows(width, height, frames, passes), 4096, (frames / 8 + 1) * 25 * passes,
      2048, 2);
  return m;
}

// Gemma 3 12B (hidden 3840, MLP 15360, 48 layers, 262144-token vocabulary): the embeddings
// (1.875 GiB) outside the layers, ~7/16 GiB a layer in bf16; prompts up to 1024 tokens.
StreamableModel gemma_12b() {
  StreamableModel m{"text encoder", "text encoding", 262144LL * 3840 * 2, 7 * kGiB / 16, 48};
  m.activation_bytes = generate::estimate_text_activations(1024, 3840, 15360, 32, 2);
  return m;
}

int64_t need(const StreamableModel& m, int64_t resident) {
  const int64_t ring = resident < m.blocks ? std::min<int64_t>(2, m.blocks - resident) : 0;
  return m.fixed_bytes + (resident + ring) * m.block_bytes + m.companion_bytes + m.activation_bytes;
}

// The plan keeps the most blocks that fit: need(K) within the budget, need(K + 1) past it.
void expect_largest_fit(const ModelOffload& p, const StreamableModel& m, int64_t budget) {
  EXPECT_EQ(p.need_bytes, need(m, p.resident_blocks));
  EXPECT_LE(p.need_bytes, budget);
  if (p.resident_blocks < m.blocks) {
    EXPECT_GT(need(m, p.resident_blocks + 1), budget);
  }
}

TEST(OffloadPlan, TheActivationModelFollowsItsDocumentedFormula) {
  // 1536x1024x121: 16 latent frames of 48 x 32 tokens.
  EXPECT_EQ(generate::video_token_rows(1536, 1024, 121, 1), 16 * 48 * 32);
  EXPECT_EQ(generate::video_token_rows(768, 512, 121, 4), 4 * 16 * 24 * 16);
  const int64_t live = 12 * 2 * (24576LL * 4096 + 400LL * 2048);
  EXPECT_EQ(generate::estimate_transformer_activations(24576, 4096, 400, 2048, 2),
            live + live / 2 + generate::kStageSlack);
  // The 22B at 1536x1024x121, one pass: about 4.4 GiB.
  const int64_t a = generate::estimate_transformer_activations(24576, 4096, 400, 2048, 2);
  EXPECT_GT(a, 4 * kGiB);
  EXPECT_LT(a, 5 * kGiB);
  const int64_t t = 2LL * 1024 * (6 * 3840 + 3 * 15360) + 4LL * 32 * 1024 * 1024;
  EXPECT_EQ(generate::estimate_text_activations(1024, 3840, 15360, 32, 2),
            t + t / 2 + generate::kStageSlack);
}

TEST(OffloadPlan, TheFullSizeModelsStayResidentOn80And48GiB) {
  const StreamableModel t = transformer_22b(1536, 1024, 121, 1), g = gemma_12b();
  for (int64_t budget : {80 * kGiB, 48 * kGiB}) {
    SCOPED_TRACE(budget / kGiB);
    const auto plan = generate::plan_offload({t, g}, budget, Offload::Auto);
    ASSERT_EQ(plan.size(), 2u);
    EXPECT_FALSE(plan[0].streams());
    EXPECT_EQ(plan[0].resident_blocks, 48);
    EXPECT_FALSE(plan[1].streams());
    EXPECT_EQ(generate::planned_streaming(plan[0], Offload::Auto).enabled(), false);
  }
}

TEST(OffloadPlan, On24And16GiBTheFirstBlocksStayAndTheRestStream) {
  const StreamableModel t = transformer_22b(1536, 1024, 121, 1), g = gemma_12b();
  // bf16 22B at 1536x1024: 0.5 + 1 + 4.4 GiB beside the blocks; 0.75 GiB a block, two in slots.
  const auto p24 = generate::plan_offload({t, g}, 24 * kGiB, Offload::Auto);
  EXPECT_EQ(p24[0].resident_blocks, 22);
  expect_largest_fit(p24[0], t, 24 * kGiB);
  EXPECT_EQ(p24[1].resident_blocks, 45);
  expect_largest_fit(p24[1], g, 24 * kGiB);
  const auto p16 = generate::plan_offload({t, g}, 16 * kGiB, Offload::Auto);
  EXPECT_EQ(p16[0].resident_blocks, 11);
  expect_largest_fit(p16[0], t, 16 * kGiB);
  EXPECT_EQ(p16[1].resident_blocks, 27);
  expect_largest_fit(p16[1], g, 16 * kGiB);

  const models::BlockStreaming s = generate::planned_streaming(p16[0], Offload::Auto);
  EXPECT_EQ(s.slots, generate::kOffloadSlots);
  EXPECT_EQ(s.resident, 11);
  EXPECT_FALSE(s.from_file);
  EXPECT_FALSE(s.streams(10));
  EXPECT_TRUE(s.streams(11));
  EXPECT_EQ(generate::describe_offload(p16[0], 16 * kGiB),
            "transformer: 11 of 48 blocks resident, 37 streamed (needs " +
                generate::gib_text(p16[0].need_bytes) + " of the 16.00 GiB budget)");

  // fp8-cast halves the blocks: the whole transformer fits 24 GiB, two thirds of it 16 GiB.
  const StreamableModel t8 = transformer_22b(1536, 1024, 121, 1, /*fp8=*/true);
  EXPECT_FALSE(generate::plan_offload({t8}, 24 * kGiB, Offload::Auto)[0].streams());
  const auto p8 = generate::plan_offload({t8}, 16 * kGiB, Offload::Auto);
  EXPECT_EQ(p8[0].resident_blocks, 24);
  expect_largest_fit(p8[0], t8, 16 * kGiB);
}

TEST(OffloadPlan, ExplicitModesStayAsGivenAndAreChecked) {
  const StreamableModel t = transformer_22b(768, 512, 121, 1);
  const auto cpu = generate::plan_offload({t}, 80 * kGiB, Offload::Cpu);
  EXPECT_EQ(cpu[0].resident_blocks, 0);
  EXPECT_EQ(cpu[0].need_bytes, need(t, 0));
  const auto disk = generate::plan_offload({t}, 16 * kGiB, Offload::Disk);
  const models::BlockStreaming d = generate::planned_streaming(disk[0], Offload::Disk);
  EXPECT_TRUE(d.from_file);
  EXPECT_EQ(d.resident, 0);
  EXPECT_TRUE(d.streams(0));
  EXPECT_FALSE(generate::plan_offload({t}, 48 * kGiB, Offload::None)[0].streams());
  const std::string e =
      test::error_of([&] { generate::plan_offload({t}, 24 * kGiB, Offload::None); });
  EXPECT_NE(e.find("the denoising stage needs "), std::string::npos) << e;
  EXPECT_NE(e.find("with the transformer resident"), std::string::npos) << e;
  EXPECT_NE(e.find("--offload auto or cpu"), std::string::npos) << e;
}

TEST(OffloadPlan, AStageThatCannotFitEvenStreamedIsRefusedUpFront) {
  // One-stage guided at 1536x1024x121: four passes batched at full size, ~14.6 GiB of activations.
  const StreamableModel t = transformer_22b(1536, 1024, 121, 4);
  const std::string e = test::error_of(
      [&] { generate::plan_offload({gemma_12b(), t}, 16 * kGiB, Offload::Auto); });
  EXPECT_NE(e.find("the denoising stage needs " + generate::gib_text(need(t, 0)) +
                   " of GPU memory with the transformer's 48 blocks all streamed"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("more than the --max-gpu-memory budget of 16.00 GiB; nothing was loaded"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("--quantization fp8-cast"), std::string::npos) << e;
  EXPECT_NE(e.find("--width / --height / --num-frames"), std::string::npos) << e;
  EXPECT_NE(e.find("a larger --max-gpu-memory"), std::string::npos) << e;
  EXPECT_EQ(e.find("--offload auto or cpu"), std::string::npos) << "it already streams: " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
  EXPECT_ERROR_HAS(generate::plan_offload({t}, 16 * kGiB, Offload::Cpu, 2, "the test's"),
                   "more than the the test's budget");
  EXPECT_ERROR_HAS(generate::plan_offload({t}, 0, Offload::Auto), "must be > 0 bytes");
}

TEST(OffloadPlan, SizesFromTheFixtureHeaderCountEveryBlock) {
  const std::string path = test::fixture("ltx23.weights.safetensors");
  const auto file = io::SafetensorsFile::open(path);
  const auto config = models::transformer::LTXModelConfig::from_file(
      *file, models::transformer::LTXModelType::AudioVideo);
  const generate::BlockModelSizes bf16 =
      generate::transformer_sizes(path, DType::BF16, quantization::Mode::None);
  const generate::BlockModelSizes f32 =
      generate::transformer_sizes(path, DType::F32, quantization::Mode::None);
  const generate::BlockModelSizes fp8 =
      generate::transformer_sizes(path, DType::BF16, quantization::Mode::Fp8Cast);
  EXPECT_EQ(bf16.blocks, config.num_layers);
  EXPECT_GT(bf16.block_bytes, 0);
  EXPECT_GT(bf16.fixed_bytes, 0);
  EXPECT_EQ(f32.block_bytes, 2 * bf16.block_bytes);
  EXPECT_EQ(f32.fixed_bytes, 2 * bf16.fixed_bytes);
  // fp8-cast: the blocks' Linears in one byte, the rest (norms, tables, gates) as before.
  EXPECT_LT(fp8.block_bytes, bf16.block_bytes);
  EXPECT_GT(fp8.block_bytes, bf16.block_bytes / 2 - 1);
  EXPECT_EQ(fp8.fixed_bytes, bf16.fixed_bytes);
  // nvfp4-cast: each block's 12 video Linears' weights at their packed size, the rest as before.
  const generate::BlockModelSizes nvfp4 =
      generate::transformer_sizes(path, DType::BF16, quantization::Mode::Nvfp4Cast);
  int64_t saved = 0;
  for (const io::TensorInfo& info : file->infos()) {
    const std::string_view kBlock0 = "transformer_blocks.0.";
    const size_t at = info.name.find(kBlock0);
    if (at == std::string::npos || !info.name.ends_with(".weight")) continue;
    const std::string name = info.name.substr(at);
    if (!quantization::is_nvfp4_cast_linear(name.substr(0, name.size() - 7))) continue;
    saved += info.numel() * 2 - quantization::nvfp4_weight_bytes(info.shape[0], info.shape[1]);
  }
  EXPECT_GT(saved, 0);
  EXPECT_EQ(nvfp4.block_bytes, bf16.block_bytes - saved);
  EXPECT_EQ(nvfp4.fixed_bytes, bf16.fixed_bytes);
}

TEST(OffloadPlan, GemmaSizesCountItsDecoderLayers) {
  const std::string root = test::fixture("text_gemma3_root");
  const generate::BlockModelSizes g = generate::text_encoder_sizes(root, DType::BF16);
  const text::GemmaAssets assets = text::GemmaAssets::load(root);
  const text::GemmaTextConfig config = text::GemmaTextConfig::from_json(assets.config, root);
  EXPECT_EQ(g.blocks, config.num_layers);
  EXPECT_GT(g.block_bytes, 0);
  EXPECT_GT(g.fixed_bytes, 0);  // the embeddings and the final norm
  const generate::BlockModelSizes f32 = generate::text_encoder_sizes(root, DType::F32);
  EXPECT_EQ(f32.block_bytes, 2 * g.block_bytes);
}

// The text encoding stage holds the connectors and the feature extractor's projection beside
// Gemma: the plan counts them (from the checkpoint's header) among the stage's needs.
TEST(OffloadPlan, TheTextStageCountsTheConnectorsAndTheProjection) {
  generate::GenerateOptions o = test::small_demo_options("two-stage", 64, 128);
  o.device = Device::cuda(0);
  generate::Progress quiet(nullptr, generate::Progress::Mode::Off);
  const generate::ResolvedModels models =
      generate::resolve_models(o, generate::component_needs(o), quiet);
  int64_t want = 0;
  for (const std::string& f : models.paths.embeddings_weight_paths) {
    if (f == models.paths.text_encoder.path) continue;
    const auto file = io::SafetensorsFile::open(f);
    for (const io::TensorInfo& info : file->infos())
      if (info.name.find("embeddings_connector.") != std::string::npos ||
          info.name.starts_with("text_embedding_projection."))
        want += info.numel() * 2;
  }
  ASSERT_GT(want, 0);
  EXPECT_EQ(generate::text_connector_bytes(models.paths, DType::BF16), want);
  EXPECT_EQ(generate::text_connector_bytes(models.paths, DType::F32), 2 * want);

  o.max_gpu_memory_bytes = 1024 * kGiB;
  o.offload = Offload::Auto;
  const generate::StreamingPlan plan = generate::plan_run_streaming(o, models);
  ASSERT_EQ(plan.models.size(), 2u);
  const generate::BlockModelSizes g =
      generate::text_encoder_sizes(models.paths.text_encoder.path, DType::BF16);
  EXPECT_GE(plan.models[1].need_bytes, g.fixed_bytes + g.blocks * g.block_bytes + want);
}

// Image-aware enhancement loads Gemma 3's vision tower and projector in the text stage: the plan
// counts them then, and only then.
TEST(OffloadPlan, ImageEnhancementCountsTheVisionTower) {
  const std::string root = test::fixture("text_gemma3_root");
  int64_t want = 0;
  const auto file = io::SafetensorsFile::open(root + "/model.safetensors");
  for (const io::TensorInfo& info : file->infos())
    if (info.name.starts_with("vision_tower.") || info.name.starts_with("multi_modal_projector."))
      want += info.numel() * 2;
  ASSERT_GT(want, 0);
  EXPECT_EQ(generate::vision_tower_bytes(root, DType::BF16), want);

  generate::GenerateOptions o = test::small_demo_options("two-stage", 64, 128);
  o.device = Device::cuda(0);
  generate::Progress quiet(nullptr, generate::Progress::Mode::Off);
  const generate::ResolvedModels models =
      generate::resolve_models(o, generate::component_needs(o), quiet);
  // The demo's text encoder has no vision tower; the tiny Gemma 3 root has one.
  EXPECT_EQ(generate::vision_tower_bytes(models.paths.text_encoder.path, DType::BF16), 0);
  generate::ModelPaths paths = models.paths;
  paths.text_encoder.path = root;
  generate::RunShape shape{128, 64, 9, 1};
  auto text_need = [&](bool with_vision) {
    shape.vision_tower = with_vision;
    const generate::StreamingPlan plan = generate::plan_streaming(
        paths, DType::BF16, shape, Offload::Auto, 1024 * kGiB, Device::cuda(0));
    for (const auto& m : plan.models)
      if (m.component == "text encoder") return m.need_bytes;
    ADD_FAILURE() << "no text encoder in the plan";
    return int64_t{0};
  };
  EXPECT_EQ(text_need(true) - text_need(false), want);
}

// The plan a generation makes (plan_run_streaming) for the demo bundle on a GPU, without one. The
// demo's transformer has as many blocks as slots (streaming saves nothing: it stays resident);
// its Gemma has 6 layers and needs the most: a budget between Gemma's resident and all-streamed
// needs keeps its first layers and streams the rest. tests/cuda/memory_budget_test.cpp runs this.
TEST(OffloadPlan, TheDemoRunUnderABudgetBetweenGemmasNeedsStreamsItsLastLayers) {
  generate::GenerateOptions o = test::small_demo_options("two-stage", 64, 128);
  o.device = Device::cuda(0);
  generate::Progress quiet(nullptr, generate::Progress::Mode::Off);
  const generate::ResolvedModels models =
      generate::resolve_models(o, generate::component_needs(o), quiet);
  o.max_gpu_memory_bytes = 1024 * kGiB;
  o.offload = Offload::Auto;
  const generate::StreamingPlan roomy = generate::plan_run_streaming(o, models);
  ASSERT_EQ(roomy.models.size(), 2u);
  EXPECT_EQ(roomy.models[0].component, "transformer");
  EXPECT_EQ(roomy.models[1].component, "text encoder");
  EXPECT_FALSE(roomy.transformer.enabled());
  EXPECT_FALSE(roomy.text_encoder.enabled());
  o.offload = Offload::Cpu;
  const generate::StreamingPlan streamed = generate::plan_run_streaming(o, models);
  EXPECT_TRUE(streamed.transformer.enabled());
  EXPECT_EQ(streamed.transformer.resident, 0);
  EXPECT_TRUE(streamed.text_encoder.enabled());
  const int64_t all = roomy.models[1].need_bytes, none = streamed.models[1].need_bytes;
  ASSERT_GT(all, none);
  ASSERT_GE(none, roomy.models[0].need_bytes) << "Gemma's stage is the demo's largest";

  o.offload = Offload::Auto;
  o.max_gpu_memory_bytes = (all + none) / 2;
  const generate::StreamingPlan plan = generate::plan_run_streaming(o, models);
  EXPECT_FALSE(plan.transformer.enabled());
  EXPECT_TRUE(plan.text_encoder.enabled());
  EXPECT_GT(plan.text_encoder.resident, 0);
  EXPECT_LT(plan.text_encoder.resident, plan.models[1].blocks);
  EXPECT_LE(plan.models[1].need_bytes, o.max_gpu_memory_bytes);
  // The other models pass generate's own up-front check under that budget too.
  EXPECT_NO_THROW(generate::check_budget_fits(
      generate::unplanned_components(generate::component_sizes(models.paths, DType::BF16), o.device),
      o.max_gpu_memory_bytes));
  // Below Gemma's all-streamed need: refused up front, naming the stage.
  o.max_gpu_memory_bytes = none - 1;
  EXPECT_ERROR_HAS(generate::plan_run_streaming(o, models), "the text encoding stage needs");
  // Without a budget or auto, --offload as given; on the CPU nothing streams.
  o.max_gpu_memory_bytes = 0;
  o.offload = Offload::Disk;
  EXPECT_TRUE(generate::plan_run_streaming(o, models).transformer.from_file);
  o.device = Device::cpu();
  o.offload = Offload::Auto;
  EXPECT_FALSE(generate::plan_run_streaming(o, models).transformer.enabled());
}

}  // namespace
}  // namespace ltx::offload_plan_test
