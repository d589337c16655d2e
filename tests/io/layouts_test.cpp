// The layouts users have (io/layouts.h): a Diffusers folder and ComfyUI FP8 files, written here
// from the tiny official fixtures, read back as the official checkpoint.
#include "io/layouts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "generate/offload_plan.h"
#include "io/checkpoint.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/vocoder.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma/model.h"
#include "models/text/gemma_assets.h"
#include "models/transformer/config.h"
#include "models/transformer/model.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/diffusion_video_decoder.h"
#include "models/video_vae/model_configurator.h"
#include "models/video_vae/video_decoder.h"
#include "models/video_vae/video_vae.h"
#include "ops/elementwise.h"
#include "support/layout_writers.h"
#include "support/test_support.h"

namespace ltx::io {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::official_transformer_config;
using test::TempDir;
using test::to_diffusers;
using test::write_diffusers_folder;
using test::write_json;

using test::same_bits;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DiffusersFolder, EveryComponentTensorComesBackUnderItsOfficialNameBitForBit) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const std::string dir = write_diffusers_folder(tmp, *official);
  const auto view = SafetensorsFile::open(dir);
  EXPECT_EQ(view->layout(), "Diffusers folder");
  int64_t compared = 0;
  for (const std::string& key : official->names()) {
    if (!to_diffusers(key)) continue;
    ASSERT_TRUE(view->contains(key)) << key;
    EXPECT_TRUE(same_bits(view->tensor(key), official->tensor(key))) << key;
    ++compared;
  }
  EXPECT_EQ(static_cast<size_t>(compared), view->size());
  EXPECT_GT(compared, 100);
}

TEST(DiffusersFolder, ConfigTranslatesToTheOfficialTransformerAndConnectorKeys) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const auto view = SafetensorsFile::open(write_diffusers_folder(tmp, *official));
  const json want = official_transformer_config(*official);
  const json got = json::parse(view->metadata().at("config"))["transformer"];
  // Every key both have agrees (the translation may also spell out keys the official file leaves
  // at their defaults, e.g. audio_connector_num_layers).
  int64_t shared = 0;
  for (const auto& [k, v] : got.items()) {
    if (k.starts_with("_") || !want.contains(k)) continue;
    EXPECT_EQ(v, want[k]) << k;
    ++shared;
  }
  EXPECT_GT(shared, 30);
  EXPECT_EQ(view->metadata().at("model_version"), official->metadata().at("model_version"));
  namespace tf = models::transformer;
  const auto a = tf::LTXModelConfig::from_file(*official, tf::LTXModelType::AudioVideo);
  const auto b = tf::LTXModelConfig::from_file(*view, tf::LTXModelType::AudioVideo);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.inner_dim(), b.inner_dim());
  EXPECT_EQ(a.apply_gated_attention, b.apply_gated_attention);
  EXPECT_EQ(a.cross_attention_adaln, b.cross_attention_adaln);
  EXPECT_EQ(a.caption_projection, b.caption_projection);
  EXPECT_EQ(a.double_precision_rope, b.double_precision_rope);
}

TEST(DiffusersFolder, TransformerBindsStrictlyToTheSameTensorsAsTheOfficialFile) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const auto view = SafetensorsFile::open(write_diffusers_folder(tmp, *official));
  namespace tf = models::transformer;
  const auto cfg = tf::LTXModelConfig::from_file(*view, tf::LTXModelType::AudioVideo);
  WeightMap wa({official}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  WeightMap wb({view}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  ASSERT_EQ(wa.names(), wb.names());
  // Every binding finishes without a missing, misshaped or unexpected name.
  EXPECT_NO_THROW(tf::LTXModel::load(wb, cfg));
  for (const std::string& n : wa.names())
    EXPECT_TRUE(same_bits(wa.take_any_shape(n, wa.dtype(n)), wb.take_any_shape(n, wb.dtype(n))))
        << n;
}

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& e : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    e = static_cast<float>(static_cast<double>(x % 20001) / 10000.0 - 1.0);
  }
  return Tensor::from_vector<float>(v, shape);
}

