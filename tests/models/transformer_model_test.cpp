// The transformer's configuration parsing, weight binding, RoPE tables, perturbation masks and
// model-level behaviour (the numbers against the reference are in transformer_parity_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "models/transformer/text_kv_cache.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx::transformer_model_test {
namespace {

namespace tf = models::transformer;
using json = nlohmann::json;
using tf::LTXModelConfig;
using tf::LTXModelType;

json fixture_metadata(const std::string& name) {
  return io::SafetensorsFile(test::fixture(name)).metadata_json();
}

// The decoded metadata of ltx23 with config.transformer edited by `edit`.
json edited_metadata(const std::function<void(json&)>& edit) {
  json m = fixture_metadata("ltx23.weights.safetensors");
  edit(m["config"]["transformer"]);
  return m;
}

LTXModelConfig parse(const json& metadata, LTXModelType type = LTXModelType::AudioVideo) {
  return LTXModelConfig::from_metadata(metadata, type, "test.safetensors");
}

// ---------------------------------------------------------------- config

TEST(TransformerConfig, ReadsEachGenerationsFlags) {
  const LTXModelConfig c2 = parse(fixture_metadata("ltx2.weights.safetensors"));
  EXPECT_TRUE(c2.caption_projection);
  EXPECT_EQ(c2.caption_channels, 48);
  EXPECT_FALSE(c2.apply_gated_attention);
  EXPECT_FALSE(c2.cross_attention_adaln);
  EXPECT_EQ(c2.av_ca_timestep_scale_multiplier, 1000.0);
  EXPECT_TRUE(c2.double_precision_rope);
  EXPECT_EQ(c2.rope_type, tf::LTXRopeType::Split);
  EXPECT_EQ(c2.num_layers, 2);
  EXPECT_EQ(c2.inner_dim(), 64);
  EXPECT_EQ(c2.audio_inner_dim(), 32);

  const LTXModelConfig c23 = parse(fixture_metadata("ltx23.weights.safetensors"));
  EXPECT_FALSE(c23.caption_projection);
  EXPECT_TRUE(c23.apply_gated_attention);
  EXPECT_TRUE(c23.cross_attention_adaln);
  EXPECT_TRUE(c23.use_prompt_adaln_single);
  EXPECT_TRUE(c23.ff_bias);
  EXPECT_FALSE(c23.use_keyframes_abs_pos_embedding);

  const LTXModelConfig c25 = parse(fixture_metadata("ltx25.weights.safetensors"));
  EXPECT_FALSE(c25.ff_bias);
  EXPECT_TRUE(c25.audio_ff_bias);
  EXPECT_TRUE(c25.use_keyframes_abs_pos_embedding);

  const LTXModelConfig kv = parse(fixture_metadata("ltx25_kvcache.weights.safetensors"));
  EXPECT_FALSE(kv.use_prompt_adaln_single);
}

TEST(TransformerConfig, AbsentKeysTakeTheReferenceCodeDefaults) {
  const LTXModelConfig c = parse(edited_metadata([](json& t) {
    for (const char* k : {"av_ca_timestep_scale_multiplier", "ff_bias", "audio_ff_bias",
                          "apply_gated_attention", "cross_attention_adaln", "rope_type",
                          "frequencies_precision", "norm_eps", "positional_embedding_theta"})
      t.erase(k);
  }));
  EXPECT_EQ(c.av_ca_timestep_scale_multiplier, 1.0);  // not 1000: the code default
  EXPECT_TRUE(c.ff_bias);
  EXPECT_TRUE(c.audio_ff_bias);
  EXPECT_FALSE(c.apply_gated_attention);
  EXPECT_FALSE(c.cross_attention_adaln);
  EXPECT_EQ(c.rope_type, tf::LTXRopeType::Split);
  EXPECT_FALSE(c.double_precision_rope);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.positional_embedding_theta, 10000.0);
}

