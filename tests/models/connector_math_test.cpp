// The pieces of the text embeddings path on small random inputs: the token-mask reordering, both
// feature extractors against naive double-precision references of the reference formulas (masked
// statistics over any padding pattern), and the connector's register replacement, masking and
// 1-D RoPE.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/embeddings_processor.h"
#include "models/text/token_mask.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace txt = models::text;
using txt::TokenMask;

Tensor mask_of(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> v;
  for (const auto& r : rows) v.insert(v.end(), r.begin(), r.end());
  return Tensor::from_vector(v, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

// ------------------------------------------------------------------ token mask

TEST(TokenMask, ReordersTokensFirstKeepingBothGroupsInOrder) {
  const std::vector<std::vector<int64_t>> rows = {
      {0, 0, 0, 1, 1, 1, 1}, {1, 0, 1, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 0, 0, 0, 1}};
  const TokenMask m = TokenMask::from_binary(mask_of(rows));
  const Tensor x = test::non_contiguous_copy(test::random_tensor({4, 7, 3}, 1));
  const Tensor y = txt::reorder_valid_first(x, m);
  ASSERT_EQ(y.shape(), x.shape());
  for (size_t b = 0; b < rows.size(); ++b) {
    std::vector<int64_t> order;  // a stable sort on the mask, descending
    for (int v : {1, 0})
      for (int64_t t = 0; t < 7; ++t)
        if (rows[b][t] == v) order.push_back(t);
    for (int64_t t = 0; t < 7; ++t)
      EXPECT_EQ(test::max_abs_diff(y.select(0, b).select(0, t), x.select(0, b).select(0, order[t])), 0.0)
          << "row " << b << " position " << t;
    EXPECT_EQ(m.count(static_cast<int64_t>(b)), m.valid_first().count(static_cast<int64_t>(b)));
    for (int64_t t = 0; t < 7; ++t)
      EXPECT_EQ(m.valid_first().valid(static_cast<int64_t>(b), t), t < m.count(static_cast<int64_t>(b)));
  }
  const Tensor g = txt::gather_valid_rows(x, m, 1);
  ASSERT_EQ(g.shape(), Shape({4, 3}));
  EXPECT_EQ(test::max_abs_diff(g.select(0, 1), x.select(0, 1).select(0, 2)), 0.0);
  EXPECT_EQ(txt::gather_valid_rows(x, m, 2).size(0), 0);
}

TEST(TokenMask, AdditiveFormAndBack) {
  const TokenMask m = TokenMask::from_binary(mask_of({{0, 1, 1}}));
  const std::vector<float> a = m.additive().to_float_vector();
  EXPECT_EQ(m.additive().shape(), Shape({1, 1, 1, 3}));
  EXPECT_EQ(a[0], -std::numeric_limits<float>::max());
  EXPECT_EQ(a[1], 0.0f);
  const TokenMask back = TokenMask::from_additive(m.additive());
  for (int64_t t = 0; t < 3; ++t) EXPECT_EQ(back.valid(0, t), m.valid(0, t));
  EXPECT_EQ(m.binary(DType::F32).to_float_vector(), (std::vector<float>{0, 1, 1}));
}

TEST(TokenMask, RejectsMasksThatAreNotBinary) {
  EXPECT_THROW(TokenMask::from_binary(mask_of({{0, 2, 1}})), Error);
  EXPECT_THROW(TokenMask::from_binary(Tensor::zeros({2, 3, 1})), Error);
  EXPECT_THROW(TokenMask::from_additive(Tensor::zeros({2, 2, 1, 3})), Error);
  EXPECT_THROW(txt::reorder_valid_first(Tensor::zeros({1, 4, 2}), TokenMask::from_binary(mask_of({{1, 1, 0}}))),
               Error);
}

// ------------------------------------------------------------------ feature extractors

constexpr int64_t kB = 4, kT = 9, kD = 5, kL = 4;
const std::vector<std::vector<int64_t>> kMaskRows = {
    {0, 0, 0, 0, 1, 1, 1, 1, 1},  // left padding (the encoder's)
    {1, 1, 0, 1, 0, 0, 1, 0, 1},  // holes
    {0, 0, 0, 0, 0, 0, 0, 0, 0},  // no token at all
    {0, 0, 0, 0, 0, 0, 0, 0, 1}};  // one token

// Hidden states [B, T, D, L] with a different scale and offset per layer (as Gemma's grow).
Tensor hidden_states() {
  Tensor h = test::random_tensor({kB, kT, kD, kL}, 7, -1.f, 1.f).clone();
  float* p = h.data<float>();
  for (int64_t i = 0; i < h.numel(); ++i) {
    const int64_t l = i % kL;
    p[i] = p[i] * static_cast<float>(1 + 3 * l) + static_cast<float>(l) * 0.5f;
  }
  return h;
}

double at(const std::vector<float>& h, int64_t b, int64_t t, int64_t d, int64_t l) {
  return h[static_cast<size_t>(((b * kT + t) * kD + d) * kL + l)];
}

// Naive double references of the reference's formulas on the full padded batch: normalised
// features [B][T][D*L] (feature index d*L + l), pads zeroed.
std::vector<std::vector<std::vector<double>>> reference_normed(const std::vector<float>& h, bool v1) {
  std::vector<std::vector<std::vector<double>>> out(kB, std::vector<std::vector<double>>(kT, std::vector<double>(kD * kL, 0.0)));
  for (int64_t b = 0; b < kB; ++b) {
    int64_t n = 0;
    for (int64_t t = 0; t < kT; ++t) n += kMaskRows[b][t];
    for (int64_t l = 0; l < kL; ++l) {
      double sum = 0, mn = INFINITY, mx = -INFINITY;
      for (int64_t t = 0; t < kT; ++t)
        for (int64_t d = 0; d < kD; ++d)
          if (kMaskRows[b][t]) {
            const double x = at(h, b, t, d, l);
            sum += x;
            mn = std::min(mn, x);
            mx = std::max(mx, x);
          }
      const double mean = sum / (static_cast<double>(n * kD) + 1e-6);
      for (int64_t t = 0; t < kT; ++t) {
        if (!kMaskRows[b][t]) continue;
        double ms = 0;
        for (int64_t d = 0; d < kD; ++d) ms += at(h, b, t, d, l) * at(h, b, t, d, l);
        ms /= kD;
        for (int64_t d = 0; d < kD; ++d) {
          const double x = at(h, b, t, d, l);
          out[b][t][d * kL + l] = v1 ? 8 * (x - mean) / (mx - mn + 1e-6) : x / std::sqrt(ms + 1e-6);
        }
      }
    }
  }
  return out;
}

// y[b][t][o] = scale * sum_k W[o][k] x[b][t][k] + bias[o].
Tensor reference_linear(const std::vector<std::vector<std::vector<double>>>& x, const Tensor& weight,
                        const Tensor& bias, double scale) {
  const int64_t out = weight.size(0), in = weight.size(1);
  const std::vector<float> w = weight.to_float_vector();
  const std::vector<float> bv = bias.defined() ? bias.to_float_vector() : std::vector<float>(out, 0.f);
  std::vector<double> y;
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (int64_t k = 0; k < in; ++k) s += w[o * in + k] * (x[b][t][k] * scale);
        y.push_back(s + bv[o]);
      }
  return Tensor::from_vector(y, {kB, kT, out});
}

txt::FeatureExtractorConfig fe_config(txt::FeatureExtractorVersion v, int64_t video, int64_t audio) {
  txt::FeatureExtractorConfig c;
  c.version = v;
  c.embedding_dim = kD;
  c.num_layers = kL;
  c.video_dim = video;
  c.audio_dim = audio;
  return c;
}

TEST(FeatureExtractor, V1MatchesTheDoubleReferenceForAnyPadding) {
  const Tensor w = test::random_tensor({kD, kD * kL}, 11);
  io::WeightMap wm;
  wm.add("aggregate_embed.weight", w);
  const auto fe = txt::FeatureExtractor::load(wm, fe_config(txt::FeatureExtractorVersion::V1, kD, kD));
  wm.finish("test");
  const Tensor h = hidden_states();
  const Tensor expected = reference_linear(reference_normed(h.to_float_vector(), true), w, Tensor(), 1.0);
  const txt::TextFeatures f = fe(test::non_contiguous_copy(h), mask_of(kMaskRows));
  ASSERT_EQ(f.video.shape(), Shape({kB, kT, kD}));
  EXPECT_LE(test::max_abs_diff(f.video, expected), 2e-5);
  EXPECT_EQ(test::max_abs_diff(f.audio, f.video), 0.0);  // V1 feeds both connectors
  // The tuple form gives the same features.
  std::vector<Tensor> layers;
  for (int64_t l = 0; l < kL; ++l) layers.push_back(h.select(3, l));
  EXPECT_EQ(test::max_abs_diff(fe(layers, mask_of(kMaskRows)).video, f.video), 0.0);
}

TEST(FeatureExtractor, V2MatchesTheDoubleReferenceForAnyPadding) {
  const int64_t wv = 7, wa = 3;
  const Tensor vw = test::random_tensor({wv, kD * kL}, 21), vb = test::random_tensor({wv}, 22);
  const Tensor aw = test::random_tensor({wa, kD * kL}, 23), ab = test::random_tensor({wa}, 24);
  io::WeightMap wm;
  wm.add("video_aggregate_embed.weight", vw);
  wm.add("video_aggregate_embed.bias", vb);
  wm.add("audio_aggregate_embed.weight", aw);
  wm.add("audio_aggregate_embed.bias", ab);
  const auto fe = txt::FeatureExtractor::load(wm, fe_config(txt::FeatureExtractorVersion::V2, wv, wa));
  wm.finish("test");
  const Tensor h = hidden_states();
  const auto normed = reference_normed(h.to_float_vector(), false);
  const txt::TextFeatures f = fe(test::non_contiguous_copy(h), mask_of(kMaskRows));
  // The rescale sqrt(out / D) comes before the projection; pad rows are the bias.
  EXPECT_LE(test::max_abs_diff(f.video, reference_linear(normed, vw, vb, std::sqrt(double(wv) / kD))), 2e-5);
  EXPECT_LE(test::max_abs_diff(f.audio, reference_linear(normed, aw, ab, std::sqrt(double(wa) / kD))), 2e-5);
}

TEST(FeatureExtractor, RejectsInputsThatDoNotMatchTheConfig) {
  io::WeightMap wm;
  wm.add("aggregate_embed.weight", test::random_tensor({kD, kD * kL}, 1));
  const auto fe = txt::FeatureExtractor::load(wm, fe_config(txt::FeatureExtractorVersion::V1, kD, kD));
  const Tensor h = hidden_states();
  EXPECT_THROW(fe(h.narrow(3, 0, kL - 1), mask_of(kMaskRows)), Error);  // one layer short
  EXPECT_THROW(fe(h.narrow(2, 0, kD - 1), mask_of(kMaskRows)), Error);  // wrong hidden size
  EXPECT_THROW(fe(h, mask_of({{1, 1, 1}})), Error);                     // mask shape
  // A misshaped projection is a binding error.
  io::WeightMap bad;
  bad.add("aggregate_embed.weight", test::random_tensor({kD, kD * kL + 1}, 1));
  (void)txt::FeatureExtractor::load(bad, fe_config(txt::FeatureExtractorVersion::V1, kD, kD));
  EXPECT_THROW(bad.finish("feature extractor"), Error);
}

// ------------------------------------------------------------------ connector

// A random connector of 2 heads x 4, `layers` blocks, gated, `regs` registers.
txt::Embeddings1DConnector make_connector(int64_t regs, int64_t layers = 2) {
  txt::Embeddings1DConnectorConfig c;
  c.num_attention_heads = 2;
  c.attention_head_dim = 4;
  c.num_layers = layers;
  c.positional_embedding_max_pos = {16};
  c.num_learnable_registers = regs;
  c.apply_gated_attention = true;
  const int64_t w = c.inner_dim();
  io::WeightMap wm;
  uint64_t seed = 100;
  const auto add = [&](const std::string& n, const Shape& s) { wm.add(n, test::random_tensor(s, ++seed)); };
  if (regs > 0) add("learnable_registers", {regs, w});
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = str("transformer_1d_blocks.", i, ".");
    for (const char* lin : {"to_q", "to_k", "to_v", "to_out.0"}) {
      add(p + "attn1." + lin + ".weight", {w, w});
      add(p + "attn1." + lin + ".bias", {w});
    }
    add(p + "attn1.q_norm.weight", {w});
    add(p + "attn1.k_norm.weight", {w});
    add(p + "attn1.to_gate_logits.weight", {2, w});
    add(p + "attn1.to_gate_logits.bias", {2});
    add(p + "ff.net.0.proj.weight", {4 * w, w});
    add(p + "ff.net.0.proj.bias", {4 * w});
    add(p + "ff.net.2.weight", {w, 4 * w});
    add(p + "ff.net.2.bias", {w});
  }
  auto conn = txt::Embeddings1DConnector::load(wm, c);
  wm.finish("connector");
  return conn;
}