// The decoders and the vocoder built from the folder compute what the official file's compute,
// bit for bit (same tensors, translated configs).
TEST(DiffusersFolder, VaeAudioVaeAndVocoderOutputsEqualTheOfficialFilesBitForBit) {
  TempDir tmp;
  const std::string official_path = test::fixture("e2e/ltx23_tiny.safetensors");
  const auto official = SafetensorsFile::open(official_path);
  const std::string dir = write_diffusers_folder(tmp, *official);
  const auto view = SafetensorsFile::open(dir);

  namespace vv = models::video_vae;
  const auto enc_a = vv::VideoEncoder::from_file(official_path);
  const auto enc_b = vv::VideoEncoder::from_file(dir);
  const Tensor video = random_tensor({1, 3, 9, 32, 32}, 1);
  EXPECT_TRUE(same_bits(enc_a(video), enc_b(video)));
  const auto dec_a = vv::ConvVideoDecoder::from_file(official_path);
  const auto dec_b = vv::ConvVideoDecoder::from_file(dir);
  const Tensor latent = random_tensor({1, 16, 2, 1, 1}, 2);
  EXPECT_TRUE(same_bits(dec_a(latent), dec_b(latent)));

  namespace av = models::audio_vae;
  const auto adec_a = av::AudioDecoder::from_file(official);
  const auto adec_b = av::AudioDecoder::from_file(view);
  const Tensor alat = random_tensor({1, adec_a.config().z_channels, 3, 16}, 3);
  const Tensor mel_a = adec_a.forward(alat), mel_b = adec_b.forward(alat);
  EXPECT_TRUE(same_bits(mel_a, mel_b));
  const auto voc_a = av::VocoderModel::from_file(official);
  const auto voc_b = av::VocoderModel::from_file(view);
  EXPECT_TRUE(same_bits(voc_a.forward(mel_a), voc_b.forward(mel_a)));
}

TEST(DiffusersFolder, DurationHeadPoolerProjectionIsConcatenatedBack) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const std::string dir = write_diffusers_folder(tmp, *official);
  // The converter's split: in_proj -> to_q / to_k / to_v (thirds of dim 0), out_proj -> to_out.
  const auto head = SafetensorsFile::open(test::fixture("duration_ltx25.weights.safetensors"));
  std::vector<std::pair<std::string, Tensor>> parts;
  const std::string pre = "duration_head.", fused = "attention_pooler.cross_attn.";
  for (const std::string& key : head->names()) {
    std::string k = key.substr(pre.size());
    const Tensor t = head->tensor(key);
    if (k.starts_with(fused + "in_proj_")) {
      const std::string leaf = k.ends_with("weight") ? "weight" : "bias";
      const int64_t third = t.size(0) / 3;
      const char* names[] = {"to_q", "to_k", "to_v"};
      for (int i = 0; i < 3; ++i)
        parts.emplace_back(str("attention_pooler.", names[i], ".", leaf),
                           t.slice(0, i * third, (i + 1) * third).contiguous());
      continue;
    }
    if (k.starts_with(fused + "out_proj."))
      k = "attention_pooler.to_out." + k.substr(fused.size() + 9);
    parts.emplace_back(k, t);
  }
  const fs::path folder = fs::path(dir) / "duration_head";
  fs::create_directories(folder);
  write_safetensors((folder / "diffusion_pytorch_model.safetensors").string(), parts);
  write_json(folder / "config.json", {{"_class_name", "LTX2DurationHead"}});
  json index = json::parse(test::read_bytes((fs::path(dir) / "model_index.json").string()));
  index["duration_head"] = {"ltx2", "LTX2DurationHead"};
  write_json(fs::path(dir) / "model_index.json", index);

  const auto view = SafetensorsFile::open(dir);
  for (const std::string& key : head->names()) {
    ASSERT_TRUE(view->contains(key)) << key;
    EXPECT_TRUE(same_bits(view->tensor(key), head->tensor(key))) << key;
  }
  // A part missing is one error naming the fused tensor.
  std::vector<std::pair<std::string, Tensor>> partial;
  for (auto& [k, t] : parts)
    if (k != "attention_pooler.to_k.bias") partial.emplace_back(k, t);
  write_safetensors((folder / "diffusion_pytorch_model.safetensors").string(), partial);
  const std::string e = error_of([&] { SafetensorsFile::open(dir); });
  EXPECT_NE(e.find("in_proj_bias"), std::string::npos) << e;
}

TEST(DiffusersFolder, MissingComponentFolderIsOneErrorNamingIt) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const std::string dir = write_diffusers_folder(tmp, *official);
  fs::remove_all(fs::path(dir) / "vae");
  const std::string e = error_of([&] { SafetensorsFile::open(dir); });
  EXPECT_NE(e.find((fs::path(dir) / "vae").string()), std::string::npos) << e;
  EXPECT_NE(e.find("download"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(DiffusersFolder, MissingShardIsOneErrorNamingTheShard) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const std::string dir = write_diffusers_folder(tmp, *official);
  fs::remove(fs::path(dir) / "transformer" / "diffusion_pytorch_model-00002-of-00002.safetensors");
  const std::string e = error_of([&] { SafetensorsFile::open(dir); });
  EXPECT_NE(e.find("diffusion_pytorch_model-00002-of-00002.safetensors' that"), std::string::npos)
      << e;
}

TEST(DiffusersFolder, IndexNamingATensorItsShardLacksIsAnError) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const std::string dir = write_diffusers_folder(tmp, *official);
  const fs::path index =
      fs::path(dir) / "transformer" / "diffusion_pytorch_model.safetensors.index.json";
  json j = json::parse(test::read_bytes(index.string()));
  j["weight_map"]["no_such.weight"] = "diffusion_pytorch_model-00001-of-00002.safetensors";
  write_json(index, j);
  const std::string e = error_of([&] { SafetensorsFile::open(dir); });
  EXPECT_NE(e.find("'no_such.weight'"), std::string::npos) << e;
}

