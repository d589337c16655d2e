// Audio VAE + vocoder: configuration parsing, weight binding (real-size key layout, one-error
// reports), latent helpers, and the code paths the released files do not use (attention, group
// norm, non-causal and avg-pool variants).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/audio_vae/audio_vae.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace av = models::audio_vae;
using json = nlohmann::json;

json fixture_config(const std::string& c) {
  return io::SafetensorsFile(test::fixture("audio_" + c + ".weights.safetensors"))
      .metadata_json("config");
}

// ------------------------------------------------------------------------------------ config

TEST(AudioConfig, ReadsTheReleasedSections) {
  const av::AudioVaeConfig a = av::AudioVaeConfig::from_config(fixture_config("ltx2"), "f");
  EXPECT_EQ(a.ch, 32);
  EXPECT_EQ(a.ch_mult, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(a.z_channels, 2);
  EXPECT_TRUE(a.attn_resolutions.empty());
  EXPECT_FALSE(a.mid_block_add_attention);
  EXPECT_EQ(a.causality_axis, av::CausalityAxis::Height);
  EXPECT_EQ(a.norm_type, av::NormType::Pixel);
  EXPECT_EQ(a.mel_bins, 64);
  EXPECT_EQ(a.n_fft, 1024);
  EXPECT_EQ(a.mel_hop_length, 160);

  const av::VocoderConfig v2 = av::VocoderConfig::from_config(fixture_config("ltx2"), "f");
  EXPECT_FALSE(v2.has_bwe);
  EXPECT_EQ(v2.output_sampling_rate(), 24000);  // code default: the 19B section has no rate
  EXPECT_TRUE(v2.vocoder.use_tanh_at_final);
  EXPECT_EQ(v2.vocoder.upsample_factor(), 240);

  const av::VocoderConfig v3 = av::VocoderConfig::from_config(fixture_config("ltx23"), "f");
  EXPECT_TRUE(v3.has_bwe);
  EXPECT_EQ(v3.vocoder.output_sampling_rate, 16000);  // = bwe.input_sampling_rate
  EXPECT_TRUE(v3.vocoder.apply_final_activation);
  EXPECT_FALSE(v3.vocoder.use_tanh_at_final);
  EXPECT_FALSE(v3.bwe_generator.apply_final_activation);
  EXPECT_EQ(v3.output_sampling_rate(), 48000);
  EXPECT_EQ(v3.bwe.n_fft, 256);
  EXPECT_EQ(v3.bwe.hop_length, 80);
}

TEST(AudioConfig, AbsentKeysTakeTheCodeDefaults) {
  const av::AudioVaeConfig a = av::AudioVaeConfig::from_config(json::object(), "f");
  EXPECT_EQ(a.ch, 128);
  EXPECT_EQ(a.ch_mult, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(a.attn_resolutions, (std::set<int64_t>{8, 16, 32}));
  EXPECT_TRUE(a.mid_block_add_attention);
  EXPECT_EQ(a.z_channels, 8);
  EXPECT_FALSE(a.mel_bins.has_value());
  // mel_bins falls through a 0 / null to the next source, like Python's `or`.
  json c = {{"audio_vae",
             {{"model", {{"params", {{"ddconfig", {{"mel_bins", 0}}}}}}},
              {"preprocessing", {{"mel", {{"n_mel_channels", nullptr}}}}},
              {"variables", {{"mel_bins", 80}}}}}};
  EXPECT_EQ(av::AudioVaeConfig::from_config(c, "f").mel_bins, 80);
  c["audio_vae"]["model"]["params"]["ddconfig"]["causality_axis"] = nullptr;
  EXPECT_EQ(av::AudioVaeConfig::from_config(c, "f").causality_axis, av::CausalityAxis::None);
}

TEST(AudioConfig, RejectsBadValuesNamingTheKey) {
  auto dd = [](json v) {
    return json{{"audio_vae", {{"model", {{"params", {{"ddconfig", std::move(v)}}}}}}}};
  };
  const std::string base = "config.audio_vae.model.params.ddconfig.";
  const std::vector<std::pair<json, std::string>> cases = {
      {dd({{"ch", "128"}}), base + "ch"},
      {dd({{"ch", 0}}), base + "ch"},
      {dd({{"ch_mult", 4}}), base + "ch_mult"},
      {dd({{"ch_mult", json::array()}}), base + "ch_mult"},
      {dd({{"norm_type", "batch"}}), base + "norm_type"},
      {dd({{"causality_axis", "depth"}}), base + "causality_axis"},
      {dd({{"attn_type", "flash"}}), base + "attn_type"},
      {dd({{"mid_block_add_attention", 1}}), base + "mid_block_add_attention"},
      {dd({{"norm_type", "group"}}), "causal"},
      {json{{"audio_vae", {{"model", 3}}}}, "config.audio_vae.model"},
  };
  for (const auto& [cfg, needle] : cases)
    test::expect_error_containing([&] { av::AudioVaeConfig::from_config(cfg, "file.st"); },
                                  {"file.st", needle});
}

TEST(AudioConfig, VocoderChecksMatchTheReference) {
  json v19 = fixture_config("ltx2");
  json v23 = fixture_config("ltx23");
  const std::vector<std::pair<json, std::vector<std::string>>> cases = [&] {
    std::vector<std::pair<json, std::vector<std::string>>> c;
    json a = v19;
    a["vocoder"]["resblock"] = "AMP1";
    c.push_back({a, {"config.vocoder.resblock", "\"1\""}});
    a = v19;
    a["vocoder"].erase("stereo");
    c.push_back({a, {"config.vocoder.stereo", "true"}});
    a = v19;
    a["vocoder"]["upsample_rates"] = {6, 5, 2, 2};
    c.push_back({a, {"upsample_kernel_sizes"}});
    a = v23;
    a["vocoder"]["bwe"]["activation"] = "snake";
    c.push_back({a, {"config.vocoder.bwe.activation", "snakebeta"}});
    a = v23;
    a["vocoder"]["vocoder"]["resblock"] = "1";
    c.push_back({a, {"config.vocoder.vocoder.resblock"}});
    a = v23;
    a["vocoder"]["bwe"].erase("n_fft");
    c.push_back({a, {"config.vocoder.bwe.n_fft", "required"}});
    a = v23;
    a["vocoder"]["bwe"]["hop_length"] = 160;
    c.push_back({a, {"hop_length", "length"}});
    a = v23;
    a["vocoder"]["bwe"]["resblock_dilation_sizes"] = {{1, 3}, {1, 3, 5}, {1, 3, 5}};
    c.push_back({a, {"3 dilations"}});
    return c;
  }();
  for (const auto& [cfg, needles] : cases) {
    try {
      av::VocoderConfig::from_config(cfg, "file.st");
      ADD_FAILURE() << "accepted " << cfg["vocoder"].dump();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("file.st"), std::string::npos) << msg;
      for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << n << ": " << msg;
    }
  }
}

// ------------------------------------------------------------------------------------ binding

// Zero-memory stand-ins (a broadcast scalar) for every tensor of a real-size file.
io::WeightMap layout_weights(const json& tensors, const io::KeyMap& keys) {
  io::WeightMap w;
  for (const auto& [name, shape] : tensors.items()) {
    const auto mapped = keys.apply(name);
    if (!mapped) continue;
    w.add(*mapped, Tensor::zeros({1}).expand(Shape(shape.get<std::vector<int64_t>>())));
  }
  return w;
}

TEST(AudioBinding, BindsEveryTensorOfTheRealSizeLayouts) {
  std::ifstream f(test::fixture("audio_real_layout.json"));
  const json layout = json::parse(f);
  for (const char* c : {"ltx2", "ltx23"}) {
    const json& cs = layout[c];
    const json& tensors = cs["tensors"];
    const av::AudioVaeConfig acfg = av::AudioVaeConfig::from_config(cs["config"], c);
    const av::VocoderConfig vcfg = av::VocoderConfig::from_config(cs["config"], c);
    io::WeightMap enc = layout_weights(tensors, av::encoder_key_map());
    av::AudioEncoder::load(enc, acfg, {});
    EXPECT_NO_THROW(enc.finish(str(c, " encoder")));
    io::WeightMap dec = layout_weights(tensors, av::decoder_key_map());
    av::AudioDecoder::load(dec, acfg, {});
    EXPECT_NO_THROW(dec.finish(str(c, " decoder")));
    io::WeightMap voc = layout_weights(tensors, av::vocoder_key_map());
    EXPECT_EQ(static_cast<int64_t>(voc.size()), cs["counts"]["vocoder"].get<int64_t>());
    av::VocoderModel::load(voc, vcfg, {});
    EXPECT_NO_THROW(voc.finish(str(c, " vocoder")));
    EXPECT_EQ(static_cast<int64_t>(enc.size() + dec.size() - 2),  // statistics in both
              cs["counts"]["audio_vae"].get<int64_t>());
  }
}

// Writes the fixture's tensors with `edit` applied (name -> tensor; undefined = drop).
std::string edited_copy(const test::TempDir& dir, const std::string& c,
                        const std::function<void(std::map<std::string, Tensor>&)>& edit) {
  const io::SafetensorsFile src(test::fixture("audio_" + c + ".weights.safetensors"));
  std::map<std::string, Tensor> t;
  for (const auto& n : src.names()) t[n] = src.tensor(n);
  edit(t);
  std::vector<std::pair<std::string, Tensor>> out(t.begin(), t.end());
  const std::string path = dir.file(c + ".edited.safetensors");
  io::write_safetensors(path, out, src.metadata());
  return path;
}

TEST(AudioBinding, ReportsMissingMisshapedAndUnexpectedTensorsInOneError) {
  test::TempDir dir;
  const std::string path = edited_copy(dir, "ltx2", [](auto& t) {
    t.erase("audio_vae.decoder.mid.block_1.conv1.conv.weight");
    t["audio_vae.decoder.conv_out.conv.bias"] = Tensor::zeros({3});
    t["audio_vae.decoder.extra.weight"] = Tensor::zeros({1});
    t.erase("vocoder.resblocks.4.convs2.1.bias");
  });
  const auto file = io::SafetensorsFile::open(path);
  test::expect_error_containing([&] { av::AudioDecoder::from_file(file); },
                                {"audio VAE decoder", path, "mid.block_1.conv1.conv.weight",
                                 "conv_out.conv.bias", "extra.weight"});
  test::expect_error_containing([&] { av::VocoderModel::from_file(file); },
                                {"vocoder", "resblocks.4.convs2.1.bias"});
  EXPECT_NO_THROW(av::AudioEncoder::from_file(file));  // the encoder's keys are intact
}

TEST(AudioBinding, TheBweAntiAliasFiltersAndStftBasesAreRequired) {
  test::TempDir dir;
  const std::string path = edited_copy(dir, "ltx23", [](auto& t) {
    t.erase("vocoder.vocoder.resblocks.0.acts1.0.upsample.filter");
    t.erase("vocoder.bwe_generator.act_post.downsample.lowpass.filter");
    t.erase("vocoder.mel_stft.mel_basis");
  });
  test::expect_error_containing(
      [&] { av::VocoderModel::from_file(io::SafetensorsFile::open(path)); },
      {"vocoder.resblocks.0.acts1.0.upsample.filter",
       "bwe_generator.act_post.downsample.lowpass.filter", "mel_stft.mel_basis"});
}

// bf16 runs on CUDA (tests/cuda/component_parity_test.cpp); the CPU computes in f32 and says so.
TEST(AudioBinding, Bf16OnlyOnCuda) {
  const auto file = io::SafetensorsFile::open(test::fixture("audio_ltx2.weights.safetensors"));
  test::expect_error_containing([&] { av::AudioDecoder::from_file(file, {DType::BF16}); },
                                {"bf16", "CUDA", "f32"});
  test::expect_error_containing([&] { av::AudioEncoder::from_file(file, {DType::BF16}); },
                                {"bf16", "CUDA", "f32"});
  test::expect_error_containing([&] { av::VocoderModel::from_file(file, {DType::BF16}); },
                                {"audio_ltx2.weights.safetensors", "bf16", "CUDA", "f32"});
}

// The pipelines run the 19B's plain vocoder in their dtype (the reference builds it so, without
// autocast) and the BWE vocoder in f32 (its forward autocasts); a bf16 BWE load is refused.
TEST(AudioBinding, VocoderDtypeFollowsTheReferencesAudioDecoderBlock) {
  const auto plain = io::SafetensorsFile::open(test::fixture("audio_ltx2.weights.safetensors"));
  const auto bwe = io::SafetensorsFile::open(test::fixture("audio_ltx23.weights.safetensors"));
  const auto cfg = [](const std::shared_ptr<const io::SafetensorsFile>& f) {
    return av::VocoderConfig::from_config(f->metadata_json("config"), f->path());
  };
  EXPECT_EQ(av::vocoder_dtype(cfg(plain), DType::BF16), DType::BF16);
  EXPECT_EQ(av::vocoder_dtype(cfg(plain), DType::F32), DType::F32);
  EXPECT_EQ(av::vocoder_dtype(cfg(bwe), DType::BF16), DType::F32);
  EXPECT_EQ(av::vocoder_dtype(cfg(bwe), DType::F32), DType::F32);
  test::expect_error_containing([&] { av::VocoderModel::from_file(bwe, {DType::BF16, Device::cuda(0)}); },
                                {"audio_ltx23.weights.safetensors", "BWE", "f32"});
}

// ------------------------------------------------------------------------------------ latents

TEST(AudioLatents, PatchifyUsesChannelMajorTokens) {
  const Tensor x = test::random_tensor({2, 3, 4, 5}, 1);
  const Tensor t = av::patchify_audio(test::non_contiguous_copy(x));
  ASSERT_EQ(t.shape(), Shape({2, 4, 15}));
  const auto xv = x.to_double_vector(), tv = t.to_double_vector();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t f = 0; f < 5; ++f)
          EXPECT_EQ(tv[(b * 4 + i) * 15 + c * 5 + f], xv[((b * 3 + c) * 4 + i) * 5 + f]);
  EXPECT_EQ(test::max_abs_diff(av::unpatchify_audio(t, 3, 5), x), 0.0);
}

