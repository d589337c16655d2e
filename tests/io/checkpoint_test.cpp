#include "io/checkpoint.h"

#include <gtest/gtest.h>

#include <functional>

#include "io/io_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using io::CheckpointSummary;
using io::ComponentSummary;
using io::inspect_checkpoint;
using io::SafetensorsFile;
using io::write_safetensors;
using nlohmann::json;
using test::TempDir;

// Sum of element counts over the file's keys that satisfy `pred` (computed independently of the
// classifier under test).
int64_t numel_where(const std::string& path, const std::function<bool(const std::string&)>& pred) {
  SafetensorsFile f(path);
  int64_t n = 0;
  for (const auto& ti : f.infos())
    if (pred(ti.name)) n += ti.numel();
  return n;
}
std::function<bool(const std::string&)> prefix(const std::string& p) {
  return [p](const std::string& k) { return k.rfind(p, 0) == 0; };
}

std::vector<std::string> ids(const CheckpointSummary& s) {
  std::vector<std::string> out;
  for (const auto& c : s.components) out.push_back(c.id);
  return out;
}

const ComponentSummary& comp(const CheckpointSummary& s, const std::string& id) {
  const ComponentSummary* c = s.component(id);
  if (c == nullptr) throw Error("no component " + id + " in " + s.path);
  return *c;
}

// Components partition the file: their counts add up to the file's.
void expect_partition(const CheckpointSummary& s) {
  SafetensorsFile f(s.path);
  int64_t numel = 0;
  for (const auto& ti : f.infos()) numel += ti.numel();
  int64_t params = 0, tensors = 0;
  for (const auto& c : s.components) {
    params += c.params;
    tensors += c.tensors;
    int64_t by_dtype = 0;
    for (const auto& [name, n] : c.dtype_params) by_dtype += n;
    EXPECT_EQ(by_dtype, c.params) << c.id;
  }
  EXPECT_EQ(s.params, numel);
  EXPECT_EQ(params, numel);
  EXPECT_EQ(tensors, static_cast<int64_t>(f.size()));
  EXPECT_EQ(s.tensors, static_cast<int64_t>(f.size()));
}