TEST(DiffusersFolder, ShapesThatContradictTheConfigAreReportedByTheBinding) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const std::string dir = write_diffusers_folder(tmp, *official);
  const fs::path cfg_path = fs::path(dir) / "transformer" / "config.json";
  json cfg = json::parse(test::read_bytes(cfg_path.string()));
  cfg["in_channels"] = cfg["in_channels"].get<int>() * 2;
  write_json(cfg_path, cfg);
  namespace tf = models::transformer;
  const std::string e = error_of([&] {
    const auto view = SafetensorsFile::open(dir);
    const auto c = tf::LTXModelConfig::from_file(*view, tf::LTXModelType::AudioVideo);
    WeightMap w({view}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
    tf::LTXModel::load(w, c);
  });
  EXPECT_NE(e.find("patchify_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("wrong shape"), std::string::npos) << e;
}

TEST(DiffusersFolder, AConfigValueOfTheWrongTypeIsOneErrorNamingTheConfig) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const std::string dir = write_diffusers_folder(tmp, *official);
  const fs::path cfg_path = fs::path(dir) / "vae" / "config.json";
  json cfg = json::parse(test::read_bytes(cfg_path.string()));
  cfg["latent_channels"] = "sixteen";
  write_json(cfg_path, cfg);
  const std::string e = error_of([&] { SafetensorsFile::open(dir); });
  EXPECT_NE(e.find(cfg_path.string()), std::string::npos) << e;
  EXPECT_NE(e.find("wrong type"), std::string::npos) << e;
  EXPECT_NE(e.find("latent_channels is \"sixteen\""), std::string::npos) << e;

  // A float where an integer belongs, out of int's range (found by fuzz_diffusers_config):
  // refused by name, never converted.
  json t = json::parse(test::read_bytes((fs::path(dir) / "transformer" / "config.json").string()));
  t["pos_embed_max_pos"] = 2.0889e+120;
  const std::string e2 = error_of([&] { (void)io::diffusers_metadata({{"transformer", t}}, dir); });
  EXPECT_NE(e2.find("pos_embed_max_pos is 2.0889e+120, the wrong type (an integer expected)"),
            std::string::npos) << e2;
}

TEST(DiffusersFolder, LatentUpsamplerFolderReadsAsTheOfficialUpsamplerFile) {
  TempDir tmp;
  const std::string path = test::fixture("upsampler_x1_5.weights.safetensors");
  const auto official = SafetensorsFile::open(path);
  const json c = json::parse(official->metadata().at("config"));
  const fs::path folder = tmp.file("latent_upsampler");
  fs::create_directories(folder);
  std::vector<std::pair<std::string, Tensor>> all;
  for (const std::string& key : official->names()) all.emplace_back(key, official->tensor(key));
  write_safetensors((folder / "diffusion_pytorch_model.safetensors").string(), all);
  write_json(folder / "config.json", {{"_class_name", "LTX2LatentUpsamplerModel"},
                                      {"in_channels", c["in_channels"]},
                                      {"mid_channels", c["mid_channels"]},
                                      {"num_blocks_per_stage", c["num_blocks_per_stage"]},
                                      {"dims", c["dims"]},
                                      {"spatial_upsample", c["spatial_upsample"]},
                                      {"temporal_upsample", c["temporal_upsample"]},
                                      {"rational_spatial_scale", c["spatial_scale"]},
                                      {"use_rational_resampler", c["rational_resampler"]}});
  const auto view = SafetensorsFile::open(folder.string());
  EXPECT_EQ(json::parse(view->metadata().at("config")), c);
  std::vector<std::string> want = official->names(), got = view->names();
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  ASSERT_EQ(got, want);
  for (const std::string& key : official->names())
    EXPECT_TRUE(same_bits(view->tensor(key), official->tensor(key))) << key;
}

TEST(DiffusersFolder, AFolderWithoutModelIndexIsRefused) {
  TempDir tmp;
  const std::string e = error_of([&] { SafetensorsFile::open(tmp.file("")); });
  EXPECT_NE(e.find("model_index.json"), std::string::npos) << e;
}

TEST(DiffusersFolder, InspectNamesTheLayout) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const CheckpointSummary s = inspect_checkpoint(write_diffusers_folder(tmp, *official));
  EXPECT_EQ(s.source_layout, "Diffusers folder");
  EXPECT_NE(s.component("transformer"), nullptr);
}

// --- LTX-2.5: the diffusion decoder component ------------------------------------------------

// The tiny LTX-2.5 checkpoint (diffusion VAE) as a Diffusers folder: its diffusion decoder in
// diffusion_decoder/, vae/ from the tiny LTX-2.3 conv VAE (the same encoder).
struct Ltx25Folder {
  std::string official_path;
  std::shared_ptr<const SafetensorsFile> official;
  std::string dir;
};
Ltx25Folder write_ltx25_folder(const TempDir& tmp, bool gated, bool listed = true) {
  Ltx25Folder f;
  f.official_path = test::write_official_ltx25(tmp, gated);
  f.official = SafetensorsFile::open(f.official_path);
  const auto conv = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  f.dir = write_diffusers_folder(tmp, *f.official, conv.get(), listed);
  return f;
}

