// The analytic FLOP models of `ltx bench` against hand counts and the issue's numbers.
#include "bench/flops.h"

#include <gtest/gtest.h>

#include "bench/presets.h"
#include "io/io_test_util.h"
#include "models/tiling.h"
#include "models/video_vae/diffusion_tiling.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using bench::FlopCount;
using bench::TransformerTokens;
using models::transformer::LTXModelConfig;
using models::transformer::LTXModelType;

const bench::FlopTerm& term(const FlopCount& f, const std::string& name) {
  for (const auto& t : f.terms)
    if (t.name == name) return t;
  static const bench::FlopTerm none{"<absent>", -1, -1};
  ADD_FAILURE() << "no FLOP term '" << name << "'";
  return none;
}

TEST(FlopModel, GemmAndAttentionFormulas) {
  EXPECT_EQ(bench::linear_flops(3, 5, 7), 2 * 3 * 5 * 7);
  EXPECT_EQ(bench::attention_flops(2, 3, 5, 7, 11), 4 * 2 * 3 * 5 * 7 * 11);
  FlopCount f;
  f.add("a", 10, 1);
  f.add("b", 5);
  f.add("a", 1, 2);
  ASSERT_EQ(f.terms.size(), 2u);
  EXPECT_EQ(f.gemm(), 16);
  EXPECT_EQ(f.attention(), 3);
  EXPECT_EQ(f.total(), 19);
  FlopCount g;
  g.add(f, 3);
  EXPECT_EQ(g.total(), 57);
  // 790 TFLOP of GEMMs take 1 s at 790 TFLOP/s; 69 TFLOP of attention 0.1 s at 690.
  FlopCount h;
  h.add("x", 790'000'000'000'000, 69'000'000'000'000);
  EXPECT_NEAR(bench::floor_ms(h, {}), 1100.0, 1e-9);
  test::expect_error_containing([&] { (void)bench::floor_ms(h, {0, 690}); }, {"positive"});
}

TEST(TransformerFlops, MatchesAHandCountOfASmallVideoOnlyModel) {
  LTXModelConfig c;
  c.model_type = LTXModelType::VideoOnly;
  c.num_layers = 1;
  c.num_attention_heads = 2;
  c.attention_head_dim = 4;  // D = 8
  c.in_channels = 3;
  c.out_channels = 5;
  c.cross_attention_dim = 6;
  c.apply_gated_attention = false;
  c.cross_attention_adaln = false;
  const FlopCount f = bench::transformer_flops(c, {1, 7, 0, 11, 0});
  // patchify 7x3 -> 8; AdaLN 256 -> 8 -> 8 -> 6*8 on 7 tokens; self-attention q,k,v,out 8 -> 8 on 7
  // rows; text attention q,out on 7 rows, k,v 6 -> 8 on 11 rows; FF 8 -> 32 -> 8; proj_out 8 -> 5.
  const int64_t gemm = 2 * 7 * 3 * 8 + 2 * 7 * (256 * 8 + 8 * 8 + 8 * 48) + 4 * 2 * 7 * 8 * 8 +
                       (2 * 2 * 7 * 8 * 8 + 2 * 2 * 11 * 6 * 8) + 2 * 2 * 7 * 8 * 32 + 2 * 7 * 8 * 5;
  const int64_t attention = 4 * 2 * 7 * 7 * 4 + 4 * 2 * 7 * 11 * 4;
  EXPECT_EQ(f.gemm(), gemm);
  EXPECT_EQ(f.attention(), attention);
  EXPECT_EQ(term(f, "video.self_attn").attention, 4 * 2 * 7 * 7 * 4);
  for (const auto& t : f.terms) EXPECT_EQ(t.name.rfind("audio", 0), std::string::npos) << t.name;
}