TEST(TransformerConfig, AudioOnlyConfiguratorIgnoresTheKeysTheReferenceIgnores) {
  // LTXAudioOnlyModelConfigurator never passes use_prompt_adaln_single or audio_ff_bias.
  const LTXModelConfig c =
      parse(fixture_metadata("ltx25_kvcache.weights.safetensors"), LTXModelType::AudioOnly);
  EXPECT_TRUE(c.use_prompt_adaln_single);
  EXPECT_FALSE(c.use_keyframes_abs_pos_embedding);
}

struct BadConfig {
  const char* what;
  std::function<void(json&)> edit;
  std::vector<std::string> needles;
};

TEST(TransformerConfig, RejectsUnknownMissingAndContradictoryKeysNamingFileAndKey) {
  const std::vector<BadConfig> cases = {
      {"unknown key", [](json& t) { t["shiny_new_flag"] = true; }, {"shiny_new_flag", "not a key"}},
      {"asserted value", [](json& t) { t["activation_fn"] = "gelu"; },
       {"activation_fn", "gelu-approximate"}},
      {"asserted key absent", [](json& t) { t.erase("attention_bias"); },
       {"attention_bias", "absent"}},
      {"head counts differ", [](json& t) { t["audio_num_attention_heads"] = 4; },
       {"num_attention_heads", "audio_num_attention_heads"}},
      {"cross dim != inner dim", [](json& t) { t["cross_attention_dim"] = 48; },
       {"cross_attention_dim", "48", "64"}},
      {"audio cross dim != audio inner", [](json& t) { t["audio_cross_attention_dim"] = 64; },
       {"audio_cross_attention_dim"}},
      {"wrong type", [](json& t) { t["num_layers"] = "2"; }, {"num_layers", "integer"}},
      {"bad rope type", [](json& t) { t["rope_type"] = "spiral"; }, {"rope_type", "spiral"}},
      {"bad precision", [](json& t) { t["frequencies_precision"] = "bfloat16"; },
       {"frequencies_precision"}},
      {"no middle grid", [](json& t) { t["use_middle_indices_grid"] = false; },
       {"use_middle_indices_grid"}},
      {"19B without caption_channels",
       [](json& t) {
         t.erase("caption_proj_before_connector");
         t.erase("caption_channels");
       },
       {"caption_channels", "required"}},
      {"odd head dim",
       [](json& t) {
         t["attention_head_dim"] = 33;
         t["num_attention_heads"] = 2;
         t["cross_attention_dim"] = 66;
       },
       {"attention_head_dim", "even"}},
  };
  for (const BadConfig& bc : cases) {
    SCOPED_TRACE(bc.what);
    const json m = edited_metadata(bc.edit);
    std::vector<std::string> needles = bc.needles;
    needles.push_back("test.safetensors");
    needles.push_back("config.transformer.");
    try {
      parse(m);
      ADD_FAILURE() << "expected an ltx::Error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << n << " in " << msg;
    }
  }
}

TEST(TransformerConfig, RequiresATransformerSection) {
  test::expect_error_containing([] { parse(json::object()); }, {"test.safetensors", "config.transformer"});
  test::expect_error_containing([] { parse(json{{"config", "{not json"}}); },
                                {"test.safetensors", "not valid JSON"});
  // The text-side and bookkeeping keys of the published files are accepted.
  EXPECT_NO_THROW(parse(edited_metadata([](json& t) { t["_some_tool_version"] = "1"; })));
}

// ---------------------------------------------------------------- binding

// Every tensor of a fixture, renamed by the AV key map, into a WeightMap built by hand so that a
// test can drop, reshape or add names.
io::WeightMap editable_weights(const std::string& fixture, const std::set<std::string>& drop,
                               const std::map<std::string, Tensor>& replace) {
  const io::SafetensorsFile f(test::fixture(fixture));
  const io::KeyMap keys = tf::transformer_key_map(LTXModelType::AudioVideo);
  io::WeightMap w;
  for (const std::string& key : f.names()) {
    const auto name = keys.apply(key);
    if (!name || drop.count(*name)) continue;
    w.add(*name, f.tensor(key));
  }
  for (const auto& [name, t] : replace) w.add(name, t);
  return w;
}

