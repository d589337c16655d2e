// Tiled decoding's host memory grows with the tile, not with the video: measured with the
// Storage allocation counter (ltx::host_allocation_stats) on the tiny ltx23 decoder, and the
// estimator behind docs/VIDEO_VAE.md checked against those measurements.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/storage.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/memory_estimate.h"
#include "support/test_support.h"

namespace ltx::video_vae_memory_test {
namespace {

using namespace models;
using namespace models::video_vae;

// Peak bytes allocated while `fn` runs, above what was live before it.
template <typename F>
int64_t peak_during(F&& fn) {
  reset_host_allocation_peak();
  const int64_t before = host_allocation_stats().live_bytes;
  fn();
  return host_allocation_stats().peak_bytes - before;
}

const ConvVideoDecoder& tiny_decoder() {
  static const ConvVideoDecoder d =
      ConvVideoDecoder::from_file(test::fixture("vae_ltx23.weights.safetensors"));
  return d;
}

// 3 latent frames per tile (4 after the causal shift), 2 latents (64 pixels) wide.
const tiling::TilingConfig kTiles =
    tiling::TileSizeConfig{tiling::DimensionSizeConfig(24, 8), {}, tiling::DimensionSizeConfig(64, 32)};
const tiling::TilingConfig kFrameTiles =
    tiling::TileSizeConfig{tiling::DimensionSizeConfig(24, 8), {}, {}};

int64_t tiled_peak(const Tensor& latent) {
  return peak_during([&] {
    int64_t frames = 0;
    tiny_decoder().tiled_decode(latent, kFrameTiles, std::nullopt, {},
                                [&](const Tensor& chunk) { frames += chunk.size(2); });
    EXPECT_EQ(frames, (latent.size(2) - 1) * 8 + 1);
  });
}

TEST(VideoVaeMemory, TiledDecodePeakDoesNotGrowWithTheVideoLength) {
  // Both already have full-size middle tiles; the long one has twice as many of them.
  const Tensor short_latent = test::random_tensor({1, 4, 7, 1, 1}, 1);
  const Tensor long_latent = test::random_tensor({1, 4, 13, 1, 1}, 2);
  (void)tiny_decoder();  // load the weights outside the measurements
  const int64_t short_peak = tiled_peak(short_latent);
  const int64_t long_peak = tiled_peak(long_latent);
  const int64_t untiled_short = peak_during([&] { (void)tiny_decoder()(short_latent); });
  const int64_t untiled_long = peak_during([&] { (void)tiny_decoder()(long_latent); });
  std::printf("    peak: tiled %.2f MB (49 frames) / %.2f MB (97 frames); untiled %.2f MB / %.2f "
              "MB\n",
              short_peak / 1e6, long_peak / 1e6, untiled_short / 1e6, untiled_long / 1e6);
  // Same tiles, twice the frames: the same peak (the latent input itself is a few KB)...
  EXPECT_LE(long_peak, short_peak + short_peak / 50);
  // ...while the untiled decode grows with the video: the measurement can tell the difference.
  EXPECT_GT(untiled_long, untiled_short + untiled_short / 2);
  EXPECT_GT(untiled_long, long_peak + long_peak / 2);
}

TEST(VideoVaeMemory, TheEstimateBoundsTheMeasuredPeak) {
  const DecoderConfig& cfg = tiny_decoder().config();  // loaded before any measurement
  const Tensor latent = test::random_tensor({1, 4, 5, 1, 3}, 3);
  for (const bool tiled : {false, true}) {
    SCOPED_TRACE(tiled ? "tiled" : "untiled");
    std::optional<tiling::TilingConfig> config;
    if (tiled) config = kTiles;
    const DecodeMemoryEstimate e = estimate_decode_memory(cfg, latent.shape(), config);
    const int64_t measured = peak_during([&] {
      if (tiled)
        tiny_decoder().tiled_decode(latent, config, std::nullopt, {}, [](const Tensor&) {});
      else
        (void)tiny_decoder()(latent);
    });
    const int64_t estimated = e.buffer_bytes + e.tile_peak_bytes;
    std::printf("    %s: measured %.3f MB, estimated %.3f MB (buffers %.3f, tile %.3f)\n",
                tiled ? "tiled" : "untiled", measured / 1e6, estimated / 1e6,
                e.buffer_bytes / 1e6, e.tile_peak_bytes / 1e6);
    EXPECT_GE(estimated, measured);
    EXPECT_LE(estimated, measured + measured / 4);
  }
  // The estimator's weight count is the loaded decoder's.
  const auto file = io::SafetensorsFile::open(test::fixture("vae_ltx23.weights.safetensors"));
  int64_t params = 0;
  for (const auto& info : file->infos())
    if (info.name.rfind("vae.decoder.", 0) == 0 ||
        info.name.rfind("vae.per_channel_statistics.", 0) == 0)
      params += info.numel();
  EXPECT_EQ(decoder_parameter_count(cfg), params);
}

// The figure in docs/VIDEO_VAE.md: 121 frames at 1536x1024 with the real LTX-2.3 decoder config
// (128 latent channels, base 128, res_x 4/6/4/2/2, zeros padding), the pipelines' automatic
// tiling versus no tiling.
TEST(VideoVaeMemory, Real23DecoderAt1536x1024For121FramesTiledNeedsUnder8GiB) {
  const nlohmann::json vae = nlohmann::json::parse(R"({
    "latent_channels": 128, "decoder_base_channels": 128, "spatial_padding_mode": "zeros",
    "timestep_conditioning": false, "causal_decoder": false, "patch_size": 4,
    "decoder_blocks": [["res_x", {"num_layers": 4}], ["compress_space", {"multiplier": 2}],
                       ["res_x", {"num_layers": 6}], ["compress_time", {"multiplier": 2}],
                       ["res_x", {"num_layers": 4}], ["compress_all", {"multiplier": 1}],
                       ["res_x", {"num_layers": 2}], ["compress_all", {"multiplier": 2}],
                       ["res_x", {"num_layers": 2}]]})");
  const DecoderConfig cfg = decoder_config_from_json(vae, "LTX-2.3 VAE");
  const Shape latent{1, 128, 16, 32, 48};  // 121 x 1024 x 1536 pixels
  const DecodeMemoryEstimate tiled =
      estimate_decode_memory(cfg, latent, tiling::auto_tiling_config(1024, 1536));
  const DecodeMemoryEstimate untiled = estimate_decode_memory(cfg, latent, std::nullopt);
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  std::printf("    2.3 decoder: %.1fM parameters (%.2f GiB f32)\n",
              decoder_parameter_count(cfg) / 1e6, tiled.weight_bytes / kGiB);
  std::printf("    tiled (auto, %lld tiles, largest %s): buffers %.2f GiB + tile %.2f GiB -> total "
              "%.2f GiB\n",
              static_cast<long long>(tiled.tiles), tiled.largest_tile.str().c_str(),
              tiled.buffer_bytes / kGiB, tiled.tile_peak_bytes / kGiB, tiled.total_bytes() / kGiB);
  std::printf("    untiled: forward %.2f GiB -> total %.2f GiB\n", untiled.tile_peak_bytes / kGiB,
              untiled.total_bytes() / kGiB);
  EXPECT_LT(tiled.total_bytes(), 8 * kGiB);  // comfortably inside 24 GiB
  EXPECT_GT(untiled.total_bytes(), 2 * tiled.total_bytes());
}

// The conv decoder's tiling from the memory free under a GPU budget: the pipelines' layout while
// its estimate fits (the 1536x1024x121 decode in what a 16 or 24 GiB budget leaves once the
// transformer is freed), smaller tiles below that, the smallest when nothing fits.
TEST(VideoVaeMemory, BudgetedTilingKeepsTheDefaultWhileItFitsAndShrinksBelow) {
  const nlohmann::json vae = nlohmann::json::parse(R"({
    "latent_channels": 128, "decoder_base_channels": 128, "spatial_padding_mode": "zeros",
    "timestep_conditioning": false, "causal_decoder": false, "patch_size": 4,
    "decoder_blocks": [["res_x", {"num_layers": 4}], ["compress_space", {"multiplier": 2}],
                       ["res_x", {"num_layers": 6}], ["compress_time", {"multiplier": 2}],
                       ["res_x", {"num_layers": 4}], ["compress_all", {"multiplier": 1}],
                       ["res_x", {"num_layers": 2}], ["compress_all", {"multiplier": 2}],
                       ["res_x", {"num_layers": 2}]]})");
  const DecoderConfig cfg = decoder_config_from_json(vae, "LTX-2.3 VAE");
  const Shape latent{1, 128, 16, 32, 48};  // 121 x 1024 x 1536 pixels
  constexpr int64_t kGiB = int64_t{1} << 30;
  const tiling::TilingConfig standard = tiling::auto_tiling_config(1024, 1536);
  const auto need = [&](const tiling::TilingConfig& t) {
    const DecodeMemoryEstimate e = estimate_decode_memory(cfg, latent, t);
    return e.total_bytes() - e.weight_bytes;
  };
  for (int64_t free : {12 * kGiB, 20 * kGiB})
    EXPECT_EQ(tiling::describe(budgeted_decode_tiling(cfg, latent, free)), tiling::describe(standard));
  const int64_t tight = need(standard) - kGiB;
  const tiling::TileSizeConfig smaller = budgeted_decode_tiling(cfg, latent, tight);
  EXPECT_NE(tiling::describe(smaller), tiling::describe(standard));
  EXPECT_LE(need(smaller), tight);
  EXPECT_LT(smaller.height.tile_size * smaller.width.tile_size,
            std::get<tiling::TileSizeConfig>(standard).height.tile_size *
                std::get<tiling::TileSizeConfig>(standard).width.tile_size);
  // Nothing fits one byte: the smallest layout (256 px, 48 frames) rather than no tiling.
  const tiling::TileSizeConfig least = budgeted_decode_tiling(cfg, latent, 1);
  EXPECT_LE(need(least), need(smaller));
  EXPECT_EQ(least.frames.tile_size, 48);
}

}  // namespace
}  // namespace ltx::video_vae_memory_test
