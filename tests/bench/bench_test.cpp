// The `ltx bench` library: planning, the tiny CPU run, random weights, official-JSON matching.
#include "bench/bench.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/random_weights.h"
#include "core/storage.h"
#include "io/io_test_util.h"
#include "io/weights.h"
#include "models/transformer/model.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::expect_error_containing;

bench::BenchOptions tiny_options() {
  bench::BenchOptions o;
  o.preset = "tiny";
  o.device = Device::cpu();
  o.warmup = 1;
  o.iters = 3;
  return o;
}

TEST(BenchPlan, HasTheIssueShapesForTheFullPreset) {
  bench::BenchOptions o;  // ltx23-22b
  const bench::BenchReport r = bench::plan(o, bench::BenchTarget::All);
  ASSERT_EQ(r.cases.size(), 3u);
  EXPECT_EQ(r.cases[0].label, "transformer 768x512x121 +audio");
  EXPECT_EQ(r.cases[0].tokens.video, 16 * 16 * 24);
  EXPECT_EQ(r.cases[0].tokens.audio, 126);
  EXPECT_EQ(r.cases[0].tokens.video_text, 1024);
  EXPECT_EQ(r.cases[1].label, "transformer 1536x1024x121 +audio");
  EXPECT_EQ(r.cases[1].tokens.video, 16 * 32 * 48);
  EXPECT_EQ(r.cases[2].kind, "vae_decode");
  EXPECT_EQ(r.cases[2].latent, Shape({1, 128, 16, 32, 48}));
  EXPECT_GT(r.cases[2].tiles, 1);  // the pipelines' automatic tiling splits 1536x1024
  for (const auto& c : r.cases) {
    EXPECT_FALSE(c.ours.has_value());
    EXPECT_GT(c.floor_ms, 0);
  }
  EXPECT_NEAR(r.cases[0].floor_ms, 262.2, 0.1);
  // Only one target; other sizes, frames and no audio.
  o.sizes = {{512, 512}};
  o.frames = 9;
  o.audio = false;
  const bench::BenchReport t = bench::plan(o, bench::BenchTarget::Transformer);
  ASSERT_EQ(t.cases.size(), 1u);
  EXPECT_EQ(t.cases[0].label, "transformer 512x512x9");
  EXPECT_EQ(t.cases[0].tokens.video, 2 * 16 * 16);
  EXPECT_EQ(t.cases[0].tokens.audio, 0);
  EXPECT_EQ(bench::plan(o, bench::BenchTarget::Vae).cases.size(), 1u);
}

TEST(BenchOptions, RejectValuesThatCannotRun) {
  const auto with = [](auto change) {
    bench::BenchOptions o = tiny_options();
    change(o);
    return [o] { o.validate(); };
  };
  expect_error_containing(with([](auto& o) { o.preset = "huge"; }), {"--preset", "huge", "tiny"});
  expect_error_containing(with([](auto& o) { o.iters = 0; }), {"--iters"});
  expect_error_containing(with([](auto& o) { o.warmup = -1; }), {"--warmup"});
  expect_error_containing(with([](auto& o) { o.frames = 10; }), {"--frames", "8k + 1"});
  expect_error_containing(with([](auto& o) { o.text_tokens = 0; }), {"--text-tokens"});
  expect_error_containing(with([](auto& o) { o.dtype = DType::BF16; }), {"--dtype bf16", "f32"});
  expect_error_containing(with([](auto& o) { o.dtype = DType::I32; }), {"--dtype", "i32"});
  expect_error_containing(with([](auto& o) { o.ceilings.gemm_tflops = 0; }), {"--gemm-tflops"});
  EXPECT_NO_THROW(tiny_options().validate());
  EXPECT_EQ(tiny_options().model_dtype(), DType::F32);
  bench::BenchOptions g;
  g.device = Device::cuda();
  EXPECT_EQ(g.model_dtype(), DType::BF16);
}