TEST(TransformerBinding, ReportsMissingMisshapedAndUnexpectedNamesInOneError) {
  const LTXModelConfig c = parse(fixture_metadata("ltx23.weights.safetensors"));
  io::WeightMap w = editable_weights(
      "ltx23.weights.safetensors",
      {"transformer_blocks.1.attn2.to_gate_logits.bias", "prompt_adaln_single.linear.weight"},
      {{"transformer_blocks.0.ff.net.2.weight", Tensor::zeros({64, 128})},
       {"transformer_blocks.2.attn1.to_q.weight", Tensor::zeros({64, 64})}});
  test::expect_error_containing([&] { tf::LTXModel::load(w, c); },
                                {"transformer", "2 missing", "transformer_blocks.1.attn2.to_gate_logits.bias",
                                 "prompt_adaln_single.linear.weight", "wrong shape",
                                 "transformer_blocks.0.ff.net.2.weight", "unexpected",
                                 "transformer_blocks.2.attn1.to_q.weight"});
}

TEST(TransformerBinding, ConfigFlagsSelectTheTensorSets) {
  // The 2.3 file under a config claiming 2.5's biasless video FFN: the biases are unexpected.
  LTXModelConfig c = parse(fixture_metadata("ltx23.weights.safetensors"));
  c.ff_bias = false;
  io::WeightMap w = editable_weights("ltx23.weights.safetensors", {}, {});
  test::expect_error_containing([&] { tf::LTXModel::load(w, c); },
                                {"unexpected", "transformer_blocks.0.ff.net.0.proj.bias"});
  // The KV-cacheable file has no prompt AdaLN, which a default config expects.
  LTXModelConfig kv = parse(fixture_metadata("ltx25_kvcache.weights.safetensors"));
  kv.use_prompt_adaln_single = true;
  io::WeightMap wk = editable_weights("ltx25_kvcache.weights.safetensors", {}, {});
  test::expect_error_containing([&] { tf::LTXModel::load(wk, kv); },
                                {"missing", "audio_prompt_adaln_single.", "prompt_adaln_single."});
}

TEST(TransformerBinding, LoadsEveryGenerationAndModelTypeFromFiles) {
  for (const char* f : {"ltx2.weights.safetensors", "ltx23.weights.safetensors",
                        "ltx25.weights.safetensors", "ltx25_kvcache.weights.safetensors",
                        "ltx23.weights.bf16.safetensors"}) {
    SCOPED_TRACE(f);
    const std::string path = test::fixture(f);
    EXPECT_EQ(tf::LTXModel::from_files({path}, LTXModelType::AudioVideo).num_blocks(), 2);
    EXPECT_NO_THROW(tf::LTXModel::from_files({path}, LTXModelType::VideoOnly));
  }
  EXPECT_NO_THROW(
      tf::LTXModel::from_files({test::fixture("ltx25.weights.safetensors")}, LTXModelType::AudioOnly));
}

TEST(TransformerBinding, AudioOnlyConfiguratorFailsWhereTheReferenceDoes) {
  // Its key filter drops the 19B audio_caption_projection; it always builds the prompt AdaLN.
  test::expect_error_containing(
      [] { tf::LTXModel::from_files({test::fixture("ltx2.weights.safetensors")}, LTXModelType::AudioOnly); },
      {"missing", "audio_caption_projection.linear_1.weight"});
  test::expect_error_containing(
      [] {
        tf::LTXModel::from_files({test::fixture("ltx25_kvcache.weights.safetensors")},
                                 LTXModelType::AudioOnly);
      },
      {"missing", "audio_prompt_adaln_single.linear.weight"});
}

