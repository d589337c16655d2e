#include "io/layouts.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/input_limits.h"
#include "core/string_replace.h"

namespace ltx::io {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

KeyRename prefix(std::string from, std::string to) {
  return {std::move(from), std::move(to), true};
}
KeyRename substring(std::string from, std::string to) {
  return {std::move(from), std::move(to), false};
}


}  // namespace

// The inverse of diffusers' scripts/convert_ltx2_to_diffusers.py (LTX_2_0 / LTX_2_3 rename dicts
// and special remaps), one table per component; the tables hold for every version the script
// converts (a key a version lacks simply never matches).
const std::vector<DiffusersComponent>& diffusers_components() {
  static const std::vector<DiffusersComponent> kComponents = [] {
    std::vector<DiffusersComponent> c;
    c.push_back(
        {"transformer",
         "the DiT (LTX2VideoTransformer3DModel)",
         {{prefix("time_embed.", "adaln_single."),
           prefix("audio_time_embed.", "audio_adaln_single."),
           prefix("prompt_adaln.", "prompt_adaln_single."),
           prefix("audio_prompt_adaln.", "audio_prompt_adaln_single.")},
          {substring("proj_in", "patchify_proj")},
          {prefix("av_cross_attn_video_scale_shift.", "av_ca_video_scale_shift_adaln_single."),
           prefix("av_cross_attn_video_a2v_gate.", "av_ca_a2v_gate_adaln_single."),
           prefix("av_cross_attn_audio_scale_shift.", "av_ca_audio_scale_shift_adaln_single."),
           prefix("av_cross_attn_audio_v2a_gate.", "av_ca_v2a_gate_adaln_single.")},
          {substring("video_a2v_cross_attn_scale_shift_table", "scale_shift_table_a2v_ca_video"),
           substring("audio_a2v_cross_attn_scale_shift_table", "scale_shift_table_a2v_ca_audio")},
          {substring("norm_q", "q_norm")},
          {substring("norm_k", "k_norm")},
          {prefix("", "model.diffusion_model.")}}});
    c.push_back(
        {"connectors",
         "the text connectors and projection (LTX2TextConnectors)",
         {{prefix("video_connector.", "model.diffusion_model.video_embeddings_connector."),
           prefix("audio_connector.", "model.diffusion_model.audio_embeddings_connector."),
           prefix("text_proj_in.", "text_embedding_projection.aggregate_embed."),
           prefix("video_text_proj_in.", "text_embedding_projection.video_aggregate_embed."),
           prefix("audio_text_proj_in.", "text_embedding_projection.audio_aggregate_embed.")},
          {substring("transformer_blocks", "transformer_1d_blocks")},
          {substring("norm_q", "q_norm")},
          {substring("norm_k", "k_norm")}}});
    std::vector<KeyRename> vae_blocks;
    // Encoder: the official list alternates res blocks and downsamplers (8 = the mid block).
    for (int i = 0; i < 4; ++i)
      vae_blocks.push_back(prefix(str("encoder.down_blocks.", i, ".downsamplers.0."),
                                  str("encoder.down_blocks.", 2 * i + 1, ".")));
    for (int i = 0; i < 4; ++i)
      vae_blocks.push_back(
          prefix(str("encoder.down_blocks.", i, "."), str("encoder.down_blocks.", 2 * i, ".")));
    vae_blocks.push_back(prefix("encoder.mid_block.", "encoder.down_blocks.8."));
    // Decoder: 0 = the mid block, then an upsampler before each up block.
    vae_blocks.push_back(prefix("decoder.mid_block.", "decoder.up_blocks.0."));
    for (int i = 0; i < 4; ++i)
      vae_blocks.push_back(prefix(str("decoder.up_blocks.", i, ".upsamplers.0."),
                                  str("decoder.up_blocks.", 2 * i + 1, ".")));
    for (int i = 0; i < 4; ++i)
      vae_blocks.push_back(
          prefix(str("decoder.up_blocks.", i, "."), str("decoder.up_blocks.", 2 * i + 2, ".")));
    vae_blocks.push_back(prefix("decoder.time_embedder.", "decoder.last_time_embedder."));
    vae_blocks.push_back(prefix("decoder.scale_shift_table", "decoder.last_scale_shift_table"));
    vae_blocks.push_back(prefix("latents_mean", "per_channel_statistics.mean-of-means"));
    vae_blocks.push_back(prefix("latents_std", "per_channel_statistics.std-of-means"));
    c.push_back({"vae",
                 "the video VAE (AutoencoderKLLTX2Video)",
                 {vae_blocks, {substring("resnets", "res_blocks")}, {prefix("", "vae.")}}});
    // LTX_2_5_DIFFUSION_DECODER_RENAME_DICT inverted; the statistics as the conv VAE's. The fused
    // qkv comes back through diffusers_concats().
    DiffusersComponent dd{
        "diffusion_decoder",
        "LTX-2.5's diffusion video decoder (LTX2VideoDiffusionDecoderModel)",
        {{prefix("decoder.t_embedder.timestep_embedder.linear_1.", "decoder.t_embedder.mlp.0."),
          prefix("decoder.t_embedder.timestep_embedder.linear_2.", "decoder.t_embedder.mlp.2."),
          prefix("latents_mean", "per_channel_statistics.mean-of-means"),
          prefix("latents_std", "per_channel_statistics.std-of-means")},
         {substring(".attn.to_out.0.", ".attn.proj.")},
         {substring(".attn.norm_q.", ".attn.q_norm.")},
         {substring(".attn.norm_k.", ".attn.k_norm.")},
         {prefix("", "vae.")}}};
    dd.read_unlisted = true;
    dd.replaces_folder = "vae";
    dd.replaces_prefixes = {"decoder.", "latents_"};
    c.push_back(dd);
    c.push_back({"audio_vae",
                 "the audio VAE (AutoencoderKLLTX2Audio)",
                 {{prefix("latents_mean", "per_channel_statistics.mean-of-means"),
                   prefix("latents_std", "per_channel_statistics.std-of-means")},
                  {prefix("", "audio_vae.")}}});
    c.push_back({"vocoder",
                 "the vocoder (LTX2Vocoder / LTX2VocoderWithBWE)",
                 {{substring("upsamplers", "ups")},
                  {substring("resnets", "resblocks")},
                  {substring("conv_in", "conv_pre")},
                  {substring("conv_out", "conv_post")},
                  {substring("act_out", "act_post")},
                  {substring("downsample.", "downsample.lowpass.")},
                  {prefix("", "vocoder.")}}});
    c.push_back({"duration_head",
                 "the duration head (LTX2DurationHead)",
                 {{prefix("attention_pooler.to_out.", "attention_pooler.cross_attn.out_proj.")},
                  {prefix("", "duration_head.")}}});
    return c;
  }();
  return kComponents;
}