TEST(Connector, PadPositionPTakesRegisterPModR) {
  const int64_t s = 8, regs = 4;
  const auto conn = make_connector(regs);
  const Tensor x = test::random_tensor({2, s, 8}, 5);
  const Tensor mask = mask_of({{1, 1, 1, 0, 0, 0, 0, 0}, {0, 1, 0, 1, 1, 1, 1, 0}});
  const Tensor additive = TokenMask::from_binary(mask).additive();
  const txt::ConnectorOutput out = conn(x, additive);
  // The same sequence with the pads replaced by hand, and no mask, must give the same result.
  Tensor manual = x.clone();
  const std::vector<int64_t> m = mask.to_int_vector();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t p = 0; p < s; ++p)
      if (m[b * s + p] == 0) manual.select(0, b).select(0, p).copy_from(conn.learnable_registers().select(0, p % regs));
  EXPECT_LE(test::max_abs_diff(out.hidden_states, conn(manual, Tensor()).hidden_states), 1e-6);
  // Everything attends afterwards: the returned mask is all zeros.
  EXPECT_EQ(out.additive_mask.shape(), Shape({2, 1, 1, s}));
  EXPECT_EQ(test::max_abs_diff(out.additive_mask, Tensor::zeros({2, 1, 1, s})), 0.0);
  // The output is RMS-normalised per token.
  const std::vector<float> y = out.hidden_states.to_float_vector();
  for (int64_t i = 0; i < 2 * s; ++i) {
    double ms = 0;
    for (int64_t d = 0; d < 8; ++d) ms += double(y[i * 8 + d]) * y[i * 8 + d];
    EXPECT_NEAR(ms / 8, 1.0, 1e-4);
  }
}