// ---------------------------------------------------------------- 22B key lists

// tests/fixtures/transformer_keys_<case>.txt from tools/parity/export_transformer_keys.py.
struct KeyList {
  json transformer_config;
  std::vector<std::pair<std::string, Shape>> tensors;
};

bool read_key_list(const std::string& path, KeyList* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::string line;
  const std::string cfg_tag = "# config.transformer: ";
  while (std::getline(f, line)) {
    if (line.rfind(cfg_tag, 0) == 0) {
      out->transformer_config = json::parse(line.substr(cfg_tag.size()));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string name;
    is >> name;
    Shape shape;
    int64_t d;
    while (is >> d) shape.push_back(d);
    out->tensors.emplace_back(name, shape);
  }
  return true;
}

// A WeightMap of data-less tensors (one shared element, stride 0) with the listed names and shapes,
// renamed by the AV key map.
io::WeightMap meta_weights(const KeyList& list) {
  static float zero = 0.f;
  const io::KeyMap keys = tf::transformer_key_map(LTXModelType::AudioVideo);
  io::WeightMap w;
  for (const auto& [name, shape] : list.tensors) {
    const auto model_name = keys.apply(name);
    EXPECT_TRUE(model_name.has_value()) << name << " is outside model.diffusion_model.";
    if (!model_name) continue;
    Strides zeros;
    for (int i = 0; i < shape.size(); ++i) zeros.push_back(0);
    w.add(*model_name, Tensor::from_blob(&zero, shape, DType::F32, Device::cpu(), nullptr, &zeros));
  }
  return w;
}

class Transformer22B : public ::testing::TestWithParam<const char*> {};

TEST_P(Transformer22B, BindsExactlyThePublishedNamesAndShapes) {
  const std::string file = test::fixture(str("transformer_keys_", GetParam(), ".txt"));
  KeyList list;
  if (!read_key_list(file, &list))
    GTEST_SKIP() << file << " is absent: make it with tools/parity/export_transformer_keys.py "
                 << "(needs the reference and PyTorch)";
  ASSERT_TRUE(list.transformer_config.is_object()) << "no '# config.transformer:' line in " << file;
  const json metadata = {{"config", {{"transformer", list.transformer_config}}}};
  const LTXModelConfig c = parse(metadata);
  EXPECT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.inner_dim(), 4096);
  // 86 tensors per block in 2.3, 84 in 2.5 (no video FFN biases): what readers of the real
  // headers report (golden README section 2).
  int64_t block0 = 0;
  for (const auto& t : list.tensors)
    block0 += t.first.rfind("model.diffusion_model.transformer_blocks.0.", 0) == 0;
  EXPECT_EQ(block0, std::string(GetParam()) == "ltx23_22b" ? 86 : 84);
  {
    io::WeightMap w = meta_weights(list);
    EXPECT_NO_THROW(tf::LTXModel::load(w, c));  // nothing missing, misshaped or left over
  }
  // One name fewer is reported, as is a shape that differs.
  ASSERT_FALSE(list.tensors.empty());
  KeyList fewer = list;
  const std::string dropped = fewer.tensors.back().first;
  fewer.tensors.pop_back();
  io::WeightMap w1 = meta_weights(fewer);
  test::expect_error_containing([&] { tf::LTXModel::load(w1, c); },
                                {"missing", dropped.substr(std::string("model.diffusion_model.").size())});
  KeyList reshaped = list;
  reshaped.tensors.front().second[0] += 1;
  io::WeightMap w2 = meta_weights(reshaped);
  test::expect_error_containing([&] { tf::LTXModel::load(w2, c); }, {"wrong shape"});
}

INSTANTIATE_TEST_SUITE_P(Published, Transformer22B, ::testing::Values("ltx23_22b", "ltx25_22b"));

// ---------------------------------------------------------------- RoPE