TEST(TransformerFlops, CountsGatesPromptAdaLNAndTheAudioVideoAttentionPerLayerAndSample) {
  LTXModelConfig c;  // AudioVideo, gated, cross-attention AdaLN (the 2.3 layout) at toy widths
  c.num_layers = 3;
  c.num_attention_heads = 2;
  c.attention_head_dim = 8;  // D = 16
  c.audio_num_attention_heads = 2;
  c.audio_attention_head_dim = 4;  // Da = 8
  c.in_channels = 4;
  c.out_channels = 4;
  c.audio_in_channels = 6;
  c.audio_out_channels = 6;
  c.cross_attention_dim = 16;
  c.audio_cross_attention_dim = 8;
  c.apply_gated_attention = true;
  c.cross_attention_adaln = true;
  const int64_t b = 2, tv = 10, ta = 3, lt = 5, d = 16, da = 8, h = 2;
  const FlopCount f = bench::transformer_flops(c, {b, tv, ta, lt, lt});
  // a2v: q video 16 -> 8, k/v audio 8 -> 8, out 8 -> 16, gate 16 -> 2 heads; product at width 8.
  EXPECT_EQ(term(f, "a2v_attn").gemm, 3 * (2 * b * tv * d * da + 2 * 2 * b * ta * da * da +
                                           2 * b * tv * da * d + 2 * b * tv * d * h));
  EXPECT_EQ(term(f, "a2v_attn").attention, 3 * 4 * b * tv * ta * da);
  EXPECT_EQ(term(f, "v2a_attn").gemm, 3 * (2 * b * ta * da * da + 2 * 2 * b * tv * d * da +
                                           2 * b * ta * da * da + 2 * b * ta * da * h));
  EXPECT_EQ(term(f, "v2a_attn").attention, 3 * 4 * b * ta * tv * da);
  // Nine AdaLN rows per token; the prompt AdaLN once per sample (on sigma).
  EXPECT_EQ(term(f, "video.adaln").gemm, 2 * b * tv * (256 * d + d * d + d * 9 * d));
  EXPECT_EQ(term(f, "audio.prompt_adaln").gemm, 2 * b * (256 * da + da * da + da * 2 * da));
  // A/V scale-shift per token (4 rows) plus the gate from the other stream's sigma (1 row).
  EXPECT_EQ(term(f, "video.av_adaln").gemm,
            2 * b * tv * (256 * d + d * d + d * 4 * d) + 2 * b * (256 * d + d * d + d * d));
  EXPECT_EQ(term(f, "video.self_attn").gemm, 3 * (4 * 2 * b * tv * d * d + 2 * b * tv * d * h));
  EXPECT_EQ(term(f, "audio.text_attn").attention, 3 * 4 * b * ta * lt * da);
  // Without audio tokens the audio stream and both A/V attentions vanish.
  const FlopCount v = bench::transformer_flops(c, {b, tv, 0, lt, 0});
  for (const auto& t : v.terms) {
    EXPECT_EQ(t.name.find("audio"), std::string::npos) << t.name;
    EXPECT_EQ(t.name.find("a2v"), std::string::npos) << t.name;
    EXPECT_EQ(t.name.find("av_adaln"), std::string::npos) << t.name;
  }
  test::expect_error_containing([&] { (void)bench::transformer_flops(c, {1, 0, 0, 1, 1}); },
                                {"no stream has tokens"});
  test::expect_error_containing([&] { (void)bench::transformer_flops(c, {0, 1, 1, 1, 1}); },
                                {"batch"});
}

