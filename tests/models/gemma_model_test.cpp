// The Gemma text decoders against the golden text cases (shared/golden/README-text.md): every
// hidden state of Gemma 3 (single-file text encoder and root folder) and Gemma 4 unified
// (Comfy-flat text encoder and the HF key layout) at relative L2 <= 1e-5, the intermediates, the
// KV-cache path against the one-shot forward, dense Gemma 4 pieces, and binding errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>

#include "io/io_test_util.h"
#include "models/gemma_support.h"
#include "models/text/gemma/model.h"
#include "ops/shape.h"

namespace ltx {
namespace {

using nlohmann::json;
using test::TempDir;
using text::GemmaAssets;
using text::GemmaTextConfig;
using text::GemmaTextModel;

// Checks the L+1 hidden states `hs` of prompt `prompt`, positions [from, 1024), of a case.
void expect_matches_reference(const std::vector<Tensor>& hs, const std::string& io_case,
                              int64_t prompt, int64_t from) {
  const io::SafetensorsFile& io = test::text_io(io_case);
  const Tensor ref = io.tensor("out.hidden_states").narrow(1, prompt, 1);
  ASSERT_EQ(static_cast<int64_t>(hs.size()), ref.size(0));
  for (int64_t l = 0; l < ref.size(0); ++l) {
    const Tensor r = ref.select(0, l).narrow(1, from, ref.size(2) - from);
    const Tensor& h = hs[static_cast<size_t>(l)];
    ASSERT_EQ(h.shape(), r.shape());
    // All positions, the left pads included (pad rows see no key: zero attention, as SDPA).
    EXPECT_LE(test::rel_l2_same_size(h, r), 1e-5) << io_case << " layer " << l;
    EXPECT_LE(test::max_rel_err(h, r), 1e-5) << io_case << " layer " << l;
  }
}

// encode() on prompt 0 of the case (the long one), with the intermediates.
void expect_encode_matches(const std::string& gemma_path, const std::string& io_case) {
  const io::SafetensorsFile& io = test::text_io(io_case);
  const GemmaTextModel model = GemmaTextModel::load(GemmaAssets::load(gemma_path));
  text::GemmaTrace trace;
  const std::vector<Tensor> hs = model.encode(io.tensor("in.input_ids").narrow(0, 0, 1),
                                              io.tensor("in.attention_mask").narrow(0, 0, 1),
                                              &trace);
  expect_matches_reference(hs, io_case, 0, 0);
  EXPECT_LE(test::rel_l2_same_size(trace.layer0_attn_out, io.tensor("inter.layer0.self_attn_out")), 1e-5);
  EXPECT_LE(test::rel_l2_same_size(trace.last_layer_raw, io.tensor("inter.last_layer_raw")), 1e-5);
}

// The last 128 positions of prompt 1 only (its 40 tokens and some pads), run through forward()
// at their encode() positions: causal attention over masked pads gives exactly encode()'s states
// there, at 1/64 of the attention cost.
void expect_window_matches(const std::string& gemma_path, const std::string& io_case) {
  const io::SafetensorsFile& io = test::text_io(io_case);
  const GemmaTextModel model = GemmaTextModel::load(GemmaAssets::load(gemma_path));
  const int64_t from = 1024 - 128;
  std::vector<int64_t> pos(128);
  for (int64_t i = 0; i < 128; ++i) pos[static_cast<size_t>(i)] = from + i;
  text::GemmaKvCache cache = model.make_cache(1, 128);
  std::vector<Tensor> hs;
  model.forward(io.tensor("in.input_ids").narrow(0, 1, 1).narrow(1, from, 128),
                Tensor::from_vector(pos, {1, 128}),
                io.tensor("in.attention_mask").narrow(0, 1, 1).narrow(1, from, 128), cache, &hs);
  expect_matches_reference(hs, io_case, 1, from);
}

TEST(GemmaModel, Gemma3TextEncoderFileMatchesEveryHiddenState) {
  expect_encode_matches(test::fixture("text_gemma3.te.safetensors"), "ltx23");
}

TEST(GemmaModel, Gemma3RootFolderMatchesEveryHiddenState) {
  // (The CLI tests run all three prompts through encode() for both layouts.)
  expect_window_matches(test::fixture("text_gemma3_root"), "ltx23");
}

TEST(GemmaModel, Gemma4UnifiedComfyFlatFileMatchesEveryHiddenState) {
  const GemmaTextModel m =
      GemmaTextModel::load(GemmaAssets::load(test::fixture("text_gemma4.te.safetensors")));
  EXPECT_NE(m.key_layout().find("Comfy-flat"), std::string::npos) << m.key_layout();
  expect_encode_matches(test::fixture("text_gemma4.te.safetensors"), "ltx25");
}

// A Gemma 4 unified root folder as HF writes it (model.language_model.* keys, two shards, config
// and sidecars as files), made from the text-encoder file by undoing the packer.
TEST(GemmaModel, Gemma4UnifiedRootFolderWithHfShardsMatchesTheHiddenStates) {
  TempDir dir;
  const std::string te = test::fixture("text_gemma4.te.safetensors");
  const std::string root = dir.file("root");
  std::filesystem::create_directories(root);
  const io::SafetensorsFile f(te);
  std::vector<std::pair<std::string, Tensor>> shard[2];
  for (const auto& n : f.names()) {
    if (n == "tokenizer_json") {
      test::write_bytes(root + "/tokenizer.json",
                        std::string(reinterpret_cast<const char*>(f.tensor_bytes(n)),
                                    static_cast<size_t>(f.info(n).numel())));
    } else if (n.rfind("hf_asset__", 0) == 0) {
      test::write_bytes(root + "/" + n.substr(10),
                        std::string(reinterpret_cast<const char*>(f.tensor_bytes(n)),
                                    static_cast<size_t>(f.info(n).numel())));
    } else if (n.rfind("model.", 0) == 0) {
      const bool lm = n.rfind("model.layers.", 0) == 0 || n.rfind("model.embed_tokens.", 0) == 0 ||
                      n.rfind("model.norm.", 0) == 0;
      const std::string key = lm ? "model.language_model." + n.substr(6) : n;
      shard[n.find("layers.4") != std::string::npos ? 1 : 0].emplace_back(key, f.tensor(n));
    }
  }
  test::write_bytes(root + "/config.json", f.metadata().at("gemma_config"));
  io::write_safetensors(root + "/model-00001-of-00002.safetensors", shard[0]);
  io::write_safetensors(root + "/model-00002-of-00002.safetensors", shard[1]);
  const GemmaAssets assets = GemmaAssets::load(root);
  ASSERT_EQ(assets.weight_paths.size(), 2u);
  const GemmaTextModel m = GemmaTextModel::load(assets);
  EXPECT_NE(m.key_layout().find("HF"), std::string::npos) << m.key_layout();
  expect_window_matches(root, "ltx25");
}

TEST(GemmaModel, RopeBuffersMatchTheReference) {
  for (const std::string c : {"ltx23", "ltx25"}) {
    const std::string te =
        test::fixture(c == "ltx23" ? "text_gemma3.te.safetensors" : "text_gemma4.te.safetensors");
    const GemmaTextModel m = GemmaTextModel::load(GemmaAssets::load(te));
    for (const auto t : {text::GemmaLayerType::Sliding, text::GemmaLayerType::Full}) {
      const std::vector<float> inv = m.rope_inv_freq(t);
      const Tensor ref = test::text_io(c).tensor(std::string("inter.rope.") +
                                                 text::gemma_layer_type_name(t) + "_inv_freq");
      ASSERT_EQ(static_cast<int64_t>(inv.size()), ref.numel()) << c;
      EXPECT_LE(test::max_rel_err(Tensor::from_vector(inv, ref.shape()), ref), 1e-6) << c;
    }
  }
}

// The KV-cache path (prefill + one token at a time) gives the one-shot forward's results.
void expect_cached_decoding_matches(const GemmaTextModel& m, int64_t T, double tol = 1e-5) {
  std::vector<int64_t> ids(static_cast<size_t>(T)), pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    ids[static_cast<size_t>(t)] = (37 * t + 11) % m.config().vocab_size;
    pos[static_cast<size_t>(t)] = t;
  }
  const std::vector<int64_t> ones(static_cast<size_t>(T), 1);
  const auto full = m.encode(Tensor::from_vector(ids, {1, T}), Tensor::from_vector(ones, {1, T}));
  text::GemmaKvCache cache = m.make_cache(1, T);
  const int64_t P = T / 2;
  auto slice = [](const std::vector<int64_t>& v, int64_t a, int64_t n) {
    return Tensor::from_vector(std::vector<int64_t>(v.begin() + a, v.begin() + a + n), {1, n});
  };
  std::vector<Tensor> steps;
  steps.push_back(m.forward(slice(ids, 0, P), slice(pos, 0, P), slice(ones, 0, P), cache));
  for (int64_t t = P; t < T; ++t)
    steps.push_back(m.forward(slice(ids, t, 1), slice(pos, t, 1), slice(ones, t, 1), cache));
  EXPECT_EQ(cache.length, T);
  const Tensor stepped = ops::concat(steps, 1);
  EXPECT_LE(test::max_rel_err(stepped, full.back()), tol);
}

TEST(GemmaModel, CachedDecodingMatchesTheOneShotForward) {
  for (const char* f : {"text_gemma3.te.safetensors", "text_gemma4.te.safetensors"})
    expect_cached_decoding_matches(GemmaTextModel::load(GemmaAssets::load(test::fixture(f))),
                                   21);  // > sliding window 8
}

TEST(GemmaModel, LeftPadsDoNotChangeTheRealTokensButShiftTheirPositions) {
  // encode() counts the pads in the positions (HF), so padding changes real-token states only
  // through RoPE; with the same positions (forward) it changes nothing.
  const GemmaTextModel m =
      GemmaTextModel::load(GemmaAssets::load(test::fixture("text_gemma3.te.safetensors")));
  const std::vector<int64_t> ids = {2, 300, 301, 302, 303};
  const std::vector<int64_t> padded = {0, 0, 0, 2, 300, 301, 302, 303};
  const std::vector<int64_t> pmask = {0, 0, 0, 1, 1, 1, 1, 1};
  const std::vector<int64_t> ppos = {0, 0, 0, 0, 1, 2, 3, 4};
  text::GemmaKvCache c1 = m.make_cache(1, 5), c2 = m.make_cache(1, 8);
  const Tensor a = m.forward(Tensor::from_vector(ids, {1, 5}),
                             Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4}, {1, 5}),
                             Tensor::from_vector(std::vector<int64_t>(5, 1), {1, 5}), c1);
  const Tensor b = m.forward(Tensor::from_vector(padded, {1, 8}), Tensor::from_vector(ppos, {1, 8}),
                             Tensor::from_vector(pmask, {1, 8}), c2);
  EXPECT_LE(test::max_rel_err(b.narrow(1, 3, 5), a), 1e-6);
}