TEST(TransformerRope, FrequencyGridIsTheFloat64LadderRoundedToF32) {
  const Tensor g = tf::rope_freq_grid(10000.0, 3, 64, true);
  ASSERT_EQ(g.shape(), Shape({10}));
  const auto v = g.to_float_vector();
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(v[i], static_cast<float>(std::pow(10000.0, i / 9.0) * M_PI / 2)) << i;
  // The f32 path differs by at most a few f32 ulps.
  const auto f = tf::rope_freq_grid(10000.0, 3, 64, false).to_float_vector();
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(f[i], v[i], 4e-7 * v[i]) << i;
  EXPECT_EQ(tf::rope_freq_grid(10000.0, 1, 2, true).to_float_vector(),
            std::vector<float>({static_cast<float>(M_PI / 2)}));
}

// Angle of (sample b, token t, axis a, frequency j) as the reference forms it in f32.
float ref_angle(const std::vector<float>& pos, int64_t n, int64_t t_count, int64_t b, int64_t t,
                int64_t a, float ladder, double max_pos) {
  const size_t base = static_cast<size_t>(((b * n + a) * t_count + t) * 2);
  const float mid = (pos[base] + pos[base + 1]) / 2.0f;
  const float frac = mid / static_cast<float>(max_pos);
  return ladder * (frac * 2.0f - 1.0f);
}

TEST(TransformerRope, SplitTablesPadAtTheFrontAndCutIntoHeads) {
  const int64_t b = 2, n = 3, t = 5, heads = 2, dim = 64;  // 10 freqs x 3 axes = 30 of 32 slots
  const Tensor pos = test::random_tensor({b, n, t, 2}, 7, 0.f, 3000.f);
  const std::vector<double> max_pos = {20, 2048, 2048};
  const tf::RopeTables pe =
      tf::precompute_freqs_cis(pos, dim, 10000.0, max_pos, heads, tf::LTXRopeType::Split, true);
  ASSERT_EQ(pe.cos.shape(), Shape({b, heads, t, dim / 2 / heads}));
  const auto cv = pe.cos.to_float_vector(), sv = pe.sin.to_float_vector();
  const auto p = pos.to_float_vector();
  const auto ladder = tf::rope_freq_grid(10000.0, n, dim, true).to_float_vector();
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t ti = 0; ti < t; ++ti)
      for (int64_t s = 0; s < dim / 2; ++s) {
        const int64_t h = s / (dim / 2 / heads), k = s % (dim / 2 / heads);
        const size_t idx = static_cast<size_t>(((bi * heads + h) * t + ti) * (dim / 2 / heads) + k);
        if (s < 2) {
          EXPECT_EQ(cv[idx], 1.f);
          EXPECT_EQ(sv[idx], 0.f);
          continue;
        }
        const int64_t j = (s - 2) / n, a = (s - 2) % n;  // frequency outer, axis inner
        const float ang = ref_angle(p, n, t, bi, ti, a, ladder[j], max_pos[a]);
        EXPECT_FLOAT_EQ(cv[idx], std::cos(ang));
        EXPECT_FLOAT_EQ(sv[idx], std::sin(ang));
      }
}

TEST(TransformerRope, InterleavedTablesRepeatEachAngleAndMatchARotation) {
  const int64_t b = 1, n = 1, t = 4, dim = 12;
  const Tensor pos = test::random_tensor({b, n, t, 2}, 3, 0.f, 19.f);
  const tf::RopeTables pe = tf::precompute_freqs_cis(pos, dim, 10000.0, {20}, 3,
                                                     tf::LTXRopeType::Interleaved, true);
  ASSERT_EQ(pe.cos.shape(), Shape({b, t, dim}));
  const auto cv = pe.cos.to_float_vector();
  for (int64_t ti = 0; ti < t; ++ti)
    for (int64_t i = 0; i < dim; i += 2) EXPECT_EQ(cv[ti * dim + i], cv[ti * dim + i + 1]);
  // Rotating pairs preserves their norms.
  const Tensor x = test::random_tensor({b, t, dim}, 5);
  const Tensor y = tf::apply_rotary_emb(x, pe, tf::LTXRopeType::Interleaved);
  const auto xv = x.to_float_vector(), yv = y.to_float_vector();
  for (size_t i = 0; i < xv.size(); i += 2)
    EXPECT_NEAR(std::hypot(xv[i], xv[i + 1]), std::hypot(yv[i], yv[i + 1]), 1e-6);
  EXPECT_THROW(tf::precompute_freqs_cis(pos, dim, 10000.0, {20, 20}, 3, tf::LTXRopeType::Split, true),
               Error);
}