TEST(BenchOptions, VideoSizesAreWidthByHeightInMultiplesOf32) {
  const bench::VideoSize s = bench::parse_video_size("1536x1024");
  EXPECT_EQ(s.width, 1536);
  EXPECT_EQ(s.height, 1024);
  EXPECT_EQ(s.str(), "1536x1024");
  for (const char* bad : {"", "768", "768x", "x512", "768x512x", "768*512", "-32x32", "100x64", "0x32"})
    expect_error_containing([&] { (void)bench::parse_video_size(bad, "--size"); }, {"--size"});
}

TEST(BenchRun, TimesTheTinyPresetOnTheCpu) {
  bench::BenchReport r = bench::plan(tiny_options(), bench::BenchTarget::All);
  ASSERT_EQ(r.cases.size(), 3u);
  bench::run(r);
  for (const auto& c : r.cases) {
    ASSERT_TRUE(c.ours.has_value()) << c.label;
    EXPECT_EQ(c.ours->ms.size(), 3u);
    EXPECT_GT(c.ours->median_ms, 0);
    EXPECT_LE(c.ours->min_ms, c.ours->median_ms);
    EXPECT_LE(c.ours->median_ms, c.ours->max_ms);
    EXPECT_GT(c.ours->weights_bytes, 0);
    // The peak is measured with the weights alive, so it holds at least them.
    EXPECT_GE(c.ours->peak_bytes, c.ours->weights_bytes) << c.label;
    ASSERT_TRUE(c.percent_of_floor().has_value());
    EXPECT_FALSE(c.ratio().has_value());  // no official numbers given
  }
  EXPECT_NE(r.device_description.find("CPU"), std::string::npos) << r.device_description;
  const std::string table = bench::format_table(r);
  for (const char* needle : {"ours ms", "official ms", "ours/off", "% floor", "transformer 64x64x9 +audio",
                             "transformer 128x64x9 +audio", "vae decode 64x64x9"})
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  const auto j = bench::to_json(r);
  EXPECT_EQ(j["cases"].size(), 3u);
  EXPECT_EQ(j["cases"][0]["ours"]["all_ms"].size(), 3u);
  EXPECT_EQ(j["cases"][2]["flops"]["total"].get<int64_t>(), r.cases[2].flops.total());
}

TEST(BenchRun, TinyTransformerWithoutAudioRunsTheVideoStreamOnly) {
  bench::BenchOptions o = tiny_options();
  o.audio = false;
  o.iters = 1;
  o.warmup = 0;
  bench::BenchReport r = bench::plan(o, bench::BenchTarget::Transformer);
  bench::run(r);
  ASSERT_EQ(r.cases.size(), 2u);
  EXPECT_TRUE(r.cases[0].ours.has_value());
  EXPECT_EQ(r.cases[0].tokens.audio, 0);
}

// ---------------------------------------------------------------- random weights

TEST(RandomWeights, FollowTheOfficialInitRules) {
  using bench::Init;
  EXPECT_EQ(bench::transformer_init("transformer_blocks.0.attn1.q_norm.weight", {64}).kind, Init::Kind::Constant);
  EXPECT_EQ(bench::transformer_init("transformer_blocks.0.attn1.k_norm.weight", {64}).value, 1.0);
  EXPECT_EQ(bench::transformer_init("proj_out.weight", {4, 8}).value, 0.02);
  EXPECT_EQ(bench::transformer_init("proj_out.bias", {4}).value, 0.01);
  EXPECT_EQ(bench::vae_init("per_channel_statistics.std-of-means", {128}).value, 1.0);
  EXPECT_EQ(bench::vae_init("per_channel_statistics.mean-of-means", {128}).value, 0.0);
  EXPECT_EQ(bench::vae_init("conv_in.conv.bias", {8}).value, 0.0);
  EXPECT_EQ(bench::vae_init("norm.gamma", {8, 1, 1}).kind, Init::Kind::Normal);
  EXPECT_EQ(bench::vae_init("up_blocks.0.res_blocks.0.conv1.conv.weight", {8, 4, 3, 3, 3}).value,
            1.0 / std::sqrt(4.0 * 27.0));
}

double sample_std(const std::vector<float>& v) {
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x;
    s2 += static_cast<double>(x) * x;
  }
  const double m = s / static_cast<double>(v.size());
  return std::sqrt(s2 / static_cast<double>(v.size()) - m * m);
}