std::vector<std::string> names_with_prefix(const SafetensorsFile& f, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& n : f.names())
    if (n.starts_with(prefix)) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(DiffusersFolder, Ltx25DiffusionDecoderComesBackUnderTheOfficialNamesBitForBit) {
  for (const bool listed : {true, false}) {  // diffusers may save it beside the pipeline only
    TempDir tmp;
    const Ltx25Folder f = write_ltx25_folder(tmp, /*gated=*/false, listed);
    const auto view = SafetensorsFile::open(f.dir);
    // Exactly the official file's names (the conv decoder of vae/ left out), bit for bit.
    std::vector<std::string> want = f.official->names(), got = view->names();
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << listed;
    for (const std::string& key : f.official->names()) {
      if (!view->contains(key)) continue;
      EXPECT_TRUE(same_bits(view->tensor(key), f.official->tensor(key))) << key;
    }
    EXPECT_GT(names_with_prefix(*view, "vae.decoder.").size(), 40u);
    EXPECT_TRUE(view->contains("vae.decoder.diff_blocks.0.attn.qkv.weight"));
    // config.vae: the official diffusion VAE's, the encoder nested.
    const json want_vae = json::parse(f.official->metadata().at("config"))["vae"];
    const json got_vae = json::parse(view->metadata().at("config"))["vae"];
    EXPECT_EQ(got_vae["_class_name"], "CausalDiffusionVAE");
    EXPECT_EQ(got_vae["decoder"], want_vae["decoder"]) << got_vae["decoder"].dump();
    EXPECT_EQ(got_vae["model_output_type"], want_vae["model_output_type"]);
    namespace vv = models::video_vae;
    const json meta_a = f.official->metadata_json(), meta_b = view->metadata_json();
    EXPECT_TRUE(vv::is_diffusion_video_vae(meta_b));
    const auto enc_a = vv::encoder_config_from_metadata(meta_a, "a");
    const auto enc_b = vv::encoder_config_from_metadata(meta_b, "b");
    EXPECT_EQ(enc_a.latent_channels, enc_b.latent_channels);
    EXPECT_EQ(enc_a.blocks.size(), enc_b.blocks.size());
    EXPECT_EQ(enc_a.scale_factors(), enc_b.scale_factors());
    EXPECT_TRUE(vv::diffusion_decoder_config_from_metadata(meta_b, "b").defaulted.empty());
  }
}

TEST(DiffusersFolder, Ltx25DecoderAndEncoderLoadFromTheFolderAndComputeAsTheSingleFile) {
  TempDir tmp;
  const Ltx25Folder f = write_ltx25_folder(tmp, /*gated=*/false);
  namespace vv = models::video_vae;
  const auto dec_a = vv::DiffusionVideoDecoder::from_file(f.official_path);
  const auto dec_b = vv::DiffusionVideoDecoder::from_file(f.dir);
  const vv::NoiseFn noise = [](const Shape& s) { return random_tensor(s, 11); };
  const Tensor latent = random_tensor({1, 16, 2, 2, 2}, 12);
  EXPECT_TRUE(same_bits(dec_a(latent, noise), dec_b(latent, noise)));
  EXPECT_TRUE(std::holds_alternative<vv::DiffusionVideoDecoder>(vv::load_video_decoder(f.dir)));
  const auto enc_a = vv::VideoEncoder::from_file(f.official_path);
  const auto enc_b = vv::VideoEncoder::from_file(f.dir);
  const Tensor video = random_tensor({1, 3, 9, 32, 32}, 13);
  EXPECT_TRUE(same_bits(enc_a(video), enc_b(video)));
}

// diffusers folds a gated file's static gates into the Linears (and drops the coarse head); the
// folder's weights are then what the single file's loader folds to.
TEST(DiffusersFolder, Ltx25GatedDecoderBindsToTheSingleFilesFoldedWeights) {
  TempDir tmp;
  const Ltx25Folder f = write_ltx25_folder(tmp, /*gated=*/true);
  const auto view = SafetensorsFile::open(f.dir);
  for (const std::string& n : view->names())
    EXPECT_TRUE(n.find(".gate_") == std::string::npos && n.find("coarse_") == std::string::npos)
        << n;
  namespace vv = models::video_vae;
  WeightMap wa({f.official}, vv::diffusion_decoder_key_map());
  WeightMap wb({view}, vv::diffusion_decoder_key_map());
  vv::DiffusionVideoDecoder::fold_legacy_gates(wa);
  vv::DiffusionVideoDecoder::fold_legacy_gates(wb);
  std::vector<std::string> used;
  for (const std::string& n : wa.names())
    if (n.find(".gate_") == std::string::npos && !n.starts_with("coarse_")) used.push_back(n);
  ASSERT_EQ(used, wb.names());
  for (const std::string& n : used)
    EXPECT_TRUE(same_bits(wa.take_any_shape(n, wa.dtype(n)), wb.take_any_shape(n, wb.dtype(n))))
        << n;
  EXPECT_NO_THROW(vv::DiffusionVideoDecoder::from_file(f.dir));
}

