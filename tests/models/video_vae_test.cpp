// Video VAE configuration, loading and binding errors, and tiled-vs-untiled consistency.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/video_vae.h"
#include "models/vae_test_util.h"
#include "ops/elementwise.h"

namespace ltx::video_vae_test {
namespace {

using namespace models;
using namespace models::video_vae;
using nlohmann::json;

json ltx23_vae_config() {
  auto f = test::open_fixture("vae_ltx23.weights.safetensors");
  return f->metadata_json("config")["vae"];
}

using test::error_of;

// ------------------------------------------------------------------------------------ configs

TEST(VideoVaeConfig, DefaultsAreTheReferences) {
  json vae = {{"latent_channels", 4},
              {"encoder_blocks", json::array({json::array({"res_x", 1})})},
              {"decoder_blocks", json::array({json::array({"compress_all", {{"multiplier", 2}}})})}};
  const DecoderConfig d = decoder_config_from_json(vae, "test");
  EXPECT_EQ(d.spatial_padding_mode, PaddingMode::Reflect);  // decoder default
  EXPECT_TRUE(d.timestep_conditioning);                     // configurator default
  EXPECT_FALSE(d.causal);
  EXPECT_EQ(d.base_channels, 128);
  EXPECT_EQ(d.bottleneck_channels(), 256);
  EXPECT_EQ(d.norm_layer, NormLayer::PixelNorm);
  EXPECT_EQ(d.scale_factors(), (tiling::ScaleFactors{2, 8, 8}));
  const EncoderConfig e = encoder_config_from_json(vae, "test");
  EXPECT_EQ(e.spatial_padding_mode, PaddingMode::Zeros);  // encoder default
  EXPECT_EQ(e.latent_log_var, LogVarianceType::Uniform);
  EXPECT_EQ(e.latent_channels, 4);
  EXPECT_EQ(e.patch_size, 4);

  // The flat spatial_padding_mode wins over encoder_spatial_padding_mode.
  vae["encoder_spatial_padding_mode"] = "replicate";
  EXPECT_EQ(encoder_config_from_json(vae, "t").spatial_padding_mode, PaddingMode::Replicate);
  vae["spatial_padding_mode"] = "zeros";
  EXPECT_EQ(encoder_config_from_json(vae, "t").spatial_padding_mode, PaddingMode::Zeros);
  EXPECT_EQ(decoder_config_from_json(vae, "t").spatial_padding_mode, PaddingMode::Zeros);

  // CausalDiffusionVAE nests its (conv) encoder: `blocks`, `out_channels`.
  json nested = {{"latent_channels", 16},
                 {"encoder", {{"blocks", json::array({json::array({"compress_all_res", json::object()})})},
                              {"out_channels", 8}}}};
  const EncoderConfig n = encoder_config_from_json(nested, "nested");
  EXPECT_EQ(n.latent_channels, 8);
  ASSERT_EQ(n.blocks.size(), 1u);
  EXPECT_EQ(n.blocks[0].multiplier_or(2), 2);
}

TEST(VideoVaeConfig, TheLtx23FileReadsAsPublished) {
  const EncoderConfig e = encoder_config_from_json(ltx23_vae_config(), "ltx23");
  const DecoderConfig d = decoder_config_from_json(ltx23_vae_config(), "ltx23");
  EXPECT_EQ(e.blocks.size(), 9u);
  EXPECT_EQ(d.blocks.size(), 9u);
  EXPECT_FALSE(d.timestep_conditioning);
  EXPECT_EQ(d.bottleneck_channels(), 4 * 2 * 1 * 2 * 2);
  EXPECT_EQ(e.scale_factors(), d.scale_factors());
}

TEST(VideoVaeConfig, RejectsMalformedConfigsNamingTheFileAndKey) {
  json vae = ltx23_vae_config();
  auto bad = [&](const std::function<void(json&)>& edit, bool decoder) {
    json v = vae;
    edit(v);
    return error_of([&] {
      if (decoder)
        decoder_config_from_json(v, "f.safetensors");
      else
        encoder_config_from_json(v, "f.safetensors");
    });
  };
  std::string e = bad([](json& v) { v["timestep_conditioning"] = "yes"; }, true);
  EXPECT_NE(e.find("f.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("timestep_conditioning"), std::string::npos) << e;
  e = bad([](json& v) { v["decoder_blocks"][0][0] = "res_z"; }, true);
  EXPECT_NE(e.find("res_z"), std::string::npos) << e;
  e = bad([](json& v) { v["decoder_blocks"][0][1] = json::object(); }, true);
  EXPECT_NE(e.find("num_layers"), std::string::npos) << e;
  e = bad([](json& v) { v["decoder_blocks"][0][1]["inject_noise"] = true; }, true);
  EXPECT_NE(e.find("inject_noise"), std::string::npos) << e;
  e = bad([](json& v) { v["_class_name"] = "CausalDiffusionVAE"; }, true);
  EXPECT_NE(e.find("diffusion"), std::string::npos) << e;
  e = bad([](json& v) { v["spatial_padding_mode"] = "mirror"; }, true);
  EXPECT_NE(e.find("mirror"), std::string::npos) << e;
  e = bad([](json& v) { v.erase("decoder_blocks"); }, true);
  EXPECT_NE(e.find("decoder_blocks"), std::string::npos) << e;
  e = bad([](json& v) { v["dims"] = 2; }, true);
  EXPECT_NE(e.find("dims"), std::string::npos) << e;
  e = bad([](json& v) { v["encoder_blocks"][1][1]["multiplier"] = 1.5; }, false);
  EXPECT_NE(e.find("multiplier"), std::string::npos) << e;
  e = bad([](json& v) { v["latent_log_var"] = "none"; }, false);
  EXPECT_NE(e.find("none"), std::string::npos) << e;
  e = bad([](json& v) { v["norm_layer"] = "batch_norm"; }, false);
  EXPECT_NE(e.find("batch_norm"), std::string::npos) << e;
  // No config.vae at all.
  e = error_of([] { decoder_config_from_metadata(json::object(), "x.safetensors"); });
  EXPECT_NE(e.find("x.safetensors"), std::string::npos) << e;
  e = error_of([] { encoder_config_from_metadata({{"config", {{"transformer", {}}}}}, "y"); });
  EXPECT_NE(e.find("vae"), std::string::npos) << e;
}

// ------------------------------------------------------------------------------------ loading

// Copies the ltx23 weights under new key names (and optionally edits them) into a temp file.
std::string rewrite_weights(const test::TempDir& dir, const std::string& name,
                            const std::function<std::string(const std::string&)>& rename,
                            const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>&
                                edit = {}) {
  auto src = test::open_fixture("vae_ltx23.weights.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& k : src->names()) {
    const std::string n = rename(k);
    if (!n.empty()) tensors.emplace_back(n, src->tensor(k));
  }
  if (edit) edit(tensors);
  const std::string path = dir.file(name);
  io::write_safetensors(path, tensors, src->metadata());
  return path;
}

TEST(VideoVaeLoading, StandaloneLayoutGivesTheSameModel) {
  test::TempDir dir;
  // The split `vae` file of 2.5: bare encoder./decoder./per_channel_statistics. keys.
  const std::string path = rewrite_weights(dir, "bare.safetensors", [](const std::string& k) {
    return k.rfind("vae.", 0) == 0 ? k.substr(4) : k;
  });
  const std::string mono = test::fixture("vae_ltx23.weights.safetensors");
  const auto io = test::open_fixture("vae_ltx23.io.safetensors");
  const Tensor pixels =
      ops::sub(ops::div(test::io_tensor(*io, "in.encode.pixels_u8").narrow(2, 0, 1), 127.5), 1.0);
  EXPECT_EQ(test::max_abs_diff(VideoEncoder::from_file(path)(pixels),
                               VideoEncoder::from_file(mono)(pixels)),
            0.0);
  const Tensor latent = test::io_tensor(*io, "in.decode.latent").narrow(2, 0, 1);
  EXPECT_EQ(test::max_abs_diff(ConvVideoDecoder::from_file(path)(latent),
                               ConvVideoDecoder::from_file(mono)(latent)),
            0.0);
}

TEST(VideoVaeLoading, ReportsMissingMisshapedAndUnexpectedTensorsInOneError) {
  test::TempDir dir;
  const std::string path = rewrite_weights(
      dir, "broken.safetensors",
      [](const std::string& k) {
        return k == "vae.decoder.up_blocks.0.res_blocks.0.conv1.conv.bias" ? "" : k;
      },
      [](std::vector<std::pair<std::string, Tensor>>& t) {
        for (auto& [n, v] : t)
          if (n == "vae.decoder.conv_out.conv.bias") v = Tensor::zeros({47}, DType::BF16);
        t.emplace_back("vae.decoder.last_scale_shift_table", Tensor::zeros({2, 4}, DType::BF16));
      });
  const std::string e = error_of([&] { ConvVideoDecoder::from_file(path); });
  EXPECT_NE(e.find("up_blocks.0.res_blocks.0.conv1.conv.bias"), std::string::npos) << e;
  EXPECT_NE(e.find("conv_out.conv.bias"), std::string::npos) << e;
  EXPECT_NE(e.find("last_scale_shift_table"), std::string::npos) << e;
  EXPECT_NE(e.find("broken.safetensors"), std::string::npos) << e;
  // The encoder does not read decoder keys: it still loads.
  EXPECT_NO_THROW(VideoEncoder::from_file(path));
  // The 19B-only statistics are accepted and ignored (the bundle test loads them too).
  const std::string extra = rewrite_weights(
      dir, "extra.safetensors", [](const std::string& k) { return k; },
      [](std::vector<std::pair<std::string, Tensor>>& t) {
        t.emplace_back("vae.per_channel_statistics.channel", Tensor::zeros({4}, DType::BF16));
        t.emplace_back("vae.per_channel_statistics.mean-of-stds", Tensor::zeros({4}, DType::BF16));
      });
  EXPECT_NO_THROW(ConvVideoDecoder::from_file(extra));
  EXPECT_NO_THROW(VideoEncoder::from_file(extra));
}

TEST(VideoVaeLoading, RejectsBadInputs) {
  const std::string w = test::fixture("vae_ltx23.weights.safetensors");
  const VideoEncoder enc = VideoEncoder::from_file(w);
  EXPECT_THROW(enc(Tensor::zeros({1, 3, 9, 64})), Error);       // rank
  EXPECT_THROW(enc(Tensor::zeros({1, 4, 9, 64, 64})), Error);   // channels
  EXPECT_THROW(enc(Tensor::zeros({1, 3, 9, 48, 64})), Error);   // not a multiple of 32
  // 11 frames: the last 2 are cropped, as the reference does.
  EXPECT_EQ(enc(Tensor::zeros({1, 3, 11, 32, 32})).shape(), Shape({1, 4, 2, 1, 1}));
  const ConvVideoDecoder dec = ConvVideoDecoder::from_file(w);
  EXPECT_THROW(dec(Tensor::zeros({1, 5, 1, 1, 1})), Error);
  EXPECT_EQ(dec.output_shape({1, 4, 3, 2, 5}), Shape({1, 3, 17, 64, 160}));
  // Encode tiles must overlap >= 16 frames / 64 pixels.
  tiling::TileSizeConfig small;
  small.frames = tiling::DimensionSizeConfig(16, 8);
  EXPECT_THROW(enc.tiled_encode(Tensor::zeros({1, 3, 25, 32, 32}), tiling::TilingConfig(small)),
               Error);
}

// The pipelines' decode_video: sample 0 as [f, H, W, 3] chunks of clamp((x + 1) / 2, 0, 1).
TEST(VideoVaeLoading, DecodeVideoYieldsClampedFramesLast) {
  const ConvVideoDecoder dec =
      ConvVideoDecoder::from_file(test::fixture("vae_ltx23.weights.safetensors"));
  const Tensor latent = test::random_tensor({1, 4, 3, 1, 1}, 21, -3.f, 3.f);
  const Tensor pixels = dec(latent);  // [1, 3, 17, 32, 32]
  const Tensor want =
      ops::clamp(ops::mul(ops::add(pixels.select(0, 0).permute({1, 2, 3, 0}), 1.0), 0.5), 0, 1);
  std::vector<Tensor> chunks;
  dec.decode_video(latent, std::nullopt, {}, [&](const Tensor& c) { chunks.push_back(c); });
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].shape(), Shape({17, 32, 32, 3}));
  EXPECT_EQ(test::max_abs_diff(chunks[0], want), 0.0);
  // Tiled: 0-frame first chunk for 3 latents with 2-latent tiles, then everything.
  chunks.clear();
  dec.decode_video(latent, tiling::TileSizeConfig{tiling::DimensionSizeConfig(16, 8), {}, {}}, {},
                   [&](const Tensor& c) { chunks.push_back(c); });
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].size(0), 0);
  EXPECT_EQ(chunks[1].shape(), Shape({17, 32, 32, 3}));
}

