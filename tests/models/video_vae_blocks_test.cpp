// Video VAE building blocks that the golden fixtures do not exercise: the attention block against a
// double-precision reference, and encoder / decoder configs with group_norm, res_x_y, plain strided
// compress blocks, attn blocks and timestep-conditioned res blocks (random weights: shapes, binding
// and wiring). Also the upsampler variants without fixtures (spatial + temporal, dims 2).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "models/upsampler/model.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/video_vae.h"
#include "ops/elementwise.h"
#include "support/test_support.h"

namespace ltx::video_vae_blocks_test {
namespace {

using namespace models;
using namespace models::video_vae;
using nlohmann::json;

// Adds a random tensor (uniform in [-s, s], s = 1/sqrt(fan_in)) under `name`.
void add(io::WeightMap& w, const std::string& name, const Shape& shape, uint64_t& seed) {
  int64_t fan_in = 1;
  for (int i = 1; i < shape.size(); ++i) fan_in *= shape[i];
  const float s = shape.size() <= 1 ? 0.5f : 1.f / std::sqrt(static_cast<float>(fan_in));
  w.add(name, test::random_tensor(shape, seed++, -s, s));
}

TEST(VideoVaeBlocks, AttentionMatchesADoubleReference) {
  const int64_t c = 6, b = 2, t = 3, h = 3, wd = 5;
  io::WeightMap w;
  uint64_t seed = 1;
  add(w, "norm.gamma", {c, 1, 1}, seed);
  add(w, "to_qkv.weight", {3 * c, c, 1, 1}, seed);
  add(w, "to_qkv.bias", {3 * c}, seed);
  add(w, "proj.weight", {c, c, 1, 1}, seed);
  add(w, "proj.bias", {c}, seed);
  const AttnBlock3D attn = AttnBlock3D::load(w, c, {});
  w.finish("attn");
  const Tensor x = test::random_tensor({b, c, t, h, wd}, 9, -2.f, 2.f);
  const Tensor y = attn(test::non_contiguous_copy(x));
  ASSERT_EQ(y.shape(), x.shape());

  const auto X = x.to_double_vector(), G = attn.gamma.to_double_vector();
  const auto Wq = attn.qkv_weight.to_double_vector(), Bq = attn.qkv_bias.to_double_vector();
  const auto Wp = attn.proj_weight.to_double_vector(), Bp = attn.proj_bias.to_double_vector();
  const auto Y = y.to_double_vector();
  const int64_t n = h * wd;
  auto at = [&](int64_t bi, int64_t ci, int64_t ti, int64_t p) {
    return X[(((bi * c + ci) * t + ti) * n) + p];
  };
  double max_err = 0;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t ti = 0; ti < t; ++ti) {
      // F.normalize over channels, times sqrt(C) * gamma; then q, k, v per position.
      std::vector<double> f(c * n), qkv(3 * c * n);
      for (int64_t p = 0; p < n; ++p) {
        double ss = 0;
        for (int64_t ci = 0; ci < c; ++ci) ss += at(bi, ci, ti, p) * at(bi, ci, ti, p);
        const double norm = std::max(std::sqrt(ss), 1e-12);
        for (int64_t ci = 0; ci < c; ++ci)
          f[ci * n + p] = at(bi, ci, ti, p) / norm * std::sqrt(double(c)) * G[ci];
        for (int64_t o = 0; o < 3 * c; ++o) {
          double acc = Bq[o];
          for (int64_t ci = 0; ci < c; ++ci) acc += Wq[o * c + ci] * f[ci * n + p];
          qkv[o * n + p] = acc;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        std::vector<double> s(n);
        double mx = -1e300;
        for (int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (int64_t ci = 0; ci < c; ++ci) d += qkv[ci * n + i] * qkv[(c + ci) * n + j];
          s[j] = d / std::sqrt(double(c));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - mx));
        std::vector<double> o(c, 0.0);
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t j = 0; j < n; ++j) o[ci] += s[j] / z * qkv[(2 * c + ci) * n + j];
        for (int64_t co = 0; co < c; ++co) {
          double acc = Bp[co];
          for (int64_t ci = 0; ci < c; ++ci) acc += Wp[co * c + ci] * o[ci];
          const double want = at(bi, co, ti, i) + acc;
          max_err = std::max(max_err, std::fabs(Y[(((bi * c + co) * t + ti) * n) + i] - want));
        }
      }
    }
  EXPECT_LT(max_err, 2e-5);
}