TEST(DiffusersFolder, Ltx25MissingDiffusionDecoderIsOneErrorNamingIt) {
  TempDir tmp;
  const Ltx25Folder f = write_ltx25_folder(tmp, /*gated=*/false);
  const fs::path folder = fs::path(f.dir) / "diffusion_decoder";
  const fs::path weights = folder / "diffusion_pytorch_model.safetensors";
  // A q / k / v part missing: the fused tensor is named.
  const auto parts = SafetensorsFile::open(weights.string());
  std::vector<std::pair<std::string, Tensor>> partial;
  for (const std::string& k : parts->names())
    if (k != "decoder.diff_blocks.1.attn.to_v.bias") partial.emplace_back(k, parts->tensor(k));
  const std::string moved = tmp.file("dd_weights.safetensors");
  fs::rename(weights, moved);
  write_safetensors(weights.string(), partial);
  std::string e = error_of([&] { SafetensorsFile::open(f.dir); });
  EXPECT_NE(e.find("vae.decoder.diff_blocks.1.attn.qkv.bias"), std::string::npos) << e;
  // No weights at all.
  fs::remove(weights);
  e = error_of([&] { SafetensorsFile::open(f.dir); });
  EXPECT_NE(e.find(folder.string()), std::string::npos) << e;
  EXPECT_NE(e.find("download the component again"), std::string::npos) << e;
  // Listed in model_index.json but no folder.
  fs::remove_all(folder);
  e = error_of([&] { SafetensorsFile::open(f.dir); });
  EXPECT_NE(e.find("diffusion_decoder (LTX-2.5's diffusion video decoder"), std::string::npos) << e;
  EXPECT_NE(e.find(folder.string()), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// diffusers' defaults are the published LTX-2.5 decoder's (1 step, x0, scale 1000, stage-5
// kernel 11, t_emb_dim 384); what the official config cannot express is refused by name.
TEST(DiffusersFolder, Ltx25DiffusionDecoderConfigDefaultsAreThePublishedOnes) {
  namespace vv = models::video_vae;
  const auto decoder_of = [](const json& cfg) {
    const auto meta = io::diffusers_metadata({{"diffusion_decoder", cfg}}, "dir");
    json m = json::object();
    m["config"] = json::parse(meta.at("config"));
    return vv::diffusion_decoder_config_from_metadata(m, "dir");
  };
  const vv::DiffusionDecoderConfig c = decoder_of(json::object());
  EXPECT_TRUE(c.defaulted.empty());
  EXPECT_EQ(c.in_channels, 128);
  EXPECT_EQ(c.stage_channels, (std::vector<int64_t>{2048, 1024, 512, 512, 256}));
  EXPECT_EQ(c.stage_depths, (std::vector<int64_t>{4, 6, 4, 2, 8}));
  ASSERT_EQ(c.stage_kernels.size(), 5u);
  EXPECT_EQ(c.stage_kernels[4], (vv::Axis3{11, 11, 11}));
  EXPECT_EQ(c.stage5_kernel, (vv::Axis3{11, 11, 11}));
  ASSERT_EQ(c.upsamples.size(), 4u);
  EXPECT_EQ(c.upsamples[1].stride, (vv::Axis3{2, 1, 1}));
  EXPECT_EQ(c.upsamples[2].reduction, 1);
  EXPECT_EQ(c.t_emb_dim, 384);
  EXPECT_EQ(c.default_num_inference_steps, 1);
  EXPECT_EQ(c.timestep_scale_multiplier, 1000.0);
  EXPECT_EQ(c.model_output_type, vv::ModelOutputType::X0);
  EXPECT_EQ(decoder_of({{"decoder_model_output_type", "v"}}).model_output_type,
            vv::ModelOutputType::Velocity);

  const auto refused = [](const json& cfg) {
    return error_of([&] { (void)io::diffusers_metadata({{"diffusion_decoder", cfg}}, "dir"); });
  };
  std::string e = refused({{"decoder_upsample_channel_reductions", {2, 2, 1}}});
  EXPECT_NE(e.find("decoder_upsample_channel_reductions"), std::string::npos) << e;
  EXPECT_NE(e.find("diffusion_decoder/config.json"), std::string::npos) << e;
  e = refused({{"decoder_stage_kernels", {{3, 7, 7}, {3, 7}, {3, 5, 5}, {3, 5, 5}}}});
  EXPECT_NE(e.find("decoder_stage_kernels holds [3,7]"), std::string::npos) << e;
  e = refused({{"scaling_factor", 0.5}});
  EXPECT_NE(e.find("scaling_factor"), std::string::npos) << e;
  e = refused({{"decoder_t_emb_dim", "wide"}});
  EXPECT_NE(e.find("decoder_t_emb_dim is \"wide\", the wrong type"), std::string::npos) << e;
}

TEST(DiffusersFolder, Ltx25InspectNamesTheLayoutAndTheDiffusionDecoder) {
  TempDir tmp;
  const Ltx25Folder f = write_ltx25_folder(tmp, /*gated=*/false);
  const CheckpointSummary s = inspect_checkpoint(f.dir);
  EXPECT_EQ(s.source_layout, "Diffusers folder");
  EXPECT_NE(s.component("diffusion_decoder"), nullptr);
  EXPECT_EQ(s.component("video_vae_decoder"), nullptr);
  EXPECT_NE(s.component("transformer"), nullptr);
}

// The Gemma text encoder of a Diffusers pipeline: text_encoder/ (weights saved by newer
// transformers, model.language_model.*) with tokenizer/ beside it.
TEST(DiffusersFolder, TextEncoderFolderReadsAsTheGemmaRoot) {
  TempDir tmp;
  const std::string te_path = test::fixture("text_gemma3.te.safetensors");
  const text::GemmaAssets ref = text::GemmaAssets::from_single_file(te_path);
  const fs::path root = tmp.file("pipeline");
  fs::create_directories(root / "text_encoder");
  fs::create_directories(root / "tokenizer");
  write_json(root / "model_index.json",
             {{"_class_name", "LTX2Pipeline"},
              {"text_encoder", {"transformers", "Gemma3ForConditionalGeneration"}},
              {"tokenizer", {"transformers", "GemmaTokenizerFast"}}});
  write_json(root / "text_encoder" / "config.json", ref.config);
  test::write_bytes((root / "tokenizer" / "tokenizer.json").string(), ref.tokenizer_json);
  for (const auto& [name, bytes] : ref.sidecars)
    test::write_bytes((root / "tokenizer" / name).string(), bytes);
  const auto te = SafetensorsFile::open(te_path);
  std::vector<std::pair<std::string, Tensor>> weights;
  const std::string hf = "language_model.model.";
  for (const std::string& key : te->names())
    if (key.starts_with(hf))
      weights.emplace_back("model.language_model." + key.substr(hf.size()), te->tensor(key));
  write_safetensors((root / "text_encoder" / "model-00001-of-00001.safetensors").string(), weights);

  const text::GemmaAssets got = text::GemmaAssets::load(root.string());
  EXPECT_EQ(got.tokenizer_json, ref.tokenizer_json);
  EXPECT_EQ(got.config, ref.config);
  EXPECT_TRUE(got.has_sidecar("tokenizer_config.json"));
  ASSERT_EQ(got.weight_paths.size(), 1u);
  const auto a = text::GemmaTextModel::load(got);
  const auto b = text::GemmaTextModel::load(ref);
  EXPECT_NE(a.key_layout().find("model.language_model"), std::string::npos) << a.key_layout();
  const Tensor ids = Tensor::from_vector<int64_t>({2, 10, 20, 30}, {1, 4});
  const Tensor mask = Tensor::from_vector<int64_t>({1, 1, 1, 1}, {1, 4});
  const std::vector<Tensor> ha = a.encode(ids, mask), hb = b.encode(ids, mask);
  ASSERT_EQ(ha.size(), hb.size());
  for (size_t i = 0; i < ha.size(); ++i) EXPECT_TRUE(same_bits(ha[i], hb[i])) << i;

  fs::remove_all(root / "text_encoder");
  const std::string e = error_of([&] { text::GemmaAssets::load(root.string()); });
  EXPECT_NE(e.find("text_encoder/"), std::string::npos) << e;
}

// --- ComfyUI split files ---------------------------------------------------------------------

TEST(ComfySplitPack, BareDiffusionModelKeysAreReadUnderTheCheckpointPrefix) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  const std::string dit = "model.diffusion_model.";
  std::vector<std::pair<std::string, Tensor>> bare;
  for (const std::string& key : official->names())
    if (key.starts_with(dit)) bare.emplace_back(key.substr(dit.size()), official->tensor(key));
  write_safetensors(tmp.file("dit.safetensors"), bare, official->metadata());
  const auto f = SafetensorsFile::open(tmp.file("dit.safetensors"));
  EXPECT_EQ(f->layout(), "ComfyUI diffusion model (bare keys)");
  namespace tf = models::transformer;
  WeightMap wa({official}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  WeightMap wb({f}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  ASSERT_EQ(wa.names(), wb.names());
  EXPECT_NO_THROW(
      tf::LTXModel::load(wb, tf::LTXModelConfig::from_file(*f, tf::LTXModelType::AudioVideo)));
}

TEST(ComfySplitPack, ScaledFp8TransformerIsAnOfficialPerTensorFp8File) {
  TempDir tmp;
  const auto official = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  std::vector<std::pair<std::string, Tensor>> out;
  int64_t quantized = 0;
  for (const std::string& key : official->names()) {
    const Tensor w = official->tensor(key);
    if (key.find(".attn1.to_q.weight") == std::string::npos) {
      out.emplace_back(key, w);
      continue;
    }
    out.emplace_back(key, w.to(DType::F8E4M3FN));
    const std::string stem = key.substr(0, key.size() - 7);
    out.emplace_back(stem + ".scale_weight", Tensor::full({1}, 1.0, DType::F32));
    out.emplace_back(stem + ".scale_input", Tensor::full({1}, 1.0, DType::F32));
    ++quantized;
  }
  out.emplace_back("scaled_fp8", Tensor::full({0}, 0.0, DType::F32));
  write_safetensors(tmp.file("fp8.safetensors"), out, official->metadata());
  const auto f = SafetensorsFile::open(tmp.file("fp8.safetensors"));
  EXPECT_EQ(f->layout(), "ComfyUI FP8 (scaled)");
  int64_t scales = 0, inputs = 0;
  for (const TensorInfo& ti : f->infos()) {
    scales += ti.name.ends_with(".weight_scale") && ti.shape.size() == 0;
    inputs += ti.name.ends_with(".input_scale");
  }
  EXPECT_GT(quantized, 0);
  EXPECT_EQ(scales, quantized);
  EXPECT_EQ(inputs, 0);  // scale_input of exactly 1 is dropped, as ComfyUI does
  EXPECT_FALSE(f->contains("scaled_fp8"));
}

TEST(ComfySplitPack, BareLoraFilesAreLeftToTheLoraReader) {
  TempDir tmp;
  write_safetensors(tmp.file("lora.safetensors"),
                    {{"patchify_proj.lora_A.weight", Tensor::zeros({2, 16})},
                     {"transformer_blocks.0.attn1.to_q.lora_A.weight", Tensor::zeros({2, 32})}});
  EXPECT_FALSE(SafetensorsFile::open(tmp.file("lora.safetensors"))->is_view());
}

TEST(ComfySplitPack, OfficialNamesAreReadAsStored) {
  const auto f = SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  EXPECT_EQ(f->layout(), "");
  EXPECT_FALSE(f->is_view());
}

// --- ComfyUI FP8 Gemma -------------------------------------------------------------------------

void expect_same_hidden_states(bool scaled) {
  TempDir tmp;
  test::write_comfy_fp8_gemma(tmp.file("gemma_fp8.safetensors"), tmp.file("twin.safetensors"), scaled);
  const auto te = SafetensorsFile::open(test::fixture("text_gemma3.te.safetensors"));
  const auto config = text::GemmaTextConfig::from_json(
      json::parse(te->metadata().at("gemma_config")), "text_gemma3.te.safetensors");
  const auto fp8 = text::GemmaTextModel::load(config, {tmp.file("gemma_fp8.safetensors")});
  const auto ref = text::GemmaTextModel::load(config, {tmp.file("twin.safetensors")});
  EXPECT_NE(fp8.key_layout().find("ComfyUI flat"), std::string::npos) << fp8.key_layout();
  const Tensor ids = Tensor::from_vector<int64_t>({2, 10, 20, 30, 40, 50}, {1, 6});
  const Tensor mask = Tensor::from_vector<int64_t>({1, 1, 1, 1, 1, 1}, {1, 6});
  const std::vector<Tensor> a = fp8.encode(ids, mask), b = ref.encode(ids, mask);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i], b[i])) << "hidden state " << i;
}

