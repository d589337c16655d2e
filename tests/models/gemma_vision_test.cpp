// Image-aware prompt enhancement (the reference's enhance_i2v on Gemma 3): the vision config, the
// resamplers against hand-computed values, the projector against a hand-written pooling, the
// prefill's image embeddings and bidirectional image block on the tiny Gemma 3 of
// text_gemma3_root, the errors, and parity with the reference's recording
// (gemma_vision.io.safetensors, made by tools/parity/gen_gemma_vision.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "media/image.h"
#include "models/gemma_support.h"
#include "models/text/gemma/enhance.h"
#include "models/text/gemma/image_processor.h"
#include "models/text/gemma/vision.h"

namespace ltx {
namespace {

using nlohmann::json;
using test::TempDir;
using text::GemmaAssets;
using text::GemmaTextModel;
using text::GemmaVisionConfig;
using text::GemmaVisionTower;

struct TinyGemma3 {
  GemmaAssets assets;
  GemmaTextModel model;
  GemmaVisionTower vision;
  TinyGemma3()
      : assets(GemmaAssets::load(test::fixture("text_gemma3_root"))),
        model(GemmaTextModel::load(assets)),
        vision(GemmaVisionTower::load(assets)) {}
};

const TinyGemma3& tiny() {
  static const TinyGemma3 g;
  return g;
}

Tensor u8_image(int64_t h, int64_t w, const std::vector<uint8_t>& values) {
  return Tensor::from_vector(values, {h, w, 1});
}

std::vector<int64_t> u8s(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data<uint8_t>(), c.data<uint8_t>() + c.numel());
}

TEST(GemmaVision, ReadsTheVisionConfigOfGemma3) {
  const GemmaVisionConfig c = text::image_enhancement_vision_config(tiny().assets);
  EXPECT_EQ(c.hidden_size, 16);
  EXPECT_EQ(c.num_layers, 1);
  EXPECT_EQ(c.image_size, 56);
  EXPECT_EQ(c.patches_per_side(), 4);
  EXPECT_EQ(c.tokens_per_side(), 2);
  EXPECT_EQ(c.text_hidden_size, 24);
  EXPECT_EQ(c.boi_token_id, 1085);
  EXPECT_EQ(c.eoi_token_id, 1086);
  EXPECT_EQ(c.image_token_id, 1087);
  const text::GemmaImageProcessorConfig p = text::image_processor_config_of(tiny().assets);
  EXPECT_EQ(p.height, 56);
  EXPECT_EQ(p.width, 56);
  EXPECT_EQ(p.resample, 2);
}

TEST(GemmaVision, RefusesModelsWithoutTheGemma3VisionTower) {
  json cfg = tiny().assets.config;
  cfg["model_type"] = "gemma4";
  EXPECT_ERROR_HAS(GemmaVisionConfig::from_json(cfg, "g4"), "Supported: a Gemma 3 checkpoint");
  cfg = tiny().assets.config;
  cfg.erase("vision_config");
  EXPECT_ERROR_HAS(GemmaVisionConfig::from_json(cfg, "g3"), "no vision_config");
  cfg = tiny().assets.config;
  cfg["mm_tokens_per_image"] = 3;
  EXPECT_ERROR_HAS(GemmaVisionConfig::from_json(cfg, "g3"), "mm_tokens_per_image");
  json pre = tiny().assets.sidecar_json("preprocessor_config.json");
  pre["resample"] = 3;
  EXPECT_ERROR_HAS(text::GemmaImageProcessorConfig::from_json(pre, "pre"), "resample 3");
  pre["resample"] = 2;
  pre["do_pan_and_scan"] = true;
  EXPECT_ERROR_HAS(text::GemmaImageProcessorConfig::from_json(pre, "pre"), "do_pan_and_scan");
}

// A Gemma 3 file whose vision tensors were stripped: the error says what is needed.
TEST(GemmaVision, TextOnlyWeightsNameTheMissingVisionTower) {
  TempDir dir;
  const std::string root = dir.file("root");
  std::filesystem::copy(test::fixture("text_gemma3_root"), root);
  test::rewrite_safetensors(
      test::fixture("text_gemma3_root/model.safetensors"), root + "/model.safetensors",
      [](const std::string& n) {
        return n.rfind("vision_tower.", 0) == 0 || n.rfind("multi_modal_projector.", 0) == 0
                   ? std::string()
                   : n;
      },
      [](std::map<std::string, std::string>&) {});
  EXPECT_ERROR_HAS(GemmaVisionTower::load(GemmaAssets::load(root)), "needs the Gemma 3 vision tower");
  text::EnhanceOptions o;
  o.system_prompt = "describe";
  o.image = Tensor::zeros({8, 8, 3}, DType::U8);
  EXPECT_ERROR_HAS(text::enhance_prompt(root, "a cat", o), "needs the Gemma 3 vision tower");
  // Gemma 4 unified cannot enhance at all, with or without an image.
  EXPECT_ERROR_HAS(text::enhance_prompt(test::fixture("text_gemma4.te.safetensors"), "a cat", o),
                   "gemma4_unified");
}

// torch's uint8 bilinear (align_corners false): 1x2 -> 1x4 is [0, 63.75, 191.25, 255] rounded,
// the last column folded onto the border pixel.
TEST(GemmaVisionResize, TorchBilinearU8MatchesHandValues) {
  const Tensor up = text::resize_u8_torch_bilinear(u8_image(1, 2, {0, 255}), 1, 4);
  EXPECT_EQ(u8s(up), (std::vector<int64_t>{0, 64, 191, 255}));
  const Tensor same = text::resize_u8_torch_bilinear(u8_image(2, 2, {1, 2, 3, 4}), 2, 2);
  EXPECT_EQ(u8s(same), (std::vector<int64_t>{1, 2, 3, 4}));
  // Rows resample like columns (a transposed input gives the transposed output).
  const Tensor col = text::resize_u8_torch_bilinear(u8_image(2, 1, {0, 255}), 4, 1);
  EXPECT_EQ(u8s(col), (std::vector<int64_t>{0, 64, 191, 255}));
}

// PIL's bilinear downscale 4 -> 2 widens the triangle to 2 pixels: weights (3, 3, 1) / 7 and
// (1, 3, 3) / 7 -> 500 / 7 and 1465 / 7.
TEST(GemmaVisionResize, PilBilinearMatchesHandValues) {
  const Tensor down = text::resize_u8_pil_bilinear(u8_image(1, 4, {0, 100, 200, 255}), 1, 2);
  EXPECT_EQ(u8s(down), (std::vector<int64_t>{71, 209}));
  const Tensor flat = text::resize_u8_pil_bilinear(
      Tensor::from_vector(std::vector<uint8_t>(5 * 7 * 3, 77), {5, 7, 3}), 3, 2);
  for (const int64_t v : u8s(flat)) EXPECT_EQ(v, 77);
}

TEST(GemmaVisionResize, AspectRatioPreservingKeepsTheLongSide) {
  const Tensor img = Tensor::zeros({36, 48, 3}, DType::U8);
  const Tensor r = text::resize_aspect_ratio_preserving_u8(img, 896);
  EXPECT_EQ(r.shape(), (Shape{672, 896, 3}));
  const Tensor tall = text::resize_aspect_ratio_preserving_u8(Tensor::zeros({30, 20, 3}, DType::U8), 90);
  EXPECT_EQ(tall.shape(), (Shape{90, 60, 3}));
}

// The projector's pooling, RMSNorm (1 + w) and projection written out by hand, against project()
// on the tower's own vision() output.
TEST(GemmaVision, TowerPiecesMatchAHandWrittenReference) {
  const GemmaVisionTower& v = tiny().vision;
  const GemmaVisionConfig& c = v.config();
  Tensor px = Tensor::empty({1, 3, 56, 56});
  float* p = px.data<float>();
  for (int64_t i = 0; i < px.numel(); ++i) p[i] = std::sin(0.37f * static_cast<float>(i)) * 0.9f;
  const Tensor out = v.vision(px);
  ASSERT_EQ(out.shape(), (Shape{1, 16, 16}));

  const auto file = io::SafetensorsFile::open(test::fixture("text_gemma3_root/model.safetensors"));

  // Projector by hand: 2x2 average of the 4x4 grid, RMSNorm (1 + w), x @ W.
  const Tensor norm_w = file->tensor("multi_modal_projector.mm_soft_emb_norm.weight").to(DType::F32);
  const Tensor proj = file->tensor("multi_modal_projector.mm_input_projection_weight").to(DType::F32);
  const Tensor got = v.project(out);
  ASSERT_EQ(got.shape(), (Shape{1, 4, 24}));
  const auto vo = out.to_double_vector();
  const auto nw = norm_w.to_double_vector();
  const auto pw = proj.to_double_vector();
  const auto g = got.to_double_vector();
  for (int64_t ty = 0; ty < 2; ++ty)
    for (int64_t tx = 0; tx < 2; ++tx) {
      std::vector<double> pooled(16, 0.0);
      for (int64_t dy = 0; dy < 2; ++dy)
        for (int64_t dx = 0; dx < 2; ++dx) {
          const int64_t patch = (ty * 2 + dy) * 4 + tx * 2 + dx;
          for (int64_t d = 0; d < 16; ++d)
            pooled[static_cast<size_t>(d)] += vo[static_cast<size_t>(patch * 16 + d)] / 4;
        }
      double ms = 0;
      for (const double x : pooled) ms += x * x / 16;
      const double inv = 1.0 / std::sqrt(ms + c.layer_norm_eps);
      for (int64_t o = 0; o < 24; ++o) {
        double acc = 0;
        for (int64_t d = 0; d < 16; ++d)
          acc += pooled[static_cast<size_t>(d)] * inv * (1.0 + nw[static_cast<size_t>(d)]) *
                 pw[static_cast<size_t>(d * 24 + o)];
        EXPECT_NEAR(g[static_cast<size_t>((ty * 2 + tx) * 24 + o)], acc, 1e-5 * (1 + std::fabs(acc)));
      }
    }
}

// The prefill: image tokens take the features (hidden state 0), and the first image token sees
// the last one (bidirectional block), which a causal mask would hide.
TEST(GemmaVision, PrefillInsertsFeaturesAndAttendsWithinTheImageBlock) {
  const GemmaTextModel& m = tiny().model;
  const std::vector<int64_t> ids = {0, 0, 2, 2, 8, 1085, 1087, 1087, 1087, 1087, 1086, 30};
  const std::vector<int64_t> mask = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const auto T = static_cast<int64_t>(ids.size());
  std::vector<int64_t> pos(ids.size());
  int64_t valid = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    valid += mask[i];
    pos[i] = std::max<int64_t>(valid - 1, 0);
  }
  std::vector<uint8_t> is_image(ids.size(), 0);
  for (size_t i = 6; i < 10; ++i) is_image[i] = 1;
  Tensor feats = Tensor::empty({4, 24});
  for (int64_t i = 0; i < feats.numel(); ++i)
    feats.data<float>()[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  auto run = [&](const Tensor& f, std::vector<Tensor>* hs) {
    text::GemmaKvCache cache = m.make_cache(1, T);
    const text::GemmaPrefillImages images{is_image, f};
    return m.forward(Tensor::from_vector(ids, {1, T}), Tensor::from_vector(pos, {1, T}),
                     Tensor::from_vector(mask, {1, T}), cache, hs, nullptr, &images);
  };
  std::vector<Tensor> hs;
  const Tensor a = run(feats, &hs);
  EXPECT_LT(test::rel_l2_same_size(hs[0].select(0, 0).narrow(0, 6, 4), feats), 1e-7);
  Tensor feats2 = feats.clone();
  feats2.data<float>()[3 * 24 + 5] += 1.0f;  // the last image token only
  const Tensor b = run(feats2, nullptr);
  // Tokens before the block do not see it; the first image token does.
  EXPECT_LT(test::rel_l2_same_size(a.select(1, 5), b.select(1, 5)), 1e-7);
  EXPECT_GT(test::rel_l2_same_size(a.select(1, 6), b.select(1, 6)), 1e-4);
}

// The whole i2v path on the tiny model: the expanded image sequence tokenizes to boi, 4 soft
// tokens, eoi (the processor's "\n\n" around them), aligned to 8, and generation runs.
TEST(GemmaVision, EnhanceI2vBuildsTheImageSequenceAndGenerates) {
  const text::PromptEnhancer enhancer(tiny().assets, tiny().model);
  std::vector<uint8_t> px(36 * 48 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) % 251);
  text::EnhanceOptions o;
  o.system_prompt = "Describe the video.";
  o.greedy = true;
  o.max_new_tokens = 3;
  const text::EnhanceResult r =
      enhancer.enhance_i2v("a fox", Tensor::from_vector(px, {36, 48, 3}), tiny().vision, o);
  EXPECT_EQ(r.input_ids.size() % 8, 0u);
  EXPECT_EQ(r.pixel_values.shape(), (Shape{1, 3, 56, 56}));
  EXPECT_EQ(r.image_features.shape(), (Shape{4, 24}));
  const auto it = std::find(r.input_ids.begin(), r.input_ids.end(), 1085);
  ASSERT_NE(it, r.input_ids.end());
  EXPECT_EQ(std::vector<int64_t>(it, it + 6), (std::vector<int64_t>{1085, 1087, 1087, 1087, 1087, 1086}));
  EXPECT_EQ(std::count(r.image_tokens.begin(), r.image_tokens.end(), 1), 4);
  EXPECT_NE(r.rendered.find("<start_of_image>User Raw Input Prompt: a fox.<end_of_turn>"),
            std::string::npos)
      << r.rendered;
  EXPECT_FALSE(r.generated_ids.empty());
  // A second image marker in the prompt is refused (the reference's processor does too).
  EXPECT_ERROR_HAS(enhancer.prepare_i2v("<start_of_image>", "s", tiny().vision.config(), 4),
                   "image markers");
}

