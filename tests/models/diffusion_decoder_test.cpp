// The LTX-2.5 diffusion video decoder against the golden fixtures (diffdec_ltx25: the shipped
// 1-step x0 config; diffdec_legacy: the code defaults, 2 Euler steps on a latent below the size
// floor, gated checkpoint), plus geometry and loading checks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/vae_test_util.h"
#include "models/video_vae/diffusion_video_decoder.h"
#include "models/video_vae/video_decoder.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/shape.h"
#include "sampling/noise.h"

namespace ltx::diffusion_decoder_test {
namespace {

using namespace models;
using namespace models::video_vae;
using test::expect_matches;
using test::io_tensor;

constexpr double kTol = 1e-5;     // rel L2 (README-ltx25.md §5)
constexpr double kMaxRel = 3e-5;  // max |d| / max |ref|

const std::string kLtx25 = "diffdec_ltx25.weights.safetensors";
const std::string kLegacy = "diffdec_legacy.weights.safetensors";
const std::string kGated = "diffdec_legacy_gated.weights.safetensors";

// The reference's draw: torch.Generator().manual_seed(seed).randn(canvas).
Tensor noise_of(const io::SafetensorsFile& io, const Shape& canvas) {
  sampling::TorchCpuGenerator gen(io.metadata_json("notes")["noise"]["seed"].get<int64_t>());
  return gen.randn(canvas);
}

const NoiseFn kNoNoise = [](const Shape& s) -> Tensor { fail("unexpected noise draw ", s.str()); };

TEST(DiffusionDecoder, ConfigFollowsTheFileAndTheCodeDefaults) {
  const auto f = test::open_fixture(kLtx25);
  const nlohmann::json meta = f->metadata_json();
  EXPECT_TRUE(is_diffusion_video_vae(meta));
  EXPECT_FALSE(
      is_diffusion_video_vae(test::open_fixture("vae_ltx23.weights.safetensors")->metadata_json()));
  const DiffusionDecoderConfig c = diffusion_decoder_config_from_metadata(meta, kLtx25);
  EXPECT_EQ(c.in_channels, 16);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.stage_channels, (std::vector<int64_t>{128, 64, 32, 32, 16}));
  EXPECT_EQ(c.stage_kernels[1], (Axis3{3, 3, 5}));
  EXPECT_EQ(c.stage5_kernel, (Axis3{7, 7, 7}));
  EXPECT_EQ(c.t_emb_dim, 32);
  EXPECT_EQ(c.default_num_inference_steps, 1);
  EXPECT_EQ(c.timestep_scale_multiplier, 1000.0);
  EXPECT_EQ(c.model_output_type, ModelOutputType::X0);
  EXPECT_EQ(c.diffusion_channels(), 16);
  // The legacy file omits steps / scale / output type: the code defaults (2, 1.0, v).
  const DiffusionDecoderConfig l =
      diffusion_decoder_config_from_metadata(test::open_fixture(kLegacy)->metadata_json(), kLegacy);
  EXPECT_EQ(l.default_num_inference_steps, 2);
  EXPECT_EQ(l.timestep_scale_multiplier, 1.0);
  EXPECT_EQ(l.model_output_type, ModelOutputType::Velocity);
  EXPECT_EQ(l.diffusion_channels(), 32);
  EXPECT_EQ(l.context_channels(), 16);
  // An empty decoder section: every architecture value is the code default (t_emb_dim 384).
  const DiffusionDecoderConfig d = diffusion_decoder_config_from_json(
      nlohmann::json::parse(R"({"_class_name": "CausalDiffusionVAE", "decoder": {}})"), "x");
  EXPECT_EQ(d.t_emb_dim, 384);
  EXPECT_EQ(d.stage_channels, (std::vector<int64_t>{1024, 512, 256, 256, 128}));
  EXPECT_EQ(d.stage5_kernel, (Axis3{3, 7, 7}));
  EXPECT_EQ(d.in_channels, 128);
}

TEST(DiffusionDecoder, ConfigRejectsInconsistentArchitectures) {
  auto cfg = [](const char* decoder) {
    return nlohmann::json::parse(
        str(R"({"_class_name": "CausalDiffusionVAE", "decoder": )", decoder, "}"));
  };
  EXPECT_ERROR_HAS(diffusion_decoder_config_from_json(cfg(R"({"stage_channels": [64, 32]})"), "f"),
                   "expected 5 stage_channels");
  EXPECT_ERROR_HAS(diffusion_decoder_config_from_json(cfg(R"({"head_dim": 12})"), "f"), "head_dim");
  EXPECT_ERROR_HAS(diffusion_decoder_config_from_json(
                       cfg(R"({"stage_channels": [1024, 512, 256, 256, 96]})"), "f"),
                   "not a multiple of head_dim");
  EXPECT_ERROR_HAS(diffusion_decoder_config_from_json(
                       cfg(R"({"stage_channels": [1024, 1024, 256, 256, 128]})"), "f"),
                   "upsamples[0]");
  EXPECT_ERROR_HAS(
      diffusion_decoder_config_from_json(
          nlohmann::json::parse(R"({"decoder": {}, "model_output_type": "eps"})"), "f"),
      "model_output_type");
  EXPECT_ERROR_HAS(diffusion_decoder_config_from_json(cfg(R"({"stage5_kernel": [3, 7]})"), "f"),
                   "stage5_kernel");
  // The conv decoder refuses the diffusion file and vice versa.
  EXPECT_ERROR_HAS(DiffusionVideoDecoder::from_file(test::fixture("vae_ltx23.weights.safetensors")),
                   "not a diffusion VAE");
}

TEST(DiffusionDecoder, GeometryMatchesTheReferenceNotes) {
  const DiffusionVideoDecoder dec = DiffusionVideoDecoder::from_file(test::fixture(kLtx25));
  EXPECT_EQ(dec.stage_min_tile_sizes(), (Axis3{3, 2, 3}));
  EXPECT_EQ(dec.tile_min_sizes(), (Axis3{4, 5, 5}));
  EXPECT_EQ(dec.tile_halos().first, (Axis3{2, 4, 4}));
  EXPECT_EQ(dec.tile_halos().second, (Axis3{3, 3, 3}));
  EXPECT_EQ(dec.trailing_ghost_frames(), 2);
  EXPECT_EQ(
      recommended_pixel_overlaps(dec.tile_halos(), stage4_to_pixel_scale_factors({2, 2, 2}, 4)),
      (std::pair<int64_t, int64_t>{8, 32}));
  const DiffusionVideoDecoder legacy = DiffusionVideoDecoder::from_file(test::fixture(kLegacy));
  EXPECT_EQ(legacy.stage_min_tile_sizes(), (Axis3{3, 2, 2}));
  EXPECT_EQ(legacy.tile_min_sizes(), (Axis3{3, 3, 3}));
  EXPECT_EQ(legacy.tile_halos().first, (Axis3{1, 1, 1}));
  EXPECT_EQ(legacy.tile_halos().second, (Axis3{1, 2, 2}));
  // The real 2.5 file: 40 frames / 160 px overlaps, a 3 x 7 x 7 latent floor.
  DiffusionDecoderConfig real;
  real.stage_channels = {2048, 1024, 512, 512, 256};
  real.stage_kernels = {{3, 7, 7}, {3, 7, 7}, {3, 5, 5}, {3, 5, 5}, {11, 11, 11}};
  real.stage5_kernel = {11, 11, 11};
  EXPECT_EQ(all_stages_min_tile_size(real.stage_kernels, real.upsamples, real.stage5_kernel),
            (Axis3{3, 7, 7}));
  const auto halos = compute_tile_halos({3, 5, 5}, 2, {11, 11, 11}, 8, {2, 2, 2});
  EXPECT_EQ(recommended_pixel_overlaps(halos, stage4_to_pixel_scale_factors({2, 2, 2}, 4)),
            (std::pair<int64_t, int64_t>{40, 160}));
}

TEST(DiffusionDecoder, TileScheduleMatchesTheReferenceNotes) {
  const DiffusionVideoDecoder dec = DiffusionVideoDecoder::from_file(test::fixture(kLtx25));
  const auto io = test::open_fixture("diffdec_ltx25.test.io.safetensors");
  const nlohmann::json tiled = io->metadata_json("notes")["tiled"];
  tiling::TileSizeConfig cfg;
  cfg.frames = {14, 8};
  cfg.width = {64, 32};
  const auto tiles = prepare_tile_schedule({9, 8, 12}, {1, 3, 17, 64, 96}, 1, 32, cfg, {2, 2, 2}, 4,
                                           dec.tile_min_sizes(), dec.tile_halos());
  ASSERT_EQ(tiles.size(), tiled["tiles"].size());
  for (size_t i = 0; i < tiles.size(); ++i) {
    const auto& ref = tiled["tiles"][i];
    for (int a = 0; a < 3; ++a) {
      EXPECT_EQ(tiles[i].in[1 + a].start, ref["stage4_in_t_h_w"][a][0].get<int64_t>()) << i;
      EXPECT_EQ(tiles[i].in[1 + a].stop, ref["stage4_in_t_h_w"][a][1].get<int64_t>()) << i;
      const auto& px = ref["pixel_out_f_h_w"][a];
      if (!px[0].is_null()) {
        EXPECT_EQ(tiles[i].out[2 + a].start, px[0].get<int64_t>()) << i;
      }
      if (!px[1].is_null()) {
        EXPECT_EQ(tiles[i].out[2 + a].stop, px[1].get<int64_t>()) << i;
      }
      const auto mask = ref["masks_f_h_w"][a].get<std::vector<float>>();
      ASSERT_EQ(tiles[i].masks[2 + a].size(), mask.size()) << i << " axis " << a;
      for (size_t j = 0; j < mask.size(); ++j)
        EXPECT_NEAR(tiles[i].masks[2 + a][j], mask[j], 1e-6) << i << " axis " << a;
    }
  }
  // Overlaps below the halos' floor are refused.
  tiling::TileSizeConfig small;
  small.width = {64, 16};
  EXPECT_ERROR_HAS(prepare_tile_schedule({9, 8, 12}, {1, 3, 17, 64, 96}, 1, 32, small, {2, 2, 2}, 4,
                                         dec.tile_min_sizes(), dec.tile_halos()),
                   "32");
}

TEST(DiffusionDecoder, TheCpuGeneratorReproducesTheRecordedNoise) {
  for (const char* name :
       {"diffdec_ltx25.test.io.safetensors", "diffdec_legacy.test.io.safetensors"}) {
    const auto io = test::open_fixture(name);
    const Tensor frame0 = io_tensor(*io, "in.noise.frames_0_1");
    const auto draw = io->metadata_json("notes")["noise"]["draws"][0].get<std::vector<int64_t>>();
    const Tensor noise = noise_of(*io, Shape(draw));
    EXPECT_EQ(test::max_abs_diff(noise.narrow(2, 0, 1), frame0), 0.0) << name;
  }
}

TEST(DiffusionDecoder, ShippedConfigMatchesTheReference) {
  std::printf("  diffdec_ltx25\n");
  const auto io = test::open_fixture("diffdec_ltx25.test.io.safetensors");
  const DiffusionVideoDecoder dec = DiffusionVideoDecoder::from_file(test::fixture(kLtx25));
  const Tensor latent = io_tensor(*io, "in.latent");
  DiffusionDecodeOptions o;
  o.initial_noise = noise_of(*io, {1, 3, 17, 64, 96});
  int probes = 0;
  o.probe = [&](const std::string& n, const Tensor& t) {
    // One step: "s5.<x>.step0" is the io file's "inter.s5.<x>" (x_in: its first two frames).
    const std::string base = n.size() > 6 && n.ends_with(".step0") ? n.substr(0, n.size() - 6) : n;
    const bool x_in = base == "s5.x_in";
    const std::string key = x_in ? "inter.s5.x_in_f0_2" : "inter." + base;
    if (!io->contains(key)) return;
    ++probes;
    Tensor v = x_in ? t.narrow(1, 0, 2) : t;
    const Tensor ref = io_tensor(*io, key);
    expect_matches(key, v.reshape(ref.shape()), ref, kTol, kTol);
  };
  const Tensor pixels = dec(latent, kNoNoise, o);
  EXPECT_EQ(pixels.shape(), (Shape{1, 3, 17, 64, 96}));
  EXPECT_EQ(probes, 16);
  expect_matches("out.pixels[0:3]", pixels.narrow(2, 0, 3), io_tensor(*io, "out.pixels.frames_0_3"),
                 kTol, kMaxRel);

  // Tiled 2 x 2 over T x W. A 1-step x0 decoder draws per tile with the tile's stage-5 canvas
  // shape (notes.tiled.noise_draws); the golden run replaced draw k by the tile's slice of the
  // full draw, which this noise source replays.
  const nlohmann::json tiles = io->metadata_json("notes")["tiled"]["tiles"];
  std::vector<Shape> draws;
  const NoiseFn per_tile = [&](const Shape& s) {
    const auto& box = tiles.at(draws.size())["pixel_out_f_h_w"];
    draws.push_back(s);
    Tensor slice = o.initial_noise;
    for (int a = 0; a < 3; ++a)
      if (!box[a][0].is_null())
        slice = slice.narrow(2 + a, box[a][0].get<int64_t>(),
                             box[a][1].get<int64_t>() - box[a][0].get<int64_t>());
    return slice.contiguous();
  };
  std::vector<int64_t> chunks;
  tiling::TileSizeConfig cfg;
  cfg.frames = {14, 8};
  cfg.width = {64, 32};
  const Tensor tiled = dec.tiled_decode_all(latent, cfg, per_tile, {}, &chunks);
  EXPECT_EQ(draws,
            (std::vector<Shape>{
                {1, 3, 13, 64, 64}, {1, 3, 13, 64, 64}, {1, 3, 12, 64, 64}, {1, 3, 12, 64, 64}}));
  EXPECT_EQ(chunks, (std::vector<int64_t>{5, 12}));
  expect_matches("out.tiled.pixels[8:11]", tiled.narrow(2, 8, 3),
                 io_tensor(*io, "out.tiled.pixels.frames_8_11"), kTol, kMaxRel);
}

TEST(DiffusionDecoder, CodeDefaultConfigMatchesTheReference) {
  // 2 Euler steps, v output, a latent below the size floor; through decode_video (sample 0 as
  // [f, H, W, 3] in [0, 1]). The tiled, combined and gated variants: tests/cli/ltx25_parity_test.
  std::printf("  diffdec_legacy\n");
  const auto io = test::open_fixture("diffdec_legacy.test.io.safetensors");
  const DiffusionVideoDecoder dec = DiffusionVideoDecoder::from_file(test::fixture(kLegacy));
  const Tensor latent = io_tensor(*io, "in.latent");
  DiffusionDecodeOptions o;
  o.initial_noise = noise_of(*io, {1, 3, 17, 64, 64});  // the padded work canvas
  std::map<std::string, Tensor> probed;
  o.probe = [&](const std::string& n, const Tensor& t) { probed[n] = t.contiguous(); };
  std::vector<Tensor> frames;
  dec.decode_video(
      latent, std::nullopt, kNoNoise, [&](const Tensor& c) { frames.push_back(c.contiguous()); },
      o);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].shape(), (Shape{9, 32, 64, 3}));
  const Tensor ref = io_tensor(*io, "out.pixels");
  const Tensor ref_rgb =
      ops::clamp(ops::mul(ops::add(ref.select(0, 0).permute({1, 2, 3, 0}), 1.0), 0.5), 0.0, 1.0);
  expect_matches("decode_video(out.pixels)", frames[0], ref_rgb, kTol, kMaxRel);
  expect_matches("inter.feat_s4", probed.at("feat_s4"), io_tensor(*io, "inter.feat_s4"), kTol,
                 kTol);
  expect_matches("inter.s4.out", probed.at("s4.out"), io_tensor(*io, "inter.s4.out"), kTol, kTol);
  const Tensor t_emb = ops::stack({probed.at("s5.t_emb.step0"), probed.at("s5.t_emb.step1")}, 0);
  expect_matches("inter.s5.t_emb", t_emb, io_tensor(*io, "inter.s5.t_emb"), kTol, kTol);
  const Tensor mod = ops::stack({probed.at("s5.modulation.step0").permute({1, 0, 2}),
                                 probed.at("s5.modulation.step1").permute({1, 0, 2})},
                                0);
  expect_matches("inter.s5.modulation", mod, io_tensor(*io, "inter.s5.modulation"), kTol, kTol);
}