TEST(Checkpoint, DescribesTheBundledTiny19BSingleFileCheckpoint) {
  const std::string path = test::fixture("tiny_ltx2_19b.safetensors");
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "single-file checkpoint");
  EXPECT_EQ(s.family, "LTX-2");
  EXPECT_EQ(s.version, "2");
  EXPECT_EQ(s.version_name, "LTX-2 (19B)");
  EXPECT_NE(s.version_source.find("caption_proj_before_connector"), std::string::npos);
  EXPECT_EQ(s.model_version, "");
  EXPECT_EQ(ids(s),
            (std::vector<std::string>{"transformer", "video_connector", "audio_connector",
                                      "text_projection", "video_vae_encoder", "video_vae_decoder",
                                      "video_vae_statistics", "audio_vae_encoder",
                                      "audio_vae_decoder", "audio_vae_statistics", "vocoder"}));
  expect_partition(s);
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();

  EXPECT_EQ(comp(s, "transformer").params, numel_where(path, [](const std::string& k) {
              return k.rfind("model.diffusion_model.", 0) == 0 &&
                     k.find("embeddings_connector.") == std::string::npos;
            }));
  EXPECT_EQ(comp(s, "video_connector").params,
            numel_where(path, prefix("model.diffusion_model.video_embeddings_connector.")));
  EXPECT_EQ(comp(s, "vocoder").params, numel_where(path, prefix("vocoder.")));
  EXPECT_EQ(comp(s, "video_vae_decoder").params, numel_where(path, prefix("vae.decoder.")));
  EXPECT_EQ(comp(s, "audio_vae_encoder").params, numel_where(path, prefix("audio_vae.encoder.")));
  EXPECT_EQ(comp(s, "transformer").dtype_tensors, (std::map<std::string, int64_t>{{"bf16", 198}}));

  const auto& t = comp(s, "transformer").config;
  EXPECT_EQ(t["num_layers"], 2);
  EXPECT_EQ(t["blocks_in_file"], 2);
  EXPECT_EQ(t["num_attention_heads"], 2);
  EXPECT_EQ(t["attention_head_dim"], 32);
  EXPECT_EQ(t["audio_num_attention_heads"], 2);
  EXPECT_EQ(t["audio_attention_head_dim"], 16);
  EXPECT_EQ(t["in_channels"], 24);
  EXPECT_EQ(t["cross_attention_dim"], 64);
  EXPECT_EQ(t["caption_channels"], 48);
  EXPECT_EQ(t["caption_proj_before_connector"], false);
  EXPECT_EQ(t["apply_gated_attention"], false);
  EXPECT_EQ(t["av_ca_timestep_scale_multiplier"], 1000.0);
  EXPECT_EQ(t["modalities"], "audio+video");
  const auto& td = comp(s, "transformer").defaulted;
  EXPECT_TRUE(td.count("caption_proj_before_connector"));
  EXPECT_TRUE(td.count("apply_gated_attention"));
  EXPECT_TRUE(td.count("cross_attention_adaln"));
  EXPECT_FALSE(td.count("num_layers"));
  EXPECT_FALSE(td.count("av_ca_timestep_scale_multiplier"));

  const auto& vc = comp(s, "video_connector").config;
  EXPECT_EQ(vc["num_layers"], 2);
  EXPECT_EQ(vc["num_attention_heads"], 2);
  EXPECT_EQ(vc["attention_head_dim"], 24);
  EXPECT_EQ(vc["registers"], 128);
  EXPECT_EQ(comp(s, "text_projection").config["feature_extractor"], "V1");
  EXPECT_EQ(comp(s, "text_projection").config["in_features"], 192);
  EXPECT_EQ(comp(s, "text_projection").config["out_features"], 48);
  const auto& dec = comp(s, "video_vae_decoder");
  EXPECT_EQ(dec.config["class"], "CausalVideoAutoencoder");
  EXPECT_EQ(dec.config["latent_channels"], 2);
  EXPECT_EQ(dec.config["compression"], "8x32x32");
  EXPECT_EQ(dec.config["spatial_padding_mode"], "reflect");  // the 19B file omits it
  EXPECT_TRUE(dec.defaulted.count("spatial_padding_mode"));
  EXPECT_EQ(dec.config["timestep_conditioning"], false);
  EXPECT_EQ(comp(s, "video_vae_encoder").config["compression"], "8x32x32");
  EXPECT_EQ(comp(s, "video_vae_statistics").config["channels"], 2);
  EXPECT_EQ(comp(s, "video_vae_statistics").notes.size(), 1u);
  EXPECT_EQ(comp(s, "audio_vae_encoder").config["ch"], 32);
  EXPECT_EQ(comp(s, "audio_vae_encoder").config["z_channels"], 2);
  const auto& voc = comp(s, "vocoder");
  EXPECT_EQ(voc.config["kind"], "HiFi-GAN");
  EXPECT_EQ(voc.config["bandwidth_extension"], false);
  EXPECT_EQ(voc.config["output_sampling_rate"], 24000);
  EXPECT_TRUE(voc.defaulted.count("output_sampling_rate"));
}

TEST(Checkpoint, Detects23TransformerFromModelVersion) {
  const std::string path = test::fixture("ltx23.weights.bf16.safetensors");
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "transformer");
  EXPECT_EQ(s.version, "2.3");
  EXPECT_EQ(s.version_name, "LTX-2.3 (22B)");
  EXPECT_EQ(s.model_version, "2.3.0");
  EXPECT_EQ(ids(s), std::vector<std::string>{"transformer"});  // this file carries no connectors
  expect_partition(s);
  const auto& t = comp(s, "transformer");
  EXPECT_EQ(t.config["apply_gated_attention"], true);
  EXPECT_EQ(t.config["cross_attention_adaln"], true);
  EXPECT_EQ(t.config["caption_proj_before_connector"], true);
  EXPECT_FALSE(t.defaulted.count("apply_gated_attention"));
  EXPECT_EQ(t.config["ff_bias"], true);
  EXPECT_TRUE(t.defaulted.count("ff_bias"));
  EXPECT_EQ(t.params, numel_where(path, prefix("model.diffusion_model.")));
}