// ---- parity with the reference's recording.

const io::SafetensorsFile* vision_io() {
  static const std::shared_ptr<const io::SafetensorsFile> f =
      io::SafetensorsFile::open(test::fixture("gemma_vision.io.safetensors"));
  return f.get();
}

TEST(GemmaVisionParity, ImagePreprocessingMatchesTheReference) {
  const io::SafetensorsFile& f = *vision_io();
  const Tensor image = f.tensor("in.image_u8");
  // The PNG the reference decoded (PIL), through the CLI's reader.
  EXPECT_EQ(u8s(media::read_image(test::fixture("gemma_vision.png"))), u8s(image));
  const Tensor resized = text::resize_aspect_ratio_preserving_u8(image, text::kEnhanceImageLongSide);
  const Tensor want = f.tensor("in.image_resized_u8");
  ASSERT_EQ(resized.shape(), want.shape());
  const auto got_v = u8s(resized), want_v = u8s(want);
  int64_t differ = 0, worst = 0;
  for (size_t i = 0; i < got_v.size(); ++i) {
    differ += got_v[i] != want_v[i];
    worst = std::max<int64_t>(worst, std::abs(got_v[i] - want_v[i]));
  }
  EXPECT_EQ(differ, 0) << "torch's u8 bilinear: " << differ << " of " << got_v.size()
                       << " values differ, by at most " << worst;
  // The processor from the reference's own resized image.
  const Tensor px = text::gemma3_pixel_values(want, text::image_processor_config_of(tiny().assets));
  EXPECT_LT(test::rel_l2_same_size(px, f.tensor("pixel_values")), 1e-7);
  // And from the decoded PNG (media::read_image is tested against PIL elsewhere).
  const Tensor px2 = text::gemma3_pixel_values(resized, text::image_processor_config_of(tiny().assets));
  EXPECT_LT(test::rel_l2_same_size(px2, f.tensor("pixel_values")), 1e-7);
}