const std::vector<DiffusersConcat>& diffusers_concats() {
  static const std::vector<DiffusersConcat> kConcats = {
      {"duration_head",
       {"attention_pooler.to_q.weight", "attention_pooler.to_k.weight",
        "attention_pooler.to_v.weight"},
       "duration_head.attention_pooler.cross_attn.in_proj_weight"},
      {"duration_head",
       {"attention_pooler.to_q.bias", "attention_pooler.to_k.bias", "attention_pooler.to_v.bias"},
       "duration_head.attention_pooler.cross_attn.in_proj_bias"},
      {"diffusion_decoder",
       {".attn.to_q.weight", ".attn.to_k.weight", ".attn.to_v.weight"},
       ".attn.qkv.weight",
       true},
      {"diffusion_decoder",
       {".attn.to_q.bias", ".attn.to_k.bias", ".attn.to_v.bias"},
       ".attn.qkv.bias",
       true}};
  return kConcats;
}

std::string diffusers_to_official(const DiffusersComponent& component, const std::string& key) {
  std::string k = key;
  for (const std::vector<KeyRename>& stage : component.stages) {
    for (const KeyRename& r : stage) {
      if (r.prefix) {
        if (k.starts_with(r.from)) {
          k = r.to + k.substr(r.from.size());
          break;
        }
      } else if (k.find(r.from) != std::string::npos) {
        k = replace_all(k, r.from, r.to);
        break;
      }
    }
  }
  return k;
}

bool is_diffusers_folder(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(fs::path(dir) / "model_index.json", ec);
}

namespace {

json read_json_file(const fs::path& p, const std::string& what) {
  const std::string text = limits::read_file_within(p.string(), limits::kMaxTextFileBytes, what);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  LTX_CHECK(!j.is_discarded() && j.is_object(), "'", p.string(), "' is not a JSON object (", what,
            "); the Diffusers folder is damaged: download it again");
  return j;
}

// One component folder's tensors: the single file or the shards its index names.
struct ComponentFiles {
  std::vector<std::shared_ptr<const SafetensorsFile>> files;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> by_key;  // Diffusers key -> file
};

ComponentFiles open_component_weights(const fs::path& folder) {
  ComponentFiles out;
  const fs::path single = folder / "diffusion_pytorch_model.safetensors";
  const fs::path index = folder / "diffusion_pytorch_model.safetensors.index.json";
  std::error_code ec;
  if (fs::is_regular_file(index, ec)) {
    const json j = read_json_file(index, "a sharded-weights index");
    LTX_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), "'", index.string(),
              "' has no \"weight_map\" object; the Diffusers folder is damaged: download it again");
    std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
    for (const auto& [key, value] : j["weight_map"].items()) {
      LTX_CHECK(value.is_string(), "'", index.string(), "': the shard of '", key,
                "' is not a file name");
      const std::string name = value.get<std::string>();
      LTX_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "..", "'",
                index.string(), "': the shard '", name, "' of '", key,
                "' is not a file name in the same folder");
      auto& shard = shards[name];
      if (!shard) {
        const fs::path p = folder / name;
        LTX_CHECK(fs::is_regular_file(p, ec), "Diffusers folder: the shard '", p.string(),
                  "' that '", index.string(),
                  "' lists is missing; download it again (e.g. `ltx "
                  "pull`, or huggingface-cli download) so that every shard is present");
        shard = std::make_shared<const SafetensorsFile>(p.string());
        out.files.push_back(shard);
      }
      LTX_CHECK(shard->contains(key), "Diffusers folder: '", index.string(), "' places tensor '",
                key, "' in '", shard->path(),
                "', which has no such tensor; the shard and its "
                "index do not belong together: download the component again");
      out.by_key[key] = shard;
    }
    return out;
  }
  LTX_CHECK(fs::is_regular_file(single, ec), "Diffusers folder: '", folder.string(),
            "' has neither diffusion_pytorch_model.safetensors nor "
            "diffusion_pytorch_model.safetensors.index.json; download the component again (only "
            "safetensors weights are read)");
  auto f = std::make_shared<const SafetensorsFile>(single.string());
  out.files.push_back(f);
  for (const std::string& key : f->names()) out.by_key[key] = f;
  return out;
}

// --- config.json -> the official `config` sections -------------------------------------------

void copy_keys(const json& from, json& to, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (from.contains(k)) to[k] = from[k];
}

[[noreturn]] void cannot_translate(const fs::path& config, const std::string& key,
                                   const std::string& why) {
  fail("Diffusers folder: '", config.string(), "': ", key, " ", why,
       "; this build cannot express it in the official checkpoint's config (use the official "
       "single-file checkpoint instead)");
}

// The setting `key` of `d`, or `fallback` when it is absent. A value of another JSON type than
// the fallback's (an integer for an integer, any number for a float, a boolean, a string, an
// array) is an error naming it: nlohmann's value() would convert a float to an int even out of
// range (undefined behaviour) or throw its own type error.
json setting(const json& d, const std::string& key, const json& fallback, const fs::path& where) {
  if (!d.contains(key)) return fallback;
  const json& v = d[key];
  const char* want = fallback.is_number_integer() ? "an integer"
                     : fallback.is_number()       ? "a number"
                     : fallback.is_boolean()      ? "true or false"
                     : fallback.is_string()       ? "a string"
                     : fallback.is_array()        ? "an array"
                                                  : nullptr;
  const bool ok = fallback.is_number_integer() ? v.is_number_integer()
                  : fallback.is_number()       ? v.is_number()
                  : fallback.is_boolean()      ? v.is_boolean()
                  : fallback.is_string()       ? v.is_string()
                  : fallback.is_array()        ? v.is_array()
                                               : true;
  if (!ok)
    fail("Diffusers folder: '", where.string(), "': ", key, " is ", v.dump(), ", the wrong type (",
         want, " expected); the config is damaged: download the component again");
  return v;
}