// The issue (and bench_official.py's analytic_flops): 202 / 1149 TFLOP per step for LTX-2.3 22B,
// 121 frames at 768x512 / 1536x1024 (6144 / 24576 video tokens), 126 audio tokens, 1024 text.
TEST(TransformerFlops, ReproducesTheIssueNumbersForLtx23At768x512And1536x1024) {
  const LTXModelConfig c = bench::preset("ltx23-22b").transformer_config();
  const FlopCount small = bench::transformer_flops(c, {1, 6144, 126, 1024, 1024});
  const FlopCount large = bench::transformer_flops(c, {1, 24576, 126, 1024, 1024});
  EXPECT_NEAR(static_cast<double>(small.total()) / 1e12, 202.0, 202.0 * 0.02);
  EXPECT_NEAR(static_cast<double>(large.total()) / 1e12, 1149.0, 1149.0 * 0.02);
  // Exactly the official script's counts (linear + attention).
  EXPECT_EQ(small.gemm(), 166747864825856);
  EXPECT_EQ(small.attention(), 35300404887552);
  EXPECT_EQ(large.gemm(), 651825766203392);
  EXPECT_EQ(large.attention(), 497272455954432);
  // The issue's floor (GEMMs at 790, attention at 690 TFLOP/s): ~264 / ~1544 ms.
  EXPECT_NEAR(bench::floor_ms(small, {}), 264.0, 264.0 * 0.02);
  EXPECT_NEAR(bench::floor_ms(large, {}), 1544.0, 1544.0 * 0.02);
}

// A decoder config with three blocks (run reversed): res_x(2), compress_space(/2), res_x(1).
models::video_vae::DecoderConfig small_decoder() {
  const nlohmann::json vae = {
      {"_class_name", "CausalVideoAutoencoder"}, {"dims", 3}, {"in_channels", 3}, {"out_channels", 3},
      {"latent_channels", 3}, {"patch_size", 1}, {"norm_layer", "pixel_norm"},
      {"decoder_blocks", nlohmann::json::parse(
                             R"([["res_x", {"num_layers": 1}], ["compress_space", {"multiplier": 2}],
                                 ["res_x", {"num_layers": 2}]])")},
      {"causal_decoder", false}, {"timestep_conditioning", false}, {"decoder_base_channels", 4},
      {"spatial_padding_mode", "zeros"}};
  return models::video_vae::decoder_config_from_json(vae, "test");
}

TEST(VaeFlops, MatchesAHandCountOfASmallDecoder) {
  const auto cfg = small_decoder();
  ASSERT_EQ(cfg.bottleneck_channels(), 8);
  const FlopCount f = bench::conv_decoder_flops(cfg, {1, 3, 2, 3, 4});
  const int64_t v0 = 2 * 3 * 4, v1 = 2 * 6 * 8, k3 = 27;
  EXPECT_EQ(term(f, "conv_in").gemm, 2 * v0 * 3 * 8 * k3);
  EXPECT_EQ(term(f, "up_blocks.0").gemm, 2 * 2 * (2 * v0 * 8 * 8 * k3));  // 2 layers x 2 convs
  EXPECT_EQ(term(f, "up_blocks.1").gemm, 2 * v0 * 8 * 16 * k3);           // 8 -> 4 * 8 / 2
  EXPECT_EQ(term(f, "up_blocks.2").gemm, 2 * (2 * v1 * 4 * 4 * k3));      // at 2x the area
  EXPECT_EQ(term(f, "conv_out").gemm, 2 * v1 * 4 * 3 * k3);
  EXPECT_EQ(f.attention(), 0);
  EXPECT_EQ(f.terms.size(), 5u);
  // Batch scales everything.
  EXPECT_EQ(bench::conv_decoder_flops(cfg, {3, 3, 2, 3, 4}).total(), 3 * f.total());
  test::expect_error_containing([&] { (void)bench::conv_decoder_flops(cfg, {1, 4, 2, 3, 4}); },
                                {"expected a latent [B, 3"});
}