// A dense Gemma 4 config (model_type gemma4) over the unified fixture's weights.
json dense_config(const GemmaAssets& unified) {
  json c = unified.config;
  c["model_type"] = "gemma4";
  c["text_config"]["model_type"] = "gemma4_text";
  return c;
}

TEST(GemmaModel, DenseGemma4WithoutPerLayerInputsEqualsTheUnifiedDecoder) {
  TempDir dir;
  const GemmaAssets unified = GemmaAssets::load(test::fixture("text_gemma4.te.safetensors"));
  json cfg = dense_config(unified);
  cfg["text_config"]["hidden_size_per_layer_input"] = 0;
  const std::string path = dir.file("dense.safetensors");
  test::rewrite_safetensors(
      unified.weight_paths[0], path,
      [](const std::string& n) {
        for (const char* p : {"model.layers.", "model.embed_tokens.", "model.norm."})
          if (n.rfind(p, 0) == 0) return "model.language_model." + n.substr(6);
        return std::string();
      },
      [](auto&) {});
  const GemmaTextModel dense =
      GemmaTextModel::load(GemmaTextConfig::from_json(cfg, "dense"), {path});
  const GemmaTextModel uni = GemmaTextModel::load(unified);
  const io::SafetensorsFile& io = test::text_io("ltx25");
  // The last 128 positions of prompt 0 (its real tokens and a few pads) keep this short.
  const Tensor ids = io.tensor("in.input_ids").narrow(0, 0, 1).narrow(1, 896, 128);
  const Tensor mask = io.tensor("in.attention_mask").narrow(0, 0, 1).narrow(1, 896, 128);
  EXPECT_EQ(test::max_abs_diff(dense.encode(ids, mask).back(), uni.encode(ids, mask).back()), 0.0);
}