// --------------------------------------------------------------------- tiled vs untiled

// The ltx23 weights with every 3x3x3 kernel reduced to the one tap that reads the output
// position's own input (decoder: the centre, its time padding is symmetric; encoder: the last
// time tap, its padding is causal). The model is then pointwise in (f, h, w) up to the
// space/depth rearrangements, so tiles see exactly what the whole video sees and tiled decode /
// encode must reproduce the untiled result up to the blending's rounding: this checks the tile
// geometry, the causal temporal split, the masks and the chunked blending end to end.
io::WeightMap pointwise_weights(const io::KeyMap& keys, int64_t tap_t) {
  auto src = test::open_fixture("vae_ltx23.weights.safetensors");
  io::WeightMap w;
  for (const auto& k : src->names()) {
    const auto name = keys.apply(k);
    if (!name) continue;
    Tensor t = src->tensor(k).to(DType::F32).clone();
    if (t.dim() == 5 && t.size(2) == 3) {
      Tensor keep = t.narrow(2, tap_t, 1).narrow(3, 1, 1).narrow(4, 1, 1).clone();
      t.fill(0.0);
      t.narrow(2, tap_t, 1).narrow(3, 1, 1).narrow(4, 1, 1).copy_from(keep);
    }
    w.add(*name, t);
  }
  return w;
}

