#pragma once
// Writers of the layouts users have, for tests (tests/io/layouts_test.cpp, tests/cli,
// tests/cuda): ComfyUI's FP8 Gemma from the tiny Gemma 3, and the tiny official checkpoint as a
// Diffusers folder, following diffusers'
// scripts/convert_ltx2_to_diffusers.py forward (LTX-2.3 rename dicts and special remaps; for a
// tiny LTX-2.5 checkpoint, its diffusion decoder as convert_ltx2_diffusion_video_vae writes it)
// and written independently of the inverse tables in src/io/layouts.cpp.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/string_replace.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "ops/elementwise.h"
#include "support/test_support.h"

namespace ltx::test {

namespace layouts_detail {
using json = nlohmann::json;
namespace fs = std::filesystem;
using io::SafetensorsFile;
using io::write_safetensors;

inline std::string apply_dict(std::string k,
                              const std::vector<std::pair<std::string, std::string>>& d) {
  for (const auto& [from, to] : d) k = replace_all(k, from, to);
  return k;
}

// The forward direction, written from diffusers' scripts/convert_ltx2_to_diffusers.py (LTX-2.3
// dicts and special remaps) independently of the inverse tables under test: official key ->
// (component folder, Diffusers key), or nothing for a key the script drops.
inline std::optional<std::pair<std::string, std::string>> to_diffusers(const std::string& key) {
  const std::string dit = "model.diffusion_model.";
  const auto strip = [](const std::string& k, const std::string& p) { return k.substr(p.size()); };
  if (key.starts_with(dit + "video_embeddings_connector.") ||
      key.starts_with(dit + "audio_embeddings_connector.") ||
      key.starts_with("text_embedding_projection.")) {
    const std::string k = key.starts_with(dit) ? strip(key, dit) : key;
    return std::pair{
        "connectors",
        apply_dict(k, {{"connectors.", ""},
                       {"video_embeddings_connector", "video_connector"},
                       {"audio_embeddings_connector", "audio_connector"},
                       {"transformer_1d_blocks", "transformer_blocks"},
                       {"text_embedding_projection.audio_aggregate_embed", "audio_text_proj_in"},
                       {"text_embedding_projection.video_aggregate_embed", "video_text_proj_in"},
                       {"q_norm", "norm_q"},
                       {"k_norm", "norm_k"}})};
  }
  if (key.starts_with(dit)) {
    std::string k =
        apply_dict(strip(key, dit),
                   {{"patchify_proj", "proj_in"},
                    {"audio_patchify_proj", "audio_proj_in"},
                    {"av_ca_video_scale_shift_adaln_single", "av_cross_attn_video_scale_shift"},
                    {"av_ca_a2v_gate_adaln_single", "av_cross_attn_video_a2v_gate"},
                    {"av_ca_audio_scale_shift_adaln_single", "av_cross_attn_audio_scale_shift"},
                    {"av_ca_v2a_gate_adaln_single", "av_cross_attn_audio_v2a_gate"},
                    {"scale_shift_table_a2v_ca_video", "video_a2v_cross_attn_scale_shift_table"},
                    {"scale_shift_table_a2v_ca_audio", "audio_a2v_cross_attn_scale_shift_table"},
                    {"q_norm", "norm_q"},
                    {"k_norm", "norm_k"},
                    {"audio_prompt_adaln_single", "audio_prompt_adaln"},
                    {"prompt_adaln_single", "prompt_adaln"}});
    if (k.starts_with("adaln_single.")) k = "time_embed." + strip(k, "adaln_single.");
    if (k.starts_with("audio_adaln_single."))
      k = "audio_time_embed." + strip(k, "audio_adaln_single.");
    return std::pair{"transformer", k};
  }
  if (key.starts_with("vae.")) {
    const std::string k = strip(key, "vae.");
    if (k == "per_channel_statistics.channel" || k == "per_channel_statistics.mean-of-stds")
      return std::nullopt;
    return std::pair{"vae", apply_dict(k, {{"down_blocks.0", "down_blocks.0"},
                                           {"down_blocks.1", "down_blocks.0.downsamplers.0"},
                                           {"down_blocks.2", "down_blocks.1"},
                                           {"down_blocks.3", "down_blocks.1.downsamplers.0"},
                                           {"down_blocks.4", "down_blocks.2"},
                                           {"down_blocks.5", "down_blocks.2.downsamplers.0"},
                                           {"down_blocks.6", "down_blocks.3"},
                                           {"down_blocks.7", "down_blocks.3.downsamplers.0"},
                                           {"down_blocks.8", "mid_block"},
                                           {"up_blocks.0", "mid_block"},
                                           {"up_blocks.1", "up_blocks.0.upsamplers.0"},
                                           {"up_blocks.2", "up_blocks.0"},
                                           {"up_blocks.3", "up_blocks.1.upsamplers.0"},
                                           {"up_blocks.4", "up_blocks.1"},
                                           {"up_blocks.5", "up_blocks.2.upsamplers.0"},
                                           {"up_blocks.6", "up_blocks.2"},
                                           {"last_time_embedder", "time_embedder"},
                                           {"last_scale_shift_table", "scale_shift_table"},
                                           {"res_blocks", "resnets"},
                                           {"per_channel_statistics.mean-of-means", "latents_mean"},
                                           {"per_channel_statistics.std-of-means", "latents_std"},
                                           {"up_blocks.7", "up_blocks.3.upsamplers.0"},
                                           {"up_blocks.8", "up_blocks.3"}})};
  }
  if (key.starts_with("audio_vae.")) {
    const std::string k = strip(key, "audio_vae.");
    if (k.starts_with("per_channel_statistics.") && !k.ends_with("-of-means")) return std::nullopt;
    return std::pair{"audio_vae",
                     apply_dict(k, {{"per_channel_statistics.mean-of-means", "latents_mean"},
                                    {"per_channel_statistics.std-of-means", "latents_std"}})};
  }
  if (key.starts_with("vocoder.")) {
    std::string k = apply_dict(strip(key, "vocoder."), {{"resblocks", "resnets"},
                                                        {"conv_pre", "conv_in"},
                                                        {"conv_post", "conv_out"},
                                                        {"act_post", "act_out"},
                                                        {"downsample.lowpass", "downsample"}});
    k = replace_all(k, ".ups.", ".upsamplers.");
    if (k.starts_with("ups.")) k = "upsamplers." + strip(k, "ups.");
    return std::pair{"vocoder", k};
  }
  return std::nullopt;
}

inline json official_transformer_config(const SafetensorsFile& f) {
  return json::parse(f.metadata().at("config"))["transformer"];
}

// The Diffusers configs of the fixture's transformer and connectors, as the conversion script
// writes them (the names of LTX2VideoTransformer3DModel / LTX2TextConnectors).
inline json diffusers_transformer_config(const json& t) {
  json d;
  d["_class_name"] = "LTX2VideoTransformer3DModel";
  for (const char* k :
       {"num_attention_heads", "attention_head_dim", "in_channels", "out_channels", "num_layers",
        "cross_attention_dim", "norm_eps", "caption_channels", "audio_num_attention_heads",
        "audio_attention_head_dim", "audio_in_channels", "audio_out_channels",
        "audio_cross_attention_dim", "timestep_scale_multiplier", "activation_fn", "attention_bias",
        "norm_elementwise_affine", "rope_type"})
    if (t.contains(k)) d[k] = t[k];
  for (const char* k :
       {"ff_bias", "audio_ff_bias", "use_prompt_adaln_single", "use_keyframes_abs_pos_embedding"})
    if (t.contains(k)) d[k] = t[k];
  d["qk_norm"] = "rms_norm_across_heads";
  d["rope_theta"] = t.value("positional_embedding_theta", 10000.0);
  d["pos_embed_max_pos"] = t["positional_embedding_max_pos"][0];
  d["base_height"] = t["positional_embedding_max_pos"][1];
  d["base_width"] = t["positional_embedding_max_pos"][2];
  d["audio_pos_embed_max_pos"] = t["audio_positional_embedding_max_pos"][0];
  d["rope_double_precision"] = t.value("frequencies_precision", "") == "float64";
  d["gated_attn"] = d["audio_gated_attn"] = t.value("apply_gated_attention", false);
  d["cross_attn_mod"] = d["audio_cross_attn_mod"] = t.value("cross_attention_adaln", false);
  d["cross_attn_timestep_scale_multiplier"] = t["av_ca_timestep_scale_multiplier"];
  d["use_prompt_embeddings"] = false;
  return d;
}

inline json diffusers_connectors_config(const json& t) {
  json d;
  d["_class_name"] = "LTX2TextConnectors";
  d["caption_channels"] = t["caption_channels"];
  d["video_connector_num_attention_heads"] = t["connector_num_attention_heads"];
  d["video_connector_attention_head_dim"] = t["connector_attention_head_dim"];
  d["video_connector_num_layers"] = t["connector_num_layers"];
  d["video_connector_num_learnable_registers"] = t.value("connector_num_learnable_registers", 128);
  d["audio_connector_num_attention_heads"] =
      t.value("audio_connector_num_attention_heads", t["connector_num_attention_heads"]);
  d["audio_connector_attention_head_dim"] =
      t.value("audio_connector_attention_head_dim", t["connector_attention_head_dim"]);
  d["audio_connector_num_layers"] =
      t.value("audio_connector_num_layers", t["connector_num_layers"]);
  d["video_gated_attn"] = d["audio_gated_attn"] = t.value("connector_apply_gated_attention", false);
  d["connector_rope_base_seq_len"] = t["connector_positional_embedding_max_pos"][0];
  d["rope_type"] = t.value("rope_type", "split");
  d["rope_double_precision"] = t.value("frequencies_precision", "") == "float64";
  d["per_modality_projections"] = t.value("caption_proj_before_connector", false);
  return d;
}

// config.vae (the fixture's flat CausalVideoAutoencoder) as AutoencoderKLLTX2Video's config.
inline json diffusers_vae_config(const json& v) {
  json d;
  d["_class_name"] = "AutoencoderKLLTX2Video";
  const int64_t latent = v["latent_channels"];
  d["latent_channels"] = latent;
  d["in_channels"] = v.value("in_channels", 3);
  d["out_channels"] = v.value("out_channels", 3);
  d["patch_size"] = v.value("patch_size", 4);
  const auto type_of = [](std::string n) {
    for (const char* suffix : {"_res"})
      if (n.ends_with(suffix)) n = n.substr(0, n.size() - 4);
    return n == "compress_space" ? "spatial" : n == "compress_time" ? "temporal" : "spatiotemporal";
  };
  json layers = json::array(), out = json::array(), down = json::array();
  int64_t ch = latent;
  for (const json& b : v["encoder_blocks"]) {
    const std::string n = b[0];
    if (n == "res_x") {
      layers.push_back(b[1]["num_layers"]);
    } else {
      ch *= b[1].value("multiplier", 2);
      out.push_back(ch);
      down.push_back(type_of(n));
    }
  }
  d["block_out_channels"] = out;
  d["layers_per_block"] = layers;
  d["downsample_type"] = down;
  d["spatio_temporal_scaling"] = json(std::vector<bool>(out.size(), true));
  json dl = json::array(), dout = json::array(), up = json::array(), factor = json::array(),
       residual = json::array();
  int64_t width = v["decoder_base_channels"];
  for (const json& b : v["decoder_blocks"]) {
    const std::string n = b[0];
    if (n == "res_x") {
      dl.push_back(b[1]["num_layers"]);
    } else {
      const int64_t m = b[1].value("multiplier", 1);
      width *= m;
      dout.push_back(width);
      up.push_back(type_of(n));
      factor.push_back(m);
      residual.push_back(b[1].value("residual", false));
    }
  }
  d["decoder_block_out_channels"] = dout;
  d["decoder_layers_per_block"] = dl;
  d["upsample_type"] = up;
  d["upsample_factor"] = factor;
  d["upsample_residual"] = residual;
  d["decoder_spatio_temporal_scaling"] = json(std::vector<bool>(dout.size(), true));
  d["timestep_conditioning"] = v.value("timestep_conditioning", false);
  d["decoder_causal"] = v.value("causal_decoder", false);
  d["encoder_spatial_padding_mode"] = v.value("spatial_padding_mode", "zeros");
  d["decoder_spatial_padding_mode"] = v.value("spatial_padding_mode", "reflect");
  return d;
}

inline json diffusers_audio_vae_config(const json& a) {
  const json dd = a["model"]["params"]["ddconfig"];
  json d;
  d["_class_name"] = "AutoencoderKLLTX2Audio";
  d["base_channels"] = dd["ch"];
  d["output_channels"] = dd["out_ch"];
  d["ch_mult"] = dd["ch_mult"];
  d["num_res_blocks"] = dd["num_res_blocks"];
  d["attn_resolutions"] = dd["attn_resolutions"].empty() ? json() : dd["attn_resolutions"];
  d["in_channels"] = dd["in_channels"];
  d["resolution"] = dd["resolution"];
  d["latent_channels"] = dd["z_channels"];
  d["norm_type"] = dd["norm_type"];
  d["causality_axis"] = dd["causality_axis"];
  d["mid_block_add_attention"] = dd["mid_block_add_attention"];
  d["mel_bins"] = dd["mel_bins"];
  d["double_z"] = dd["double_z"];
  d["sample_rate"] = a["model"]["params"]["sampling_rate"];
  d["mel_hop_length"] = a["preprocessing"]["stft"]["hop_length"];
  d["is_causal"] = a["preprocessing"]["stft"]["causal"];
  return d;
}

inline json diffusers_vocoder_config(const json& v) {
  json d;
  d["_class_name"] = "LTX2VocoderWithBWE";
  const auto generator = [&](const json& g, const std::string& p) {
    d[p + "hidden_channels"] = g["upsample_initial_channel"];
    d[p + "upsample_factors"] = g["upsample_rates"];
    d[p + "upsample_kernel_sizes"] = g["upsample_kernel_sizes"];
    d[p + "resnet_kernel_sizes"] = g["resblock_kernel_sizes"];
    d[p + "resnet_dilations"] = g["resblock_dilation_sizes"];
    d[p + "act_fn"] = "snakebeta";
    d[p + "final_act_fn"] = g.value("use_tanh_at_final", true) ? json("tanh") : json();
    d[p + "final_bias"] = g.value("use_bias_at_final", true);
    d[p + "out_channels"] = 2;
  };
  generator(v["vocoder"], "");
  generator(v["bwe"], "bwe_");
  const json& b = v["bwe"];
  d["input_sampling_rate"] = b["input_sampling_rate"];
  d["output_sampling_rate"] = b["output_sampling_rate"];
  d["hop_length"] = b["hop_length"];
  d["filter_length"] = b["n_fft"];
  d["window_length"] = b["win_size"];
  d["num_mel_channels"] = b["num_mels"];
  return d;
}

inline void write_json(const fs::path& p, const json& j) { write_bytes(p.string(), j.dump(2)); }

// LTX-2.5's diffusion decoder forward, from convert_ltx2_diffusion_video_vae (written
// independently of the inverse table): the official VAE's `vae.decoder.*` without the prefix,
// `coarse_*` heads and static gates dropped, LTX_2_5_DIFFUSION_DECODER_RENAME_DICT applied, each
// gate folded into the Linear it gates (f32 product, back to the stored dtype), the fused qkv
// split into thirds (to_q / to_k / to_v), `decoder.` put back; the statistics renamed by the
// conv VAE dict (mean-of-stds and channel dropped).
inline std::vector<std::pair<std::string, Tensor>> diffusion_decoder_to_diffusers(
    const SafetensorsFile& official) {
  std::vector<std::pair<std::string, Tensor>> out;
  std::map<std::string, Tensor> decoder, gates;
  for (const std::string& key : official.names()) {
    if (key.starts_with("vae.per_channel_statistics.")) {
      const std::string k = key.substr(4);
      if (k.ends_with(".channel") || k.ends_with("mean-of-stds")) continue;
      out.emplace_back(apply_dict(k, {{"per_channel_statistics.mean-of-means", "latents_mean"},
                                      {"per_channel_statistics.std-of-means", "latents_std"}}),
                       official.tensor(key));
    } else if (key.starts_with("vae.decoder.")) {
      const std::string k = key.substr(12);
      (k.ends_with(".gate_msa") || k.ends_with(".gate_mlp") || k.ends_with(".gate_ctx")
           ? gates
           : decoder)[k] = official.tensor(key);
    }
  }
  const std::vector<std::pair<std::string, std::string>> fold_targets = {
      {".attn.to_out.0.weight", ".gate_msa"}, {".attn.to_out.0.bias", ".gate_msa"},
      {".mlp.w_down.weight", ".gate_mlp"},    {".context_proj.weight", ".gate_ctx"},
      {".context_proj.bias", ".gate_ctx"}};
  for (const auto& [key, stored] : decoder) {
    if (key.starts_with("coarse_") || key.find(".coarse_") != std::string::npos) continue;
    const std::string k = apply_dict(key, {{"t_embedder.mlp.0.", "t_embedder.timestep_embedder.linear_1."},
                                           {"t_embedder.mlp.2.", "t_embedder.timestep_embedder.linear_2."},
                                           {".attn.proj.", ".attn.to_out.0."},
                                           {".attn.q_norm.", ".attn.norm_q."},
                                           {".attn.k_norm.", ".attn.norm_k."}});
    Tensor value = stored;
    for (const auto& [leaf, gate_suffix] : fold_targets) {
      if (!k.ends_with(leaf)) continue;
      const auto g = gates.find(k.substr(0, k.size() - leaf.size()) + gate_suffix);
      if (g == gates.end()) break;
      const Tensor gf = g->second.to(DType::F32);
      value = ops::mul(value.dim() == 2 ? gf.unsqueeze(1) : gf, value.to(DType::F32))
                  .to(stored.dtype());
      break;
    }
    for (const std::string leaf : {"weight", "bias"}) {
      if (!k.ends_with(".qkv." + leaf)) continue;
      const std::string base = k.substr(0, k.size() - leaf.size() - 4);
      const int64_t third = value.size(0) / 3;
      const char* names[] = {"to_q.", "to_k.", "to_v."};
      for (int i = 0; i < 3; ++i)
        out.emplace_back("decoder." + base + names[i] + leaf,
                         value.slice(0, i * third, (i + 1) * third).contiguous());
    }
    if (!k.ends_with(".qkv.weight") && !k.ends_with(".qkv.bias"))
      out.emplace_back("decoder." + k, value);
  }
  return out;
}

// config.vae of an official diffusion VAE (CausalDiffusionVAE / NADiffusionDecoder) as
// LTX2VideoDiffusionDecoderModel's config: four deterministic stage kernels plus the stage-5
// kernel, the `upsamples` pairs as strides and channel reductions.
inline json diffusers_diffusion_decoder_config(const json& v) {
  const json& dec = v["decoder"];
  json d;
  d["_class_name"] = "LTX2VideoDiffusionDecoderModel";
  d["out_channels"] = dec["out_channels"];
  d["latent_channels"] = dec["in_channels"];
  d["patch_size"] = dec["patch_size"];
  d["scaling_factor"] = 1.0;
  d["decoder_head_dim"] = dec["head_dim"];
  d["decoder_stage_channels"] = dec["stage_channels"];
  d["decoder_stage_depths"] = dec["stage_depths"];
  json kernels = dec["stage_kernels"];
  kernels.erase(kernels.size() - 1);
  d["decoder_stage_kernels"] = kernels;
  json strides = json::array(), reductions = json::array();
  for (const json& u : dec["upsamples"]) {
    strides.push_back(u[0]);
    reductions.push_back(u[1]);
  }
  d["decoder_upsample_strides"] = strides;
  d["decoder_upsample_channel_reductions"] = reductions;
  d["decoder_stage5_kernel"] = dec["stage5_kernel"];
  d["decoder_t_emb_dim"] = dec["t_emb_dim"];
  d["decoder_timestep_scale_multiplier"] = dec["timestep_scale_multiplier"];
  d["decoder_model_output_type"] = v["model_output_type"];
  d["decoder_num_inference_steps"] = dec["default_num_inference_steps"];
  d["spatial_compression_ratio"] = 32;
  d["temporal_compression_ratio"] = 8;
  return d;
}

// A tiny official LTX-2.5-style checkpoint: the tiny LTX-2.3 checkpoint with its video VAE
// replaced by a diffusion VAE (its conv encoder, the diffusion decoder fixture diffdec_ltx25 and
// that file's statistics; config.vae a CausalDiffusionVAE with the encoder nested). With `gated`
// the decoder also carries legacy static gates and a coarse head, as gated distilled files do.
inline std::string write_official_ltx25(const TempDir& tmp, bool gated) {
  const auto base = SafetensorsFile::open(fixture("e2e/ltx23_tiny.safetensors"));
  const auto dd = SafetensorsFile::open(fixture("diffdec_ltx25.weights.safetensors"));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& key : base->names())
    if (!key.starts_with("vae.decoder.") && !key.starts_with("vae.per_channel_statistics."))
      tensors.emplace_back(key, base->tensor(key));
  for (const std::string& key : dd->names()) tensors.emplace_back("vae." + key, dd->tensor(key));
  if (gated) {
    const int64_t c5 = dd->info("decoder.norm_out.weight").shape[0];
    uint64_t seed = 7;
    for (const char* block : {"diff_blocks.0.", "diff_blocks.1."})
      for (const char* gate : {"gate_msa", "gate_mlp", "gate_ctx"})
        tensors.emplace_back(str("vae.decoder.", block, gate),
                             random_tensor({c5}, ++seed, 0.5f, 1.5f).to(DType::BF16));
    tensors.emplace_back("vae.decoder.coarse_head.weight",
                         random_tensor({4, c5}, 99).to(DType::BF16));
  }
  json config = json::parse(base->metadata().at("config"));
  const json conv = config["vae"];
  json vae = json::parse(dd->metadata().at("config"))["vae"];
  vae["encoder"] = {{"blocks", conv["encoder_blocks"]},
                    {"in_channels", conv.value("in_channels", 3)},
                    {"out_channels", conv["latent_channels"]},
                    {"patch_size", conv.value("patch_size", 4)},
                    {"norm_layer", conv.value("norm_layer", "pixel_norm")},
                    {"latent_log_var", conv.value("latent_log_var", "uniform")},
                    {"spatial_padding_mode", conv.value("spatial_padding_mode", "zeros")}};
  config["vae"] = vae;
  std::map<std::string, std::string> metadata = base->metadata();
  metadata["config"] = config.dump();
  const std::string path = tmp.file(gated ? "ltx25_tiny_gated.safetensors" : "ltx25_tiny.safetensors");
  write_safetensors(path, tensors, metadata);
  return path;
}

// Writes the tiny official checkpoint as a Diffusers folder (the transformer in two shards + an
// index) and returns it. An LTX-2.5 checkpoint (config.vae a CausalDiffusionVAE) gets its video
// VAE as the converter's --diffusion_vae writes it, in `diffusion_decoder/` (listed in
// model_index.json or not, `list_diffusion_decoder`), and `vae/` from the conv VAE file
// `conv_vae` (its `vae.*` and config.vae), as the converter's --vae_filename does.
inline std::string write_diffusers_folder(const TempDir& tmp, const SafetensorsFile& official,
                                          const SafetensorsFile* conv_vae = nullptr,
                                          bool list_diffusion_decoder = true) {
  const fs::path root = tmp.file("pipeline");
  std::map<std::string, std::vector<std::pair<std::string, Tensor>>> parts;
  const json official_config = json::parse(official.metadata().at("config"));
  const bool diffusion = official_config["vae"].value("_class_name", "") == "CausalDiffusionVAE";
  for (const std::string& key : official.names())
    if (auto to = to_diffusers(key); to && !(diffusion && key.starts_with("vae.")))
      parts[to->first].emplace_back(to->second, official.tensor(key));
  if (diffusion) {
    parts["diffusion_decoder"] = diffusion_decoder_to_diffusers(official);
    if (conv_vae != nullptr)
      for (const std::string& key : conv_vae->names())
        if (auto to = to_diffusers(key); to && key.starts_with("vae."))
          parts["vae"].emplace_back(to->second, conv_vae->tensor(key));
  }
  json index = {{"_class_name", "LTX2Pipeline"}, {"_diffusers_version", "0.37.0"}};
  const json t = official_transformer_config(official);
  for (auto& [folder, tensors] : parts) {
    fs::create_directories(root / folder);
    if (folder != "diffusion_decoder" || list_diffusion_decoder)
      index[folder] = {"diffusers", folder};
    if (folder == "transformer") {
      const size_t half = tensors.size() / 2;
      const std::vector<std::pair<std::string, Tensor>> a(tensors.begin(), tensors.begin() + half),
          b(tensors.begin() + half, tensors.end());
      const std::string na = "diffusion_pytorch_model-00001-of-00002.safetensors";
      const std::string nb = "diffusion_pytorch_model-00002-of-00002.safetensors";
      write_safetensors((root / folder / na).string(), a);
      write_safetensors((root / folder / nb).string(), b);
      json wm = json::object();
      for (const auto& [k, v] : a) wm[k] = na;
      for (const auto& [k, v] : b) wm[k] = nb;
      write_json(root / folder / "diffusion_pytorch_model.safetensors.index.json",
                 {{"metadata", {{"total_size", 0}}}, {"weight_map", wm}});
      write_json(root / folder / "config.json", diffusers_transformer_config(t));
    } else {
      write_safetensors((root / folder / "diffusion_pytorch_model.safetensors").string(), tensors);
      const json& cfg = official_config;
      const json vae_cfg =
          diffusion && conv_vae != nullptr
              ? json::parse(conv_vae->metadata().at("config"))["vae"]
              : cfg["vae"];
      write_json(root / folder / "config.json",
                 folder == "connectors"          ? diffusers_connectors_config(t)
                 : folder == "diffusion_decoder" ? diffusers_diffusion_decoder_config(cfg["vae"])
                 : folder == "vae"               ? diffusers_vae_config(vae_cfg)
                 : folder == "audio_vae" ? diffusers_audio_vae_config(cfg["audio_vae"])
                                         : diffusers_vocoder_config(cfg["vocoder"]));
    }
  }
  write_json(root / "model_index.json", index);
  return root.string();
}

}  // namespace layouts_detail

