// The `ltx bench` library: planning, the tiny CPU run, random weights, official-JSON matching.
#include "bench/bench.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "bench/pipeline_bench.h"
#include "bench/random_weights.h"
#include "generate/offload_plan.h"
#include "io/safetensors.h"
#include "core/storage.h"
#include "io/io_test_util.h"
#include "io/weights.h"
#include "models/audio_vae/audio_vae.h"
#include "nn/linear.h"
#include "quantization/ggml_dequant.h"
#include "quantization/ggml_quant.h"
#include "models/audio_vae/config.h"
#include "models/audio_vae/vocoder.h"
#include "models/text/embeddings_processor.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma/model.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/upsampler/model_configurator.h"
#include "models/video_vae/diffusion_video_decoder.h"
#include "sampling/noise.h"
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
  o.decode_free_bytes = int64_t{8} << 30;  // the diffusion tiling's budget, not this host's
  return o;
}

// The ltx25-22b preset planned for an H200's free memory (one diffusion decode tile).
bench::BenchOptions ltx25_options() {
  bench::BenchOptions o;
  o.preset = "ltx25-22b";
  o.decode_free_bytes = int64_t{139} << 30;
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

TEST(BenchPlan, Ltx25PresetAddsTheDiffusionDecodeWithTheReferenceTiling) {
  const bench::BenchReport r = bench::plan(ltx25_options(), bench::BenchTarget::All);
  ASSERT_EQ(r.cases.size(), 4u);
  EXPECT_EQ(r.cases[0].label, "transformer 768x512x121 +audio");
  EXPECT_EQ(r.cases[2].kind, "vae_decode");  // 2.5 ships the conv VAE too
  const bench::BenchCase& d = r.cases[3];
  EXPECT_EQ(d.kind, "diffusion_decode");
  EXPECT_EQ(d.label, "diffusion decode 1536x1024x121 (1 tile, chunked_eager)");
  EXPECT_EQ(d.latent, Shape({1, 128, 16, 32, 48}));
  EXPECT_EQ(d.tiles, 1);
  ASSERT_TRUE(d.decode_tiling.has_value());
  EXPECT_EQ(models::tiling::describe(*d.decode_tiling),
            "TileSizeConfig(frames=128/40, height=1024/160, width=1536/160)");
  EXPECT_EQ(d.decode_free_bytes, int64_t{139} << 30);
  const auto cfg = bench::preset("ltx25-22b").diffusion_decoder_config();
  EXPECT_EQ(d.flops.total(), bench::diffusion_decoder_flops(cfg, d.latent, d.decode_tiling).total());
  EXPECT_NEAR(d.floor_ms, 583.1, 0.1);
  // The 2.5 transformer: bias-free video FF, keyframe position embedding; same FLOPs as 2.3.
  const auto tcfg = bench::preset("ltx25-22b").transformer_config();
  EXPECT_FALSE(tcfg.ff_bias);
  EXPECT_TRUE(tcfg.audio_ff_bias);
  EXPECT_TRUE(tcfg.use_keyframes_abs_pos_embedding);
  EXPECT_EQ(r.cases[1].flops.total(), bench::plan(bench::BenchOptions{}, bench::BenchTarget::All).cases[1].flops.total());
  // A smaller budget splits the decode (and costs the overlaps); --no-tiling is one tile.
  bench::BenchOptions small = ltx25_options();
  small.decode_free_bytes = int64_t{20} << 30;
  const bench::BenchReport s = bench::plan(small, bench::BenchTarget::DiffusionDecoder);
  ASSERT_EQ(s.cases.size(), 1u);
  EXPECT_GT(s.cases[0].tiles, 1);
  EXPECT_GT(s.cases[0].flops.total(), d.flops.total());
  bench::BenchOptions untiled = ltx25_options();
  untiled.vae_tiling = false;
  const bench::BenchCase u = bench::plan(untiled, bench::BenchTarget::DiffusionDecoder).cases.at(0);
  EXPECT_EQ(u.label, "diffusion decode 1536x1024x121 (untiled, chunked_eager)");
  EXPECT_FALSE(u.decode_tiling.has_value());
  EXPECT_EQ(u.flops.total(), d.flops.total());
  // Without a budget the free memory of the device (here the host) decides.
  bench::BenchOptions host = tiny_options();
  host.decode_free_bytes.reset();
  const bench::BenchCase h = bench::plan(host, bench::BenchTarget::DiffusionDecoder).cases.at(0);
  EXPECT_GE(h.tiles, 1);
  EXPECT_GT(h.decode_free_bytes.value_or(0), 0);
}

TEST(BenchPlan, DiffusionDecodeNeedsAPresetWithOneAndABudgetThatFits) {
  // ltx23-22b has none: `all` leaves it out, `diffdec` says so.
  EXPECT_EQ(bench::plan(bench::BenchOptions{}, bench::BenchTarget::All).cases.size(), 3u);
  expect_error_containing([] { (void)bench::plan(bench::BenchOptions{}, bench::BenchTarget::DiffusionDecoder); },
                          {"ltx23-22b", "no diffusion video decoder", "ltx25-22b"});
  bench::BenchOptions o = ltx25_options();
  o.decode_free_bytes = int64_t{3} << 30;  // below the weights, the reserve and the stage-4 feature
  expect_error_containing([&] { (void)bench::plan(o, bench::BenchTarget::DiffusionDecoder); },
                          {"diffusion decode 1536x1024x121", "no decode tile fits", "--decode-free-gib",
                           "--no-tiling"});
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
  expect_error_containing(with([](auto& o) { o.decode_free_bytes = 0; }), {"--decode-free-gib"});
  expect_error_containing(with([](auto& o) { o.cuda_graph = true; }), {"--cuda-graph", "--device cuda"});
  expect_error_containing(with([](auto& o) { o.share_text_kv = false; }), {"--no-text-kv-share", "--guided"});
  expect_error_containing(with([](auto& o) { o.weights_format = "q3_k"; }),
                          {"--weights-format", "'q3_k'", "dense, bf16, q8_0, q6_k, q5_k, q5_k_m, q4_k, q4_k_m, q5_0, q4_0"});
  expect_error_containing(with([](auto& o) { o.weights_format = "bf16"; }), {"--weights-format bf16", "f32", "dense"});
  expect_error_containing(with([](auto& o) {
                            o.weights_format = "Q4_K";
                            o.quantization = quantization::Mode::Fp8;
                          }),
                          {"--weights-format Q4_K", "--quantization fp8", "one of the two"});
  expect_error_containing(with([](auto& o) {
                            o.device = Device::cuda();
                            o.dtype = DType::BF16;
                            o.guided = o.cuda_graph = true;
                          }),
                          {"--cuda-graph", "--guided"});
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
  ASSERT_EQ(r.cases.size(), 4u);
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
  // No GPU clock / power on the CPU: null in the JSON, no line in the table.
  for (const auto& c : r.cases) EXPECT_FALSE(c.ours->gpu.has_value()) << c.label;
  const std::string table = bench::format_table(r);
  EXPECT_EQ(table.find("GPU during"), std::string::npos) << table;
  for (const char* needle : {"ours ms", "official ms", "ours/off", "% floor", "transformer 64x64x9 +audio",
                             "transformer 128x64x9 +audio", "vae decode 64x64x9",
                             "diffusion decode 64x64x9 (4 tiles, chunked_eager)"})
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  const auto j = bench::to_json(r);
  EXPECT_EQ(j["cases"].size(), 4u);
  EXPECT_EQ(j["cases"][3]["kind"], "diffusion_decode");
  EXPECT_TRUE(j["cases"][0]["ours"]["gpu"].is_null());
  EXPECT_EQ(j["cases"][3]["tiles"], 4);
  EXPECT_EQ(j["cases"][3]["mode"], "chunked_eager");
  EXPECT_EQ(j["cases"][3]["decode_free_bytes"], int64_t{8} << 30);
  EXPECT_NE(j["cases"][3]["tiling"].get<std::string>().find("TileSizeConfig"), std::string::npos);
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

// --guided: one step of the guided denoiser with the LTX-2.3 default guidance (4 passes batched:
// cond, uncond, STG, isolated modality), its FLOPs 4 forwards, its label and JSON saying so; with
// and without the shared text K / V.
// The 19B: its transformer layout (no gated attention, no text-attention AdaLN, the caption
// projection inside), its generation's guidance (STG on block 29), and no VAE case.
TEST(BenchPlan, Ltx2PresetIsThe19BTransformerOnly) {
  const auto cfg = bench::preset("ltx2-19b").transformer_config();
  EXPECT_FALSE(cfg.apply_gated_attention);
  EXPECT_FALSE(cfg.cross_attention_adaln);
  EXPECT_TRUE(cfg.caption_projection);
  EXPECT_EQ(cfg.caption_channels, 3840);
  EXPECT_EQ(cfg.num_layers, 48);
  bench::BenchOptions o;
  o.preset = "ltx2-19b";
  const bench::BenchReport r = bench::plan(o, bench::BenchTarget::All);
  ASSERT_EQ(r.cases.size(), 2u);
  EXPECT_EQ(r.cases[0].label, "transformer 768x512x121 +audio");
  EXPECT_EQ(r.cases[1].label, "transformer 1536x1024x121 +audio");
  const bench::BenchReport t23 = bench::plan(bench::BenchOptions{}, bench::BenchTarget::Transformer);
  // No gate logits and no prompt AdaLN, but the caption projections on the text tokens.
  EXPECT_NE(r.cases[0].flops.total(), t23.cases[0].flops.total());
  EXPECT_NEAR(static_cast<double>(r.cases[0].flops.total()) / static_cast<double>(t23.cases[0].flops.total()),
              1.0, 0.02);
  expect_error_containing([&] { (void)bench::plan(o, bench::BenchTarget::Vae); },
                          {"ltx2-19b", "no conv video VAE", "ltx23-22b"});
  o.guided = true;
  EXPECT_EQ(bench::plan(o, bench::BenchTarget::Transformer).cases.at(0).passes, 4);
  expect_error_containing([] { (void)bench::preset("ltx2"); }, {"ltx2-19b", "ltx23-22b", "tiny"});
}

TEST(BenchRun, GuidedStepRunsTheDefaultGuidanceAsOneBatch) {
  for (bool share : {true, false}) {
    bench::BenchOptions o = tiny_options();
    o.guided = true;
    o.share_text_kv = share;
    o.iters = 1;
    o.warmup = 0;
    bench::BenchReport r = bench::plan(o, bench::BenchTarget::Transformer);
    bench::BenchOptions single = o;
    single.guided = false;
    single.share_text_kv = true;
    const bench::BenchReport one = bench::plan(single, bench::BenchTarget::Transformer);
    ASSERT_EQ(r.cases.size(), one.cases.size());
    EXPECT_EQ(r.cases[0].passes, 4);
    EXPECT_EQ(r.cases[0].flops.total(), 4 * one.cases[0].flops.total());
    EXPECT_NE(r.cases[0].label.find(share ? "guided x4" : "guided x4 kv-per-pass"), std::string::npos)
        << r.cases[0].label;
    bench::run(r);
    ASSERT_TRUE(r.cases[0].ours.has_value());
    const auto j = bench::to_json(r);
    EXPECT_EQ(j["guided"], true);
    EXPECT_EQ(j["side_streams"], false);  // the CPU has none
    EXPECT_EQ(j["share_text_kv"], share);
    EXPECT_EQ(j["cases"][0]["passes"], 4);
  }
}

// An A/B option of the transformer case (`set` turns it on): the same FLOP count (the floor keeps
// the per-token AdaLN either way), `tag` in the label and `key` true in the JSON only with it, and
// both forms run, plain and guided.
void expect_ab_option_of_the_same_case(const std::function<void(bench::BenchOptions&)>& set, const char* tag,
                                       const char* key) {
  for (bool guided : {false, true}) {
    SCOPED_TRACE(std::string(tag) + (guided ? ", guided" : ", one forward"));
    bench::BenchOptions o = tiny_options();
    o.guided = guided;
    o.iters = 1;
    o.warmup = 0;
    bench::BenchOptions with = o;
    set(with);
    bench::BenchReport a = bench::plan(o, bench::BenchTarget::Transformer);
    bench::BenchReport b = bench::plan(with, bench::BenchTarget::Transformer);
    ASSERT_EQ(a.cases.size(), b.cases.size());
    EXPECT_EQ(a.cases[0].flops.total(), b.cases[0].flops.total());
    EXPECT_EQ(a.cases[0].label.find(tag), std::string::npos) << a.cases[0].label;
    EXPECT_NE(b.cases[0].label.find(tag), std::string::npos) << b.cases[0].label;
    bench::run(a);
    bench::run(b);
    ASSERT_TRUE(a.cases[0].ours.has_value());
    ASSERT_TRUE(b.cases[0].ours.has_value());
    EXPECT_EQ(bench::to_json(a)[key], false);
    EXPECT_EQ(bench::to_json(b)[key], true);
  }
}

// --per-token-timesteps: the reference's [B, T, 1] timesteps instead of one per sample.
TEST(BenchRun, PerTokenTimestepsAreAnABOfTheSameCase) {
  expect_ab_option_of_the_same_case([](bench::BenchOptions& o) { o.per_token_timesteps = true; }, "per-token-ts",
                                    "per_token_timesteps");
}

// --image-conditioned: the first latent frame pinned (two runs of timesteps), alone and with
// per-token timesteps (its A/B).
TEST(BenchRun, ImageConditionedIsTheSameCaseWithAPinnedFrame) {
  expect_ab_option_of_the_same_case([](bench::BenchOptions& o) { o.image_conditioned = true; }, "image-cond",
                                    "image_conditioned");
  expect_ab_option_of_the_same_case(
      [](bench::BenchOptions& o) {
        o.image_conditioned = true;
        o.per_token_timesteps = true;
      },
      "image-cond", "image_conditioned");
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

// GGML weights: whole-block windows of one pool quantised once, so every made tensor is valid
// blocks (finite when dequantised) equal to the pool's dequantised values at its window starts,
// and exactly the quantisation of its dense twin (make_ggml_source).
TEST(RandomWeights, GgmlWeightsAreWindowsOfOneQuantisedPool) {
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q4_K, GgmlType::Q4_0}) {
    SCOPED_TRACE(ggml_type_name(type));
    bench::RandomWeights rw(bench::transformer_init, 5, 1 << 12);
    const Shape shape{6, 512};
    const io::GgmlTensor g = rw.make_ggml("ff.net.0.proj.weight", shape, type, Device::cpu());
    EXPECT_EQ(g.type, type);
    EXPECT_EQ(g.shape, shape);
    EXPECT_EQ(g.row_elems, 512);
    ASSERT_EQ(static_cast<int64_t>(g.bytes.nbytes()), 6 * quantization::ggml_row_bytes(type, 512));
    std::vector<float> values(6 * 512);
    quantization::dequantize_rows(type, g.bytes.raw_data(), 6, 512, values.data());
    for (float v : values) ASSERT_TRUE(std::isfinite(v));
    EXPECT_NEAR(sample_std(values), 0.02, 0.004);
    // The pool's values dequantised, window by window.
    const auto& pool = rw.ggml_pool(0.02, type);
    const int64_t elems = ggml_traits(type).block_elems, pool_n = pool.values.numel();
    std::vector<float> pool_values(static_cast<size_t>(pool_n));
    quantization::dequantize_rows(type, pool.blocks.raw_data(), 1, pool_n, pool_values.data());
    const std::vector<int64_t> starts = rw.ggml_window_starts("ff.net.0.proj.weight", shape, type);
    const int64_t blocks = 6 * 512 / elems, window = std::min(blocks, pool_n / elems / 2);
    ASSERT_EQ(static_cast<int64_t>(starts.size()), (blocks + window - 1) / window);
    for (size_t w = 0; w < starts.size(); ++w) {
      const int64_t pos = static_cast<int64_t>(w) * window * elems;
      const int64_t len = std::min(window * elems, 6 * 512 - pos);
      for (int64_t i = 0; i < len; ++i)
        ASSERT_EQ(values[pos + i], pool_values[starts[w] * elems + i]) << "window " << w << " value " << i;
    }
    // The dense twin: quantising it gives the same bytes; it is the bf16 values the blocks came from.
    const Tensor twin = rw.make_ggml_source("ff.net.0.proj.weight", shape, type, DType::F32, Device::cpu());
    std::vector<uint8_t> again(g.bytes.nbytes());
    quantization::quantize_rows(type, twin.data<float>(), 6, 512, again.data());
    EXPECT_EQ(std::memcmp(again.data(), g.bytes.raw_data(), again.size()), 0);
    EXPECT_EQ(twin.to(Device::cpu(), DType::BF16).to_float_vector(), twin.to_float_vector());
    EXPECT_EQ(rw.ggml_tensors_made(), 1);
    EXPECT_EQ(rw.bytes_made(), static_cast<int64_t>(g.bytes.nbytes()) + 6 * 512 * 4);
  }
  bench::RandomWeights rw(bench::transformer_init, 5, 1 << 12);
  expect_error_containing([&] { (void)rw.make_ggml("w", {4, 100}, GgmlType::Q4_K, Device::cpu()); },
                          {"'w'", "Q4_K", "256"});
}

// A synthetic map with a GGML rule: Linear::load binds the names it types with take_ggml (blocks
// of the rule's type), the rest dense; the tiny transformer loads with `ltx quantize`'s policy.
TEST(RandomWeights, SyntheticMapHandsOutGgmlBlocksThroughTakeGgml) {
  bench::RandomWeights rw(bench::transformer_init, 0, 1 << 12);
  const bench::GgmlRule rule = [](const std::string& name, const Shape&) -> std::optional<GgmlType> {
    if (name == "a.weight") return GgmlType::Q8_0;
    return std::nullopt;
  };
  io::WeightMap w = io::WeightMap::synthetic(rw.synthesizer(), rw.ggml_synthesizer(rule));
  EXPECT_EQ(w.synthesized_ggml_type("a.weight", {8, 64}), GgmlType::Q8_0);
  const nn::Linear a = nn::Linear::load(w, "a", 64, 8, true, {DType::F32, Device::cpu()});
  const nn::Linear b = nn::Linear::load(w, "b", 64, 8, false, {DType::F32, Device::cpu()});
  w.finish("layers");
  EXPECT_EQ(a.format, nn::LinearFormat::GgmlBlocks);
  EXPECT_EQ(a.ggml_type, GgmlType::Q8_0);
  EXPECT_EQ(a.weight.shape(), Shape({8, 2 * 34}));
  EXPECT_EQ(a.bias.dtype(), DType::F32);
  EXPECT_EQ(b.format, nn::LinearFormat::Dense);
  EXPECT_FALSE(w.synthesized_ggml_type("a.weight", {8, 64}).has_value());  // held now
  EXPECT_EQ(rw.ggml_tensors_made(), 1);

  const auto cfg = bench::preset("tiny").transformer_config();
  bench::RandomWeights tw(bench::transformer_init);
  io::WeightMap t = io::WeightMap::synthetic(tw.synthesizer(), tw.ggml_synthesizer(bench::transformer_gguf_rule("q8_0")));
  const auto model = models::transformer::LTXModel::load(t, cfg);
  EXPECT_GT(tw.ggml_tensors_made(), 0);
  // The policy: 2-D weights of whole blocks, except the projections and AdaLN tables it keeps.
  const bench::GgmlRule policy = bench::transformer_gguf_rule("Q4_K_M");
  EXPECT_EQ(policy("model.diffusion_model.transformer_blocks.0.attn1.to_q.weight", {4096, 4096}), GgmlType::Q4_K);
  EXPECT_EQ(policy("transformer_blocks.0.attn1.to_v.weight", {4096, 4096}), GgmlType::Q6_K);
  EXPECT_FALSE(policy("proj_out.weight", {128, 4096}).has_value());
  EXPECT_FALSE(policy("transformer_blocks.0.ff.net.0.proj.bias", {4096}).has_value());
  EXPECT_FALSE(policy("transformer_blocks.0.attn1.to_q.weight", {64, 100}).has_value());
  expect_error_containing([] { (void)bench::transformer_gguf_rule("BF16"); }, {"'BF16'", "Q8_0"});
}

TEST(RandomWeights, CountParametersWithoutMakingThem) {
  const auto cfg = bench::preset("tiny").diffusion_decoder_config();
  const auto load = [&](io::WeightMap& w) { (void)models::video_vae::DiffusionVideoDecoder::load(w, cfg); };
  bench::RandomWeights rw(bench::diffusion_vae_init);
  io::WeightMap w = io::WeightMap::synthetic(rw.synthesizer());
  load(w);
  EXPECT_EQ(bench::count_parameters(load) * 4, rw.bytes_made());  // f32
  // The full 2.5 decoder without allocating it: ~0.42 B parameters (0.83 GB in bf16).
  const auto real = bench::preset("ltx25-22b").diffusion_decoder_config();
  const int64_t live = host_allocation_stats().live_bytes;
  const int64_t n = bench::count_parameters(
      [&](io::WeightMap& m) { (void)models::video_vae::DiffusionVideoDecoder::load(m, real); });
  EXPECT_GT(n, 400'000'000);
  EXPECT_LT(n, 440'000'000);
  EXPECT_LT(host_allocation_stats().live_bytes - live, 1 << 20);
  EXPECT_EQ(bench::diffusion_vae_init("diff_blocks.0.scale_shift_table", {7, 256}).value, 0.02);
  EXPECT_EQ(bench::diffusion_vae_init("diff_blocks.0.attn.qkv.weight", {768, 256}).value, 1.0 / 16.0);
  EXPECT_EQ(bench::diffusion_vae_init("diff_blocks.0.attn.q_norm.weight", {64}).value, 1.0);
}

// The FLOP model walks the decoder's own geometry: one noise draw per tile (the 1-step x0
// decoder), each of the stage-5 canvas the FLOP count uses.
TEST(DiffusionDecoderFlops, FollowTheTilesAndCanvasesTheDecoderRuns) {
  bench::BenchOptions o = tiny_options();
  o.vae_size = bench::VideoSize{128, 64};
  const bench::BenchCase c = bench::plan(o, bench::BenchTarget::DiffusionDecoder).cases.at(0);
  ASSERT_GT(c.tiles, 1);
  const auto cfg = bench::preset("tiny").diffusion_decoder_config();
  bench::RandomWeights rw(bench::diffusion_vae_init);
  io::WeightMap w = io::WeightMap::synthetic(rw.synthesizer());
  const auto dec = models::video_vae::DiffusionVideoDecoder::load(w, cfg);
  sampling::TorchCpuGenerator gen(3);
  int64_t draws = 0, tokens = 0, frames = 0;
  const models::video_vae::NoiseFn noise = [&](const Shape& s) {
    ++draws;
    tokens += s[2] * (s[3] / cfg.patch_size) * (s[4] / cfg.patch_size);
    return gen.randn(s);
  };
  dec.decode_video(gen.randn(c.latent), c.decode_tiling, noise, [&](const Tensor& t) { frames += t.size(0); });
  EXPECT_EQ(frames, 9);
  EXPECT_EQ(draws, c.tiles);
  const int64_t c5 = cfg.diffusion_channels(), noised = 3 * cfg.patch_size * cfg.patch_size;
  int64_t counted = -1;
  for (const auto& t : c.flops.terms)
    if (t.name == "stage5.conv_in_x_t") counted = t.gemm;
  EXPECT_EQ(counted, 2 * tokens * noised * c5);
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

// What tools/bench/bench_official_diffdec.py writes: its whole layout, runs trimmed of the
// breakdown entries we do not read.
nlohmann::json official_diffdec_doc() {
  const auto run = [](const std::string& label, int64_t frames, int64_t t, double wall, double peak) {
    return nlohmann::json{{"label", label},
                          {"frames", frames},
                          {"latent", {1, 128, t, 32, 48}},
                          {"tiling", "TileSizeConfig(frames=128/40, height=1024/160, width=1536/160)"},
                          {"n_tiles", 1},
                          {"wall_s", wall},
                          {"gpu_event_ms", wall * 1e3 - 5},
                          {"peak_allocated_GiB", peak},
                          {"peak_reserved_GiB", peak + 2},
                          {"chunks_frames", {frames}},
                          {"out_shape", {1024, 1536, 3}},
                          {"breakdown_ms", {{"stage_5 (8 diffusion blocks + out)", {{"calls", 1}, {"ms", wall * 900}}}}},
                          {"out_finite", true},
                          {"out_mean", 0.5}};
  };
  nlohmann::json d;
  d["runs"] = {run("calibration 25 frames (cold: includes Triton na3d JIT compile)", 25, 4, 60.0, 12.0),
               run("FULL 121 frames #1", 121, 16, 150.2, 30.1), run("FULL 121 frames #2", 121, 16, 140.0, 30.5),
               run("FULL 121 frames #3", 121, 16, 142.0, 30.2)};
  d["env"] = {{"torch", "2.11.0"}, {"cuda", "12.8"}, {"triton", "3.5.0"}, {"gpu", "NVIDIA H200"},
              {"stubbed", nlohmann::json::array()}, {"triton_cache_files_before", 0}};
  d["mode"] = {{"mode", "chunked_eager"}, {"resolved", "DiffVAEConfig(...)"}, {"natten", true}, {"triton_na", true}};
  d["config_vae"] = {{"_class_name", "CausalDiffusionVAE"}};
  d["params"] = {{"total", 416000000}, {"groups", nlohmann::json::object()}, {"model_bytes", 832000000}};
  d["tiling"] = {{"25", "TileSizeConfig(...)"}, {"49", "TileSizeConfig(...)"}, {"121", "TileSizeConfig(...)"}};
  d["free_bytes"] = int64_t{149} << 30;
  d["backend"] = {{"stage5_w_chunks", 4}};
  d["full_121"] = {{"walls_s", {150.2, 140.0, 142.0}}, {"warm_median_s", 141.0}, {"first_includes_compile", false}};
  return d;
}

TEST(BenchOfficial, AttachesTheDiffusionDecoderWarmRuns) {
  bench::BenchReport r = bench::plan(ltx25_options(), bench::BenchTarget::All);
  bench::attach_official(r, official_diffdec_doc(), "diffdec.json", bench::OfficialChoice::Best);
  const bench::BenchCase& d = r.cases[3];
  ASSERT_EQ(d.official.size(), 1u);
  ASSERT_TRUE(d.official_choice.has_value());
  // Runs #2 and #3 (the script's warm_median_s); the calibration run is never used.
  EXPECT_DOUBLE_EQ(d.official[0].median_ms, 141000.0);
  EXPECT_DOUBLE_EQ(d.official[0].min_ms, 140000.0);
  EXPECT_DOUBLE_EQ(d.official[0].peak_gib.value_or(0), 30.5);
  EXPECT_EQ(d.official[0].section, "diffusion decoder (chunked_eager)");
  EXPECT_EQ(d.official[0].tiles, 1);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(r.cases[i].official.empty()) << r.cases[i].label;
  // The bench_official.py file fills the other cases and leaves this one alone (LTX-2.5 eager
  // for the 2.5 transformer, the shared conv VAE).
  nlohmann::json sections = official_doc();
  sections["sections"]["LTX-2.5 eager"] = {{"stage1 768x512", {{"median_ms", 470.0}, {"peak_allocated_GiB", 37.0}}}};
  bench::attach_official(r, sections, "off.json", bench::OfficialChoice::Best);
  ASSERT_EQ(r.cases[0].official.size(), 1u);
  EXPECT_EQ(r.cases[0].official[0].section, "LTX-2.5 eager");
  EXPECT_TRUE(r.cases[1].official.empty());  // no 2.5 run at 1536x1024 in that file
  EXPECT_EQ(r.cases[2].official.at(0).median_ms, 2078);
  ASSERT_EQ(r.cases[3].official.size(), 1u);
  r.cases[3].ours = bench::Timing{};
  r.cases[3].ours->median_ms = 70500;
  EXPECT_DOUBLE_EQ(*r.cases[3].ratio(), 0.5);
  const std::string table = bench::format_table(r);
  for (const char* needle : {"official: diffdec.json (torch 2.11.0, NVIDIA H200)", "official: off.json",
                             "141000.0 (eager)", "30.5", "0.50", "470.0 (eager)"})
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  const auto j = bench::to_json(r);
  EXPECT_EQ(j["official_files"].size(), 2u);
  EXPECT_EQ(j["cases"][3]["official"][0]["tiles"], 1);
  EXPECT_EQ(j["cases"][3]["official_shown"], "diffusion decoder (chunked_eager)");
  // Attaching the same file again replaces its values, not adds to them.
  bench::attach_official(r, official_diffdec_doc(), "diffdec.json", bench::OfficialChoice::Best);
  EXPECT_EQ(r.official_files.size(), 2u);
  EXPECT_EQ(r.cases[3].official.size(), 1u);
}

TEST(BenchOfficial, DiffusionRunsOfOtherShapesModesOrPresetsAreIgnored) {
  // Only the calibration run has a matching latent (--frames 25): never a warm number.
  bench::BenchOptions o = ltx25_options();
  o.frames = 25;
  bench::BenchReport r = bench::plan(o, bench::BenchTarget::DiffusionDecoder);
  bench::attach_official(r, official_diffdec_doc(), "diffdec.json", bench::OfficialChoice::Best);
  EXPECT_TRUE(r.cases[0].official.empty());
  // One full run: it is the number.
  nlohmann::json one = official_diffdec_doc();
  one["runs"] = {one["runs"][0], one["runs"][1]};
  bench::BenchReport full = bench::plan(ltx25_options(), bench::BenchTarget::DiffusionDecoder);
  bench::attach_official(full, one, "diffdec.json", bench::OfficialChoice::Best);
  ASSERT_EQ(full.cases[0].official.size(), 1u);
  EXPECT_DOUBLE_EQ(full.cases[0].official[0].median_ms, 150200.0);
  // Another stage-5 mode, an untiled run of ours, the tiny preset, or a compiled choice.
  nlohmann::json combined = official_diffdec_doc();
  combined["mode"]["mode"] = "combined_compile";
  bench::attach_official(full, combined, "diffdec.json", bench::OfficialChoice::Best);
  EXPECT_TRUE(full.cases[0].official.empty());
  bench::BenchOptions untiled = ltx25_options();
  untiled.vae_tiling = false;
  bench::BenchReport u = bench::plan(untiled, bench::BenchTarget::DiffusionDecoder);
  bench::attach_official(u, official_diffdec_doc(), "diffdec.json", bench::OfficialChoice::Best);
  EXPECT_TRUE(u.cases[0].official.empty());
  bench::BenchReport t = bench::plan(tiny_options(), bench::BenchTarget::DiffusionDecoder);
  bench::attach_official(t, official_diffdec_doc(), "diffdec.json", bench::OfficialChoice::Best);
  EXPECT_TRUE(t.cases[0].official.empty());
  bench::attach_official(full, official_diffdec_doc(), "diffdec.json", bench::OfficialChoice::Compiled);
  EXPECT_EQ(full.cases[0].official.size(), 1u);
  EXPECT_FALSE(full.cases[0].official_choice.has_value());
  // Runs without a wall time are skipped, not an error.
  nlohmann::json broken = official_diffdec_doc();
  for (auto& run : broken["runs"]) run.erase("wall_s");
  bench::attach_official(full, broken, "diffdec.json", bench::OfficialChoice::Best);
  EXPECT_TRUE(full.cases[0].official.empty());
}

TEST(BenchOfficial, RejectsFilesThatAreNotOfficialResults) {
  bench::BenchReport r = bench::plan(tiny_options(), bench::BenchTarget::All);
  expect_error_containing([&] { bench::attach_official(r, nlohmann::json::array(), "x.json", {}); },
                          {"x.json", "sections", "runs", "bench_official_diffdec.py"});
  expect_error_containing(
      [&] { bench::attach_official(r, nlohmann::json{{"runs", "none"}}, "y.json", {}); }, {"y.json", "runs"});
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

namespace ltx {
namespace {

// The pipeline benchmark's full-size configs bind the published models: counted without
// allocating them, Gemma 3 12B's language model is the published 11.8 B parameters, and every
// other model's config parses and loads.
TEST(PipelinePreset, FullSizeModelsLoadAtThePublishedSizes) {
  const bench::Preset p = bench::preset("ltx23-22b");
  const text::GemmaTextConfig gemma = text::GemmaTextConfig::from_json(p.gemma, "test");
  EXPECT_EQ(gemma.hidden_size, 3840);
  EXPECT_EQ(gemma.num_layers, 48);
  const int64_t live = host_allocation_stats().live_bytes;
  const int64_t gemma_n = bench::count_parameters([&](io::WeightMap& w) {
    (void)text::GemmaTextModel::load(gemma, w, {}, "test", "test");
  });
  EXPECT_GT(gemma_n, 11'700'000'000);
  EXPECT_LT(gemma_n, 11'850'000'000);
  const auto processor = models::text::EmbeddingsProcessorConfig::from_metadata(
      nlohmann::json{{"config", {{"transformer", p.transformer}}}},
      models::text::GemmaTextDims{gemma.hidden_size, gemma.num_layers}, "test");
  const int64_t connectors_n = bench::count_parameters([&](io::WeightMap& w) {
    (void)models::text::EmbeddingsProcessor::load(w, processor, {});
  });
  const auto acfg = models::audio_vae::AudioVaeConfig::from_config(p.audio, "test");
  const auto vcfg = models::audio_vae::VocoderConfig::from_config(p.audio, "test");
  EXPECT_TRUE(vcfg.has_bwe);
  EXPECT_EQ(vcfg.output_sampling_rate(), 48000);
  const int64_t audio_n = bench::count_parameters([&](io::WeightMap& w) {
    (void)models::audio_vae::AudioDecoder::load(w, acfg, {});
    (void)models::audio_vae::VocoderModel::load(w, vcfg, {});
  });
  const auto ucfg = models::upsampler::upsampler_config_from_json(p.upsampler, "test");
  const int64_t upsampler_n = bench::count_parameters([&](io::WeightMap& w) {
    (void)models::upsampler::LatentUpsampler::load(w, ucfg, {});
  });
  EXPECT_LT(host_allocation_stats().live_bytes - live, 1 << 20);
  EXPECT_GT(connectors_n, 0);
  EXPECT_GT(audio_n, 0);
  EXPECT_GT(upsampler_n, 0);
}

// The pipeline bench's stand-in files give the memory planner the full-size models as published
// files would: the 22B transformer's 48 blocks and Gemma 3 12B's 48 layers at their bf16 sizes, and
// fp8-cast halves the transformer's blocks; the files hold only headers (sparse data sections).
TEST(PipelineBenchStandIns, GiveThePlannerTheFullSizeModels) {
  std::string dir;
  {
    const bench::StandInModelFiles files(bench::preset("ltx23-22b"));
    const auto t = generate::transformer_sizes(files.transformer(), DType::BF16,
                                               quantization::Mode::None);
    EXPECT_EQ(t.blocks, 48);
    const double gib = static_cast<double>(int64_t{1} << 30);
    const double total = static_cast<double>(t.fixed_bytes + t.blocks * t.block_bytes) / gib;
    EXPECT_GT(total, 35.0);  // ~20 B parameters in bf16
    EXPECT_LT(total, 42.0);
    const auto f = generate::transformer_sizes(files.transformer(), DType::BF16,
                                               quantization::Mode::Fp8Cast);
    EXPECT_LT(f.block_bytes, t.block_bytes * 0.6);
    const auto g = generate::text_encoder_sizes(files.text_encoder(), DType::BF16);
    EXPECT_EQ(g.blocks, 48);
    EXPECT_GT(static_cast<double>(g.fixed_bytes + g.blocks * g.block_bytes) / gib, 21.0);
    const auto file = io::SafetensorsFile::open(files.upsampler());
    EXPECT_GT(file->size(), 0u);
    dir = std::filesystem::path(files.transformer()).parent_path().string();
    EXPECT_TRUE(std::filesystem::is_directory(dir));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));  // removed with the object
}

// --weights-format q4_k in the pipeline bench: the stand-in transformer is a GGUF file whose
// linear weights are Q4_K blocks, so the planner (and the budget check) see the GGML model's
// bytes, as for a community GGUF file: about a quarter of the bf16 blocks, the same 48 of them.
TEST(PipelineBenchStandIns, AQuantizedWeightsFormatGivesThePlannerAGgufTransformerOfItsBlocks) {
  const bench::Preset p = bench::preset("ltx23-22b");
  const bench::StandInModelFiles dense(p);
  const bench::StandInModelFiles q4(p, bench::transformer_gguf_rule("Q4_K"));
  EXPECT_TRUE(q4.transformer().ends_with(".gguf")) << q4.transformer();
  const auto d = generate::transformer_sizes(dense.transformer(), DType::BF16, quantization::Mode::None);
  const auto q = generate::transformer_sizes(q4.transformer(), DType::BF16, quantization::Mode::None);
  EXPECT_EQ(q.blocks, d.blocks);
  EXPECT_LT(q.block_bytes, d.block_bytes * 0.35);  // 4.5 bits a weight, the norms and biases bf16
  EXPECT_GT(q.block_bytes, d.block_bytes * 0.25);
  EXPECT_LT(std::filesystem::file_size(q4.transformer()), std::filesystem::file_size(dense.transformer()));
}

// --text-encoder-format fp8: the stand-in Gemma stores its Linear weights in e4m3 with a scale
// each, so a bf16 run plans them at a byte (about half the dense Gemma); an f32 run widens them.
TEST(PipelineBenchStandIns, AnFp8TextEncoderIsPlannedAtAByteAWeightInBf16) {
  const bench::Preset p = bench::preset("ltx23-22b");
  const bench::StandInModelFiles dense(p);
  const bench::StandInModelFiles fp8(p, {}, /*fp8_text_encoder=*/true);
  const auto total = [](const generate::BlockModelSizes& s) {
    return static_cast<double>(s.fixed_bytes + s.blocks * s.block_bytes);
  };
  const auto d = generate::text_encoder_sizes(dense.text_encoder(), DType::BF16);
  const auto f = generate::text_encoder_sizes(fp8.text_encoder(), DType::BF16);
  EXPECT_EQ(f.blocks, d.blocks);
  EXPECT_LT(f.block_bytes, d.block_bytes * 0.51);  // the norms stay bf16
  EXPECT_GT(f.block_bytes, d.block_bytes * 0.49);
  EXPECT_EQ(f.fixed_bytes, d.fixed_bytes);  // the embedding table is not a Linear
  EXPECT_LT(total(f), total(d) * 0.75);
  EXPECT_NEAR(total(generate::text_encoder_sizes(fp8.text_encoder(), DType::F32)),
              total(generate::text_encoder_sizes(dense.text_encoder(), DType::F32)),
              total(d) * 0.001);  // only the scales differ
  const auto file = io::SafetensorsFile::open(fp8.text_encoder());
  EXPECT_EQ(file->info("layers.0.mlp.up_proj.weight").dtype, DType::F8E4M3FN);
  EXPECT_TRUE(file->contains("layers.0.mlp.up_proj.weight_scale"));
}

// The pipeline bench takes --weights-format as `ltx bench transformer` does: one check, so an
// unknown format and a quantized one with --quantization are refused (naming the flag) before
// anything is made.
TEST(PipelineBenchOptions, AWeightsFormatIsCheckedAsTheTransformerBenchChecksIt) {
  bench::PipelineBenchOptions o;
  o.preset = "tiny";
  o.width = o.height = 128;
  o.frames = 9;
  o.weights_format = "q3_x";
  expect_error_containing([&] { (void)bench::run_pipeline_bench(o); },
                          {"--weights-format", "q3_x", "q4_k"});
  o.weights_format = "q4_k";
  o.quantization = quantization::Mode::Fp8Cast;
  expect_error_containing([&] { (void)bench::run_pipeline_bench(o); },
                          {"--weights-format", "--quantization fp8-cast"});
}

}  // namespace
}  // namespace ltx