TEST(Checkpoint, ResolvesConnectorConfigLikeTheReference) {
  // The audio connector falls back to the video connector's keys, then to the code defaults.
  TempDir dir;
  const std::string path = dir.file("connectors.safetensors");
  const json config = json::parse(R"({"transformer": {"caption_proj_before_connector": true,
      "connector_num_layers": 8, "connector_num_attention_heads": 32,
      "connector_attention_head_dim": 128, "audio_connector_attention_head_dim": 64,
      "connector_apply_gated_attention": true}})");
  const std::string v = "model.diffusion_model.video_embeddings_connector.";
  const std::string a = "model.diffusion_model.audio_embeddings_connector.";
  write_safetensors(
      path,
      {{v + "learnable_registers", Tensor::zeros({128, 8})},
       {v + "transformer_1d_blocks.0.attn1.to_q.weight", Tensor::zeros({8, 8})},
       {v + "transformer_1d_blocks.7.attn1.to_q.weight", Tensor::zeros({8, 8})},
       {a + "learnable_registers", Tensor::zeros({128, 4})},
       {"text_embedding_projection.video_aggregate_embed.weight", Tensor::zeros({8, 12})},
       {"text_embedding_projection.audio_aggregate_embed.weight", Tensor::zeros({4, 12})}},
      {{"config", config.dump()}});
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "text connectors / projection");
  EXPECT_EQ(s.version, "2.3+");
  EXPECT_EQ(ids(s),
            (std::vector<std::string>{"video_connector", "audio_connector", "text_projection"}));
  expect_partition(s);
  const auto& vc = comp(s, "video_connector");
  EXPECT_EQ(vc.config["num_layers"], 8);
  EXPECT_EQ(vc.config["blocks_in_file"], 2);
  EXPECT_EQ(vc.config["registers"], 128);
  EXPECT_EQ(vc.config["apply_gated_attention"], true);
  const auto& ac = comp(s, "audio_connector");
  EXPECT_EQ(ac.config["num_layers"], 8);            // from connector_num_layers
  EXPECT_EQ(ac.config["num_attention_heads"], 32);  // from connector_num_attention_heads
  EXPECT_EQ(ac.config["attention_head_dim"], 64);   // its own key
  EXPECT_TRUE(ac.defaulted.count("positional_embedding_max_pos"));
  EXPECT_EQ(ac.config["positional_embedding_max_pos"], json::parse("[1]"));
  const auto& tp = comp(s, "text_projection").config;
  EXPECT_EQ(tp["feature_extractor"], "V2");
  EXPECT_EQ(tp["in_features"], 12);
  EXPECT_EQ(tp["video_out_features"], 8);
  EXPECT_EQ(tp["audio_out_features"], 4);
}

TEST(Checkpoint, Detects25SplitTransformerAndItsFlags) {
  const std::string path = test::fixture("ltx25.weights.bf16.safetensors");
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.version, "2.5");
  EXPECT_EQ(s.version_name, "LTX-2.5 (22B)");
  EXPECT_EQ(s.model_version, "2.5.0");
  expect_partition(s);
  const auto& t = comp(s, "transformer");
  EXPECT_EQ(t.config["ff_bias"], false);
  EXPECT_EQ(t.config["use_keyframes_abs_pos_embedding"], true);
  EXPECT_EQ(t.config["audio_ff_bias"], true);
  EXPECT_TRUE(t.defaulted.count("audio_ff_bias"));
  EXPECT_EQ(std::find(s.metadata_keys.begin(), s.metadata_keys.end(), "gemma_source_checkpoint") !=
                s.metadata_keys.end(),
            true);
}