// ---------------------------------------------------------------- perturbations

TEST(TransformerPerturbations, KeepMasksPerTypeBlockAndSample) {
  using tf::Perturbation;
  using tf::PerturbationType;
  const tf::BatchedPerturbationConfig p(
      {{{Perturbation{PerturbationType::SkipVideoSelfAttn, std::vector<int64_t>{1}}}},
       {{Perturbation{PerturbationType::SkipV2ACrossAttn, std::nullopt}}},
       {}},
      3);
  EXPECT_FALSE(p.keep(PerturbationType::SkipVideoSelfAttn, 1, 0));
  EXPECT_TRUE(p.keep(PerturbationType::SkipVideoSelfAttn, 0, 0));
  EXPECT_TRUE(p.any_in_batch(PerturbationType::SkipVideoSelfAttn, 1));
  EXPECT_FALSE(p.all_in_batch(PerturbationType::SkipVideoSelfAttn, 1));
  EXPECT_FALSE(p.any_in_batch(PerturbationType::SkipAudioSelfAttn, 1));
  for (int64_t blk = 0; blk < 3; ++blk) EXPECT_FALSE(p.keep(PerturbationType::SkipV2ACrossAttn, blk, 1));
  EXPECT_EQ(p.mask(PerturbationType::SkipV2ACrossAttn, 2).to_float_vector(),
            std::vector<float>({1.f, 0.f, 1.f}));
  EXPECT_EQ(p.mask(PerturbationType::SkipV2ACrossAttn, 2).shape(), Shape({3, 1, 1}));
  const auto all = tf::BatchedPerturbationConfig::uniform(
      {{Perturbation{PerturbationType::SkipA2VCrossAttn, std::nullopt}}}, 2, 4);
  EXPECT_TRUE(all.all_in_batch(PerturbationType::SkipA2VCrossAttn, 3));
  EXPECT_THROW(all.keep(PerturbationType::SkipA2VCrossAttn, 4, 0), Error);
}

// ---------------------------------------------------------------- model behaviour

tf::Modality fixture_modality(const io::SafetensorsFile& io, const std::string& stream) {
  const std::string p = "in." + stream + ".";
  tf::Modality m;
  m.latent = io.tensor(p + "latent");
  m.sigma = io.tensor(p + "sigma");
  m.timesteps = io.tensor(p + "timesteps");
  m.positions = io.tensor(p + "positions");
  m.context = io.tensor(p + "context");
  return m;
}

TEST(TransformerModel, RefusesStreamsTheModelTypeLacksAndMismatchedPerturbations) {
  const io::SafetensorsFile io(test::fixture("ltx25.io.safetensors"));
  const tf::Modality video = fixture_modality(io, "video"), audio = fixture_modality(io, "audio");
  const auto audio_only =
      tf::LTXModel::from_files({test::fixture("ltx25.weights.safetensors")}, LTXModelType::AudioOnly);
  test::expect_error_containing([&] { audio_only.forward(&video, nullptr, nullptr); },
                                {"video", "audio-only"});
  const auto av =
      tf::LTXModel::from_files({test::fixture("ltx25.weights.safetensors")}, LTXModelType::AudioVideo);
  const auto wrong = tf::BatchedPerturbationConfig::empty(2, 3);
  test::expect_error_containing([&] { av.forward(&video, &audio, &wrong); }, {"perturbation", "3 blocks"});
  EXPECT_THROW(av.forward(nullptr, nullptr, nullptr), Error);
}