// ---- dense Gemma 4: per-layer input embeddings, KV sharing, double-wide MLPs ----

// A tiny dense Gemma 4 config exercising every dense-only feature.
json tiny_dense_config() {
  json tc = {{"hidden_size", 12},
             {"intermediate_size", 10},
             {"num_hidden_layers", 6},
             {"num_attention_heads", 4},
             {"num_key_value_heads", 2},
             {"head_dim", 4},
             {"global_head_dim", 8},
             {"num_global_key_value_heads", 1},
             {"attention_k_eq_v", true},
             {"vocab_size", 40},
             {"vocab_size_per_layer_input", 40},
             {"hidden_size_per_layer_input", 3},
             {"num_kv_shared_layers", 2},
             {"use_double_wide_mlp", true},
             {"sliding_window", 3},
             {"layer_types",
              {"sliding_attention", "full_attention", "sliding_attention", "full_attention",
               "sliding_attention", "full_attention"}},
             {"final_logit_softcapping", 5.0}};
  return {{"model_type", "gemma4"}, {"text_config", tc}};
}

// Random weights under the published dense names (model.language_model.*), plus `extra`.
std::vector<std::pair<std::string, Tensor>> tiny_dense_weights(const GemmaTextConfig& c) {
  std::vector<std::pair<std::string, Tensor>> w;
  uint64_t seed = 100;
  const int64_t D = c.hidden_size, P = c.hidden_size_per_layer_input, L = c.num_layers;
  auto add = [&](const std::string& n, const Shape& s, float lo, float hi) {
    w.emplace_back("model.language_model." + n, test::random_tensor(s, seed++, lo, hi));
  };
  auto lin = [&](const std::string& n, int64_t in, int64_t out) {
    const float a = static_cast<float>(std::sqrt(3.0 / static_cast<double>(in)));
    add(n + ".weight", {out, in}, -a, a);
  };
  add("embed_tokens.weight", {c.vocab_size, D}, -0.5f, 0.5f);
  add("norm.weight", {D}, 0.6f, 1.4f);
  add("embed_tokens_per_layer.weight", {c.vocab_size_per_layer_input, L * P}, -0.5f, 0.5f);
  lin("per_layer_model_projection", D, L * P);
  add("per_layer_projection_norm.weight", {P}, 0.6f, 1.4f);
  for (int64_t i = 0; i < L; ++i) {
    const auto& s = c.layers[static_cast<size_t>(i)];
    const std::string p = str("layers.", i, ".");
    for (const char* n :
         {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
          "post_feedforward_layernorm", "post_per_layer_input_norm"})
      add(p + n + ".weight", {D}, 0.6f, 1.4f);
    lin(p + "self_attn.q_proj", D, c.num_heads * s.head_dim);
    lin(p + "self_attn.o_proj", c.num_heads * s.head_dim, D);
    add(p + "self_attn.q_norm.weight", {s.head_dim}, 0.4f, 0.8f);
    if (s.kv_source < 0) {
      lin(p + "self_attn.k_proj", D, s.num_kv_heads * s.head_dim);
      if (!s.k_eq_v) lin(p + "self_attn.v_proj", D, s.num_kv_heads * s.head_dim);
      add(p + "self_attn.k_norm.weight", {s.head_dim}, 0.4f, 0.8f);
    }
    lin(p + "mlp.gate_proj", D, s.intermediate_size);
    lin(p + "mlp.up_proj", D, s.intermediate_size);
    lin(p + "mlp.down_proj", s.intermediate_size, D);
    add(p + "layer_scalar", {1}, 0.5f, 1.5f);
    lin(p + "per_layer_input_gate", D, P);
    lin(p + "per_layer_projection", P, D);
  }
  return w;
}