TEST(Checkpoint, DescribesTheDiffusionDecoderFile) {
  const std::string path = test::fixture("diffdec_ltx25.weights.safetensors");
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "video VAE (diffusion decoder)");
  EXPECT_EQ(s.version_name, "LTX-2.5");
  EXPECT_EQ(ids(s), (std::vector<std::string>{"diffusion_decoder", "video_vae_statistics"}));
  expect_partition(s);
  const auto& d = comp(s, "diffusion_decoder");
  EXPECT_EQ(d.params, numel_where(path, prefix("decoder.")));
  EXPECT_EQ(d.config["class"], "CausalDiffusionVAE");
  EXPECT_EQ(d.config["decoder_class"], "NADiffusionDecoder");
  EXPECT_EQ(d.config["model_output_type"], "x0");
  EXPECT_EQ(d.config["default_num_inference_steps"], 1);
  EXPECT_EQ(d.config["timestep_scale_multiplier"], 1000.0);
  EXPECT_EQ(d.config["t_emb_dim"], 32);
  EXPECT_EQ(d.config["stage_channels"], json::parse("[128, 64, 32, 32, 16]"));
  EXPECT_TRUE(d.defaulted.empty());
}

TEST(Checkpoint, DescribesDurationHeadAndUpsampler) {
  const CheckpointSummary d =
      inspect_checkpoint(test::fixture("duration_ltx25.weights.safetensors"));
  EXPECT_EQ(d.layout, "duration head");
  EXPECT_EQ(d.version, "2.5");
  expect_partition(d);
  const auto& dh = comp(d, "duration_head").config;
  EXPECT_EQ(dh["video_input_dim"], 64);
  EXPECT_EQ(dh["audio_input_dim"], 32);
  EXPECT_EQ(dh["pooler_hidden_dim"], 32);
  EXPECT_EQ(dh["mlp_hidden"], 48);
  EXPECT_EQ(dh["num_pooler_heads"], 4);

  const std::string up = test::fixture("upsampler_x2.weights.safetensors");
  const CheckpointSummary u = inspect_checkpoint(up);
  EXPECT_EQ(u.layout, "latent upsampler");
  EXPECT_EQ(u.family, "LTX-2");
  EXPECT_EQ(u.version, "");
  EXPECT_EQ(ids(u), std::vector<std::string>{"latent_upsampler"});
  expect_partition(u);
  const auto& uc = comp(u, "latent_upsampler").config;
  EXPECT_EQ(uc["kind"], "spatial x2");
  EXPECT_EQ(uc["mid_channels"], 32);
  EXPECT_EQ(uc["rational_resampler"], false);
}

TEST(Checkpoint, DescribesTheSingleFileGemmaTextEncoder) {
  const std::string path = test::fixture("text_gemma4.te.safetensors");
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "text encoder");
  EXPECT_EQ(s.family, "Gemma");
  EXPECT_EQ(s.version, "2.5");
  EXPECT_NE(s.version_name.find("Gemma 4 unified"), std::string::npos);
  EXPECT_EQ(ids(s), (std::vector<std::string>{"text_projection", "gemma", "tokenizer"}));
  expect_partition(s);
  const auto& g = comp(s, "gemma");
  EXPECT_EQ(g.config["model_type"], "gemma4_unified");
  EXPECT_EQ(g.config["gemma_version"], "gemma4-12b-ltx-v1");
  EXPECT_EQ(g.config["hidden_size"], 24);
  EXPECT_EQ(g.config["num_hidden_layers"], 6);
  EXPECT_EQ(g.config["layers_in_file"], 6);
  EXPECT_EQ(g.config["key_layout"], "Comfy-flat Gemma 4 (model.layers.*)");
  EXPECT_EQ(g.config["language_model_params"].get<int64_t>() +
                g.config["vision_audio_params"].get<int64_t>(),
            g.params);
  const auto& tok = comp(s, "tokenizer");
  EXPECT_EQ(tok.dtype_tensors, (std::map<std::string, int64_t>{{"u8", 3}}));
  EXPECT_EQ(tok.config["assets"],
            json::parse(R"(["processor_config.json", "tokenizer_config.json"])"));
  EXPECT_EQ(tok.config["tokenizer_json_bytes"],
            SafetensorsFile(path).info("tokenizer_json").nbytes());
  EXPECT_EQ(comp(s, "text_projection").config["feature_extractor"], "V2");
}