TEST(AudioLatents, StatisticsNormaliseInTokenSpace) {
  av::PerChannelStatistics s;
  s.mean = test::random_tensor({6}, 2);
  s.std = test::random_tensor({6}, 3, 0.5f, 1.5f);
  const Tensor tok = test::random_tensor({1, 4, 6}, 4);
  const auto n = s.normalize(tok).to_double_vector(), tv = tok.to_double_vector();
  const auto m = s.mean.to_double_vector(), sd = s.std.to_double_vector();
  for (size_t i = 0; i < n.size(); ++i) EXPECT_NEAR(n[i], (tv[i] - m[i % 6]) / sd[i % 6], 1e-6);
  EXPECT_LE(test::max_abs_diff(s.un_normalize(s.normalize(tok)), tok), 1e-6);
  test::expect_error_containing([&] { s.normalize(Tensor::zeros({1, 4, 8})); },
                                {"8 features", "6 entries"});
}

TEST(AudioLatents, FramesFollowTheReferenceRounding) {
  // AudioLatentShape.from_video_pixel_shape (metadata `latent_frames` of the golden files).
  const std::vector<std::tuple<int64_t, double, int64_t>> table = {
      {121, 24.0, 126}, {121, 25.0, 121}, {97, 24.0, 101}, {241, 30.0, 201}, {9, 24.0, 9},
      {17, 25.0, 17},   {5, 50.0, 2},     {3, 10.0, 8},    {1, 8.0, 3}};
  for (const auto& [frames, fps, want] : table)
    EXPECT_EQ(av::audio_latent_frames_for_video(frames, fps), want) << frames << " @ " << fps;
  EXPECT_EQ(av::audio_latent_frames(5 / 25.0), 5);
  EXPECT_EQ(av::audio_latent_frames(0.1), 2);  // 2.5 -> 2 (half to even)
  EXPECT_EQ(av::audio_latent_frames(0.14), 4);  // 3.5 -> 4
}