json translate_transformer(const json& d, const fs::path& where) {
  json t = json::object();
  t["_class_name"] = "AVTransformer3DModel";
  copy_keys(d, t,
            {"num_attention_heads",
             "attention_head_dim",
             "in_channels",
             "out_channels",
             "num_layers",
             "cross_attention_dim",
             "norm_eps",
             "caption_channels",
             "audio_num_attention_heads",
             "audio_attention_head_dim",
             "audio_in_channels",
             "audio_out_channels",
             "audio_cross_attention_dim",
             "timestep_scale_multiplier",
             "activation_fn",
             "attention_bias",
             "norm_elementwise_affine",
             "rope_type",
             "ff_bias",
             "audio_ff_bias",
             "use_prompt_adaln_single",
             "use_keyframes_abs_pos_embedding"});
  if (d.contains("qk_norm")) {
    if (d["qk_norm"] != "rms_norm_across_heads")
      cannot_translate(where, "qk_norm", str("is ", d["qk_norm"].dump()));
    t["qk_norm"] = "rms_norm";
  }
  if (d.contains("rope_theta")) t["positional_embedding_theta"] = d["rope_theta"];
  t["positional_embedding_max_pos"] = {setting(d, "pos_embed_max_pos", 20, where),
                                       setting(d, "base_height", 2048, where), setting(d, "base_width", 2048, where)};
  t["audio_positional_embedding_max_pos"] = {setting(d, "audio_pos_embed_max_pos", 20, where)};
  t["frequencies_precision"] = setting(d, "rope_double_precision", true, where) ? "float64" : "float32";
  const bool gated = setting(d, "gated_attn", false, where);
  if (setting(d, "audio_gated_attn", gated, where) != gated)
    cannot_translate(where, "audio_gated_attn", "differs from gated_attn");
  t["apply_gated_attention"] = gated;
  const bool ca_mod = setting(d, "cross_attn_mod", false, where);
  if (setting(d, "audio_cross_attn_mod", ca_mod, where) != ca_mod)
    cannot_translate(where, "audio_cross_attn_mod", "differs from cross_attn_mod");
  t["cross_attention_adaln"] = ca_mod;
  if (d.contains("cross_attn_timestep_scale_multiplier"))
    t["av_ca_timestep_scale_multiplier"] = d["cross_attn_timestep_scale_multiplier"];
  // What every published LTX-2.x transformer is: the reference asserts these values, and the
  // Diffusers model has no setting for them (those it has are copied above and checked there).
  const json fixed = {{"dropout", 0.0},
                      {"attention_bias", true},
                      {"num_vector_embeds", nullptr},
                      {"activation_fn", "gelu-approximate"},
                      {"num_embeds_ada_norm", 1000},
                      {"use_linear_projection", false},
                      {"only_cross_attention", false},
                      {"cross_attention_norm", true},
                      {"double_self_attention", false},
                      {"upcast_attention", false},
                      {"standardization_norm", "rms_norm"},
                      {"norm_elementwise_affine", false},
                      {"qk_norm", "rms_norm"},
                      {"positional_embedding_type", "rope"},
                      {"use_audio_video_cross_attention", true},
                      {"share_ff", false},
                      {"av_cross_ada_norm", true},
                      {"use_middle_indices_grid", true}};
  for (const auto& [k, v] : fixed.items())
    if (!t.contains(k)) t[k] = v;
  return t;
}

// The connectors' keys live in the official transformer section.
void translate_connectors(const json& d, json& t, const fs::path& where) {
  const auto same = [&](const char* a, const char* b) {
    if (d.contains(a) && d.contains(b) && d[a] != d[b])
      cannot_translate(where, a,
                       str("(", d[a].dump(), ") differs from ", b, " (", d[b].dump(), ")"));
  };
  same("video_gated_attn", "audio_gated_attn");
  if (d.contains("video_connector_num_attention_heads"))
    t["connector_num_attention_heads"] = d["video_connector_num_attention_heads"];
  if (d.contains("video_connector_attention_head_dim"))
    t["connector_attention_head_dim"] = d["video_connector_attention_head_dim"];
  if (d.contains("video_connector_num_layers"))
    t["connector_num_layers"] = d["video_connector_num_layers"];
  for (const char* k : {"audio_connector_num_attention_heads", "audio_connector_attention_head_dim",
                        "audio_connector_num_layers"})
    if (d.contains(k)) t[k] = d[k];
  const json regs = d.value("video_connector_num_learnable_registers", json(128));
  t["connector_num_learnable_registers"] = regs.is_null() ? json(0) : regs;
  t["connector_apply_gated_attention"] = setting(d, "video_gated_attn", false, where);
  t["connector_positional_embedding_max_pos"] = {setting(d, "connector_rope_base_seq_len", 4096, where)};
  // The official connectors share the transformer's rotary settings.
  if (d.contains("rope_type") && t.contains("rope_type") && d["rope_type"] != t["rope_type"])
    cannot_translate(where, "rope_type", "differs from the transformer's");
  if (d.contains("rope_double_precision") &&
      (setting(d, "rope_double_precision", true, where).get<bool>() ? "float64" : "float32") !=
          t.value("frequencies_precision", std::string("float64")))
    cannot_translate(where, "rope_double_precision", "differs from the transformer's");
  if (setting(d, "per_modality_projections", false, where)) {
    // The V2 feature extractor: per-modality projections before the connectors.
    t["caption_proj_before_connector"] = true;
    t["caption_projection_first_linear"] = false;
    t["caption_proj_input_norm"] = false;
    t["caption_projection_second_linear"] = false;
  }
  if (d.contains("caption_channels") && !t.contains("caption_channels"))
    t["caption_channels"] = d["caption_channels"];
}