// In bf16 (the GPU's dtype) the Linears stay in e4m3 with their scales (the bits are checked on
// the GPU, tests/cuda/gemma_fp8_test.cpp): the planner counts them at a byte, and in f32
// (widened at load) at four, as the twin.
void expect_planned_at_a_byte_in_bf16(bool scaled) {
  TempDir tmp;
  const std::string file = tmp.file("gemma_fp8.safetensors"), twin = tmp.file("twin.safetensors");
  test::write_comfy_fp8_gemma(file, twin, scaled);
  const auto sizes = [](const std::string& path, DType dtype) {
    const generate::BlockModelSizes s = generate::text_encoder_sizes(path, dtype);
    return s.fixed_bytes + s.blocks * s.block_bytes;
  };
  int64_t linear_weights = 0, scales = 0;  // the twin has no scales: they count as floats
  const auto opened = SafetensorsFile::open(file);
  for (const TensorInfo& i : opened->infos()) {
    if (i.dtype == DType::F8E4M3FN) linear_weights += i.numel();
    scales += i.name.ends_with("_scale");
  }
  ASSERT_GT(linear_weights, 0);
  EXPECT_EQ(scales > 0, scaled);
  EXPECT_EQ(sizes(file, DType::BF16), sizes(twin, DType::BF16) - linear_weights + 2 * scales);
  EXPECT_EQ(sizes(file, DType::F32), sizes(twin, DType::F32) + 4 * scales);
}