// ------------------------------------------------------------------ synthetic files

TEST(Checkpoint, DescribesALoraFile) {
  TempDir dir;
  const std::string path = dir.file("tiny.lora.safetensors");
  std::vector<std::pair<std::string, Tensor>> t;
  for (int b = 0; b < 2; ++b)
    for (const char* m : {"attn1.to_q", "ff.net.0.proj"}) {
      const std::string p = str("diffusion_model.transformer_blocks.", b, ".", m);
      t.emplace_back(p + ".lora_A.weight", Tensor::zeros({4, 16}, DType::BF16));
      t.emplace_back(p + ".lora_B.weight", Tensor::zeros({32, 4}, DType::BF16));
      t.emplace_back(p + ".alpha", Tensor::full({}, 4.0, DType::BF16));
    }
  t.emplace_back("diffusion_model.proj_out.lora_A.weight", Tensor::zeros({4, 16}, DType::BF16));
  write_safetensors(
      path, t,
      {{"reference_downscale_factor", "2"}, {"ss_network_alpha", "4"}, {"unrelated", "x"}});
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "LoRA");
  EXPECT_EQ(ids(s), std::vector<std::string>{"lora"});
  expect_partition(s);
  const auto& l = comp(s, "lora");
  EXPECT_EQ(l.config["targets"], 4);
  EXPECT_EQ(l.config["rank"], 4);
  EXPECT_EQ(l.config["alpha_tensors"], 4);
  EXPECT_EQ(l.config["target_modules"], json::parse(R"({"attn1.to_q": 2, "ff.net.0.proj": 2})"));
  EXPECT_EQ(l.config["metadata.reference_downscale_factor"], 2);
  EXPECT_EQ(l.config["metadata.ss_network_alpha"], 4);
  EXPECT_FALSE(l.config.contains("metadata.unrelated"));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("diffusion_model.proj_out.lora_A.weight"), std::string::npos);
  EXPECT_FALSE(l.notes.empty());  // alpha is ignored by the reference
}

TEST(Checkpoint, ReportsMixedLoraRanks) {
  TempDir dir;
  const std::string path = dir.file("mixed.safetensors");
  write_safetensors(path, {{"a.lora_A.weight", Tensor::zeros({2, 8})},
                           {"a.lora_B.weight", Tensor::zeros({8, 2})},
                           {"b.lora_A.weight", Tensor::zeros({8, 8})},
                           {"b.lora_B.weight", Tensor::zeros({8, 3})}});
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(comp(s, "lora").config["rank"], json::parse("[2, 8]"));
  ASSERT_EQ(s.warnings.size(), 1u);  // b's matrices do not multiply
  EXPECT_NE(s.warnings[0].find("'b'"), std::string::npos);
}