TEST(Connector, WithoutRegistersThePadsAreMaskedOut) {
  const auto conn = make_connector(0);
  const Tensor x = test::random_tensor({1, 6, 8}, 9);
  Tensor changed = x.clone();
  changed.select(0, 0).select(0, 4).copy_from(test::random_tensor({1, 8}, 10).select(0, 0));
  const Tensor additive = TokenMask::from_binary(mask_of({{1, 1, 1, 1, 0, 1}})).additive();
  const Tensor a = conn(x, additive).hidden_states, b = conn(changed, additive).hidden_states;
  for (int64_t t : {0, 1, 2, 3, 5})
    EXPECT_LE(test::max_abs_diff(a.select(1, t), b.select(1, t)), 1e-6) << t;
  // Without the mask the changed pad is seen by everyone.
  EXPECT_GT(test::max_abs_diff(conn(x, Tensor()).hidden_states.select(1, 0),
                               conn(changed, Tensor()).hidden_states.select(1, 0)),
            1e-4);
}

TEST(Connector, RopeIsOneAxisOverArangeWithMaxPos) {
  const auto conn = make_connector(4, 1);
  const int64_t s = 8;
  const auto pe = conn.rope(s, Device::cpu());
  ASSERT_EQ(pe.cos.shape(), Shape({1, 2, s, 2}));  // [1, heads, S, head_dim / 2]
  // inner/2 = 4 frequencies theta^(j/3) pi/2 (j = 0..3), 2 per head, angle f (2 p / 16 - 1).
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t p = 0; p < s; ++p)
      for (int64_t i = 0; i < 2; ++i) {
        const int64_t j = h * 2 + i;
        const double f = std::pow(10000.0, j / 3.0) * std::numbers::pi / 2;
        const double angle = f * (2.0 * p / 16.0 - 1.0);
        EXPECT_NEAR(pe.cos.select(1, h).select(1, p).select(1, i).item(), std::cos(angle), 2e-3);
        EXPECT_NEAR(pe.sin.select(1, h).select(1, p).select(1, i).item(), std::sin(angle), 2e-3);
      }
}