TEST(VideoVaeBlocks, EncoderWithGroupNormResXYStridedConvsAndAttention) {
  const json vae = json::parse(R"({
    "latent_channels": 32, "patch_size": 1, "norm_layer": "group_norm",
    "latent_log_var": "per_channel",
    "encoder_blocks": [["res_x_y", {"multiplier": 2}], ["compress_time", 1],
                       ["compress_space", 1], ["compress_all_x_y", {"multiplier": 2}],
                       ["attn", {}]]})");
  const EncoderConfig cfg = encoder_config_from_json(vae, "synthetic");
  EXPECT_EQ(cfg.scale_factors(), (tiling::ScaleFactors{4, 4, 4}));
  io::WeightMap w;
  uint64_t seed = 100;
  add(w, "conv_in.conv.weight", {32, 3, 3, 3, 3}, seed);
  add(w, "conv_in.conv.bias", {32}, seed);
  for (const char* n : {"norm1", "norm3"}) {
    add(w, str("down_blocks.0.", n, ".weight"), {32}, seed);
    add(w, str("down_blocks.0.", n, ".bias"), {32}, seed);
  }
  add(w, "down_blocks.0.norm2.weight", {64}, seed);
  add(w, "down_blocks.0.norm2.bias", {64}, seed);
  add(w, "down_blocks.0.conv1.conv.weight", {64, 32, 3, 3, 3}, seed);
  add(w, "down_blocks.0.conv1.conv.bias", {64}, seed);
  add(w, "down_blocks.0.conv2.conv.weight", {64, 64, 3, 3, 3}, seed);
  add(w, "down_blocks.0.conv2.conv.bias", {64}, seed);
  add(w, "down_blocks.0.conv_shortcut.weight", {64, 32, 1, 1, 1}, seed);
  add(w, "down_blocks.0.conv_shortcut.bias", {64}, seed);
  for (int i : {1, 2}) {
    add(w, str("down_blocks.", i, ".conv.weight"), {64, 64, 3, 3, 3}, seed);
    add(w, str("down_blocks.", i, ".conv.bias"), {64}, seed);
  }
  add(w, "down_blocks.3.conv.weight", {128, 64, 3, 3, 3}, seed);
  add(w, "down_blocks.3.conv.bias", {128}, seed);
  add(w, "down_blocks.4.norm.gamma", {128, 1, 1}, seed);
  add(w, "down_blocks.4.to_qkv.weight", {384, 128, 1, 1}, seed);
  add(w, "down_blocks.4.to_qkv.bias", {384}, seed);
  add(w, "down_blocks.4.proj.weight", {128, 128, 1, 1}, seed);
  add(w, "down_blocks.4.proj.bias", {128}, seed);
  add(w, "conv_norm_out.weight", {128}, seed);
  add(w, "conv_norm_out.bias", {128}, seed);
  add(w, "conv_out.conv.weight", {64, 128, 3, 3, 3}, seed);  // per_channel: 2 x 32
  add(w, "conv_out.conv.bias", {64}, seed);
  add(w, "per_channel_statistics.mean-of-means", {32}, seed);
  w.add("per_channel_statistics.std-of-means", Tensor::full({32}, 2.0));
  const VideoEncoder enc = VideoEncoder::load(w, cfg);
  w.finish("synthetic encoder");
  const Tensor z = enc(test::random_tensor({1, 3, 5, 8, 8}, 5));
  EXPECT_EQ(z.shape(), Shape({1, 32, 2, 2, 2}));
  for (float v : z.to_float_vector()) ASSERT_TRUE(std::isfinite(v));
}