using layouts_detail::diffusers_transformer_config;
using layouts_detail::diffusion_decoder_to_diffusers;
using layouts_detail::write_official_ltx25;
using layouts_detail::official_transformer_config;
using layouts_detail::to_diffusers;
using layouts_detail::write_diffusers_folder;
using layouts_detail::write_json;

// The tiny Gemma 3's language model as ComfyUI's flat FP8 file: model.{layers,embed_tokens,norm}.*,
// the Linear weights in e4m3 (scaled: w / s with a `.scale_weight`, and the `scaled_fp8` marker),
// everything else as stored. Returns the file and fills `twin` with the dequantised weights under
// the official HF names (bf16(f32(w8) * s), as the reference folds pre-quantised scales).
inline void write_comfy_fp8_gemma(const std::string& path, const std::string& twin_path,
                                  bool scaled) {
  const auto te = io::SafetensorsFile::open(fixture("text_gemma3.te.safetensors"));
  std::vector<std::pair<std::string, Tensor>> comfy, twin;
  const std::string hf = "language_model.model.";
  for (const std::string& key : te->names()) {
    if (!key.starts_with(hf)) continue;
    const std::string flat = "model." + key.substr(hf.size());
    const Tensor w = te->tensor(key);
    const bool linear = w.dim() == 2 && key.find("embed_tokens") == std::string::npos;
    if (!linear) {
      comfy.emplace_back(flat, w);
      twin.emplace_back(key, w);
      continue;
    }
    const float s = scaled ? 0.03125f : 1.0f;
    const Tensor w8 =
        ops::mul(w.to(DType::F32), Tensor::full({}, 1.0f / s, DType::F32)).to(DType::F8E4M3FN);
    comfy.emplace_back(flat, w8);
    if (scaled)
      comfy.emplace_back(flat.substr(0, flat.size() - 7) + ".scale_weight",
                         Tensor::full({1}, s, DType::F32));
    twin.emplace_back(key, ops::mul(w8.to(DType::F32), Tensor::full({}, s, DType::F32))
                               .to(scaled ? DType::BF16 : DType::F32));
  }
  if (scaled) comfy.emplace_back("scaled_fp8", Tensor::full({2}, 0.0, DType::F32));
  io::write_safetensors(path, comfy);
  io::write_safetensors(twin_path, twin);
}

}  // namespace ltx::test