TEST(ComfyFp8Gemma, ThePlannerCountsScaledLinearsAtAByteInBf16) {
  expect_planned_at_a_byte_in_bf16(true);
}

TEST(ComfyFp8Gemma, ThePlannerCountsUnscaledLinearsAtAByteInBf16) {
  expect_planned_at_a_byte_in_bf16(false);
}

TEST(ComfyFp8Gemma, TheLinearWeightNamesAreThoseOfEveryKeyLayout) {
  for (const char* name : {"language_model.model.layers.3.self_attn.q_proj.weight",
                           "model.language_model.layers.0.mlp.down_proj.weight",
                           "model.layers.1.mlp.gate_proj.weight", "layers.2.self_attn.o_proj.weight",
                           "per_layer_model_projection.weight",
                           "layers.0.per_layer_input_gate.weight"})
    EXPECT_TRUE(text::is_gemma_linear_weight(name)) << name;
  for (const char* name : {"model.layers.1.mlp.gate_proj.weight_scale", "model.embed_tokens.weight",
                           "model.layers.0.input_layernorm.weight", "model.norm.weight",
                           "layers.0.self_attn.q_proj.bias", "q_proj"})
    EXPECT_FALSE(text::is_gemma_linear_weight(name)) << name;
}

TEST(ComfyFp8Gemma, UnscaledE4m3WeightsComputeAsTheirExactUpcast) {
  expect_same_hidden_states(false);
}