TEST(AudioLatents, ConformTrimsOrZeroPadsTime) {
  const Tensor x = test::random_tensor({1, 2, 6, 3}, 5);
  const Tensor shorter = av::conform_latent_length(x, 4);
  ASSERT_EQ(shorter.shape(), Shape({1, 2, 4, 3}));
  EXPECT_EQ(test::max_abs_diff(shorter, x.narrow(2, 0, 4)), 0.0);
  const Tensor longer = av::conform_latent_length(x, 9);
  ASSERT_EQ(longer.shape(), Shape({1, 2, 9, 3}));
  EXPECT_EQ(test::max_abs_diff(longer.narrow(2, 0, 6), x), 0.0);
  for (double v : longer.narrow(2, 6, 3).to_double_vector()) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(av::conform_latent_length(x, 6).shape(), x.shape());
}

// ------------------------------------------------------------------------------------ paths

TEST(AudioVaeBlocks, AttentionMatchesANaiveDoubleComputation) {
  const int64_t b = 2, c = 4, h = 3, wd = 5, n = h * wd;
  io::WeightMap w;
  uint64_t seed = 20;
  for (const char* p : {"q", "k", "v", "proj_out"}) {
    w.add(str("attn.", p, ".weight"), test::random_tensor({c, c, 1, 1}, seed++, -0.6f, 0.6f));
    w.add(str("attn.", p, ".bias"), test::random_tensor({c}, seed++, -0.1f, 0.1f));
  }
  const av::AttnBlock attn = av::AttnBlock::load(w, "attn", c, av::NormType::Pixel, {});
  w.finish("attention");
  const Tensor x = test::random_tensor({b, c, h, wd}, 30);
  const auto y = attn(x).to_double_vector();
  const auto xv = x.to_double_vector();
  auto param = [&](const char* p, const char* kind) {
    return io::WeightMap(w).take(str("attn.", p, ".", kind), kind[0] == 'w' ? Shape({c, c, 1, 1})
                                                                            : Shape({c}),
                                 DType::F32)
        .to_double_vector();
  };
  std::map<std::string, std::vector<double>> W, B;
  for (const char* p : {"q", "k", "v", "proj_out"}) {
    W[p] = param(p, "weight");
    B[p] = param(p, "bias");
  }
  for (int64_t bi = 0; bi < b; ++bi) {
    // PixelNorm over channels, then the 1x1 projections.
    std::vector<double> hn(c * n);
    for (int64_t i = 0; i < n; ++i) {
      double ss = 0;
      for (int64_t ch = 0; ch < c; ++ch) ss += std::pow(xv[(bi * c + ch) * n + i], 2);
      for (int64_t ch = 0; ch < c; ++ch)
        hn[ch * n + i] = xv[(bi * c + ch) * n + i] / std::sqrt(ss / c + 1e-6);
    }
    auto proj = [&](const char* p, const std::vector<double>& in) {
      std::vector<double> o(c * n);
      for (int64_t oc = 0; oc < c; ++oc)
        for (int64_t i = 0; i < n; ++i) {
          double a = B[p][oc];
          for (int64_t ic = 0; ic < c; ++ic) a += W[p][oc * c + ic] * in[ic * n + i];
          o[oc * n + i] = a;
        }
      return o;
    };
    const auto q = proj("q", hn), k = proj("k", hn), v = proj("v", hn);
    std::vector<double> att(c * n, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> s(n);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        double d = 0;
        for (int64_t ch = 0; ch < c; ++ch) d += q[ch * n + i] * k[ch * n + j];
        s[j] = d / std::sqrt(double(c));
        mx = std::max(mx, s[j]);
      }
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t j = 0; j < n; ++j) att[ch * n + i] += v[ch * n + j] * s[j] / sum;
    }
    const auto out = proj("proj_out", att);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(y[(bi * c + ch) * n + i], xv[(bi * c + ch) * n + i] + out[ch * n + i], 1e-5);
  }
}