TEST(GemmaVisionParity, TowerProjectorEmbeddingsAndLogitsMatchTheReference) {
  const io::SafetensorsFile& f = *vision_io();
  const Tensor px = f.tensor("pixel_values").to(DType::F32);
  const Tensor vo = tiny().vision.vision(px);
  EXPECT_LT(test::rel_l2_same_size(vo, f.tensor("vision_out")), 1e-5);
  const Tensor po = tiny().vision.project(f.tensor("vision_out").to(DType::F32));
  EXPECT_LT(test::rel_l2_same_size(po, f.tensor("projector_out")), 1e-5);

  // The model input as the enhancer builds it.
  const text::PromptEnhancer enhancer(tiny().assets, tiny().model);
  const std::string prompt = f.metadata().at("prompt");
  const std::string system = f.metadata().at("system_prompt");
  const text::EnhanceResult r =
      enhancer.prepare_i2v(prompt, system, tiny().vision.config(), po.size(1));
  EXPECT_EQ(r.rendered, f.metadata().at("rendered"));
  EXPECT_EQ(r.input_ids, f.tensor("input_ids").to_int_vector());
  EXPECT_EQ(r.attention_mask, f.tensor("attention_mask").to_int_vector());
  const std::vector<int64_t> types = f.tensor("token_type_ids").to_int_vector();
  ASSERT_EQ(types.size(), r.image_tokens.size());
  for (size_t i = 0; i < types.size(); ++i) EXPECT_EQ(types[i], r.image_tokens[i]) << i;

  // The prefill: merged embeddings (hidden state 0) and the logits of every position.
  const auto T = static_cast<int64_t>(r.input_ids.size());
  std::vector<int64_t> pos(r.input_ids.size());
  int64_t valid = 0;
  for (size_t i = 0; i < pos.size(); ++i) {
    valid += r.attention_mask[i] != 0;
    pos[i] = std::max<int64_t>(valid - 1, 0);
  }
  text::GemmaKvCache cache = tiny().model.make_cache(1, T);
  const text::GemmaPrefillImages images{r.image_tokens, po.select(0, 0)};
  std::vector<Tensor> hs;
  const Tensor h = tiny().model.forward(Tensor::from_vector(r.input_ids, {1, T}),
                                        Tensor::from_vector(pos, {1, T}),
                                        Tensor::from_vector(r.attention_mask, {1, T}), cache, &hs,
                                        nullptr, &images);
  EXPECT_LT(test::rel_l2_same_size(hs[0], f.tensor("inputs_embeds")), 1e-5);
  // Left pads: HF's logits there come from fully masked rows; compare the real tokens.
  const int64_t first = T - valid;
  const Tensor logits = tiny().model.logits(h);
  EXPECT_LT(test::rel_l2_same_size(logits.narrow(1, first, T - first),
                         f.tensor("prefill_logits").to(DType::F32).narrow(1, first, T - first)),
            1e-5);
}