std::vector<int64_t> ints(const json& d, const char* key, const fs::path& where) {
  if (!d.contains(key)) return {};
  const json& v = d[key];
  if (!v.is_array()) cannot_translate(where, key, "is not a list");
  std::vector<int64_t> out;
  for (const json& e : v) {
    if (!e.is_number_integer())
      cannot_translate(where, key, "holds a value that is not an integer");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

// A bool, or a tuple of bools, expanded to `n` entries.
std::vector<bool> bools(const json& d, const char* key, size_t n, bool dflt,
                        const fs::path& where) {
  if (!d.contains(key) || d[key].is_boolean())
    return std::vector<bool>(n, d.contains(key) ? d[key].get<bool>() : dflt);
  const json& v = d[key];
  if (!v.is_array() || v.size() != n)
    cannot_translate(where, key, str("is not a bool or a list of ", n, " bools"));
  std::vector<bool> out;
  for (const json& e : v) out.push_back(e.is_boolean() && e.get<bool>());
  return out;
}

std::vector<std::string> strings(const json& d, const char* key, const fs::path& where) {
  std::vector<std::string> out;
  if (!d.contains(key)) return out;
  if (!d[key].is_array()) cannot_translate(where, key, "is not a list");
  for (const json& e : d[key]) {
    if (!e.is_string()) cannot_translate(where, key, "holds a value that is not a string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

const char* compress_name(const std::string& type, bool encoder, const fs::path& where) {
  if (type == "spatial") return encoder ? "compress_space_res" : "compress_space";
  if (type == "temporal") return encoder ? "compress_time_res" : "compress_time";
  if (type == "spatiotemporal") return encoder ? "compress_all_res" : "compress_all";
  cannot_translate(where, encoder ? "downsample_type" : "upsample_type",
                   str("has the entry \"", type, "\""));
}

// AutoencoderKLLTX2Video -> config.vae (CausalVideoAutoencoder). The encoder starts at
// latent_channels and each down block is its res blocks then a residual downsampler to the
// block's width; the decoder lists are given pixel side first, as the official decoder_blocks.
json translate_vae(const json& d, const fs::path& where) {
  const int64_t latent = setting(d, "latent_channels", 128, where);
  const std::vector<int64_t> enc_out = ints(d, "block_out_channels", where);
  const std::vector<int64_t> enc_layers = ints(d, "layers_per_block", where);
  const std::vector<std::string> down = strings(d, "downsample_type", where);
  if (enc_layers.size() != enc_out.size() + 1 || down.size() != enc_out.size())
    cannot_translate(where, "layers_per_block",
                     "does not hold one entry per down block plus the mid block");
  const std::vector<bool> enc_scale =
      bools(d, "spatio_temporal_scaling", enc_out.size(), true, where);
  json enc_blocks = json::array();
  int64_t ch = latent;
  for (size_t i = 0; i < enc_out.size(); ++i) {
    enc_blocks.push_back({"res_x", {{"num_layers", enc_layers[i]}}});
    if (!enc_scale[i]) {
      if (enc_out[i] != ch)
        cannot_translate(where, "block_out_channels", "changes width without a downsampler");
      continue;
    }
    if (enc_out[i] % ch != 0)
      cannot_translate(where, "block_out_channels", "is not a multiple of the previous width");
    enc_blocks.push_back({compress_name(down[i], true, where), {{"multiplier", enc_out[i] / ch}}});
    ch = enc_out[i];
  }
  enc_blocks.push_back({"res_x", {{"num_layers", enc_layers.back()}}});

  const std::vector<int64_t> dec_out = ints(d, "decoder_block_out_channels", where);
  const std::vector<int64_t> dec_layers = ints(d, "decoder_layers_per_block", where);
  const std::vector<std::string> up = strings(d, "upsample_type", where);
  const std::vector<int64_t> factor = ints(d, "upsample_factor", where);
  if (dec_layers.size() != dec_out.size() + 1 || up.size() != dec_out.size() ||
      factor.size() != dec_out.size())
    cannot_translate(where, "decoder_layers_per_block",
                     "does not hold one entry per up block plus the mid block");
  const std::vector<bool> dec_scale =
      bools(d, "decoder_spatio_temporal_scaling", dec_out.size(), true, where);
  const std::vector<bool> residual = bools(d, "upsample_residual", dec_out.size(), false, where);
  for (bool noise : bools(d, "decoder_inject_noise", dec_layers.size(), false, where))
    if (noise) cannot_translate(where, "decoder_inject_noise", "is set");
  json dec_blocks = json::array();
  if (dec_out.empty() || factor[0] < 1 || dec_out[0] % factor[0] != 0)
    cannot_translate(where, "decoder_block_out_channels", "does not divide by upsample_factor");
  const int64_t base = dec_out[0] / factor[0];
  int64_t width = base;  // the width after each up block, pixel side first
  for (size_t i = 0; i < dec_out.size(); ++i) {
    dec_blocks.push_back({"res_x", {{"num_layers", dec_layers[i]}}});
    if (!dec_scale[i])
      cannot_translate(where, "decoder_spatio_temporal_scaling", "skips an upsampler");
    if (dec_out[i] != width * factor[i])
      cannot_translate(where, "decoder_block_out_channels",
                       "changes width inside an up block (no official block does)");
    json params = {{"multiplier", factor[i]}};
    if (residual[i]) params["residual"] = true;
    dec_blocks.push_back({compress_name(up[i], false, where), params});
    width = dec_out[i];
  }
  dec_blocks.push_back({"res_x", {{"num_layers", dec_layers.back()}}});

  json v = json::object();
  v["_class_name"] = "CausalVideoAutoencoder";
  v["dims"] = 3;
  v["in_channels"] = setting(d, "in_channels", 3, where);
  v["out_channels"] = setting(d, "out_channels", 3, where);
  v["latent_channels"] = latent;
  v["decoder_blocks"] = dec_blocks;
  v["decoder_base_channels"] = base;
  v["patch_size"] = setting(d, "patch_size", 4, where);
  v["norm_layer"] = "pixel_norm";
  v["latent_log_var"] = "uniform";
  v["causal_decoder"] = setting(d, "decoder_causal", false, where);
  v["timestep_conditioning"] = setting(d, "timestep_conditioning", false, where);
  v["spatial_padding_mode"] = setting(d, "decoder_spatial_padding_mode", std::string("reflect"), where);
  // The encoder's own section, so that its padding may differ from the decoder's.
  v["encoder"] = {
      {"blocks", enc_blocks},
      {"in_channels", v["in_channels"]},
      {"out_channels", latent},
      {"patch_size", v["patch_size"]},
      {"norm_layer", "pixel_norm"},
      {"latent_log_var", "uniform"},
      {"spatial_padding_mode", setting(d, "encoder_spatial_padding_mode", std::string("zeros"), where)}};
  return v;
}

// AutoencoderKLLTX2Audio -> config.audio_vae.
json translate_audio_vae(const json& d, const fs::path& where) {
  json dd = json::object();
  dd["ch"] = setting(d, "base_channels", 128, where);
  dd["out_ch"] = setting(d, "output_channels", 2, where);
  dd["ch_mult"] = setting(d, "ch_mult", json::array({1, 2, 4}), where);
  dd["num_res_blocks"] = setting(d, "num_res_blocks", 2, where);
  const json attn = setting(d, "attn_resolutions", json(), where);
  dd["attn_resolutions"] = attn.is_null() ? json::array() : attn;
  dd["in_channels"] = setting(d, "in_channels", 2, where);
  dd["resolution"] = setting(d, "resolution", 256, where);
  dd["z_channels"] = setting(d, "latent_channels", 8, where);
  dd["double_z"] = setting(d, "double_z", true, where);
  dd["norm_type"] = setting(d, "norm_type", std::string("pixel"), where);
  dd["causality_axis"] = d.value("causality_axis", json("height"));
  dd["dropout"] = setting(d, "dropout", 0.0, where);
  dd["mid_block_add_attention"] = setting(d, "mid_block_add_attention", false, where);
  if (d.contains("mel_bins")) dd["mel_bins"] = d["mel_bins"];
  json a = json::object();
  a["model"] = {{"params", {{"ddconfig", dd}, {"sampling_rate", setting(d, "sample_rate", 16000, where)}}}};
  a["preprocessing"] = {
      {"stft",
       {{"hop_length", setting(d, "mel_hop_length", 160, where)}, {"causal", setting(d, "is_causal", true, where)}}}};
  return a;
}

// One HiFi-GAN generator of LTX2Vocoder / LTX2VocoderWithBWE (`p` = "" or "bwe_").
json translate_generator(const json& d, const std::string& p, bool amp, const fs::path& where) {
  const auto key = [&](const char* k) { return p + k; };
  json g = json::object();
  g["resblock"] = amp ? "AMP1" : "1";
  g["stereo"] = setting(d, key("out_channels"), 2, where) == 2;
  if (amp) g["activation"] = "snakebeta";
  const std::string act = setting(d, key("act_fn"), std::string(amp ? "snakebeta" : "leaky_relu"), where);
  if (act != (amp ? "snakebeta" : "leaky_relu"))
    cannot_translate(where, key("act_fn").c_str(), str("is \"", act, "\""));
  if (d.contains(key("hidden_channels"))) g["upsample_initial_channel"] = d[key("hidden_channels")];
  if (d.contains(key("upsample_factors"))) g["upsample_rates"] = d[key("upsample_factors")];
  if (d.contains(key("upsample_kernel_sizes")))
    g["upsample_kernel_sizes"] = d[key("upsample_kernel_sizes")];
  if (d.contains(key("resnet_kernel_sizes")))
    g["resblock_kernel_sizes"] = d[key("resnet_kernel_sizes")];
  if (d.contains(key("resnet_dilations")))
    g["resblock_dilation_sizes"] = d[key("resnet_dilations")];
  const json fin = setting(d, key("final_act_fn"), json(), where);
  g["use_tanh_at_final"] = fin.is_string() && fin.get<std::string>() == "tanh";
  if (d.contains(key("final_bias"))) g["use_bias_at_final"] = d[key("final_bias")];
  return g;
}

// LTX2Vocoder / LTX2VocoderWithBWE -> config.vocoder.
json translate_vocoder(const json& d, const fs::path& where) {
  const bool bwe = d.contains("bwe_hidden_channels") || d.contains("bwe_upsample_factors") ||
                   setting(d, "_class_name", std::string(), where) == "LTX2VocoderWithBWE";
  if (!bwe) {
    json g = translate_generator(d, "", false, where);
    if (d.contains("output_sampling_rate")) g["output_sampling_rate"] = d["output_sampling_rate"];
    return g;
  }
  json b = translate_generator(d, "bwe_", true, where);
  b["input_sampling_rate"] = setting(d, "input_sampling_rate", 16000, where);
  b["output_sampling_rate"] = setting(d, "output_sampling_rate", 48000, where);
  b["hop_length"] = setting(d, "hop_length", 80, where);
  b["n_fft"] = setting(d, "filter_length", 512, where);
  b["win_size"] = setting(d, "window_length", 512, where);
  b["num_mels"] = setting(d, "num_mel_channels", 64, where);
  return {{"vocoder", translate_generator(d, "", true, where)}, {"bwe", b}};
}

// `key` of `d` as a list of positive integers, or `fallback` when it is absent.
json diffusers_int_list(const json& d, const char* key, const json& fallback,
                        const fs::path& where) {
  const json v = setting(d, key, fallback, where);
  for (const json& e : v)
    if (!e.is_number_integer() || e.get<int64_t>() < 1)
      cannot_translate(where, key, str("holds ", e.dump(), ", not a positive integer"));
  return v;
}

// `key` of `d` as a list of [t, h, w] triples, or `fallback` when it is absent.
json diffusers_triples(const json& d, const char* key, const json& fallback,
                       const fs::path& where) {
  const json v = setting(d, key, fallback, where);
  for (const json& e : v) {
    bool ok = e.is_array() && e.size() == 3;
    for (size_t i = 0; ok && i < 3; ++i) ok = e[i].is_number_integer() && e[i].get<int64_t>() >= 1;
    if (!ok) cannot_translate(where, key, str("holds ", e.dump(), ", not [t, h, w]"));
  }
  return v;
}

json diffusers_triple_list(std::initializer_list<std::array<int, 3>> triples) {
  json out = json::array();
  for (const auto& t : triples) out.push_back(json::array({t[0], t[1], t[2]}));
  return out;
}

// LTX2VideoDiffusionDecoderModel -> config.vae of the official diffusion VAE (CausalDiffusionVAE
// with its NADiffusionDecoder section). Absent keys take diffusers' defaults, which are the
// published LTX-2.5 values; the four stage kernels and the stage-5 kernel make the official five,
// the strides and channel reductions its `upsamples` pairs.
json translate_diffusion_decoder(const json& d, const fs::path& where) {
  json dec = json::object();
  dec["_class_name"] = "NADiffusionDecoder";
  dec["in_channels"] = setting(d, "latent_channels", 128, where);
  dec["out_channels"] = setting(d, "out_channels", 3, where);
  dec["patch_size"] = setting(d, "patch_size", 4, where);
  dec["head_dim"] = setting(d, "decoder_head_dim", 64, where);
  dec["stage_channels"] = diffusers_int_list(d, "decoder_stage_channels",
                                             json::array({2048, 1024, 512, 512, 256}), where);
  dec["stage_depths"] =
      diffusers_int_list(d, "decoder_stage_depths", json::array({4, 6, 4, 2, 8}), where);
  json kernels = diffusers_triples(
      d, "decoder_stage_kernels", diffusers_triple_list({{3, 7, 7}, {3, 7, 7}, {3, 5, 5}, {3, 5, 5}}),
      where);
  const json strides = diffusers_triples(
      d, "decoder_upsample_strides",
      diffusers_triple_list({{1, 2, 2}, {2, 1, 1}, {2, 2, 2}, {2, 2, 2}}), where);
  const json reductions = diffusers_int_list(d, "decoder_upsample_channel_reductions",
                                             json::array({2, 2, 1, 2}), where);
  const json stage5 = setting(d, "decoder_stage5_kernel", json::array({11, 11, 11}), where);
  bool stage5_ok = stage5.size() == 3;
  for (size_t i = 0; stage5_ok && i < 3; ++i)
    stage5_ok = stage5[i].is_number_integer() && stage5[i].get<int64_t>() >= 1;
  if (!stage5_ok) cannot_translate(where, "decoder_stage5_kernel", "is not [t, h, w]");
  if (reductions.size() != strides.size())
    cannot_translate(where, "decoder_upsample_channel_reductions",
                     "does not hold one entry per upsample stride");
  if (kernels.size() != strides.size())
    cannot_translate(where, "decoder_stage_kernels",
                     "does not hold one entry per deterministic stage (one per upsample stride)");
  json upsamples = json::array();
  for (size_t i = 0; i < strides.size(); ++i)
    upsamples.push_back(json::array({strides[i], reductions[i]}));
  kernels.push_back(stage5);
  dec["stage_kernels"] = kernels;
  dec["upsamples"] = upsamples;
  dec["stage5_kernel"] = stage5;
  dec["t_emb_dim"] = setting(d, "decoder_t_emb_dim", 384, where);
  dec["timestep_scale_multiplier"] =
      setting(d, "decoder_timestep_scale_multiplier", 1000.0, where);
  dec["default_num_inference_steps"] = setting(d, "decoder_num_inference_steps", 1, where);
  // Fixed in diffusers' module: Linear pixel-shuffle upsamplers, no convolution padding.
  dec["resampler_kind"] = "linear";
  dec["spatial_padding_mode"] = "zeros";
  if (setting(d, "scaling_factor", 1.0, where).get<double>() != 1.0)
    cannot_translate(where, "scaling_factor", "is not 1 (the official latents are scaled by the "
                     "per-channel statistics only)");
  json v = json::object();
  v["_class_name"] = "CausalDiffusionVAE";
  v["dims"] = 3;
  v["model_output_type"] = setting(d, "decoder_model_output_type", std::string("x0"), where);
  v["spatial_padding_mode"] = "zeros";
  v["decoder"] = dec;
  return v;
}

// Adds what `folder`'s config.json says to the official `config`.
void translate_config(const std::string& folder, const json& cfg, const fs::path& config_path,
                      json& config) {
  if (folder == "transformer") {
    json t = translate_transformer(cfg, config_path);
    if (config.contains("transformer")) t.update(config["transformer"]);
    config["transformer"] = t;
  } else if (folder == "connectors") {
    json t = config.value("transformer", json::object());
    translate_connectors(cfg, t, config_path);
    config["transformer"] = t;
  } else if (folder == "vae") {
    json v = translate_vae(cfg, config_path);
    if (config.contains("vae") && config["vae"].value("_class_name", "") == "CausalDiffusionVAE")
      config["vae"]["encoder"] = v["encoder"];  // the diffusion decoder's file has this encoder
    else
      config["vae"] = v;
  } else if (folder == "diffusion_decoder") {
    json v = translate_diffusion_decoder(cfg, config_path);
    if (config.contains("vae") && config["vae"].contains("encoder")) {
      const json& enc = config["vae"]["encoder"];
      if (enc.contains("out_channels") && enc["out_channels"] != v["decoder"]["in_channels"])
        cannot_translate(config_path, "latent_channels",
                         str("(", v["decoder"]["in_channels"].dump(),
                             ") differs from the vae's latent_channels (", enc["out_channels"].dump(),
                             ")"));
      v["encoder"] = enc;
    }
    config["vae"] = v;
  } else if (folder == "audio_vae") {
    config["audio_vae"] = translate_audio_vae(cfg, config_path);
  } else if (folder == "vocoder") {
    config["vocoder"] = translate_vocoder(cfg, config_path);
  }
}

}  // namespace

namespace {

// A Diffusers latent upsampler folder (LTX2LatentUpsamplerModel: the official names, its own
// config keys) as the official upsampler file.
std::shared_ptr<const SafetensorsFile> open_upsampler_folder(const fs::path& folder,
                                                             const json& d) {
  json c = json::object();
  c["_class_name"] = "LatentUpsampler";
  copy_keys(d, c,
            {"in_channels", "mid_channels", "num_blocks_per_stage", "dims", "spatial_upsample",
             "temporal_upsample"});
  if (d.contains("rational_spatial_scale")) c["spatial_scale"] = d["rational_spatial_scale"];
  if (d.contains("use_rational_resampler")) c["rational_resampler"] = d["use_rational_resampler"];
  const ComponentFiles files = open_component_weights(folder);
  std::vector<ViewTensor> tensors;
  for (const auto& [key, file] : files.by_key) {
    const TensorInfo& ti = file->info(key);
    const std::shared_ptr<const SafetensorsFile> src = file;
    const std::string src_key = key;
    tensors.push_back({key, ti.dtype, ti.shape, [src, src_key] { return src->tensor(src_key); }});
  }
  return SafetensorsFile::view(folder.string(), "Diffusers latent upsampler folder",
                               std::move(tensors), {{"config", c.dump()}});
}

}  // namespace

namespace {

// The view tensor of `official`: the Diffusers `parts` of one component concatenated along dim 0
// (checked to stack); the parts go into `consumed`.
ViewTensor concat_parts(const ComponentFiles& files, const fs::path& folder,
                        const std::vector<std::string>& parts, const std::string& official,
                        std::set<std::string>& consumed) {
  size_t present = 0;
  for (const std::string& part : parts) present += files.by_key.count(part);
  LTX_CHECK(present == parts.size(), "Diffusers folder: '", folder.string(), "' has only ", present,
            " of ", parts.front(), " and its ", parts.size() - 1, " siblings (", official,
            " is made of all of them); download the component again");
  std::vector<std::shared_ptr<const SafetensorsFile>> srcs;
  Shape shape;
  DType dtype = DType::F32;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& f = files.by_key.at(parts[i]);
    const TensorInfo& ti = f->info(parts[i]);
    if (i == 0) {
      shape = ti.shape;
      dtype = ti.dtype;
    } else {
      bool same = ti.dtype == dtype && ti.shape.size() == shape.size() && shape.size() >= 1;
      for (int d = 1; same && d < shape.size(); ++d) same = ti.shape[d] == shape[d];
      LTX_CHECK(same, "Diffusers folder: '", parts[i], "' (", dtype_name(ti.dtype), " ",
                ti.shape.str(), ") does not stack with '", parts[0], "' (", dtype_name(dtype), " ",
                shape.str(), ") into ", official);
      shape[0] += ti.shape[0];
    }
    srcs.push_back(f);
    consumed.insert(parts[i]);
  }
  return {official, dtype, shape, [srcs, parts, shape, dtype] {
            Tensor out = Tensor::empty(shape, dtype);
            auto* dst = static_cast<uint8_t*>(out.raw_data());
            for (size_t i = 0; i < parts.size(); ++i) {
              const Tensor t = srcs[i]->tensor(parts[i]).contiguous();
              std::memcpy(dst, t.raw_data(), t.nbytes());
              dst += t.nbytes();
            }
            return out;
          }};
}

}  // namespace

std::shared_ptr<const SafetensorsFile> open_layout_folder(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  const fs::path index = root / "model_index.json";
  if (!fs::is_regular_file(index, ec) && fs::is_regular_file(root / "config.json", ec)) {
    const json d = read_json_file(root / "config.json", "a component config");
    if (d.value("_class_name", json()) == "LTX2LatentUpsamplerModel")
      return open_upsampler_folder(root, d);
  }
  LTX_CHECK(fs::is_regular_file(index, ec), "'", dir,
            "' is a folder but not a Diffusers pipeline (no model_index.json) nor a Diffusers "
            "latent upsampler (config.json of LTX2LatentUpsamplerModel): pass a .safetensors "
            "checkpoint file, or the Diffusers folder that holds model_index.json");
  const json model_index = read_json_file(index, "the Diffusers pipeline index");

  // The components read: those model_index.json lists, and those read unlisted whose folder is
  // there; then the keys a component read replaces in another.
  std::vector<const DiffusersComponent*> read;
  std::map<std::string, std::vector<std::string>> left_out;  // folder -> Diffusers key prefixes
  for (const DiffusersComponent& comp : diffusers_components()) {
    const bool listed = model_index.contains(comp.folder) && model_index[comp.folder].is_array() &&
                        !model_index[comp.folder].empty() && !model_index[comp.folder][0].is_null();
    const bool beside = comp.read_unlisted && fs::is_directory(root / comp.folder, ec);
    if (!listed && !beside) continue;
    read.push_back(&comp);
    for (const std::string& p : comp.replaces_prefixes) left_out[comp.replaces_folder].push_back(p);
  }

  std::vector<ViewTensor> tensors;
  std::set<std::string> seen;
  std::vector<std::pair<std::string, json>> configs;
  std::vector<std::string> found;
  for (const DiffusersComponent* comp_ptr : read) {
    const DiffusersComponent& comp = *comp_ptr;
    const fs::path folder = root / comp.folder;
    LTX_CHECK(fs::is_directory(folder, ec), "Diffusers folder: '", index.string(), "' lists the ",
              comp.folder, " (", comp.description, ") but the folder '", folder.string(),
              "' is missing; download the whole pipeline again (every component folder)");
    const fs::path config_path = folder / "config.json";
    LTX_CHECK(fs::is_regular_file(config_path, ec), "Diffusers folder: '", config_path.string(),
              "' is missing (the config of ", comp.description, "); download the component again");
    const json cfg = read_json_file(config_path, "a component config");
    const ComponentFiles files = open_component_weights(folder);
    const std::vector<std::string>& dropped = left_out[comp.folder];
    const auto is_dropped = [&dropped](const std::string& key) {
      return std::any_of(dropped.begin(), dropped.end(),
                         [&key](const std::string& p) { return key.starts_with(p); });
    };
    std::set<std::string> consumed;
    for (const DiffusersConcat& cat : diffusers_concats()) {
      if (cat.folder != comp.folder) continue;
      std::vector<std::pair<std::vector<std::string>, std::string>> groups;  // parts, official
      if (!cat.by_suffix) {
        if (std::any_of(cat.parts.begin(), cat.parts.end(),
                        [&files](const std::string& p) { return files.by_key.count(p) > 0; }))
          groups.emplace_back(cat.parts, cat.official);
      } else {
        for (const auto& [key, file] : files.by_key) {
          if (!key.ends_with(cat.parts[0])) continue;
          const std::string base = key.substr(0, key.size() - cat.parts[0].size());
          std::vector<std::string> parts;
          for (const std::string& p : cat.parts) parts.push_back(base + p);
          groups.emplace_back(parts, diffusers_to_official(comp, base + cat.official));
        }
      }
      for (const auto& [parts, official] : groups) {
        tensors.push_back(concat_parts(files, folder, parts, official, consumed));
        LTX_CHECK(seen.insert(official).second, "Diffusers folder '", dir,
                  "': two tensors map to '", official, "' (the second made of '", parts[0],
                  "' and its siblings)");
      }
    }
    for (const auto& [key, file] : files.by_key) {
      if (consumed.count(key) || is_dropped(key)) continue;
      const std::string name = diffusers_to_official(comp, key);
      LTX_CHECK(seen.insert(name).second, "Diffusers folder '", dir, "': two tensors map to '",
                name, "' (the second from '", file->path(), "', key '", key, "')");
      const TensorInfo& ti = file->info(key);
      // Copies: a lambda cannot capture structured bindings before C++20's P1091 (clang < 16).
      const std::shared_ptr<const SafetensorsFile> src = file;
      const std::string src_key = key;
      tensors.push_back(
          {name, ti.dtype, ti.shape, [src, src_key] { return src->tensor(src_key); }});
    }
    configs.emplace_back(comp.folder, cfg);
    found.push_back(comp.folder);
  }
  LTX_CHECK(std::find(found.begin(), found.end(), "transformer") != found.end(),
            "Diffusers folder '", dir,
            "': model_index.json lists no transformer; this is not an "
            "LTX-2 pipeline folder (or it is incomplete: download it again)");
  return SafetensorsFile::view(dir, "Diffusers folder", std::move(tensors),
                               diffusers_metadata(configs, dir));
}

std::map<std::string, std::string> diffusers_metadata(
    const std::vector<std::pair<std::string, json>>& configs, const std::string& dir) {
  json config = json::object();
  for (const auto& [folder, cfg] : configs) {
    const fs::path config_path = fs::path(dir) / folder / "config.json";
    LTX_CHECK(cfg.is_object(), "Diffusers folder: '", config_path.string(),
              "' is not a JSON object; download the component again");
    try {
      translate_config(folder, cfg, config_path, config);
    } catch (const json::exception& e) {
      fail("Diffusers folder: '", config_path.string(), "': a value has the wrong type (", e.what(),
           "); the config is damaged: download the component again");
    }
  }
  std::map<std::string, std::string> metadata;
  metadata["config"] = config.dump();
  // A Diffusers folder does not record the checkpoint's model_version, which picks the
  // pipelines' defaults; its transformer's settings tell the published versions apart (2.3 added
  // the cross-attention AdaLN, 2.5 dropped the video FFN bias and added the keyframe embedding;
  // LTX-2 (19B) files carry no model_version).
  const json t = config.value("transformer", json::object());
  const auto is = [&t](const char* key, bool v) { return t.contains(key) && t[key] == v; };
  if (is("ff_bias", false) || is("use_keyframes_abs_pos_embedding", true))
    metadata["model_version"] = "2.5.0";
  else if (is("cross_attention_adaln", true))
    metadata["model_version"] = "2.3.0";
  return metadata;
}

// --- ComfyUI files -----------------------------------------------------------------------------

namespace {

// A ComfyUI diffusion-model file saved without the checkpoint's prefix (transformer_blocks.*,
// patchify_proj.* at the top level, as ComfyUI-GGUF also writes them).
bool has_bare_transformer_keys(const SafetensorsFile& file) {
  bool blocks = false, stem = false;
  for (const std::string& n : file.names()) {
    if (n.starts_with("model.diffusion_model.")) return false;
    // LoRA files name their targets bare too; their own reader maps them.
    if (n.find(".lora_") != std::string::npos) return false;
    blocks = blocks || n.starts_with("transformer_blocks.0.");
    stem = stem || n.starts_with("patchify_proj.") || n.starts_with("adaln_single.") ||
           n.starts_with("audio_patchify_proj.");
  }
  return blocks && stem;
}

bool is_component_prefix(const std::string& n) {
  for (const char* p : {"vae.", "audio_vae.", "vocoder.", "text_embedding_projection."})
    if (n.starts_with(p)) return true;
  return false;
}

}  // namespace

std::shared_ptr<const SafetensorsFile> adapt_file_layout(
    std::shared_ptr<const SafetensorsFile> file) {
  bool scaled = file->contains("scaled_fp8");
  for (const std::string& n : file->names())
    scaled = scaled || n.ends_with(".comfy_quant") || n.ends_with(".scale_weight");
  const bool bare = has_bare_transformer_keys(*file);
  if (!scaled && !bare) return file;
  std::vector<ViewTensor> tensors;
  for (const TensorInfo& ti : file->infos()) {
    std::string name = ti.name;
    if (name == "scaled_fp8" || name.ends_with(".comfy_quant")) continue;
    if (name.ends_with(".scale_weight")) name = name.substr(0, name.size() - 13) + ".weight_scale";
    if (name.ends_with(".scale_input")) name = name.substr(0, name.size() - 12) + ".input_scale";
    const bool scale = name.ends_with(".weight_scale") || name.ends_with(".input_scale");
    if (scaled && name.ends_with(".input_scale") && ti.shape.numel() == 1) {
      // ComfyUI drops an input scale of exactly 1 (no activation scaling).
      const Tensor v = file->tensor(ti.name).to(DType::F32);
      if (v.data<float>()[0] == 1.0f) continue;
    }
    if (bare && !is_component_prefix(name)) name = "model.diffusion_model." + name;
    const std::string key = ti.name;
    if (scaled && scale && ti.shape.numel() == 1 && ti.shape.size() > 0) {
      // The official per-tensor scales are scalars; ComfyUI also writes them as [1].
      tensors.push_back(
          {name, ti.dtype, Shape{}, [file, key] { return file->tensor(key).reshape(Shape{}); }});
      continue;
    }
    tensors.push_back({name, ti.dtype, ti.shape, [file, key] { return file->tensor(key); }});
  }
  std::string layout = scaled ? "ComfyUI FP8 (scaled)" : "";
  if (bare)
    layout += std::string(layout.empty() ? "" : ", ") + "ComfyUI diffusion model (bare keys)";
  return SafetensorsFile::view(file->path(), layout, std::move(tensors), file->metadata());
}

}  // namespace ltx::io