// Random weights for every tensor an audio VAE of `cfg` binds (names and shapes written out
// here from the reference's module tree, independently of the loader).
io::WeightMap random_vae(const av::AudioVaeConfig& cfg, bool encoder, uint64_t seed) {
  std::mt19937_64 rng(seed);
  io::WeightMap w;
  auto conv = [&](const std::string& name, int64_t in, int64_t out, int64_t k) {
    w.add(name + ".weight",
          test::random_tensor({out, in, k, k}, rng(), -1.f / std::sqrt(float(in * k * k)),
                              1.f / std::sqrt(float(in * k * k))));
    w.add(name + ".bias", test::random_tensor({out}, rng(), -0.1f, 0.1f));
  };
  auto norm = [&](const std::string& name, int64_t ch) {
    if (cfg.norm_type != av::NormType::Group) return;
    w.add(name + ".weight", test::random_tensor({ch}, rng(), 0.5f, 1.5f));
    w.add(name + ".bias", test::random_tensor({ch}, rng(), -0.1f, 0.1f));
  };
  auto resnet = [&](const std::string& name, int64_t in, int64_t out) {
    norm(name + ".norm1", in);
    conv(name + ".conv1.conv", in, out, 3);
    norm(name + ".norm2", out);
    conv(name + ".conv2.conv", out, out, 3);
    if (in != out) conv(name + ".nin_shortcut.conv", in, out, 1);
  };
  auto attn = [&](const std::string& name, int64_t ch) {
    norm(name + ".norm", ch);
    for (const char* p : {".q", ".k", ".v", ".proj_out"}) conv(name + p, ch, ch, 1);
  };
  const int64_t n = static_cast<int64_t>(cfg.ch_mult.size());
  w.add("per_channel_statistics.mean-of-means", test::random_tensor({cfg.ch}, rng()));
  w.add("per_channel_statistics.std-of-means", test::random_tensor({cfg.ch}, rng(), 0.5f, 1.5f));
  int64_t ch = 0;
  if (encoder) {
    conv("conv_in.conv", cfg.in_channels, cfg.ch, 3);
    int64_t res = cfg.resolution, in = cfg.ch;
    for (int64_t l = 0; l < n; ++l) {
      const int64_t out = cfg.ch * cfg.ch_mult[l];
      for (int64_t j = 0; j < cfg.num_res_blocks; ++j) {
        resnet(str("down.", l, ".block.", j), in, out);
        in = out;
        if (cfg.attn_resolutions.count(res)) attn(str("down.", l, ".attn.", j), out);
      }
      if (l != n - 1 && cfg.resamp_with_conv) conv(str("down.", l, ".downsample.conv"), out, out, 3);
      if (l != n - 1) res /= 2;
    }
    ch = in;
  } else {
    ch = cfg.ch * cfg.ch_mult.back();
    conv("conv_in.conv", cfg.z_channels, ch, 3);
  }
  resnet("mid.block_1", ch, ch);
  if (cfg.mid_block_add_attention) attn("mid.attn_1", ch);
  resnet("mid.block_2", ch, ch);
  if (!encoder) {
    int64_t res = cfg.resolution >> (n - 1);
    for (int64_t l = n - 1; l >= 0; --l) {
      const int64_t out = cfg.ch * cfg.ch_mult[l];
      for (int64_t j = 0; j <= cfg.num_res_blocks; ++j) {
        resnet(str("up.", l, ".block.", j), ch, out);
        ch = out;
        if (cfg.attn_resolutions.count(res)) attn(str("up.", l, ".attn.", j), out);
      }
      if (l != 0) {
        conv(str("up.", l, ".upsample.conv.conv"), out, out, 3);
        res *= 2;
      }
    }
  }
  norm("norm_out", ch);
  conv("conv_out.conv", ch, encoder ? (cfg.double_z ? 2 : 1) * cfg.z_channels : cfg.out_ch, 3);
  return w;
}