TEST(GemmaVisionParity, GreedyEnhancementMatchesTheReferenceTokens) {
  const io::SafetensorsFile& f = *vision_io();
  const text::PromptEnhancer enhancer(tiny().assets, tiny().model);
  text::EnhanceOptions o;
  o.system_prompt = f.metadata().at("system_prompt");
  o.greedy = true;
  o.max_new_tokens = std::stoll(f.metadata().at("max_new_tokens"));
  const text::EnhanceResult r =
      enhancer.enhance_i2v(f.metadata().at("prompt"), f.tensor("in.image_u8"), tiny().vision, o);
  EXPECT_LT(test::rel_l2_same_size(r.pixel_values, f.tensor("pixel_values")), 1e-7);
  EXPECT_LT(test::rel_l2_same_size(r.image_features.unsqueeze(0), f.tensor("projector_out")), 1e-5);
  EXPECT_EQ(r.generated_ids, f.tensor("generated_ids").to_int_vector());
  EXPECT_EQ(r.decoded, f.metadata().at("decoded"));
  // The one-call API (loads the root's model and vision tower) gives the cleaned text.
  o.image = f.tensor("in.image_u8");
  EXPECT_EQ(text::enhance_prompt(test::fixture("text_gemma3_root"), f.metadata().at("prompt"), o),
            text::clean_response(f.metadata().at("decoded")));
}

}  // namespace
}  // namespace ltx