TEST(RandomWeights, MakeTensorsOfTheRequestedLayoutAndScaleDeterministically) {
  bench::RandomWeights rw(bench::transformer_init, 7, 1 << 14);
  const Tensor a = rw.make("ff.net.0.proj.weight", {300, 200}, DType::BF16, Device::cpu());
  EXPECT_EQ(a.shape(), Shape({300, 200}));
  EXPECT_EQ(a.dtype(), DType::BF16);
  EXPECT_TRUE(a.is_contiguous());
  const std::vector<float> va = a.to_float_vector();
  EXPECT_NEAR(sample_std(va), 0.02, 0.002);
  // Bigger than the pool: still filled everywhere (no zero runs left from empty()).
  int zeros = 0;
  for (float x : va) zeros += x == 0.f;
  EXPECT_LT(zeros, 60);
  const Tensor n = rw.make("attn1.q_norm.weight", {5}, DType::F32, Device::cpu());
  EXPECT_EQ(n.to_float_vector(), std::vector<float>(5, 1.f));
  EXPECT_EQ(rw.tensors_made(), 2);
  EXPECT_EQ(rw.bytes_made(), 300 * 200 * 2 + 5 * 4);
  // Same seed and name: same values; another name: others.
  bench::RandomWeights again(bench::transformer_init, 7, 1 << 14);
  EXPECT_EQ(again.make("ff.net.0.proj.weight", {300, 200}, DType::BF16, Device::cpu()).to_float_vector(), va);
  EXPECT_NE(again.make("ff.net.2.weight", {300, 200}, DType::BF16, Device::cpu()).to_float_vector(), va);
  expect_error_containing([&] { (void)rw.make("ids", {3}, DType::I64, Device::cpu()); },
                          {"'ids'", "floating-point"});
}

TEST(RandomWeights, BuildTheTinyTransformerThroughASyntheticWeightMap) {
  const auto cfg = bench::preset("tiny").transformer_config();
  bench::RandomWeights rw(bench::transformer_init);
  io::WeightMap w = io::WeightMap::synthetic(rw.synthesizer());
  const auto model = models::transformer::LTXModel::load(w, cfg);  // finish() inside: nothing missing
  EXPECT_EQ(model.num_blocks(), 2);
  EXPECT_GT(rw.tensors_made(), 100);
}

// ---------------------------------------------------------------- official results

// What tools/bench/bench_official.py writes (trimmed to the fields we read).
nlohmann::json official_doc() {
  const auto res = [](double median, double peak, int64_t nv) {
    return nlohmann::json{{"median_ms", median},
                          {"min_ms", median - 1},
                          {"peak_allocated_GiB", peak},
                          {"inputs", {{"video_tokens", {1, nv, 128}}, {"audio_tokens", {1, 126, 128}}}},
                          {"analytic", {{"total_flops", nv == 6144 ? 202048269713408.0 : 1149098222157824.0}}}};
  };
  nlohmann::json d;
  d["env"] = {{"torch", "2.11.0"}, {"gpu", "NVIDIA H200"}};
  d["sections"]["LTX-2.3 eager"] = {{"model", {{"params_total", 1}}},
                                    {"stage1 768x512", res(468.6, 36.9, 6144)},
                                    {"stage2 1536x1024", res(2321, 41.2, 24576)}};
  d["sections"]["LTX-2.3 compiled"] = {{"stage1 768x512", res(380, 36.0, 6144)}};
  d["sections"]["LTX-2.3 compiled+capture"] = {{"stage1 768x512", res(360.0, 35.5, 6144)},
                                               {"stage2 1536x1024", res(1981, 40.0, 24576)}};
  d["sections"]["LTX-2.5 eager"] = "skipped (--skip)";
  d["sections"]["VAE decode"] = {{"median_ms", 2078.0}, {"min_ms", 2070.0}, {"peak_allocated_GiB", 3.55}};
  return d;
}