TEST(TransformerModel, KeyframeEmbeddingIsAddedToMarkedTokensOnly) {
  const io::SafetensorsFile io(test::fixture("ltx25.io.safetensors"));
  const auto model =
      tf::LTXModel::from_files({test::fixture("ltx25.weights.safetensors")}, LTXModelType::AudioVideo);
  tf::Modality video = fixture_modality(io, "video");
  const auto x_in = [&](const tf::Modality& v) {
    Tensor out;
    model.forward(&v, nullptr, nullptr, [&](const std::string& name, const Tensor& t) {
      if (name == "video.x_in") out = t;
    });
    return out;
  };
  const Tensor plain = x_in(video);
  video.keyframes_mask = io.tensor("in.video.keyframes_mask");
  const Tensor marked = x_in(video);
  const io::SafetensorsFile w(test::fixture("ltx25.weights.safetensors"));
  const auto emb = w.tensor("model.diffusion_model.keyframes_abs_pos_embedding").to_float_vector();
  const auto m = video.keyframes_mask.to_float_vector();
  const auto a = plain.to_float_vector(), b = marked.to_float_vector();
  const int64_t d = plain.size(2);
  for (size_t tok = 0; tok < m.size(); ++tok)
    for (int64_t k = 0; k < d; ++k)
      EXPECT_FLOAT_EQ(b[tok * d + k], a[tok * d + k] + (m[tok] > 0 ? emb[k] : 0.f)) << tok;
}

TEST(TransformerModel, X0ModelIsLatentMinusVelocityTimesTimesteps) {
  const io::SafetensorsFile io(test::fixture("ltx23.io.safetensors"));
  const auto model =
      tf::LTXModel::from_files({test::fixture("ltx23.weights.safetensors")}, LTXModelType::AudioVideo);
  const tf::Modality video = fixture_modality(io, "video"), audio = fixture_modality(io, "audio");
  const tf::ModelOutputs v = model.forward(&video, &audio, nullptr);
  const tf::ModelOutputs x0 = tf::X0Model{model}(&video, &audio, nullptr);
  const auto lat = video.latent.to_float_vector(), vel = v.video.to_float_vector(),
             den = x0.video.to_float_vector(), ts = video.timesteps.to_float_vector();
  const int64_t c = video.latent.size(2);
  for (size_t i = 0; i < lat.size(); ++i) EXPECT_EQ(den[i], lat[i] - vel[i] * ts[i / c]) << i;
  // Tokens with timestep 0 (conditioning) come back unchanged.
  EXPECT_EQ(den[static_cast<size_t>(48 * c)], lat[static_cast<size_t>(48 * c)]);
}