TEST(VideoVaeBlocks, TimestepConditionedGroupNormDecoderWithResXYAndAttention) {
  const json vae = json::parse(R"({
    "latent_channels": 8, "patch_size": 1, "norm_layer": "group_norm",
    "decoder_base_channels": 32, "spatial_padding_mode": "replicate",
    "decoder_blocks": [["compress_all", {"multiplier": 2}], ["attn", {}],
                       ["res_x_y", {"multiplier": 2}], ["res_x", 1]]})");
  const DecoderConfig cfg = decoder_config_from_json(vae, "synthetic");
  ASSERT_TRUE(cfg.timestep_conditioning);  // the configurator's default
  EXPECT_EQ(cfg.bottleneck_channels(), 128);
  io::WeightMap w;
  uint64_t seed = 200;
  auto conv = [&](const std::string& n, int64_t in, int64_t out) {
    add(w, n + ".conv.weight", {out, in, 3, 3, 3}, seed);
    add(w, n + ".conv.bias", {out}, seed);
  };
  auto norm = [&](const std::string& n, int64_t c) {
    add(w, n + ".weight", {c}, seed);
    add(w, n + ".bias", {c}, seed);
  };
  auto embedder = [&](const std::string& n, int64_t dim) {
    add(w, n + ".timestep_embedder.linear_1.weight", {dim, 256}, seed);
    add(w, n + ".timestep_embedder.linear_1.bias", {dim}, seed);
    add(w, n + ".timestep_embedder.linear_2.weight", {dim, dim}, seed);
    add(w, n + ".timestep_embedder.linear_2.bias", {dim}, seed);
  };
  conv("conv_in", 8, 128);
  // up_blocks.0 = res_x (128, timestep-conditioned)
  embedder("up_blocks.0.time_embedder", 512);
  norm("up_blocks.0.res_blocks.0.norm1", 128);
  norm("up_blocks.0.res_blocks.0.norm2", 128);
  conv("up_blocks.0.res_blocks.0.conv1", 128, 128);
  conv("up_blocks.0.res_blocks.0.conv2", 128, 128);
  add(w, "up_blocks.0.res_blocks.0.scale_shift_table", {4, 128}, seed);
  // up_blocks.1 = res_x_y 128 -> 64 (never timestep-conditioned)
  norm("up_blocks.1.norm1", 128);
  norm("up_blocks.1.norm2", 64);
  norm("up_blocks.1.norm3", 128);
  conv("up_blocks.1.conv1", 128, 64);
  conv("up_blocks.1.conv2", 64, 64);
  add(w, "up_blocks.1.conv_shortcut.weight", {64, 128, 1, 1, 1}, seed);
  add(w, "up_blocks.1.conv_shortcut.bias", {64}, seed);
  // up_blocks.2 = attn (64)
  add(w, "up_blocks.2.norm.gamma", {64, 1, 1}, seed);
  add(w, "up_blocks.2.to_qkv.weight", {192, 64, 1, 1}, seed);
  add(w, "up_blocks.2.to_qkv.bias", {192}, seed);
  add(w, "up_blocks.2.proj.weight", {64, 64, 1, 1}, seed);
  add(w, "up_blocks.2.proj.bias", {64}, seed);
  // up_blocks.3 = compress_all, 64 -> 8 * 64 / 2 -> 32 channels
  conv("up_blocks.3.conv", 64, 256);
  norm("conv_norm_out", 32);
  conv("conv_out", 32, 3);
  w.add("timestep_scale_multiplier", Tensor::full({}, 1000.0));
  embedder("last_time_embedder", 64);
  add(w, "last_scale_shift_table", {2, 32}, seed);
  add(w, "per_channel_statistics.mean-of-means", {8}, seed);
  w.add("per_channel_statistics.std-of-means", Tensor::full({8}, 1.5));
  const ConvVideoDecoder dec = ConvVideoDecoder::load(w, cfg);
  w.finish("synthetic decoder");

  const Tensor latent = test::random_tensor({2, 8, 2, 3, 3}, 7);
  const NoiseFn zeros = [](const Shape& s) { return Tensor::zeros(s); };
  const Tensor a = dec(latent, Tensor::full({2}, 0.05), zeros);
  EXPECT_EQ(a.shape(), Shape({2, 3, 3, 6, 6}));
  // timestep None is 0.05 for every sample; another timestep changes the output.
  EXPECT_EQ(test::max_abs_diff(dec(latent, std::nullopt, zeros), a), 0.0);
  EXPECT_GT(test::max_abs_diff(dec(latent, Tensor::full({2}, 0.5), zeros), a), 1e-4);
  // The noise enters as 0.025 * noise + 0.975 * latent.
  const NoiseFn ones = [](const Shape& s) { return Tensor::full(s, 1.0); };
  const Tensor shifted = ops::add(latent, 0.025 / 0.975);
  EXPECT_LT(test::max_rel_err(dec(latent, std::nullopt, ones), dec(shifted, std::nullopt, zeros)),
            1e-4);
}