TEST(Checkpoint, DescribesABweVocoderAndSplitVaeFile) {
  TempDir dir;
  const std::string path = dir.file("audio.safetensors");
  const json config = json::parse(R"({
      "audio_vae": {"model": {"params": {"ddconfig": {"ch": 64, "z_channels": 8}}}},
      "vocoder": {"vocoder": {"upsample_initial_channel": 1536, "resblock": "AMP1"},
                  "bwe": {"upsample_initial_channel": 512, "input_sampling_rate": 16000,
                          "output_sampling_rate": 48000}}})");
  write_safetensors(path,
                    {{"audio_vae.decoder.conv_in.conv.weight", Tensor::zeros({4, 2, 3, 3})},
                     {"audio_vae.per_channel_statistics.mean-of-means", Tensor::zeros({64})},
                     {"vocoder.vocoder.conv_pre.weight", Tensor::zeros({8, 4, 7})},
                     {"vocoder.bwe_generator.conv_pre.weight", Tensor::zeros({8, 4, 7})},
                     {"vocoder.mel_stft.mel_basis", Tensor::zeros({64, 257})}},
                    {{"config", config.dump()}, {"model_version", "2.3.0"}});
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "audio VAE + vocoder");
  EXPECT_EQ(s.version_name, "LTX-2.3");
  EXPECT_EQ(ids(s),
            (std::vector<std::string>{"audio_vae_decoder", "audio_vae_statistics", "vocoder"}));
  expect_partition(s);
  const auto& v = comp(s, "vocoder");
  EXPECT_EQ(v.config["kind"], "BigVGAN-v2 + BWE");
  EXPECT_EQ(v.config["bandwidth_extension"], true);
  EXPECT_EQ(v.config["upsample_initial_channel"], 1536);
  EXPECT_EQ(v.config["bwe_upsample_initial_channel"], 512);
  EXPECT_EQ(v.config["output_sampling_rate"], 48000);
  EXPECT_EQ(v.params, 8 * 4 * 7 * 2 + 64 * 257);
  EXPECT_EQ(comp(s, "audio_vae_decoder").config["ch"], 64);
  EXPECT_EQ(comp(s, "audio_vae_decoder").config["ch_mult"], json::parse("[1, 2, 4]"));
  EXPECT_TRUE(comp(s, "audio_vae_decoder").defaulted.count("ch_mult"));
  EXPECT_EQ(comp(s, "audio_vae_statistics").config["channels"], 64);
}

TEST(Checkpoint, ClassifiesBareSplitVaeKeys) {
  TempDir dir;
  const std::string path = dir.file("vae.safetensors");
  const json config = json::parse(R"({"vae": {
      "_class_name": "CausalVideoAutoencoder", "latent_channels": 4, "patch_size": 2,
      "encoder_blocks": [["res_x", {}], ["compress_time_res", {}], ["compress_space_res", {}]],
      "decoder_blocks": [["compress_all", {}]], "spatial_padding_mode": "zeros"}})");
  write_safetensors(path,
                    {{"encoder.conv_in.conv.weight", Tensor::zeros({4, 12, 3, 3, 3})},
                     {"decoder.conv_in.conv.weight", Tensor::zeros({8, 4, 3, 3, 3})},
                     {"per_channel_statistics.mean-of-means", Tensor::zeros({4})},
                     {"per_channel_statistics.std-of-means", Tensor::zeros({4})}},
                    {{"config", config.dump()}, {"model_version", "2.5.0"}});
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "video VAE");
  EXPECT_EQ(s.version_name, "LTX-2.5");
  EXPECT_EQ(ids(s), (std::vector<std::string>{"video_vae_encoder", "video_vae_decoder",
                                              "video_vae_statistics"}));
  expect_partition(s);
  EXPECT_EQ(comp(s, "video_vae_encoder").config["compression"], "2x4x4");
  EXPECT_EQ(comp(s, "video_vae_decoder").config["compression"], "2x4x4");
  EXPECT_EQ(comp(s, "video_vae_decoder").config["spatial_padding_mode"], "zeros");
  EXPECT_EQ(comp(s, "video_vae_decoder").config["timestep_conditioning"], true);  // code default
  EXPECT_EQ(comp(s, "video_vae_statistics").params, 8);
}

TEST(Checkpoint, InfersVersionFromConfigFlagsWithoutModelVersion) {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  const json config = json::parse(R"({"transformer": {"num_layers": 3,
      "caption_proj_before_connector": true, "ff_bias": false}})");
  write_safetensors(
      path,
      {{"model.diffusion_model.transformer_blocks.0.attn1.to_q.weight", Tensor::zeros({2, 2})},
       {"model.diffusion_model.transformer_blocks.1.attn1.to_q.weight", Tensor::zeros({2, 2})}},
      {{"config", config.dump()}});
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.version, "2.5");
  EXPECT_NE(s.version_source.find("ff_bias"), std::string::npos);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("num_layers is 3 but the file holds 2"), std::string::npos)
      << s.warnings[0];

  const json config23 = json::parse(R"({"transformer": {"caption_proj_before_connector": true}})");
  write_safetensors(path, {{"model.diffusion_model.x", Tensor::zeros({1})}},
                    {{"config", config23.dump()}});
  EXPECT_EQ(inspect_checkpoint(path).version, "2.3+");
}