TEST(DiffusionDecoder, LegacyGatesAreFoldedWithBf16Rounding) {
  const auto io = test::open_fixture("diffdec_legacy.test.io.safetensors");
  io::WeightMap w({test::open_fixture(kGated)}, diffusion_decoder_key_map());
  DiffusionVideoDecoder::fold_legacy_gates(w);
  int checked = 0;
  for (const std::string& name : io->names()) {
    const std::string prefix = "inter.gated.folded.";
    if (name.rfind(prefix, 0) != 0) continue;
    ++checked;
    // Bit-exact: f32 product rounded back to the stored bf16.
    EXPECT_EQ(test::max_abs_diff(w.take_any_shape(name.substr(prefix.size()), DType::F32),
                                 io_tensor(*io, name)),
              0.0)
        << name;
  }
  EXPECT_EQ(checked, 5);
  EXPECT_EQ(w.dtype("diff_blocks.0.attn.proj.weight"), DType::BF16);
  // The gates and the coarse head are consumed / ignored, the rest binds.
  const auto unused = w.unused();
  for (const auto& n : unused)
    EXPECT_TRUE(n.find("gate_") == std::string::npos && n.find("coarse_") == std::string::npos)
        << n;
}

TEST(DiffusionDecoder, WChunkedAttentionAgreesWithFullVolumeAwayFromTheWEdges) {
  // A stage-5-like volume: 7 frames x 7 rows x 26 columns of width 16 with kernel (7, 7, 7).
  io::WeightMap w({test::open_fixture(kLtx25)}, diffusion_decoder_key_map());
  io::WeightMap bw = w.scoped("diff_blocks.0.");
  const DiffusionNABlock block = DiffusionNABlock::load(bw, 16, 32, {7, 7, 7}, 16, {});
  const Tensor x = test::random_tensor({1, 7, 7, 26, 16}, 3);
  const Tensor scale = test::random_tensor({1, 1, 1, 1, 16}, 4, -0.2f, 0.2f);
  const Tensor shift = test::random_tensor({1, 1, 1, 1, 16}, 5, -0.2f, 0.2f);
  const Tensor full =
      ops::add(x, block.attn(ops::modulate(ops::rms_norm(x, block.norm1, 1e-6), scale, shift)));
  for (int64_t chunks : {1, 3, 4}) {
    const Tensor chunked = block.w_chunked_attention_residual(x, scale, shift, chunks);
    EXPECT_LE(test::max_abs_diff(chunked.narrow(3, 3, 20), full.narrow(3, 3, 20)), 1e-5) << chunks;
    // At the edges the replicated columns make a difference.
    EXPECT_GT(test::max_abs_diff(chunked.narrow(3, 0, 1), full.narrow(3, 0, 1)), 1e-4) << chunks;
  }
}

TEST(DiffusionDecoder, IsSelectedFromTheVaeFileMetadata) {
  EXPECT_TRUE(
      std::holds_alternative<DiffusionVideoDecoder>(load_video_decoder(test::fixture(kLtx25))));
  EXPECT_TRUE(std::holds_alternative<ConvVideoDecoder>(
      load_video_decoder(test::fixture("vae_ltx23.weights.safetensors"))));
  EXPECT_ERROR_HAS(ConvVideoDecoder::from_file(test::fixture(kLtx25)), "CausalVideoAutoencoder");
}

TEST(DiffusionDecoder, RejectsBadLatents) {
  const DiffusionVideoDecoder dec = DiffusionVideoDecoder::from_file(test::fixture(kLtx25));
  EXPECT_ERROR_HAS(dec(test::random_tensor({1, 8, 3, 2, 3}, 1), kNoNoise), "[B, 16, F, H, W]");
  DiffusionDecodeOptions o;
  o.initial_noise = test::random_tensor({1, 3, 9, 64, 96}, 2);
  EXPECT_ERROR_HAS(dec(test::random_tensor({1, 16, 3, 2, 3}, 1), kNoNoise, o), "work canvas");
}

}  // namespace
}  // namespace ltx::diffusion_decoder_test