TEST(VideoVaeTiling, TiledDecodeMatchesUntiledForAPointwiseModel) {
  io::WeightMap w = pointwise_weights(decoder_key_map(), 1);
  const ConvVideoDecoder dec =
      ConvVideoDecoder::load(w, decoder_config_from_json(ltx23_vae_config(), "ltx23"));
  w.finish("pointwise decoder");
  const Tensor latent = test::random_tensor({1, 4, 5, 1, 3}, 7, -2.f, 2.f);
  const Tensor full = dec(latent);
  using tiling::DimensionSizeConfig;
  using tiling::DimensionTilingConfig;
  std::vector<std::pair<std::string, tiling::TilingConfig>> configs = {
      {"frames 16/8 width 64/32",
       tiling::TileSizeConfig{DimensionSizeConfig(16, 8), {}, DimensionSizeConfig(64, 32)}},
      {"frames 24/16 (overlapping ramps: weighted)",
       tiling::TileSizeConfig{DimensionSizeConfig(24, 16), {}, {}}},
      {"counts 2/1 frames, 2/1 width",
       tiling::TileCountConfig{DimensionTilingConfig(2, 1), {}, DimensionTilingConfig(2, 1)}},
      {"spatial only (the reference cannot run this one)",
       tiling::TileSizeConfig{{}, {}, DimensionSizeConfig(64, 32)}},
  };
  int weighted = 0;
  for (const auto& [name, cfg] : configs) {
    SCOPED_TRACE(name);
    const bool complementary = tiling::masks_are_complementary(
        prepare_tiles_for_decoding(latent.shape(), full.shape(), dec.video_downscale_factors(), cfg),
        full.shape());
    weighted += complementary ? 0 : 1;
    std::vector<int64_t> frames;
    const Tensor tiled = dec.tiled_decode_all(latent, cfg, std::nullopt, {}, &frames);
    const double err = test::max_rel_err(tiled, full);
    std::printf("    tiled decode %-48s %s, chunks %zu, max_rel %.2e\n", name.c_str(),
                complementary ? "complementary" : "weighted", frames.size(), err);
    EXPECT_LE(err, 1e-5);
    int64_t total = 0;
    for (int64_t f : frames) total += f;
    EXPECT_EQ(total, full.size(2));
  }
  EXPECT_EQ(weighted, 1);
  // A bf16 latent on the CPU: its f32 backend accumulates the tiles in f32 (on CUDA they are
  // accumulated in bf16, the latent's dtype, like the reference's buffers).
  {
    const Tensor tiled = dec.tiled_decode_all(latent.to(DType::BF16), configs[1].second);
    EXPECT_EQ(tiled.dtype(), DType::F32);
    EXPECT_LE(test::max_rel_err(tiled, full), 2e-2);
  }
  // A tile covering the whole latent (here: the automatic config) is the untiled decode, bit for
  // bit.
  EXPECT_EQ(test::max_abs_diff(dec.tiled_decode_all(latent, tiling::auto_tiling_config(32, 96)),
                               full),
            0.0);
}