TEST(Connector, RejectsBadInputs) {
  const auto conn = make_connector(4);
  EXPECT_THROW(conn(test::random_tensor({1, 6, 8}, 1), Tensor()), Error);   // 6 % 4 registers
  EXPECT_THROW(conn(test::random_tensor({1, 8, 6}, 1), Tensor()), Error);   // width
  EXPECT_THROW(conn(test::random_tensor({1, 8, 8}, 1), Tensor::zeros({1, 1, 1, 7})), Error);  // mask
}

// ------------------------------------------------------------------ processor

TEST(EmbeddingsProcessor, LeftAndRightPaddingGiveTheSameContexts) {
  const io::SafetensorsFile io(test::fixture("ltx23.textproc.io.safetensors"));
  const Tensor h = io.tensor("in.hidden_states"), mask = io.tensor("in.attention_mask");
  const TokenMask m = TokenMask::from_binary(mask);
  // The same prompts right-padded (tokens first) and with the pads in the middle.
  const Tensor h_right = txt::reorder_valid_first(h, m);
  const Tensor mask_right = m.valid_first().binary();
  const auto proc = txt::EmbeddingsProcessor::from_files({test::fixture("ltx23.weights.safetensors")}, {48, 3});
  const auto left = proc.process_hidden_states(h, mask);
  const auto right = proc.process_hidden_states(h_right, mask_right);
  EXPECT_LE(test::max_abs_diff(left.video_encoding, right.video_encoding), 1e-6);
  EXPECT_LE(test::max_abs_diff(left.audio_encoding, right.audio_encoding), 1e-6);
  // The features stay at the token positions.
  const auto f_left = proc.features(h, mask), f_right = proc.features(h_right, mask_right);
  EXPECT_LE(test::max_abs_diff(txt::reorder_valid_first(f_left.video, m), f_right.video), 1e-6);
}

}  // namespace
}  // namespace ltx
