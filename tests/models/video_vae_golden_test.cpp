// The video VAE against the reference's outputs on the golden fixtures (tests/fixtures/README.md):
// encode, tiled encode, decode, tiled decode, the timestep-conditioned decoder with its recorded
// noise, the inter.* tensors, and the reference's tile layouts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/video_vae.h"
#include "models/vae_test_util.h"
#include "ops/elementwise.h"

namespace ltx::video_vae_golden_test {
namespace {

using namespace models;
using namespace models::video_vae;
using test::expect_matches;
using test::io_tensor;

constexpr double kLatentTol = 1e-5;  // encode latents, inter.*
constexpr double kPixelTol = 2e-5;   // decoded pixels
// max|x - ref| / max|ref| is checked at 3x the README's figure: the tiny ltx2 encoder starts
// with 2 channels, where PixelNorm amplifies f32 rounding (README-vae.md section 6).
constexpr double kMaxRelSlack = 3;

std::optional<tiling::TilingConfig> notes_tiling(const io::SafetensorsFile& io, const char* what) {
  const nlohmann::json notes = io.metadata_json("notes");
  if (!notes.contains(what)) return std::nullopt;
  return tiling::tiling_config_from_json(notes[what]["tiling_config"]);
}

Tensor encoder_input(const io::SafetensorsFile& io) {
  return ops::sub(ops::div(io_tensor(io, "in.encode.pixels_u8"), 127.5), 1.0);
}

// Encode, its intermediates and the tiled encode against the io file.
void check_encoder(const VideoEncoder& enc, const io::SafetensorsFile& io) {
  const Tensor pixels = encoder_input(io);
  int probes = 0;
  const Tensor latent = enc(pixels, [&](const std::string& name, const Tensor& v) {
    const std::string key = "inter.encode." + name;
    if (!io.contains(key)) return;
    ++probes;
    expect_matches(key, v, io_tensor(io, key), kLatentTol, kLatentTol * kMaxRelSlack);
  });
  EXPECT_GT(probes, 0);
  expect_matches("out.encode.latent", latent, io_tensor(io, "out.encode.latent"), kLatentTol,
                 kLatentTol);
  expect_matches("out.f64.encode.latent", latent, io_tensor(io, "out.f64.encode.latent"),
                 kLatentTol, kLatentTol);
  const auto cfg = notes_tiling(io, "tiled_encode");
  ASSERT_TRUE(cfg.has_value());
  expect_matches("out.tiled_encode.latent", enc.tiled_encode(pixels, cfg),
                 io_tensor(io, "out.tiled_encode.latent"), kLatentTol, kLatentTol);
}

// Plain decode with intermediates and the tiled decode with its chunk frame counts.
void check_decoder(const ConvVideoDecoder& dec, const io::SafetensorsFile& io) {
  const Tensor out = dec(io_tensor(io, "in.decode.latent"), std::nullopt, {},
                         [&](const std::string& name, const Tensor& v) {
                           const std::string key = "inter.decode." + name;
                           ASSERT_TRUE(io.contains(key)) << key;
                           expect_matches(key, v, io_tensor(io, key), kLatentTol,
                                          kLatentTol * kMaxRelSlack);
                         });
  expect_matches("out.decode.pixels", out, io_tensor(io, "out.decode.pixels"), kPixelTol,
                 kPixelTol);
  const auto cfg = notes_tiling(io, "tiled_decode");
  ASSERT_TRUE(cfg.has_value());
  std::vector<int64_t> frames;
  const Tensor tiled =
      dec.tiled_decode_all(io_tensor(io, "in.tiled_decode.latent"), cfg, std::nullopt, {}, &frames);
  expect_matches("out.tiled_decode.pixels", tiled, io_tensor(io, "out.tiled_decode.pixels"),
                 kPixelTol, kPixelTol);
  EXPECT_EQ(frames, io.tensor("out.tiled_decode.chunk_frames").to_int_vector());
}

TEST(VideoVaeGolden, Ltx23EncoderAndDecoderMatchTheReference) {
  const auto io = test::open_fixture("vae_ltx23.io.safetensors");
  const std::string weights = test::fixture("vae_ltx23.weights.safetensors");
  const VideoEncoder enc = VideoEncoder::from_file(weights);
  EXPECT_EQ(enc.video_scale_factors(), (tiling::ScaleFactors{8, 32, 32}));
  check_encoder(enc, *io);
  const ConvVideoDecoder dec = ConvVideoDecoder::from_file(weights);
  EXPECT_EQ(dec.config().spatial_padding_mode, PaddingMode::Zeros);
  check_decoder(dec, *io);
}

// LTX-2 (19B) layout: residual compress_all upsampling, reflect-padded decoder (no padding key in
// the config), loaded from the single-file bundle (DiT, audio VAE, vocoder keys all filtered out).
TEST(VideoVaeGolden, Ltx2FromTheBundleMatchesTheReference) {
  const auto io = test::open_fixture("vae_ltx2.io.safetensors");
  const std::string bundle = test::fixture("tiny_ltx2_19b.safetensors");
  check_encoder(VideoEncoder::from_file(bundle), *io);
  const ConvVideoDecoder dec = ConvVideoDecoder::from_file(bundle);
  EXPECT_EQ(dec.config().spatial_padding_mode, PaddingMode::Reflect);
  EXPECT_FALSE(dec.config().timestep_conditioning);
  check_decoder(dec, *io);
}

// Timestep-conditioned decoder (batch 2): recorded noise, explicit and default timesteps, the
// causal variant, and a tiled decode that draws noise per tile (first chunk has 0 frames).
TEST(VideoVaeGolden, TimestepConditionedDecoderMatchesTheReference) {
  const auto io = test::open_fixture("vae_tsc.io.safetensors");
  const std::string weights = test::fixture("vae_tsc.weights.safetensors");
  auto file = io::SafetensorsFile::open(weights);
  DecoderConfig config = decoder_config_from_metadata(file->metadata_json(), weights);
  ASSERT_TRUE(config.timestep_conditioning);
  auto build = [&](const DecoderConfig& c) {
    io::WeightMap w({file}, decoder_key_map());
    ConvVideoDecoder d = ConvVideoDecoder::load(w, c);
    w.finish("tsc decoder");
    return d;
  };
  const ConvVideoDecoder dec = build(config);
  const Tensor latent = io_tensor(*io, "in.decode.latent");
  const Tensor noise = io_tensor(*io, "in.decode.noise");
  const Tensor timestep = io_tensor(*io, "in.decode.timestep");
  int draws = 0;
  const NoiseFn recorded = [&](const Shape& s) {
    ++draws;
    EXPECT_EQ(s, noise.shape());
    return noise;
  };
  const Tensor out = dec(latent, timestep, recorded, [&](const std::string& name, const Tensor& v) {
    const std::string key = "inter.decode." + name;
    expect_matches(key, v, io_tensor(*io, key), kLatentTol, kLatentTol);
  });
  EXPECT_EQ(draws, 1);
  expect_matches("out.decode.pixels", out, io_tensor(*io, "out.decode.pixels"), kPixelTol,
                 kPixelTol);
  expect_matches("out.decode_default_t.pixels", dec(latent, std::nullopt, recorded),
                 io_tensor(*io, "out.decode_default_t.pixels"), kPixelTol, kPixelTol);
  DecoderConfig causal = config;
  causal.causal = true;
  expect_matches("out.decode_causal.pixels", build(causal)(latent, timestep, recorded),
                 io_tensor(*io, "out.decode_causal.pixels"), kPixelTol, kPixelTol);

  // Tiled: one draw per tile in tile order, each of the tile's latent shape.
  const std::vector<float> flat = io->tensor("in.tiled_decode.noise_flat").to_float_vector();
  size_t pos = 0;
  const NoiseFn per_tile = [&](const Shape& s) {
    const auto n = static_cast<size_t>(s.numel());
    EXPECT_LE(pos + n, flat.size());
    std::vector<float> part(flat.begin() + static_cast<std::ptrdiff_t>(pos),
                            flat.begin() + static_cast<std::ptrdiff_t>(std::min(pos + n, flat.size())));
    part.resize(n);
    pos += n;
    return Tensor::from_vector(part, s);
  };
  std::vector<int64_t> frames;
  const Tensor tiled = dec.tiled_decode_all(io_tensor(*io, "in.tiled_decode.latent"),
                                            notes_tiling(*io, "tiled_decode"),
                                            io_tensor(*io, "in.tiled_decode.timestep"), per_tile,
                                            &frames);
  EXPECT_EQ(pos, flat.size());
  EXPECT_EQ(frames, (std::vector<int64_t>{0, 5}));
  expect_matches("out.tiled_decode.pixels", tiled, io_tensor(*io, "out.tiled_decode.pixels"),
                 kPixelTol, kPixelTol);

  // Without a noise source a timestep-conditioned decoder refuses to run.
  EXPECT_THROW(dec(latent, timestep, {}), Error);
  // One timestep per sample.
  EXPECT_THROW(dec(latent, Tensor::full({3}, 0.1), recorded), Error);
}

// The tiles (ranges and blend masks) built for the fixtures' tiling configs are the ones the
// reference recorded in notes.tiled_{encode,decode}.tiles.
void expect_tiles_match(const std::vector<tiling::Tile>& tiles, const nlohmann::json& ref,
                        const Shape& in_shape, const Shape& out_shape, const std::string& what) {
  ASSERT_EQ(tiles.size(), ref.size()) << what;
  for (size_t i = 0; i < tiles.size(); ++i) {
    for (int a = 0; a < 5; ++a) {
      auto check = [&](const tiling::Range& r, const nlohmann::json& j, const Shape& full,
                       const char* side) {
        const int64_t start = j[0].is_null() ? 0 : j[0].get<int64_t>();
        const int64_t stop = j[1].is_null() ? full[a] : j[1].get<int64_t>();
        EXPECT_EQ(r.start, start) << what << " tile " << i << " axis " << a << " " << side;
        EXPECT_EQ(r.stop, stop) << what << " tile " << i << " axis " << a << " " << side;
      };
      check(tiles[i].in[a], ref[i]["in"][a], in_shape, "in");
      check(tiles[i].out[a], ref[i]["out"][a], out_shape, "out");
      const auto mask = ref[i]["masks"][a].get<std::vector<double>>();
      ASSERT_EQ(tiles[i].masks[a].size(), mask.size()) << what << " tile " << i << " axis " << a;
      for (size_t k = 0; k < mask.size(); ++k)
        EXPECT_NEAR(tiles[i].masks[a][k], mask[k], 1e-6) << what << " tile " << i << " axis " << a;
    }
  }
}

TEST(VideoVaeGolden, TileLayoutsAreTheReferences) {
  for (const char* name : {"vae_ltx23.io.safetensors", "vae_ltx2.io.safetensors",
                           "vae_tsc.io.safetensors"}) {
    SCOPED_TRACE(name);
    const auto io = test::open_fixture(name);
    const nlohmann::json notes = io->metadata_json("notes");
    const nlohmann::json config = io->metadata_json("config");
    const DecoderConfig dc = decoder_config_from_json(config["vae"], name);
    const tiling::ScaleFactors s = dc.scale_factors();
    const Shape latent = io->info("in.tiled_decode.latent").shape;
    const Shape out{latent[0], 3, (latent[2] - 1) * s.time + 1, latent[3] * s.height,
                    latent[4] * s.width};
    expect_tiles_match(prepare_tiles_for_decoding(latent, out, s, notes_tiling(*io, "tiled_decode")),
                       notes["tiled_decode"]["tiles"], latent, out, "decode");
    EXPECT_EQ(tiling::masks_are_complementary(
                  prepare_tiles_for_decoding(latent, out, s, notes_tiling(*io, "tiled_decode")), out),
              notes["tiled_decode"]["complementary"].get<bool>());
    if (!io->contains("in.encode.pixels_u8")) continue;
    const EncoderConfig ec = encoder_config_from_json(config["vae"], name);
    const Shape video = io->info("in.encode.pixels_u8").shape;
    const tiling::ScaleFactors es = ec.scale_factors();
    const Shape lat{video[0], ec.latent_channels, (video[2] - 1) / es.time + 1,
                    video[3] / es.height, video[4] / es.width};
    expect_tiles_match(prepare_tiles_for_encoding(video, ec.latent_channels,
                                                  notes_tiling(*io, "tiled_encode"), es),
                       notes["tiled_encode"]["tiles"], video, lat, "encode");
  }
}

}  // namespace
}  // namespace ltx::video_vae_golden_test