TEST(UpsamplerBlocks, SpatioTemporalAndPerFrameVariantsHaveTheReferenceShapes) {
  struct Case {
    json cfg;
    Shape out;
  };
  const std::vector<Case> cases = {
      {{{"in_channels", 4}, {"mid_channels", 32}, {"num_blocks_per_stage", 1},
        {"temporal_upsample", true}},
       {1, 4, 5, 6, 8}},
      {{{"in_channels", 4}, {"mid_channels", 32}, {"num_blocks_per_stage", 1}, {"dims", 2}},
       {1, 4, 3, 6, 8}},
      {{{"in_channels", 4}, {"mid_channels", 32}, {"num_blocks_per_stage", 0},
        {"rational_resampler", true}, {"spatial_scale", 0.75}},
       {1, 4, 3, 3, 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cfg.dump());
    const upsampler::LatentUpsamplerConfig cfg = upsampler::upsampler_config_from_json(c.cfg, "u");
    const bool d2 = cfg.dims == 2;
    io::WeightMap w;
    uint64_t seed = 300;
    auto conv = [&](const std::string& n, int64_t in, int64_t out, bool three_d) {
      if (three_d)
        add(w, n + ".weight", {out, in, 3, 3, 3}, seed);
      else
        add(w, n + ".weight", {out, in, 3, 3}, seed);
      add(w, n + ".bias", {out}, seed);
    };
    auto norm = [&](const std::string& n) {
      add(w, n + ".weight", {32}, seed);
      add(w, n + ".bias", {32}, seed);
    };
    conv("initial_conv", 4, 32, !d2);
    norm("initial_norm");
    for (const char* stage : {"res_blocks", "post_upsample_res_blocks"})
      for (int64_t i = 0; i < cfg.num_blocks_per_stage; ++i) {
        conv(str(stage, ".", i, ".conv1"), 32, 32, !d2);
        conv(str(stage, ".", i, ".conv2"), 32, 32, !d2);
        norm(str(stage, ".", i, ".norm1"));
        norm(str(stage, ".", i, ".norm2"));
      }
    if (cfg.rational_resampler) {
      conv("upsampler.conv", 32, 9 * 32, false);
      w.add("upsampler.blur_down.kernel", upsampler::BlurDownsample::binomial_kernel(5));
    } else if (cfg.temporal_upsample) {
      conv("upsampler.0", 32, 8 * 32, true);
    } else {
      conv("upsampler.0", 32, 4 * 32, false);
    }
    conv("final_conv", 32, 4, !d2);
    const upsampler::LatentUpsampler up = upsampler::LatentUpsampler::load(w, cfg);
    w.finish("synthetic upsampler");
    const Tensor x = test::random_tensor({1, 4, 3, 3, 4}, 8);
    // (Rational 0.75: up by 3 to 9x12, blur with stride 4 -> ceil(9/4) x ceil(12/4).)
    EXPECT_EQ(up(x).shape(), c.out);
    EXPECT_EQ(up.output_shape(x.shape()), c.out);
  }
}

}  // namespace
}  // namespace ltx::video_vae_blocks_test