TEST(VaeFlops, TheLtx23DecoderAt1536x1024x121MatchesAStageByStageCount) {
  const auto cfg = bench::preset("ltx23-22b").decoder_config();
  const FlopCount f = bench::conv_decoder_flops(cfg, {1, 128, 16, 32, 48});
  // Grids after each upsampling: compress_all (x2 all), compress_all, compress_time, compress_space.
  const int64_t v0 = 16 * 32 * 48, v1 = 31 * 64 * 96, v2 = 61 * 128 * 192, v3 = 121 * 128 * 192,
                v4 = 121 * 256 * 384, k = 27;
  const int64_t expected = 2 * v0 * 128 * 1024 * k            // conv_in 128 -> 1024
                           + 4 * 2 * v0 * 1024 * 1024 * k     // res_x(2) at 1024
                           + 2 * v0 * 1024 * 4096 * k         // compress_all /2: 1024 -> 8 * 512
                           + 4 * 2 * v1 * 512 * 512 * k       // res_x(2) at 512
                           + 2 * v1 * 512 * 4096 * k          // compress_all /1
                           + 8 * 2 * v2 * 512 * 512 * k       // res_x(4) at 512
                           + 2 * v2 * 512 * 512 * k           // compress_time /2: 512 -> 2 * 256
                           + 12 * 2 * v3 * 256 * 256 * k      // res_x(6) at 256
                           + 2 * v3 * 256 * 512 * k           // compress_space /2: 256 -> 4 * 128
                           + 8 * 2 * v4 * 128 * 128 * k       // res_x(4) at 128
                           + 2 * v4 * 128 * 48 * k;           // conv_out 128 -> 3 * 4 * 4
  EXPECT_EQ(f.total(), expected);
}

TEST(VaeFlops, TiledDecodeCountsEveryTileIncludingOverlaps) {
  const auto cfg = bench::preset("ltx23-22b").decoder_config();
  const Shape latent = {1, 128, 16, 32, 48};
  const FlopCount whole = bench::conv_decoder_flops(cfg, latent);
  EXPECT_EQ(bench::tiled_decoder_flops(cfg, latent, std::nullopt).total(), whole.total());
  // Two tiles along the width, overlapping by 2 latent columns: 25 + 25 columns of work.
  const models::tiling::TileCountConfig two{{}, {}, {2, 2}};
  const FlopCount tiled = bench::tiled_decoder_flops(cfg, latent, two);
  EXPECT_EQ(tiled.total(), 2 * bench::conv_decoder_flops(cfg, {1, 128, 16, 32, 25}).total());
  // The pipelines' automatic tiling costs more than one tile (overlaps decode twice).
  const auto autotile = models::tiling::auto_tiling_config(1024, 1536);
  EXPECT_GT(bench::tiled_decoder_flops(cfg, latent, autotile).total(), whole.total());
}

// ---------------------------------------------------------------- diffusion decoder

using models::video_vae::Stage5Attention;

TEST(DiffusionDecoderFlops, NeighbourhoodWindowsAreClampedToTheAxes) {
  EXPECT_EQ(bench::na_window({11, 11, 11}, {121, 256, 106}), 1331);
  EXPECT_EQ(bench::na_window({3, 7, 7}, {2, 5, 40}), 2 * 5 * 7);
  EXPECT_EQ(bench::na_window({3, 1, 3}, {1, 1, 1}), 1);
}