// Modality::context_groups: samples of one group (same context and sigma) compute the text
// K / V once. Against the same batch without groups, on the 19B path (no K/V AdaLN), 2.3 (K/V
// modulated by the prompt timestep) and the KV-cacheable 2.5 (static table only): equal to BLAS's
// summation order for another row count (OpenBLAS's threads split rows by position, so even two
// identical samples of one batch can differ in the last bits).
TEST(TransformerModel, ContextGroupsShareTheTextKeysAndValues) {
  for (const char* c : {"ltx2", "ltx23", "ltx25_kvcache"}) {
    SCOPED_TRACE(c);
    const io::SafetensorsFile io(test::fixture(std::string(c) + ".io.safetensors"));
    const auto model = tf::LTXModel::from_files({test::fixture(std::string(c) + ".weights.safetensors")},
                                                LTXModelType::AudioVideo);
    // Three samples of the fixture's first: contexts A, B (A scaled), A.
    const auto batch3 = [&](const tf::Modality& m) {
      tf::Modality r = m;
      for (Tensor* t : {&r.latent, &r.sigma, &r.timesteps, &r.positions}) {
        const Tensor one = t->narrow(0, 0, 1);
        *t = ops::concat({one, one, one}, 0);
      }
      const Tensor a = m.context.narrow(0, 0, 1);
      r.context = ops::concat({a, ops::mul(a, 0.5), a}, 0);
      return r;
    };
    tf::Modality video = batch3(fixture_modality(io, "video")), audio = batch3(fixture_modality(io, "audio"));
    const tf::ModelOutputs plain = model.forward(&video, &audio, nullptr);
    video.context_groups = audio.context_groups = {7, 3, 7};
    const tf::ModelOutputs shared = model.forward(&video, &audio, nullptr);
    for (const auto& [got, want] : {std::pair{shared.video, plain.video}, std::pair{shared.audio, plain.audio}}) {
      EXPECT_LE(test::max_rel_err(got, want), 2e-5);
      EXPECT_LE(test::max_rel_err(got.narrow(0, 0, 1), got.narrow(0, 2, 1)), 2e-5);  // both A
      EXPECT_GT(test::max_rel_err(got.narrow(0, 0, 1), got.narrow(0, 1, 1)), 1e-4);  // B differs
    }
    video.context_groups = {0, 1};
    test::expect_error_containing([&] { model.forward(&video, &audio, nullptr); },
                                  {"2 context groups", "batch of 3"});
  }
}

// The text K / V cache (text_kv_cache.h) across calls: filled on the first call for the models
// whose K / V do not depend on sigma (19B, 2.5 KV-cacheable: blocks x streams x groups entries),
// read on the next (at another sigma: the same outputs as computing them again), and never
// consulted on 2.3 (its prompt timestep modulates K / V).
TEST(TransformerModel, TextKvCacheKeepsSigmaIndependentKeysAndValuesAcrossCalls) {
  for (const char* c : {"ltx2", "ltx25_kvcache", "ltx23"}) {
    SCOPED_TRACE(c);
    const bool cacheable = std::string(c) != "ltx23";
    const io::SafetensorsFile io(test::fixture(std::string(c) + ".io.safetensors"));
    const auto model = tf::LTXModel::from_files({test::fixture(std::string(c) + ".weights.safetensors")},
                                                LTXModelType::AudioVideo);
    tf::Modality video = fixture_modality(io, "video"), audio = fixture_modality(io, "audio");
    const int64_t b = video.latent.size(0);
    std::vector<int64_t> ids(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) ids[static_cast<size_t>(i)] = i;
    tf::TextKvCache cache;
    const auto at_sigma = [&](tf::Modality m, float scale, bool cached) {
      m.sigma = ops::mul(m.sigma, scale);
      m.timesteps = ops::mul(m.timesteps, scale);
      if (cached) {
        m.context_groups = ids;
        m.text_kv_cache = &cache;
      }
      return m;
    };
    for (float scale : {1.f, 0.5f}) {
      const tf::Modality v = at_sigma(video, scale, true), a = at_sigma(audio, scale, true);
      const tf::Modality pv = at_sigma(video, scale, false), pa = at_sigma(audio, scale, false);
      const tf::ModelOutputs got = model.forward(&v, &a, nullptr), want = model.forward(&pv, &pa, nullptr);
      EXPECT_LE(test::max_rel_err(got.video, want.video), 2e-5) << scale;
      EXPECT_LE(test::max_rel_err(got.audio, want.audio), 2e-5) << scale;
      EXPECT_EQ(cache.entries(), cacheable ? static_cast<size_t>(model.num_blocks() * 2 * b) : 0u);
    }
    EXPECT_EQ(cache.refused(), 0);
    EXPECT_EQ(cache.bytes() > 0, cacheable);
  }
}

}  // namespace
}  // namespace ltx::transformer_model_test