struct VariantCase {
  const char* name;
  av::CausalityAxis axis;
  av::NormType norm;
  bool attention;
  bool conv_down;
};

TEST(AudioVaeBlocks, UnreleasedVariantsBindAndKeepTheShapeRules) {
  for (const VariantCase& v : std::vector<VariantCase>{
           {"height+attention", av::CausalityAxis::Height, av::NormType::Pixel, true, true},
           {"none+group+avgpool", av::CausalityAxis::None, av::NormType::Group, true, false},
           {"width", av::CausalityAxis::Width, av::NormType::Pixel, false, true},
           {"width-compat", av::CausalityAxis::WidthCompatibility, av::NormType::Pixel, false,
            true}}) {
    av::AudioVaeConfig cfg;
    cfg.ch = 32;
    cfg.ch_mult = {1, 2};
    cfg.num_res_blocks = 1;
    cfg.z_channels = 2;
    cfg.resolution = 16;
    cfg.attn_resolutions = v.attention ? std::set<int64_t>{8, 16} : std::set<int64_t>{};
    cfg.mid_block_add_attention = v.attention;
    cfg.causality_axis = v.axis;
    cfg.norm_type = v.norm;
    cfg.resamp_with_conv = v.conv_down;
    cfg.mel_bins = 16;  // decoded mel bins; the tiny latent has 8

    io::WeightMap we = random_vae(cfg, true, 1);
    const av::AudioEncoder enc = av::AudioEncoder::load(we, cfg, {});
    ASSERT_NO_THROW(we.finish(v.name)) << v.name;
    io::WeightMap wd = random_vae(cfg, false, 2);
    const av::AudioDecoder dec = av::AudioDecoder::load(wd, cfg, {});
    ASSERT_NO_THROW(wd.finish(v.name)) << v.name;

    // Statistics span ch = 32 = z (2) x 16 latent mel bins; one downsampling level halves both axes.
    const Tensor mel = test::random_tensor({1, 2, 5, 32}, 7);
    const Tensor lat = enc.forward(mel);
    const bool causal_h = v.axis == av::CausalityAxis::Height;
    const int64_t t_lat = v.conv_down ? (causal_h ? 3 : 2) : 2;
    EXPECT_EQ(lat.shape(), Shape({1, 2, t_lat, 16})) << v.name;
    const Tensor out = dec.forward(test::random_tensor({1, 2, 3, 16}, 8));
    // Target time: 4T - 3 when causal (any axis but none), else 4T; mel bins from the config.
    const int64_t t_mel = v.axis == av::CausalityAxis::None ? 12 : 9;
    EXPECT_EQ(out.shape(), Shape({1, 2, t_mel, 16})) << v.name;
    for (double x : out.to_double_vector()) ASSERT_TRUE(std::isfinite(x)) << v.name;
  }
}

TEST(AudioVaeBlocks, LinearAttentionIsRejectedLikeTheReference) {
  av::AudioVaeConfig cfg;
  cfg.ch = 32;
  cfg.ch_mult = {1};
  cfg.num_res_blocks = 1;
  cfg.z_channels = 2;
  cfg.attn_type = av::AttentionType::Linear;
  io::WeightMap w = random_vae(cfg, true, 3);
  test::expect_error_containing([&] { av::AudioEncoder::load(w, cfg, {}); }, {"linear"});
}

TEST(AudioVaeBlocks, EncoderRejectsMonoMel) {
  const av::AudioEncoder enc = av::AudioEncoder::from_file(
      io::SafetensorsFile::open(test::fixture("audio_ltx23.weights.safetensors")));
  test::expect_error_containing([&] { enc.forward(Tensor::zeros({1, 1, 9, 64})); },
                                {"[B, 2, T, mel_bins]", "mono"});
}

}  // namespace
}  // namespace ltx