TEST(Checkpoint, WarnsAboutUnknownTensorsAndUnreadableConfig) {
  TempDir dir;
  const std::string path = dir.file("odd.safetensors");
  write_safetensors(path, {{"foo.bar", Tensor::zeros({3})}, {"baz", Tensor::zeros({2})}},
                    {{"config", "{not json"}});
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "unknown");
  EXPECT_EQ(s.family, "");
  EXPECT_EQ(s.version_name, "unknown");
  EXPECT_EQ(ids(s), std::vector<std::string>{"other"});
  EXPECT_EQ(comp(s, "other").params, 5);
  ASSERT_EQ(s.warnings.size(), 2u);
  EXPECT_NE(s.warnings[0].find("not valid JSON"), std::string::npos);
  EXPECT_NE(s.warnings[1].find("2 tensors belong to no known component"), std::string::npos);
}

TEST(Checkpoint, DescribesAnEmptyFile) {
  TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  write_safetensors(path, {});
  const CheckpointSummary s = inspect_checkpoint(path);
  EXPECT_EQ(s.layout, "empty");
  EXPECT_EQ(s.params, 0);
  EXPECT_TRUE(s.components.empty());
  EXPECT_NE(io::to_text(s).find("empty"), std::string::npos);
}

TEST(Checkpoint, BadFilesThrowNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("broken.safetensors");
  test::write_bytes(path, test::raw_safetensors("{\"a\":1}", 0));
  test::expect_error_containing([&] { inspect_checkpoint(path); }, {path, "tensor 'a'"});
}

TEST(Checkpoint, ParsesModelVersionsLikeTheReference) {
  EXPECT_EQ(io::parse_model_version("2.3.0"), (std::vector<int>{2, 3, 0}));
  EXPECT_EQ(io::parse_model_version("2.5"), (std::vector<int>{2, 5}));
  EXPECT_EQ(io::parse_model_version("2.4-rc2"), (std::vector<int>{2, 4}));
  EXPECT_EQ(io::parse_model_version("2.3.rc1"), (std::vector<int>{2, 3}));
  EXPECT_EQ(io::parse_model_version(""), std::vector<int>{});
  EXPECT_EQ(io::parse_model_version("beta"), std::vector<int>{});
  EXPECT_EQ(io::parse_model_version("2..3"), std::vector<int>{2});
}

TEST(Checkpoint, JsonAndTextReportsCarryTheSummary) {
  const CheckpointSummary s = inspect_checkpoint(test::fixture("tiny_ltx2_19b.safetensors"));
  const nlohmann::ordered_json j = io::to_json(s);
  EXPECT_EQ(j["version_name"], "LTX-2 (19B)");
  EXPECT_EQ(j["layout"], "single-file checkpoint");
  EXPECT_TRUE(j["model_version"].is_null());
  EXPECT_EQ(j["params"], s.params);
  ASSERT_EQ(j["components"].size(), s.components.size());
  EXPECT_EQ(j["components"][0]["id"], "transformer");
  EXPECT_EQ(j["components"][0]["dtypes"]["bf16"]["params"], s.components[0].params);
  EXPECT_EQ(j["components"][0]["config"]["num_layers"], 2);
  const std::string text = io::to_text(s);
  for (const char* needle :
       {"LTX-2 (19B)", "single-file checkpoint", "transformer (DiT)", "heads=2x32",
        "caption_proj_before_connector=false*", "vocoder", "1,523,336"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
}

}  // namespace
}  // namespace ltx