// The LTX-2.5 decoder (the preset's config.vae) at 1536x1024x121 in one tile, the pipelines'
// CHUNKED_EAGER layout, against a stage-by-stage count.
TEST(DiffusionDecoderFlops, TheLtx25DecodeAt1536x1024x121MatchesAStageByStageCount) {
  const auto cfg = bench::preset("ltx25-22b").diffusion_decoder_config();
  int64_t tiles = 0;
  const FlopCount f = bench::diffusion_decoder_flops(cfg, {1, 128, 16, 32, 48}, std::nullopt,
                                                     Stage5Attention::WChunked, 4, &tiles);
  EXPECT_EQ(tiles, 1);
  // Stages 1-3 on the latent plus 2 ghost frames; the upsamples (1,2,2), (2,1,1), (2,2,2) drop
  // the duplicated leading frame of every time doubling.
  const int64_t v1 = 18 * 32 * 48, v2 = 18 * 64 * 96, v3 = 35 * 64 * 96, v4 = 69 * 128 * 192;
  EXPECT_EQ(term(f, "conv_in").gemm, 2 * v1 * 128 * 2048);
  // 4 blocks at 2048 (32 heads of 64), window 3 x 7 x 7; SwiGLU hidden 8192.
  EXPECT_EQ(term(f, "stage1.attn").gemm, 4 * (2 * v1 * 2048 * 6144 + 2 * v1 * 2048 * 2048));
  EXPECT_EQ(term(f, "stage1.attn").attention, 4 * (4 * 32 * v1 * 147 * 64));
  EXPECT_EQ(term(f, "stage1.mlp").gemm, 4 * 3 * (2 * v1 * 2048 * 8192));
  EXPECT_EQ(term(f, "upsamples.0").gemm, 2 * v1 * 2048 * 4096);  // 2048 -> 4 cells x 1024
  EXPECT_EQ(term(f, "stage2.attn").attention, 6 * (4 * 16 * v2 * 147 * 64));
  EXPECT_EQ(term(f, "upsamples.1").gemm, 2 * v2 * 1024 * 1024);  // 1024 -> 2 cells x 512
  EXPECT_EQ(term(f, "stage3.attn").attention, 4 * (4 * 8 * v3 * 75 * 64));
  EXPECT_EQ(term(f, "upsamples.2").gemm, 2 * v3 * 512 * 4096);  // 512 -> 8 cells x 512
  // Stage 4 on the whole 69-frame feature (61 content + 8 ghost frames); the ghost frames are
  // cropped before upsamples[3] (512 -> 8 cells x 256).
  EXPECT_EQ(term(f, "stage4.attn").attention, 2 * (4 * 8 * v4 * 75 * 64));
  EXPECT_EQ(term(f, "upsamples.3").gemm, int64_t{2} * (61 * 128 * 192) * 512 * 2048);
  // Stage 5: 121 x 256 x 384 tokens of 256 channels (4 heads), 8 blocks, window 11^3, 1 step.
  const int64_t n5 = 121 * 256 * 384;
  EXPECT_EQ(term(f, "stage5.conv_in_x_t").gemm, 2 * n5 * 48 * 256);
  EXPECT_EQ(term(f, "stage5.context_proj").gemm, 8 * 2 * n5 * 256 * 256);
  EXPECT_EQ(term(f, "stage5.attn").gemm, 8 * (2 * n5 * 256 * 768 + 2 * n5 * 256 * 256));
  EXPECT_EQ(term(f, "stage5.attn").attention, 8 * (4 * 4 * n5 * 1331 * 64));
  // 4 W chunks of 96 columns, each run with 5 halo columns per side: 40 extra columns.
  const int64_t halo = 121 * 256 * 40;
  EXPECT_EQ(term(f, "stage5.attn_halo").gemm, 8 * (2 * halo * 256 * 768 + 2 * halo * 256 * 256));
  EXPECT_EQ(term(f, "stage5.attn_halo").attention, 8 * (4 * 4 * halo * 1331 * 64));
  EXPECT_EQ(term(f, "stage5.mlp").gemm, 8 * 3 * (2 * n5 * 256 * 1024));
  EXPECT_EQ(term(f, "stage5.conv_out").gemm, 2 * n5 * 256 * 48);
  EXPECT_EQ(f.terms.size(), 19u);
  // The totals the docs quote (bench/README.md).
  EXPECT_NEAR(static_cast<double>(f.total()) / 1e12, 439.7, 0.05);
  EXPECT_NEAR(static_cast<double>(f.attention()) / 1e12, 144.4, 0.05);
  EXPECT_NEAR(bench::floor_ms(f, {}), 583.1, 0.1);
}