TEST(ComfyFp8Gemma, ScaledWeightsComputeAsTheFoldedBf16Twin) { expect_same_hidden_states(true); }

// ComfyUI's file carries neither config nor tokenizer: put beside Gemma's, it is the root's
// weights.
TEST(ComfyFp8Gemma, AFolderWithGemmasConfigAndTokenizerReadsTheFileAsItsWeights) {
  TempDir tmp;
  const fs::path root = tmp.file("gemma");
  fs::create_directories(root);
  test::write_comfy_fp8_gemma((root / "gemma_3_12B_it_fp8_e4m3fn.safetensors").string(),
                    tmp.file("twin.safetensors"), true);
  const text::GemmaAssets ref =
      text::GemmaAssets::from_single_file(test::fixture("text_gemma3.te.safetensors"));
  write_json(root / "config.json", ref.config);
  test::write_bytes((root / "tokenizer.json").string(), ref.tokenizer_json);
  for (const auto& [name, bytes] : ref.sidecars) test::write_bytes((root / name).string(), bytes);
  const text::GemmaAssets got = text::GemmaAssets::load(root.string());
  ASSERT_EQ(got.weight_paths.size(), 1u);
  EXPECT_NO_THROW(got.require_encoder_assets());
  const auto fp8 = text::GemmaTextModel::load(got);
  const auto twin = text::GemmaTextModel::load(text::GemmaTextConfig::from_json(ref.config, "twin"),
                                               {tmp.file("twin.safetensors")});
  const Tensor ids = Tensor::from_vector<int64_t>({2, 7, 9}, {1, 3});
  const Tensor mask = Tensor::from_vector<int64_t>({1, 1, 1}, {1, 3});
  EXPECT_TRUE(same_bits(fp8.encode(ids, mask).back(), twin.encode(ids, mask).back()));
}

TEST(ComfyFp8Gemma, InspectNamesTheLayoutAndTheFp8Storage) {
  TempDir tmp;
  test::write_comfy_fp8_gemma(tmp.file("gemma_fp8.safetensors"), tmp.file("twin.safetensors"), true);
  const CheckpointSummary s = inspect_checkpoint(tmp.file("gemma_fp8.safetensors"));
  EXPECT_EQ(s.source_layout, "ComfyUI FP8 (scaled)");
  const ComponentSummary* g = s.component("gemma");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->config.value("key_layout", "").find("ComfyUI flat Gemma"), std::string::npos);
  bool fp8 = false;
  for (const StorageTypeSummary& t : s.storage_types) fp8 = fp8 || t.type == "F8_E4M3";
  EXPECT_TRUE(fp8);
  EXPECT_GT(s.bits_per_weight, 8.0);
  EXPECT_LT(s.bits_per_weight, 16.0);
}

TEST(ComfyFp8Gemma, ScaleNamesAreReadAsTheOfficialPreQuantisedOnes) {
  TempDir tmp;
  test::write_comfy_fp8_gemma(tmp.file("gemma_fp8.safetensors"), tmp.file("twin.safetensors"), true);
  const auto f = SafetensorsFile::open(tmp.file("gemma_fp8.safetensors"));
  EXPECT_EQ(f->layout(), "ComfyUI FP8 (scaled)");
  EXPECT_FALSE(f->contains("scaled_fp8"));
  EXPECT_TRUE(f->contains("model.layers.0.mlp.up_proj.weight_scale"));
  EXPECT_EQ(f->info("model.layers.0.mlp.up_proj.weight_scale").shape.size(), 0);
}

}  // namespace
}  // namespace ltx::io