// The dense decoder written out naively in double (one sequence, no pads, positions 0..T-1).
std::vector<double> naive_dense_forward(const GemmaTextConfig& c,
                                        const std::map<std::string, std::vector<double>>& W,
                                        const std::vector<int64_t>& ids) {
  const auto T = static_cast<int64_t>(ids.size());
  const int64_t D = c.hidden_size, P = c.hidden_size_per_layer_input, L = c.num_layers;
  const int64_t H = c.num_heads;
  auto w = [&](const std::string& n) -> const std::vector<double>& {
    return W.at("model.language_model." + n);
  };
  auto matvec = [](const std::vector<double>& m, const std::vector<double>& x, int64_t out) {
    const auto in = static_cast<int64_t>(x.size());
    std::vector<double> y(static_cast<size_t>(out), 0.0);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) y[o] += m[static_cast<size_t>(o * in + i)] * x[i];
    return y;
  };
  auto rms = [&](std::vector<double> x, const std::vector<double>* scale) {
    double ss = 0;
    for (const double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + c.rms_norm_eps);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= r * (scale ? (*scale)[i] : 1.0);
    return x;
  };
  auto gelu = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  };
  auto rope = [&](std::vector<double> x, int64_t t, text::GemmaLayerType type, int64_t dh) {
    const auto inv = text::gemma_rope_inv_freq(c.rope(type), dh);
    const int64_t half = dh / 2;
    for (size_t h0 = 0; h0 < x.size(); h0 += static_cast<size_t>(dh))
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(inv[static_cast<size_t>(i)]) * static_cast<double>(t);
        const double x1 = x[h0 + i], x2 = x[h0 + i + half];
        x[h0 + i] = x1 * std::cos(a) - x2 * std::sin(a);
        x[h0 + i + half] = x2 * std::cos(a) + x1 * std::sin(a);
      }
    return x;
  };
  auto per_head = [&](const std::vector<double>& x, int64_t dh, const std::vector<double>* s) {
    std::vector<double> y;
    for (size_t h0 = 0; h0 < x.size(); h0 += static_cast<size_t>(dh)) {
      const auto part = rms(std::vector<double>(x.begin() + h0, x.begin() + h0 + dh), s);
      y.insert(y.end(), part.begin(), part.end());
    }
    return y;
  };

  std::vector<std::vector<double>> h(static_cast<size_t>(T)), ple(static_cast<size_t>(T));
  const double es = std::sqrt(static_cast<double>(D)), ps = std::sqrt(static_cast<double>(P));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = ids[static_cast<size_t>(t)];
    for (int64_t d = 0; d < D; ++d)
      h[t].push_back(w("embed_tokens.weight")[static_cast<size_t>(id * D + d)] *
                     static_cast<double>(static_cast<float>(es)));
    auto proj = matvec(w("per_layer_model_projection.weight"), h[t], L * P);
    for (int64_t l = 0; l < L; ++l) {
      std::vector<double> part(proj.begin() + l * P, proj.begin() + (l + 1) * P);
      for (auto& v : part) v /= std::sqrt(static_cast<double>(D));
      part = rms(part, &w("per_layer_projection_norm.weight"));
      for (int64_t p = 0; p < P; ++p)
        ple[t].push_back(
            (part[p] +
             w("embed_tokens_per_layer.weight")[static_cast<size_t>(id * L * P + l * P + p)] *
                 static_cast<double>(static_cast<float>(ps))) /
            std::sqrt(2.0));
    }
  }
  std::vector<std::vector<std::vector<double>>> K(L), V(L);
  for (int64_t i = 0; i < L; ++i) {
    const auto& s = c.layers[static_cast<size_t>(i)];
    const std::string p = str("layers.", i, ".");
    const int64_t dh = s.head_dim, hkv = s.num_kv_heads;
    std::vector<std::vector<double>> q(T);
    for (int64_t t = 0; t < T; ++t) {
      const auto xn = rms(h[t], &w(p + "input_layernorm.weight"));
      q[t] = rope(per_head(matvec(w(p + "self_attn.q_proj.weight"), xn, H * dh), dh,
                           &w(p + "self_attn.q_norm.weight")),
                  t, s.type, dh);
      if (s.kv_source < 0) {
        const auto kr = matvec(w(p + "self_attn.k_proj.weight"), xn, hkv * dh);
        const auto vr = s.k_eq_v ? kr : matvec(w(p + "self_attn.v_proj.weight"), xn, hkv * dh);
        K[i].push_back(rope(per_head(kr, dh, &w(p + "self_attn.k_norm.weight")), t, s.type, dh));
        V[i].push_back(per_head(vr, dh, nullptr));
      }
    }
    const auto& Ki = s.kv_source < 0 ? K[i] : K[s.kv_source];
    const auto& Vi = s.kv_source < 0 ? V[i] : V[s.kv_source];
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> attn(static_cast<size_t>(H * dh), 0.0);
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t kh = hh / (H / hkv);
        std::vector<double> sc;
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          const bool visible = s.type == text::GemmaLayerType::Full || j > t - c.sliding_window;
          double v = -1e300;
          if (visible) {
            v = 0;
            for (int64_t d = 0; d < dh; ++d) v += q[t][hh * dh + d] * Ki[j][kh * dh + d];
          }
          sc.push_back(v);
          mx = std::max(mx, v);
        }
        double sum = 0;
        for (auto& v : sc) sum += (v = v < -1e299 ? 0.0 : std::exp(v - mx));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < dh; ++d) attn[hh * dh + d] += sc[j] / sum * Vi[j][kh * dh + d];
      }
      auto o = rms(matvec(w(p + "self_attn.o_proj.weight"), attn, D),
                   &w(p + "post_attention_layernorm.weight"));
      for (int64_t d = 0; d < D; ++d) o[d] += h[t][d];
      const auto x2 = rms(o, &w(p + "pre_feedforward_layernorm.weight"));
      auto g = matvec(w(p + "mlp.gate_proj.weight"), x2, s.intermediate_size);
      const auto u = matvec(w(p + "mlp.up_proj.weight"), x2, s.intermediate_size);
      for (size_t k = 0; k < g.size(); ++k) g[k] = gelu(g[k]) * u[k];
      auto m = rms(matvec(w(p + "mlp.down_proj.weight"), g, D),
                   &w(p + "post_feedforward_layernorm.weight"));
      for (int64_t d = 0; d < D; ++d) m[d] += o[d];
      auto pg = matvec(w(p + "per_layer_input_gate.weight"), m, P);
      for (int64_t k = 0; k < P; ++k) pg[k] = gelu(pg[k]) * ple[t][i * P + k];
      auto pp = rms(matvec(w(p + "per_layer_projection.weight"), pg, D),
                    &w(p + "post_per_layer_input_norm.weight"));
      const double scalar = w(p + "layer_scalar")[0];
      for (int64_t d = 0; d < D; ++d) pp[d] = (pp[d] + m[d]) * scalar;
      h[t] = pp;
    }
  }
  std::vector<double> out;
  for (int64_t t = 0; t < T; ++t) {
    const auto n = rms(h[t], &w("norm.weight"));
    out.insert(out.end(), n.begin(), n.end());
  }
  return out;
}

