// The latent upsamplers against the reference on the golden fixtures, plus config checks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/upsampler/model.h"
#include "models/vae_test_util.h"

namespace ltx::upsampler_test {
namespace {

using namespace models;
using namespace models::upsampler;
using test::expect_matches;
using test::io_tensor;

constexpr double kTol = 1e-5;

void check_case(const std::string& name, const Shape& expected_out) {
  SCOPED_TRACE(name);
  std::printf("  upsampler_%s\n", name.c_str());
  const auto io = test::open_fixture("upsampler_" + name + ".io.safetensors");
  const LatentUpsampler up =
      LatentUpsampler::from_file(test::fixture("upsampler_" + name + ".weights.safetensors"));
  const video_vae::PerChannelStatistics stats =
      load_video_latent_statistics(test::fixture("vae_ltx23.weights.safetensors"));
  // The io file's copies of the statistics are the VAE file's.
  EXPECT_EQ(test::max_abs_diff(stats.mean_of_means,
                               io_tensor(*io, "in.vae.per_channel_statistics.mean-of-means")),
            0.0);
  const Tensor latent = io_tensor(*io, "in.latent");
  EXPECT_EQ(up.output_shape(latent.shape()), expected_out);
  int probes = 0;
  const Tensor out = upsample_video(latent, stats, up, [&](const std::string& n, const Tensor& v) {
    ++probes;
    expect_matches("inter." + n, v, io_tensor(*io, "inter." + n), kTol, kTol);
  });
  EXPECT_EQ(probes, 6);
  expect_matches("out.latent", out, io_tensor(*io, "out.latent"), kTol, kTol);
  expect_matches("out.f64.latent", out, io_tensor(*io, "out.f64.latent"), kTol, kTol);
}

TEST(UpsamplerGolden, SpatialX2MatchesTheReference) { check_case("x2", {2, 4, 2, 8, 8}); }
TEST(UpsamplerGolden, RationalX1_5MatchesTheReference) { check_case("x1_5", {2, 4, 2, 6, 6}); }
TEST(UpsamplerGolden, TemporalX2MatchesTheReference) {
  check_case("temporal_x2", {2, 4, 3, 4, 4});
}
TEST(UpsamplerGolden, RationalX2MatchesTheReference) {
  check_case("x2_rational", {2, 4, 2, 8, 8});
}

TEST(Upsampler, TheStoredBlurKernelIsTheBinomialOne) {
  auto f = test::open_fixture("upsampler_x1_5.weights.safetensors");
  EXPECT_EQ(test::max_abs_diff(f->tensor("upsampler.blur_down.kernel").to(DType::F32),
                               BlurDownsample::binomial_kernel(5)),
            0.0);
}

TEST(Upsampler, ConfigDefaultsAndErrors) {
  using nlohmann::json;
  const LatentUpsamplerConfig d = upsampler_config_from_json(json::object(), "u");
  EXPECT_EQ(d.in_channels, 128);
  EXPECT_EQ(d.mid_channels, 512);
  EXPECT_EQ(d.num_blocks_per_stage, 4);
  EXPECT_TRUE(d.spatial_upsample);
  EXPECT_FALSE(d.temporal_upsample);
  EXPECT_EQ(d.spatial_scale, 2.0);
  EXPECT_FALSE(d.rational_resampler);
  EXPECT_EQ(d.defaulted.size(), 8u);
  EXPECT_EQ(rational_for_scale(0.75), (std::pair<int64_t, int64_t>{3, 4}));
  EXPECT_EQ(rational_for_scale(4.0), (std::pair<int64_t, int64_t>{4, 1}));
  EXPECT_THROW(rational_for_scale(3.0), Error);
  EXPECT_THROW(upsampler_config_from_json({{"rational_resampler", true}, {"spatial_scale", 1.25}},
                                          "u"),
               Error);
  EXPECT_THROW(upsampler_config_from_json({{"spatial_upsample", false}}, "u"), Error);
  EXPECT_THROW(upsampler_config_from_json({{"mid_channels", 48}}, "u"), Error);
  EXPECT_THROW(upsampler_config_from_json({{"in_channels", "128"}}, "u"), Error);
  EXPECT_THROW(upsampler_config_from_json({{"dims", 2}, {"temporal_upsample", true},
                                           {"spatial_upsample", false}},
                                          "u"),
               Error);
  EXPECT_THROW(upsampler_config_from_json({{"_class_name", "Other"}}, "u"), Error);
  EXPECT_THROW(upsampler_config_from_metadata(json::object(), "u.safetensors"), Error);
  // A video VAE file is not an upsampler (no flat config / wrong keys).
  EXPECT_THROW(LatentUpsampler::from_file(test::fixture("vae_tsc.weights.safetensors")), Error);
  // The statistics must come from a file that has them.
  EXPECT_THROW(load_video_latent_statistics(test::fixture("upsampler_x2.weights.safetensors")),
               Error);
}

TEST(Upsampler, RejectsLatentsOfTheWrongWidth) {
  const LatentUpsampler up =
      LatentUpsampler::from_file(test::fixture("upsampler_x2.weights.safetensors"));
  EXPECT_THROW(up(Tensor::zeros({1, 5, 2, 4, 4})), Error);
  EXPECT_THROW(up(Tensor::zeros({1, 4, 4, 4})), Error);
}

}  // namespace
}  // namespace ltx::upsampler_test