TEST(DiffusionDecoderFlops, FullVolumeAttentionHasNoHaloAndTheSameCore) {
  const auto cfg = bench::preset("ltx25-22b").diffusion_decoder_config();
  const Shape latent = {1, 128, 16, 32, 48};
  const FlopCount chunked = bench::diffusion_decoder_flops(cfg, latent, std::nullopt);
  const FlopCount full =
      bench::diffusion_decoder_flops(cfg, latent, std::nullopt, Stage5Attention::FullVolume);
  EXPECT_EQ(term(full, "stage5.attn").gemm, term(chunked, "stage5.attn").gemm);
  EXPECT_EQ(term(full, "stage5.attn").attention, term(chunked, "stage5.attn").attention);
  for (const auto& t : full.terms) EXPECT_NE(t.name, "stage5.attn_halo");
  // FullVolume crops the ghost frames after upsamples[3], so it upsamples all 69 frames.
  EXPECT_EQ(term(full, "upsamples.3").gemm, int64_t{2} * (69 * 128 * 192) * 512 * 2048);
  EXPECT_EQ(full.total() - term(full, "upsamples.3").gemm + term(chunked, "stage5.attn_halo").gemm +
                term(chunked, "stage5.attn_halo").attention,
            chunked.total() - term(chunked, "upsamples.3").gemm);
  // One chunk: the slab is the volume plus edge copies, still counted.
  const FlopCount one = bench::diffusion_decoder_flops(cfg, latent, std::nullopt, Stage5Attention::WChunked, 1);
  EXPECT_EQ(term(one, "stage5.attn_halo").attention, 8 * (int64_t{4} * 4 * (121 * 256 * 10) * 1331 * 64));
  test::expect_error_containing(
      [&] { (void)bench::diffusion_decoder_flops(cfg, latent, std::nullopt, Stage5Attention::WChunked, 0); },
      {"w_chunks"});
  test::expect_error_containing([&] { (void)bench::diffusion_decoder_flops(cfg, {1, 16, 2, 2, 2}, std::nullopt); },
                                {"expected a latent [B, 128"});
}

TEST(DiffusionDecoderFlops, TilesRepeatStagesFourAndFiveOnly) {
  const auto cfg = bench::preset("ltx25-22b").diffusion_decoder_config();
  const Shape latent = {1, 128, 16, 32, 48};
  const FlopCount whole = bench::diffusion_decoder_flops(cfg, latent, std::nullopt);
  // The reference's recommendation for a 20 GiB budget splits the decode.
  models::video_vae::DiffusionTilingBudget budget;
  budget.free_bytes = int64_t{20} << 30;
  const auto tiling = models::video_vae::recommended_decode_tiling(
      models::video_vae::diffusion_tiling_geometry(cfg), 1024, 1536, 121, budget);
  int64_t tiles = 0;
  const FlopCount tiled =
      bench::diffusion_decoder_flops(cfg, latent, tiling, Stage5Attention::WChunked, 4, &tiles);
  EXPECT_GT(tiles, 1);
  for (const char* once : {"conv_in", "stage1.attn", "stage2.mlp", "stage3.attn", "upsamples.2"})
    EXPECT_EQ(term(tiled, once).gemm, term(whole, once).gemm) << once;
  // Overlapping tiles recompute stages 4 and 5 where they overlap.
  for (const char* per_tile : {"stage4.attn", "upsamples.3", "stage5.attn", "stage5.mlp"})
    EXPECT_GT(term(tiled, per_tile).gemm, term(whole, per_tile).gemm) << per_tile;
  // A tiling that keeps every axis whole is the single tile.
  models::tiling::TileSizeConfig whole_axes;
  whole_axes.frames = {128, 40};
  whole_axes.height = {1024, 160};
  whole_axes.width = {1536, 160};
  EXPECT_EQ(bench::diffusion_decoder_flops(cfg, latent, models::tiling::TilingConfig(whole_axes)).total(),
            whole.total());
}

}  // namespace
}  // namespace ltx