TEST(GemmaModel, DenseGemma4MatchesANaiveDoubleReference) {
  TempDir dir;
  const GemmaTextConfig c = GemmaTextConfig::from_json(tiny_dense_config(), "dense");
  ASSERT_EQ(c.layers[4].kv_source, 2);
  ASSERT_EQ(c.layers[5].kv_source, 3);
  auto weights = tiny_dense_weights(c);
  std::map<std::string, std::vector<double>> W;
  for (const auto& [n, t] : weights) W[n] = t.to_double_vector();
  // HF drops the K/V tensors of KV-shared layers: extra ones must not trouble the binding.
  weights.emplace_back("model.language_model.layers.5.self_attn.k_proj.weight",
                       test::random_tensor({8, 12}, 7));
  const std::string path = dir.file("dense.safetensors");
  io::write_safetensors(path, weights);
  const GemmaTextModel m = GemmaTextModel::load(c, {path});

  const std::vector<int64_t> ids = {2, 17, 5, 33, 8, 8, 21, 39, 1, 12};
  const auto T = static_cast<int64_t>(ids.size());
  const std::vector<double> ref = naive_dense_forward(c, W, ids);
  const auto hs = m.encode(Tensor::from_vector(ids, {1, T}),
                           Tensor::from_vector(std::vector<int64_t>(ids.size(), 1), {1, T}));
  EXPECT_LE(test::max_rel_err(hs.back(), Tensor::from_vector(ref, {1, T, 12})), 1e-5);
  // This random 12-wide model amplifies float32 rounding (both paths sit ~1e-5 from the double
  // reference per token), hence the looser bound.
  expect_cached_decoding_matches(m, 9, 5e-5);

  // Logits are soft-capped at 5.
  const std::vector<float> logits = m.logits(hs.back()).to_float_vector();
  for (const float l : logits) EXPECT_LT(std::fabs(l), 5.0f);
}