TEST(BenchOfficial, AttachesTheMatchingSectionsAndShowsTheChosenOne) {
  bench::BenchReport r = bench::plan(bench::BenchOptions{}, bench::BenchTarget::All);
  bench::attach_official(r, official_doc(), "off.json", bench::OfficialChoice::Best);
  ASSERT_EQ(r.cases[0].official.size(), 3u);
  ASSERT_TRUE(r.cases[0].official_choice.has_value());
  EXPECT_EQ(r.cases[0].official[*r.cases[0].official_choice].section, "LTX-2.3 compiled+capture");
  ASSERT_EQ(r.cases[1].official.size(), 2u);
  EXPECT_EQ(r.cases[1].official[*r.cases[1].official_choice].median_ms, 1981);
  ASSERT_EQ(r.cases[2].official.size(), 1u);
  EXPECT_EQ(r.cases[2].official[0].median_ms, 2078);
  // With our timings the ratio is ours / official.
  r.cases[0].ours = bench::Timing{};
  r.cases[0].ours->median_ms = 180;
  EXPECT_DOUBLE_EQ(*r.cases[0].ratio(), 0.5);
  const std::string table = bench::format_table(r);
  for (const char* needle : {"360.0 (capture)", "1981.0 (capture)", "2078.0 (eager)", "0.50", "off.json",
                             "NVIDIA H200"})
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  // A named section; one that lacks the case shows nothing.
  bench::attach_official(r, official_doc(), "off.json", bench::OfficialChoice::Compiled);
  EXPECT_EQ(r.cases[0].official[*r.cases[0].official_choice].median_ms, 380);
  EXPECT_FALSE(r.cases[1].official_choice.has_value());
  bench::attach_official(r, official_doc(), "off.json", bench::OfficialChoice::Eager);
  EXPECT_EQ(r.cases[1].official[*r.cases[1].official_choice].median_ms, 2321);
  EXPECT_EQ(bench::to_json(r)["cases"][1]["official_shown"], "LTX-2.3 eager");
}

TEST(BenchOfficial, IgnoresRunsOfOtherShapes) {
  bench::BenchOptions o;
  o.text_tokens = 512;  // the official run used 1024
  o.vae_tiling = false;  // the official decode is tiled
  bench::BenchReport r = bench::plan(o, bench::BenchTarget::All);
  bench::attach_official(r, official_doc(), "off.json", bench::OfficialChoice::Best);
  for (const auto& c : r.cases) EXPECT_TRUE(c.official.empty()) << c.label;
  // Recorded token counts that differ from ours.
  nlohmann::json d = official_doc();
  d["sections"]["LTX-2.3 eager"]["stage1 768x512"]["inputs"]["video_tokens"] = {1, 6000, 128};
  bench::BenchReport r2 = bench::plan(bench::BenchOptions{}, bench::BenchTarget::Transformer);
  bench::attach_official(r2, d, "off.json", bench::OfficialChoice::Best);
  EXPECT_EQ(r2.cases[0].official.size(), 2u);  // compiled + capture only
  // The tiny preset is another model.
  bench::BenchReport t = bench::plan(tiny_options(), bench::BenchTarget::All);
  bench::attach_official(t, official_doc(), "off.json", bench::OfficialChoice::Best);
  for (const auto& c : t.cases) EXPECT_TRUE(c.official.empty()) << c.label;
}

TEST(BenchOfficial, RejectsFilesThatAreNotOfficialResults) {
  bench::BenchReport r = bench::plan(tiny_options(), bench::BenchTarget::All);
  expect_error_containing([&] { bench::attach_official(r, nlohmann::json::array(), "x.json", {}); },
                          {"x.json", "sections"});
  expect_error_containing(
      [&] { bench::attach_official(r, "/nonexistent/off.json", bench::OfficialChoice::Best); },
      {"/nonexistent/off.json", "cannot open"});
  test::TempDir dir;
  const std::string bad = dir.file("bad.json");
  test::write_bytes(bad, "{not json");
  expect_error_containing([&] { bench::attach_official(r, bad, bench::OfficialChoice::Best); },
                          {"bad.json", "not valid JSON"});
  expect_error_containing([] { (void)bench::parse_official_choice("fastest"); },
                          {"--official-section", "fastest"});
}

}  // namespace
}  // namespace ltx