TEST(VideoVaeTiling, TiledEncodeMatchesUntiledForAPointwiseModel) {
  io::WeightMap w = pointwise_weights(encoder_key_map(), 2);
  const VideoEncoder enc =
      VideoEncoder::load(w, encoder_config_from_json(ltx23_vae_config(), "ltx23"));
  w.finish("pointwise encoder");
  const Tensor video = test::random_tensor({1, 3, 33, 32, 128}, 11);
  const Tensor full = enc(video);
  using tiling::DimensionSizeConfig;
  std::vector<std::pair<std::string, tiling::TilingConfig>> configs = {
      {"frames 24/16 (weighted) width 96/64",
       tiling::TileSizeConfig{DimensionSizeConfig(24, 16), {}, DimensionSizeConfig(96, 64)}},
      {"counts 2/1 frames, 2/1 width",
       tiling::TileCountConfig{tiling::DimensionTilingConfig(2, 1), {},
                               tiling::DimensionTilingConfig(2, 1)}},
  };
  for (const auto& [name, cfg] : configs) {
    SCOPED_TRACE(name);
    const double err = test::max_rel_err(enc.tiled_encode(video, cfg), full);
    std::printf("    tiled encode %-48s max_rel %.2e\n", name.c_str(), err);
    EXPECT_LE(err, 1e-5);
  }
}

}  // namespace
}  // namespace ltx::video_vae_test