TEST(GemmaModel, BindingErrorsListEveryBadTensor) {
  TempDir dir;
  const std::string src = test::fixture("text_gemma3.te.safetensors");
  const std::string bad = dir.file("bad.safetensors");
  test::rewrite_safetensors(
      src, bad,
      [](const std::string& n) -> std::string {
        if (n == "language_model.model.layers.0.mlp.up_proj.weight") return "";
        if (n == "language_model.model.layers.2.self_attn.q_norm.weight")
          return "language_model.model.layers.2.self_attn.q_norm_typo.weight";
        return n;
      },
      [](auto&) {});
  try {
    GemmaTextModel::load(GemmaAssets::load(bad));
    FAIL() << "expected a binding error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* n : {"layers.0.mlp.up_proj.weight", "layers.2.self_attn.q_norm.weight",
                          "q_norm_typo", "missing", "unexpected", "bad.safetensors"})
      EXPECT_NE(msg.find(n), std::string::npos) << n << "\n" << msg;
  }
}

TEST(GemmaModel, RefusesWeightsOfAnotherLayout) {
  // A Gemma 4 config over Gemma 3 weights finds no language-model tensors at all.
  const GemmaAssets g3 = GemmaAssets::load(test::fixture("text_gemma3.te.safetensors"));
  const GemmaAssets g4 = GemmaAssets::load(test::fixture("text_gemma4.te.safetensors"));
  try {
    GemmaTextModel::load(GemmaTextConfig::from_json(g4.config, "g4"), g3.weight_paths);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no language-model tensors"), std::string::npos)
        << e.what();
  }
  // A Gemma 4 file with a v_proj on its K-as-V global layer.
  TempDir dir;
  const std::string extra = dir.file("extra.safetensors");
  const io::SafetensorsFile f(g4.weight_paths[0]);
  std::vector<std::pair<std::string, Tensor>> t;
  for (const auto& n : f.names()) t.emplace_back(n, f.tensor(n));
  t.emplace_back("model.layers.5.self_attn.v_proj.weight", test::random_tensor({16, 24}, 3));
  io::write_safetensors(extra, t, f.metadata());
  EXPECT_THROW(GemmaTextModel::load(GemmaAssets::load(extra)), Error);
}

TEST(GemmaModel, RejectsTokenIdsOutsideTheVocabulary) {
  const GemmaTextModel m =
      GemmaTextModel::load(GemmaAssets::load(test::fixture("text_gemma3.te.safetensors")));
  EXPECT_THROW(m.encode(Tensor::from_vector(std::vector<int64_t>{2, 5000}, {1, 2}),
                        Tensor::from_vector(std::vector<int64_t>{1, 1}, {1, 2})),
               Error);
  EXPECT_THROW(m.encode(Tensor::from_vector(std::vector<int64_t>{2, 5}, {1, 2}),
                        Tensor::from_vector(std::vector<int64_t>{1, 1, 1}, {1, 3})),
               Error);
}

}  // namespace
}  // namespace ltx
