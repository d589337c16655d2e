#include "io/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <map>
#include <sstream>

#include "core/error.h"
#include "io/llama_gguf.h"

namespace ltx::io {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// One tensor as the summary sees it, whatever the file format: its element type by name ("bf16"
// for safetensors, "Q4_K" for GGUF) and its size.
struct Item {
  std::string name;
  std::string dtype;
  Shape shape;
  uint64_t bytes = 0;
  int64_t numel() const { return shape.numel(); }
  uint64_t nbytes() const { return bytes; }
};

// A file's tensors and string metadata (safetensors' __metadata__, GGUF's string values).
struct Header {
  std::map<std::string, std::string> meta;
  std::vector<Item> items;
  std::set<std::string> names;

  const std::map<std::string, std::string>& metadata() const { return meta; }
  bool contains(const std::string& name) const { return names.count(name) != 0; }
  // Every metadata value decoded as SafetensorsFile::metadata_json does.
  json metadata_json() const {
    json out = json::object();
    for (const auto& [k, v] : meta) {
      json j = json::parse(v, nullptr, /*allow_exceptions=*/false);
      out[k] = j.is_discarded() ? json(v) : j;
    }
    return out;
  }
};

// Display order and titles of the components.
struct ComponentKind {
  const char* id;
  const char* title;
};
constexpr ComponentKind kKinds[] = {
    {"transformer", "transformer (DiT)"},
    {"video_connector", "video text connector"},
    {"audio_connector", "audio text connector"},
    {"text_projection", "text projection"},
    {"gemma", "Gemma text encoder"},
    {"tokenizer", "tokenizer + assets"},
    {"video_vae_encoder", "video VAE encoder"},
    {"video_vae_decoder", "video VAE decoder"},
    {"diffusion_decoder", "video diffusion decoder"},
    {"video_vae_statistics", "video latent statistics"},
    {"audio_vae_encoder", "audio VAE encoder"},
    {"audio_vae_decoder", "audio VAE decoder"},
    {"audio_vae_statistics", "audio latent statistics"},
    {"vocoder", "vocoder"},
    {"latent_upsampler", "latent upsampler"},
    {"duration_head", "duration head"},
    {"lora", "LoRA"},
    {"other", "unrecognised tensors"},
};

constexpr const char* kLoraA = ".lora_A.weight";
constexpr const char* kLoraB = ".lora_B.weight";

// Key prefixes of the Gemma layouts the reference accepts (HF Gemma 3, HF Gemma 4, Comfy-flat).
constexpr std::string_view kGemmaPrefixes[] = {
    "language_model.",
    "vision_tower.",
    "multi_modal_projector.",
    "model.language_model.",
    "model.vision_tower.",
    "model.vision_embedder.",
    "model.embed_vision.",
    "model.embed_audio.",
    "model.audio_tower.",
    "model.multi_modal_projector.",
    "model.layers.",
    "model.embed_tokens.",
    "model.norm.",
    "vision_model.",
    "audio_projector.",
    "lm_head.",
};
constexpr std::string_view kUpsamplerPrefixes[] = {
    "initial_conv.", "initial_norm.", "res_blocks.", "upsampler.", "post_upsample_res_blocks.",
    "final_conv."};

bool is_gemma_language_key(const std::string& k) {
  return k.find("language_model.") != std::string::npos || k.starts_with("model.layers.") ||
         k.starts_with("model.embed_tokens.") || k.starts_with("model.norm.") ||
         k.starts_with("lm_head.");
}

struct Context {
  bool lora = false;
  bool diffusion_vae = false;
};

std::string classify(const std::string& k, const Context& ctx) {
  if (ctx.lora) {
    if (k.ends_with(kLoraA) || k.ends_with(kLoraB) || k.ends_with(".alpha")) return "lora";
    return "other";
  }
  if (k.starts_with("model.diffusion_model.video_embeddings_connector.") ||
      k.starts_with("model.diffusion_model.embeddings_connector."))
    return "video_connector";
  if (k.starts_with("model.diffusion_model.audio_embeddings_connector.")) return "audio_connector";
  if (k.starts_with("model.diffusion_model.")) return "transformer";
  if (k.starts_with("text_embedding_projection.")) return "text_projection";
  if (k.starts_with("vae.encoder.") || k.starts_with("encoder.")) return "video_vae_encoder";
  if (k.starts_with("vae.decoder.") || k.starts_with("decoder."))
    return ctx.diffusion_vae ? "diffusion_decoder" : "video_vae_decoder";
  if (k.starts_with("vae.per_channel_statistics.") || k.starts_with("per_channel_statistics."))
    return "video_vae_statistics";
  if (k.starts_with("audio_vae.encoder.")) return "audio_vae_encoder";
  if (k.starts_with("audio_vae.decoder.")) return "audio_vae_decoder";
  if (k.starts_with("audio_vae.per_channel_statistics.")) return "audio_vae_statistics";
  if (k.starts_with("vocoder.")) return "vocoder";
  if (k.starts_with("duration_head.")) return "duration_head";
  for (auto p : kUpsamplerPrefixes)
    if (k.starts_with(p)) return "latent_upsampler";
  if (k == "tokenizer_json" || k.starts_with("hf_asset__")) return "tokenizer";
  for (auto p : kGemmaPrefixes)
    if (k.starts_with(p)) return "gemma";
  return "other";
}

// ------------------------------------------------------------------ config helpers

const json* find(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* p : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(p);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

ojson to_ojson(const json& j) { return ojson::parse(j.dump()); }

// Records `key` from `section` (under the name `out`), or `dflt` marked as defaulted when the
// section lacks it; nothing when there is no default either.
void put(ComponentSummary& c, const json* section, const std::string& key,
         const json& dflt = nullptr, const std::string& out = "") {
  const std::string name = out.empty() ? key : out;
  if (section != nullptr && section->is_object() && section->contains(key)) {
    c.config[name] = to_ojson((*section)[key]);
  } else if (!dflt.is_null()) {
    c.config[name] = to_ojson(dflt);
    c.defaulted.insert(name);
  }
}

// Like put(), trying several keys in order (the reference's nested .get fallbacks).
void put_first(ComponentSummary& c, const json* section, std::initializer_list<const char*> keys,
               const json& dflt, const std::string& out) {
  if (section != nullptr && section->is_object())
    for (const char* k : keys)
      if (section->contains(k)) {
        c.config[out] = to_ojson((*section)[k]);
        return;
      }
  if (!dflt.is_null()) {
    c.config[out] = to_ojson(dflt);
    c.defaulted.insert(out);
  }
}

// Distinct integers N in "<marker>N." over the component's keys.
int64_t count_indices(const std::vector<const Item*>& infos, const std::string& marker) {
  std::set<int64_t> ids;
  for (const Item* ti : infos) {
    const size_t pos = ti->name.find(marker);
    if (pos == std::string::npos) continue;
    size_t i = pos + marker.size();
    int64_t v = 0;
    bool any = false;
    while (i < ti->name.size() && std::isdigit(static_cast<unsigned char>(ti->name[i]))) {
      v = v * 10 + (ti->name[i] - '0');
      any = true;
      ++i;
    }
    if (any && i < ti->name.size() && ti->name[i] == '.') ids.insert(v);
  }
  return static_cast<int64_t>(ids.size());
}

const Item* find_suffix(const std::vector<const Item*>& infos,
                              const std::string& suffix) {
  for (const Item* ti : infos)
    if (ti->name.ends_with(suffix)) return ti;
  return nullptr;
}

bool any_contains(const std::vector<const Item*>& infos, const std::string& text) {
  for (const Item* ti : infos)
    if (ti->name.find(text) != std::string::npos) return true;
  return false;
}

// Scale factors of a video VAE block list: ("compress_time*" | "compress_all*") double time,
// ("compress_space*" | "compress_all*") double space; space also includes the patch size.
std::string compression_of(const json& blocks, int64_t patch) {
  if (!blocks.is_array()) return "";
  int64_t t = 1, s = patch;
  for (const json& b : blocks) {
    std::string name;
    if (b.is_array() && !b.empty() && b[0].is_string()) name = b[0].get<std::string>();
    if (b.is_string()) name = b.get<std::string>();
    if (name.starts_with("compress_all")) {
      t *= 2;
      s *= 2;
    } else if (name.starts_with("compress_time")) {
      t *= 2;
    } else if (name.starts_with("compress_space")) {
      s *= 2;
    }
  }
  return str(t, "x", s, "x", s);
}

std::string version_text(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += '.';
    s += std::to_string(v[i]);
  }
  return s;
}

struct Version {
  std::string short_name, name, source;
};

// LTX version name from a parsed model_version; the model size is named only when the file holds
// the DiT (a VAE of "2.5" is not 22B of anything).
Version ltx_version(const std::vector<int>& v, const std::string& source, bool dit) {
  if (v.empty()) return {};
  const int major = v[0], minor = v.size() > 1 ? v[1] : 0;
  if (major == 2 && minor < 3) return {"2", dit ? "LTX-2 (19B)" : "LTX-2", source};
  if (major == 2) return {str("2.", minor), str("LTX-2.", minor, dit ? " (22B)" : ""), source};
  return {version_text(v), str("LTX-", version_text(v)), source};
}

std::string metadata_string(const Header& f, const std::string& key) {
  auto it = f.metadata().find(key);
  return it == f.metadata().end() ? "" : it->second;
}

// ------------------------------------------------------------------ per-component details

struct Inputs {
  const Header& file;
  const json& config;  // decoded metadata "config" (object or null)
  const json& meta;    // every metadata value decoded
};

void describe_transformer(ComponentSummary& c, const std::vector<const Item*>& infos,
                          const Inputs& in) {
  const json* tc = find(in.config, {"transformer"});
  if (tc == nullptr || !tc->is_object()) {
    c.notes.push_back("no config.transformer in the metadata: the model cannot be configured");
    tc = nullptr;
  }
  if (tc != nullptr) {
    put(c, tc, "num_layers", 48);
    put(c, tc, "num_attention_heads", 32);
    put(c, tc, "attention_head_dim", 128);
    put(c, tc, "audio_num_attention_heads", 32);
    put(c, tc, "audio_attention_head_dim", 64);
    put(c, tc, "in_channels", 128);
    put(c, tc, "out_channels", 128);
    put(c, tc, "audio_in_channels", 128);
    put(c, tc, "audio_out_channels", 128);
    put(c, tc, "cross_attention_dim", 4096);
    put(c, tc, "audio_cross_attention_dim", 2048);
    put(c, tc, "caption_channels");
    put(c, tc, "caption_proj_before_connector", false);
    put(c, tc, "apply_gated_attention", false);
    put(c, tc, "cross_attention_adaln", false);
    put(c, tc, "use_prompt_adaln_single", true);
    put(c, tc, "ff_bias", true);
    put(c, tc, "audio_ff_bias", true);
    put(c, tc, "use_keyframes_abs_pos_embedding", false);
    put(c, tc, "av_ca_timestep_scale_multiplier", 1);
    put(c, tc, "timestep_scale_multiplier", 1000);
    put(c, tc, "rope_type", "split");
    put(c, tc, "frequencies_precision");
    put(c, tc, "positional_embedding_theta", 10000.0);
    put(c, tc, "norm_eps", 1e-6);
  }
  c.config["blocks_in_file"] = count_indices(infos, "model.diffusion_model.transformer_blocks.");
  const bool video = find_suffix(infos, "model.diffusion_model.patchify_proj.weight") != nullptr;
  const bool audio =
      find_suffix(infos, "model.diffusion_model.audio_patchify_proj.weight") != nullptr;
  c.config["modalities"] = video && audio ? "audio+video"
                           : video        ? "video"
                           : audio        ? "audio"
                                          : "none";
  c.notes.push_back(
      any_contains(infos, "model.diffusion_model.caption_projection.")
          ? "caption projection inside the transformer (19B text path, feature extractor V1)"
          : "no caption projection in the transformer (22B text path: projection in the "
            "text encoder file, feature extractor V2)");
}

void describe_connector(ComponentSummary& c, const std::vector<const Item*>& infos,
                        const Inputs& in, bool audio) {
  const json* tc = find(in.config, {"transformer"});
  if (tc != nullptr && tc->is_object()) {
    if (audio) {
      put_first(c, tc, {"audio_connector_num_layers", "connector_num_layers"}, 2, "num_layers");
      put_first(c, tc, {"audio_connector_num_attention_heads", "connector_num_attention_heads"}, 30,
                "num_attention_heads");
      put_first(c, tc, {"audio_connector_attention_head_dim", "connector_attention_head_dim"}, 128,
                "attention_head_dim");
    } else {
      put(c, tc, "connector_num_layers", 2, "num_layers");
      put(c, tc, "connector_num_attention_heads", 30, "num_attention_heads");
      put(c, tc, "connector_attention_head_dim", 128, "attention_head_dim");
    }
    put(c, tc, "connector_apply_gated_attention", false, "apply_gated_attention");
    put(c, tc, "connector_positional_embedding_max_pos", json::array({1}),
        "positional_embedding_max_pos");
  } else {
    c.notes.push_back(
        "no config.transformer in this file (the connector config comes from the "
        "transformer file)");
  }
  c.config["blocks_in_file"] = count_indices(infos, "transformer_1d_blocks.");
  if (const Item* r = find_suffix(infos, ".learnable_registers"); r && r->shape.size() == 2)
    c.config["registers"] = r->shape[0];
}

void describe_text_projection(ComponentSummary& c, const std::vector<const Item*>& infos) {
  const Item* v1 = find_suffix(infos, "text_embedding_projection.aggregate_embed.weight");
  const Item* vv =
      find_suffix(infos, "text_embedding_projection.video_aggregate_embed.weight");
  const Item* va =
      find_suffix(infos, "text_embedding_projection.audio_aggregate_embed.weight");
  if (v1 != nullptr && v1->shape.size() == 2) {
    c.config["feature_extractor"] = "V1";
    c.config["in_features"] = v1->shape[1];
    c.config["out_features"] = v1->shape[0];
  }
  if (vv != nullptr && vv->shape.size() == 2) {
    c.config["feature_extractor"] = "V2";
    c.config["in_features"] = vv->shape[1];
    c.config["video_out_features"] = vv->shape[0];
  }
  if (va != nullptr && va->shape.size() == 2) c.config["audio_out_features"] = va->shape[0];
}

void describe_gemma(ComponentSummary& c, const std::vector<const Item*>& infos,
                    const Inputs& in) {
  const json* gc = find(in.meta, {"gemma_config"});
  if (gc != nullptr && gc->is_object()) {
    put(c, gc, "model_type");
    put(c, gc, "gemma_version");
    const json* tc = find(*gc, {"text_config"});
    put(c, tc, "hidden_size");
    put(c, tc, "num_hidden_layers");
    put(c, tc, "num_attention_heads");
    put(c, tc, "num_key_value_heads");
    put(c, tc, "head_dim");
    put(c, tc, "vocab_size");
    const std::string mt = gc->value("model_type", "");
    if (mt == "gemma3") c.notes.push_back("gemma3: encodes prompts and can enhance them");
    if (mt == "gemma4_unified")
      c.notes.push_back("gemma4_unified: encodes prompts, cannot enhance them");
    if (mt == "gemma4") c.notes.push_back("gemma4 (dense): prompt enhancement only");
  } else {
    c.notes.push_back("no gemma_config metadata: the Gemma config must come from elsewhere");
  }
  std::string layout = "unknown";
  if (any_contains(infos, "language_model.model.")) layout = "HF Gemma 3 (language_model.model.*)";
  if (any_contains(infos, "model.language_model.")) layout = "HF Gemma 4 (model.language_model.*)";
  if (find_suffix(infos, "model.layers.0.post_feedforward_layernorm.weight") != nullptr &&
      !any_contains(infos, "language_model.")) {
    // ComfyUI's flat text-encoder files: Gemma 4 unified, or Gemma 3 (gemma_3_12B_it*.safetensors,
    // which carry no config; Gemma 3 names the norms of its q / k projections q_norm / k_norm too,
    // so only the config tells them apart).
    const std::string mt =
        gc != nullptr && gc->is_object() ? gc->value("model_type", std::string()) : std::string();
    layout = mt == "gemma3" ? "ComfyUI flat Gemma 3 (model.layers.*)"
             : mt.empty()   ? "ComfyUI flat Gemma (model.layers.*; Gemma 3 or 4, no config)"
                            : "Comfy-flat Gemma 4 (model.layers.*)";
  }
  c.config["key_layout"] = layout;
  c.config["layers_in_file"] = count_indices(infos, "layers.");
  int64_t lang = 0, other = 0;
  for (const Item* ti : infos)
    (is_gemma_language_key(ti->name) ? lang : other) += ti->numel();
  c.config["language_model_params"] = lang;
  c.config["vision_audio_params"] = other;
}

void describe_tokenizer(ComponentSummary& c, const std::vector<const Item*>& infos) {
  ojson assets = ojson::array();
  for (const Item* ti : infos) {
    if (ti->name == "tokenizer_json") c.config["tokenizer_json_bytes"] = ti->nbytes();
    if (ti->name.starts_with("hf_asset__")) assets.push_back(ti->name.substr(10));
  }
  c.config["assets"] = assets;
  for (const Item* ti : infos)
    if (ti->dtype != "u8" && ti->dtype != "i8")
      c.notes.push_back(str("'", ti->name, "' is ", ti->dtype, ", expected u8 bytes"));
}

void describe_video_vae(ComponentSummary& c, const Inputs& in, bool encoder) {
  const json* vc = find(in.config, {"vae"});
  if (vc == nullptr || !vc->is_object()) {
    c.notes.push_back("no config.vae in the metadata");
    return;
  }
  put(c, vc, "_class_name", "CausalVideoAutoencoder", "class");
  if (encoder) {
    const json* ec = find(*vc, {"encoder"});
    if (ec != nullptr && ec->is_object()) {  // nested encoder (CausalDiffusionVAE files)
      put_first(c, ec, {"out_channels"}, vc->value("latent_channels", 128), "latent_channels");
      put(c, ec, "patch_size", 4);
      const json* blocks =
          ec->contains("blocks") ? &(*ec)["blocks"] : find(*ec, {"encoder_blocks"});
      if (blocks) c.config["blocks"] = blocks->size();
      if (blocks) c.config["compression"] = compression_of(*blocks, ec->value("patch_size", 4));
    } else {
      put(c, vc, "latent_channels", 128);
      put(c, vc, "patch_size", 4);
      if (const json* b = find(*vc, {"encoder_blocks"})) {
        c.config["blocks"] = b->size();
        c.config["compression"] = compression_of(*b, vc->value("patch_size", 4));
      }
      put_first(c, vc, {"encoder_spatial_padding_mode"}, "zeros", "spatial_padding_mode");
      put(c, vc, "norm_layer", "pixel_norm");
      put(c, vc, "latent_log_var", "uniform");
    }
    return;
  }
  put(c, vc, "latent_channels", 128);
  put(c, vc, "patch_size", 4);
  if (const json* b = find(*vc, {"decoder_blocks"})) {
    c.config["blocks"] = b->size();
    c.config["compression"] = compression_of(*b, vc->value("patch_size", 4));
  }
  put(c, vc, "decoder_base_channels", 128);
  put(c, vc, "spatial_padding_mode", "reflect");
  put(c, vc, "timestep_conditioning", true);
  put(c, vc, "causal_decoder", false);
}

void describe_diffusion_decoder(ComponentSummary& c, const std::vector<const Item*>& infos,
                                const Inputs& in) {
  const json* vc = find(in.config, {"vae"});
  if (vc == nullptr || !vc->is_object()) {
    c.notes.push_back("no config.vae in the metadata");
  } else {
    const json* dc = vc->contains("decoder") ? &(*vc)["decoder"] : vc;
    put(c, vc, "_class_name", nullptr, "class");
    put(c, dc, "_class_name", nullptr, "decoder_class");
    put_first(c, dc, {"in_channels"}, vc->value("latent_channels", 128), "latent_channels");
    put(c, dc, "patch_size", 4);
    put(c, dc, "stage_channels", json::array({1024, 512, 256, 256, 128}));
    put(c, dc, "stage_depths", json::array({4, 6, 4, 2, 8}));
    put(c, dc, "stage5_kernel", json::array({3, 7, 7}));
    put_first(c, dc, {"head_dim", "na_head_dim"}, 64, "head_dim");
    put(c, dc, "t_emb_dim", 384);
    put(c, dc, "default_num_inference_steps", 2);
    put(c, dc, "timestep_scale_multiplier", 1.0);
    put(c, vc, "model_output_type", "v");
  }
  if (any_contains(infos, ".gate_msa") || any_contains(infos, ".gate_mlp") ||
      any_contains(infos, ".gate_ctx"))
    c.notes.push_back("legacy static gates present (folded into the weights at load)");
  if (any_contains(infos, "decoder.coarse_"))
    c.notes.push_back("coarse_* tensors present (dropped at load)");
  if (any_contains(infos, "type_emb"))
    c.notes.push_back("type_emb present (unused by the reference)");
}

void describe_statistics(ComponentSummary& c, const std::vector<const Item*>& infos) {
  if (const Item* m = find_suffix(infos, "mean-of-means"); m && m->shape.size() == 1)
    c.config["channels"] = m->shape[0];
  if (find_suffix(infos, "per_channel_statistics.channel") || find_suffix(infos, "mean-of-stds"))
    c.notes.push_back("extra 19B statistics (channel, mean-of-stds) present, unused by the loader");
}

void describe_audio_vae(ComponentSummary& c, const Inputs& in) {
  const json* ac = find(in.config, {"audio_vae"});
  if (ac == nullptr || !ac->is_object()) {
    c.notes.push_back("no config.audio_vae in the metadata");
    return;
  }
  const json* dd = find(*ac, {"model", "params", "ddconfig"});
  put(c, dd, "ch", 128);
  put(c, dd, "ch_mult", json::array({1, 2, 4}));
  put(c, dd, "num_res_blocks", 2);
  put(c, dd, "z_channels", 8);
  put(c, dd, "mel_bins");
  put(c, dd, "norm_type", "pixel");
  put(c, dd, "causality_axis", "height");
  put(c, dd, "mid_block_add_attention", true);
  put(c, find(*ac, {"model", "params"}), "sampling_rate", 16000);
  put(c, find(*ac, {"preprocessing", "stft"}), "hop_length", 160);
}

void describe_vocoder(ComponentSummary& c, const std::vector<const Item*>& infos,
                      const Inputs& in) {
  const json* vc = find(in.config, {"vocoder"});
  const bool bwe_keys = any_contains(infos, "vocoder.bwe_generator.");
  const bool bwe_cfg = vc != nullptr && vc->is_object() && vc->contains("bwe");
  c.config["kind"] = bwe_keys || bwe_cfg ? "BigVGAN-v2 + BWE" : "HiFi-GAN";
  c.config["bandwidth_extension"] = bwe_keys || bwe_cfg;
  if (vc == nullptr || !vc->is_object()) {
    c.notes.push_back("no config.vocoder in the metadata");
    return;
  }
  if (bwe_cfg) {
    const json* main = find(*vc, {"vocoder"});
    const json* bwe = find(*vc, {"bwe"});
    put(c, main, "upsample_initial_channel", 1024);
    put(c, main, "upsample_rates", json::array({6, 5, 2, 2, 2}));
    put(c, main, "resblock", "1");
    put(c, main, "activation", "snake");
    put(c, bwe, "upsample_initial_channel", nullptr, "bwe_upsample_initial_channel");
    put(c, bwe, "upsample_rates", nullptr, "bwe_upsample_rates");
    put(c, bwe, "input_sampling_rate", nullptr, "input_sampling_rate");
    put(c, bwe, "output_sampling_rate", nullptr, "output_sampling_rate");
    if (!bwe_keys)
      c.notes.push_back(
          "config.vocoder has a bwe section but the file has no bwe_generator weights");
  } else {
    put(c, vc, "upsample_initial_channel", 1024);
    put(c, vc, "upsample_rates", json::array({6, 5, 2, 2, 2}));
    put(c, vc, "resblock", "1");
    put(c, vc, "output_sampling_rate", 24000);
    if (bwe_keys)
      c.notes.push_back("bwe_generator weights present but config.vocoder has no bwe section");
  }
}

void describe_upsampler(ComponentSummary& c, const Inputs& in) {
  const json& cfg = in.config;
  if (!cfg.is_object() || (!cfg.contains("in_channels") && !cfg.contains("mid_channels"))) {
    c.notes.push_back("no upsampler config (flat config with in_channels, mid_channels, ...)");
    return;
  }
  put(c, &cfg, "_class_name", nullptr, "class");
  put(c, &cfg, "in_channels", 128);
  put(c, &cfg, "mid_channels", 512);
  put(c, &cfg, "num_blocks_per_stage", 4);
  put(c, &cfg, "dims", 3);
  put(c, &cfg, "spatial_upsample", true);
  put(c, &cfg, "temporal_upsample", false);
  put(c, &cfg, "spatial_scale", 2.0);
  put(c, &cfg, "rational_resampler", false);
  const bool sp = c.config["spatial_upsample"].get<bool>();
  const bool tp = c.config["temporal_upsample"].get<bool>();
  const double scale = c.config["spatial_scale"].get<double>();
  std::ostringstream kind;
  if (sp && tp) {
    kind << "spatial x" << scale << " + temporal x2";
  } else if (sp) {
    kind << "spatial x" << scale;
    if (c.config["rational_resampler"].get<bool>()) kind << " (rational)";
  } else if (tp) {
    kind << "temporal x2";
  } else {
    kind << "none";
  }
  c.config["kind"] = kind.str();
}

void describe_duration_head(ComponentSummary& c, const Inputs& in) {
  const json* tc = find(in.config, {"transformer"});
  const json* dc = find(in.config, {"duration_head"});
  put(c, tc, "cross_attention_dim", 4096, "video_input_dim");
  put(c, tc, "audio_cross_attention_dim", 2048, "audio_input_dim");
  put(c, dc, "pooler_hidden_dim", 256);
  put(c, dc, "num_queries", 1);
  put(c, dc, "num_pooler_heads", 4);
  put(c, dc, "mlp_hidden", 256);
}

void describe_lora(ComponentSummary& c, const std::vector<const Item*>& infos,
                   const Inputs& in, std::vector<std::string>& warnings) {
  std::map<std::string, const Item*> a, b;
  int64_t alphas = 0;
  for (const Item* ti : infos) {
    if (ti->name.ends_with(kLoraA))
      a[ti->name.substr(0, ti->name.size() - 14)] = ti;
    else if (ti->name.ends_with(kLoraB))
      b[ti->name.substr(0, ti->name.size() - 14)] = ti;
    else if (ti->name.ends_with(".alpha"))
      ++alphas;
  }
  std::set<int64_t> ranks;
  std::map<std::string, int64_t> modules;
  int64_t pairs = 0;
  std::vector<std::string> unpaired;
  for (const auto& [prefix, ta] : a) {
    auto it = b.find(prefix);
    if (it == b.end()) {
      unpaired.push_back(prefix + kLoraA);
      continue;
    }
    ++pairs;
    if (ta->shape.size() == 2) ranks.insert(ta->shape[0]);
    const Item* tb = it->second;
    if (ta->shape.size() != 2 || tb->shape.size() != 2 || tb->shape[1] != ta->shape[0])
      warnings.push_back("LoRA pair '" + prefix + "': lora_A " + ta->shape.str() + " and lora_B " +
                         tb->shape.str() + " do not multiply");
    // Module kind: the target name without the diffusion-model prefix and any block index.
    std::string target = prefix;
    for (size_t p; (p = target.find("diffusion_model.")) != std::string::npos;) target.erase(p, 16);
    const size_t blk = target.find("transformer_blocks.");
    if (blk != std::string::npos) {
      const size_t dot = target.find('.', blk + 19);
      if (dot != std::string::npos) target = target.substr(dot + 1);
    }
    ++modules[target];
  }
  for (const auto& [prefix, tb] : b)
    if (!a.count(prefix)) unpaired.push_back(prefix + kLoraB);
  c.config["targets"] = pairs;
  if (ranks.size() == 1)
    c.config["rank"] = *ranks.begin();
  else
    c.config["rank"] = ojson(std::vector<int64_t>(ranks.begin(), ranks.end()));
  c.config["target_modules"] = ojson(modules);
  c.config["alpha_tensors"] = alphas;
  if (alphas > 0)
    c.notes.push_back(
        "alpha tensors present; the reference ignores them (delta = strength * B @ A)");
  if (!unpaired.empty()) {
    std::string first = unpaired.front();
    warnings.push_back(
        str(unpaired.size(), " LoRA tensors without their partner (e.g. '", first, "')"));
  }
  // Metadata the pipelines read from LoRA files, and anything that looks like scaling metadata.
  for (const auto& [k, v] : in.file.metadata()) {
    std::string low = k;
    for (char& ch : low) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (k == "reference_downscale_factor" || k == "reference_temporal_scale_factor" ||
        k == "hdr_transform" || k == "use_hdr_transform" ||
        low.find("alpha") != std::string::npos || low.find("rank") != std::string::npos ||
        low.find("strength") != std::string::npos || low.find("network_dim") != std::string::npos)
      c.config["metadata." + k] = to_ojson(in.meta.at(k));
  }
}

// ------------------------------------------------------------------ version / layout

Version detect_version(const Inputs& in, const std::set<std::string>& present,
                       CheckpointSummary& s) {
  const bool dit = present.count("transformer") != 0;
  const std::string mv = metadata_string(in.file, "model_version");
  if (!mv.empty()) {
    Version v = ltx_version(parse_model_version(mv), "metadata model_version \"" + mv + "\"", dit);
    if (!v.name.empty()) return v;
    s.warnings.push_back("metadata model_version \"" + mv + "\" is not a version number");
  }
  if (const json* g = find(in.meta, {"gemma_source_checkpoint", "ltx_version"});
      g && g->is_string()) {
    Version v = ltx_version(parse_model_version(g->get<std::string>()),
                            "metadata gemma_source_checkpoint.ltx_version", dit);
    if (!v.name.empty()) return v;
  }
  if (const json* tc = find(in.config, {"transformer"});
      tc && tc->is_object() && (present.count("transformer") || present.count("video_connector"))) {
    if (!tc->contains("caption_proj_before_connector"))
      return {"2", "LTX-2 (19B)", "config.transformer has no caption_proj_before_connector"};
    if (tc->value("ff_bias", true) == false || tc->value("use_keyframes_abs_pos_embedding", false))
      return {
          "2.5", "LTX-2.5 (22B)",
          "config.transformer: ff_bias=false / use_keyframes_abs_pos_embedding (no model_version)"};
    return {"2.3+", "LTX-2.3 or later (22B)",
            "config.transformer has caption_proj_before_connector (no model_version)"};
  }
  if (const json* vc = find(in.config, {"vae", "_class_name"});
      vc && vc->is_string() && vc->get<std::string>() != "CausalVideoAutoencoder")
    return {"2.5", "LTX-2.5", str("config.vae._class_name ", vc->get<std::string>())};
  if (const json* gc = find(in.meta, {"gemma_config"}); gc && gc->is_object()) {
    const std::string gv = gc->value("gemma_version", "");
    const std::string mt = gc->value("model_type", "");
    const std::string what = mt == "gemma3"           ? "Gemma 3 text encoder"
                             : mt == "gemma4_unified" ? "Gemma 4 unified text encoder"
                             : mt == "gemma4"         ? "Gemma 4 text encoder"
                                                      : "Gemma text encoder";
    if (gv == "gemma4-12b-ltx-v1")
      return {"2.5", what + " for LTX-2.5", "gemma_config.gemma_version " + gv};
    if (mt == "gemma3")
      return {"", what + " for LTX-2 / LTX-2.3", "gemma_config.model_type gemma3"};
    return {"", what,
            gv.empty() ? "gemma_config without gemma_version" : "gemma_config.gemma_version " + gv};
  }
  if (const json* vc = find(in.config, {"vocoder"});
      vc && vc->is_object() && present.count("vocoder")) {
    if (vc->contains("bwe"))
      return {"2.3+", "LTX-2.3 or later", "config.vocoder has a bwe section"};
    return {"2", "LTX-2", "config.vocoder has no bwe section (19B vocoder)"};
  }
  if (present.count("video_vae_statistics") &&
      in.file.contains("vae.per_channel_statistics.channel"))
    return {"2", "LTX-2", "19B-only VAE statistics (per_channel_statistics.channel)"};
  return {"", "", "no model_version metadata and no version-specific config"};
}

std::string detect_layout(const std::set<std::string>& p) {
  auto has = [&](const char* id) { return p.count(id) != 0; };
  const bool vvae = has("video_vae_encoder") || has("video_vae_decoder") ||
                    has("diffusion_decoder") || has("video_vae_statistics");
  const bool avae =
      has("audio_vae_encoder") || has("audio_vae_decoder") || has("audio_vae_statistics");
  if (has("lora")) return "LoRA";
  if (p.empty()) return "empty";
  if (has("transformer") && (vvae || avae || has("vocoder"))) return "single-file checkpoint";
  if (has("transformer")) return "transformer";
  if (has("gemma")) return "text encoder";
  if (has("video_connector") || has("audio_connector") || has("text_projection"))
    return "text connectors / projection";
  if (has("diffusion_decoder")) return "video VAE (diffusion decoder)";
  if (vvae && !avae) return "video VAE";
  if (avae && has("vocoder")) return "audio VAE + vocoder";
  if (avae) return "audio VAE";
  if (has("vocoder")) return "vocoder";
  if (has("latent_upsampler")) return "latent upsampler";
  if (has("duration_head")) return "duration head";
  if (has("tokenizer")) return "tokenizer";
  return "unknown";
}

std::string family_of(const CheckpointSummary& s, const std::set<std::string>& p) {
  if (p.count("gemma")) return "Gemma";
  for (const char* id :
       {"transformer", "video_connector", "audio_connector", "text_projection", "video_vae_encoder",
        "video_vae_decoder", "diffusion_decoder", "video_vae_statistics", "audio_vae_encoder",
        "audio_vae_decoder", "vocoder", "latent_upsampler", "duration_head", "lora"})
    if (p.count(id)) return "LTX-2";
  return s.version.empty() ? "" : "LTX-2";
}

// ------------------------------------------------------------------ text helpers

std::string thousands(int64_t v) {
  std::string d = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string value_text(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    std::ostringstream os;
    os << v.get<double>();
    return os.str();
  }
  return v.dump();
}

// "bf16", or "f32+u8" for mixed components.
std::string dtype_summary(const std::map<std::string, int64_t>& dtype_tensors) {
  std::string s;
  for (const auto& [name, n] : dtype_tensors) {
    if (!s.empty()) s += "+";
    s += name;
  }
  return s;
}

}  // namespace

std::vector<int> parse_model_version(const std::string& version) {
  std::string v = version;
  std::replace(v.begin(), v.end(), '-', '.');
  std::vector<int> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t dot = v.find('.', start);
    if (dot == std::string::npos) dot = v.size();
    const std::string part = v.substr(start, dot - start);
    if (part.empty() || part.size() > 9 || !std::all_of(part.begin(), part.end(), [](char ch) {
          return std::isdigit(static_cast<unsigned char>(ch));
        }))
      break;
    out.push_back(std::stoi(part));
    start = dot + 1;
  }
  return out;
}

const ComponentSummary* CheckpointSummary::component(const std::string& id) const {
  for (const auto& c : components)
    if (c.id == id) return &c;
  return nullptr;
}

namespace {

// Everything but the format's own fields: components, config, version, layout.
void summarize(const Header& file, CheckpointSummary& s) {
  s.model_version = metadata_string(file, "model_version");

  const json meta = file.metadata_json();
  json config = nullptr;
  if (file.meta.count("config") != 0) {
    config = meta["config"];
    if (config.is_string()) {
      s.warnings.push_back("metadata 'config' is not valid JSON; the model cannot be configured");
      config = nullptr;
    } else if (!config.is_object()) {
      s.warnings.push_back("metadata 'config' is not a JSON object");
      config = nullptr;
    }
  }
  const Inputs in{file, config, meta};

  Context ctx;
  for (const Item& ti : file.items)
    if (ti.name.ends_with(kLoraA) || ti.name.ends_with(kLoraB)) ctx.lora = true;
  if (const json* cls = find(config, {"vae", "_class_name"}); cls && cls->is_string()) {
    ctx.diffusion_vae = cls->get<std::string>() != "CausalVideoAutoencoder";
  } else {
    for (const Item& ti : file.items)
      if (ti.name.find("decoder.det_stages.") != std::string::npos ||
          ti.name.find("decoder.diff_blocks.") != std::string::npos)
        ctx.diffusion_vae = true;
  }

  std::map<std::string, std::vector<const Item*>> groups;
  for (const Item& ti : file.items) {
    groups[classify(ti.name, ctx)].push_back(&ti);
    s.tensors += 1;
    s.params += ti.numel();
  }
  std::set<std::string> present;
  for (const auto& [id, v] : groups) present.insert(id);

  for (const ComponentKind& kind : kKinds) {
    auto it = groups.find(kind.id);
    if (it == groups.end()) continue;
    const auto& infos = it->second;
    ComponentSummary c;
    c.id = kind.id;
    c.title = kind.title;
    for (const Item* ti : infos) {
      c.tensors += 1;
      c.params += ti->numel();
      c.bytes += ti->nbytes();
      c.dtype_tensors[ti->dtype] += 1;
      c.dtype_params[ti->dtype] += ti->numel();
    }
    const std::string id = kind.id;
    if (id == "transformer")
      describe_transformer(c, infos, in);
    else if (id == "video_connector")
      describe_connector(c, infos, in, false);
    else if (id == "audio_connector")
      describe_connector(c, infos, in, true);
    else if (id == "text_projection")
      describe_text_projection(c, infos);
    else if (id == "gemma")
      describe_gemma(c, infos, in);
    else if (id == "tokenizer")
      describe_tokenizer(c, infos);
    else if (id == "video_vae_encoder")
      describe_video_vae(c, in, true);
    else if (id == "video_vae_decoder")
      describe_video_vae(c, in, false);
    else if (id == "diffusion_decoder")
      describe_diffusion_decoder(c, infos, in);
    else if (id == "video_vae_statistics" || id == "audio_vae_statistics")
      describe_statistics(c, infos);
    else if (id == "audio_vae_encoder" || id == "audio_vae_decoder")
      describe_audio_vae(c, in);
    else if (id == "vocoder")
      describe_vocoder(c, infos, in);
    else if (id == "latent_upsampler")
      describe_upsampler(c, in);
    else if (id == "duration_head")
      describe_duration_head(c, in);
    else if (id == "lora")
      describe_lora(c, infos, in, s.warnings);
    else if (id == "other") {
      ojson examples = ojson::array();
      for (size_t i = 0; i < infos.size() && i < 5; ++i) examples.push_back(infos[i]->name);
      c.config["examples"] = examples;
      s.warnings.push_back(str(infos.size(), " tensors belong to no known component (e.g. '",
                               infos.front()->name, "')"));
    }
    s.components.push_back(std::move(c));
  }

  // Cross-checks between config and file.
  if (const ComponentSummary* t = s.component("transformer")) {
    if (t->config.contains("num_layers") && !t->defaulted.count("num_layers") &&
        t->config["num_layers"] != t->config["blocks_in_file"])
      s.warnings.push_back(str("config.transformer.num_layers is ", t->config["num_layers"].dump(),
                               " but the file holds ", t->config["blocks_in_file"].dump(),
                               " transformer blocks"));
  }
  const Version v = detect_version(in, present, s);
  s.version = v.short_name;
  s.version_source = v.source;
  s.layout = detect_layout(present);
  s.family = family_of(s, present);
  s.version_name = !v.name.empty()       ? v.name
                   : s.family == "LTX-2" ? "LTX-2.x (version not recorded in the file)"
                                         : "unknown";
}

}  // namespace

CheckpointSummary inspect_checkpoint(const std::string& path) {
  if (is_gguf_file(path)) return inspect_checkpoint(GgufFile(path));
  return inspect_checkpoint(*SafetensorsFile::open(path));  // other layouts as the official file
}

CheckpointSummary inspect_checkpoint(const SafetensorsFile& file) {
  CheckpointSummary s;
  s.path = file.path();
  s.file_size = file.file_size();
  s.header_size = file.header_size();
  for (const auto& [k, v] : file.metadata()) s.metadata_keys.push_back(k);
  Header h;
  h.meta = file.metadata();
  h.items.reserve(file.infos().size());
  for (const TensorInfo& ti : file.infos()) {
    h.items.push_back({ti.name, dtype_name(ti.dtype), ti.shape, ti.nbytes()});
    h.names.insert(ti.name);
  }
  summarize(h, s);
  s.source_layout = file.layout().empty() ? "official safetensors" : file.layout();
  if (file.is_view()) s.format = "safetensors (" + file.layout() + ")";
  // Storage by dtype and the bits per weight over every tensor (as for GGUF files).
  std::map<std::string, StorageTypeSummary> by_dtype;
  uint64_t all_bytes = 0;
  for (const TensorInfo& ti : file.infos()) {
    StorageTypeSummary& t = by_dtype[safetensors_dtype_name(ti.dtype)];
    t.type = safetensors_dtype_name(ti.dtype);
    ++t.tensors;
    t.params += ti.numel();
    t.bytes += ti.nbytes();
    all_bytes += ti.nbytes();
  }
  int64_t all_params = 0;
  for (auto& [name, t] : by_dtype) {
    t.bits_per_weight = t.params > 0 ? 8.0 * static_cast<double>(t.bytes) / t.params : 0;
    all_params += t.params;
    s.storage_types.push_back(t);
  }
  std::sort(s.storage_types.begin(), s.storage_types.end(),
            [](const StorageTypeSummary& a, const StorageTypeSummary& b) { return a.bytes > b.bytes; });
  s.bits_per_weight = all_params > 0 ? 8.0 * static_cast<double>(all_bytes) / all_params : 0;
  if (file.header_size() % 8 != 0)
    s.warnings.push_back(
        str("header length ", file.header_size(),
            " is not a multiple of 8: tensor data may be misaligned (copied on load)"));
  return s;
}

CheckpointSummary inspect_checkpoint(const GgufFile& file) {
  CheckpointSummary s;
  s.path = file.path();
  s.format = "GGUF";
  s.file_size = file.file_size();
  s.header_size = file.data_offset();
  s.gguf_version = file.version();
  s.gguf_alignment = file.alignment();
  for (const GgufMetadata& kv : file.metadata()) s.metadata_keys.push_back(kv.key);
  if (const GgufMetadata* a = file.find("general.architecture")) {
    if (a->type == GgufValueType::String)
      s.architecture = a->value.get<std::string>();
    else
      s.warnings.push_back(str("metadata 'general.architecture' is a ",
                               gguf_value_type_name(a->type), ", not a string"));
  }

  s.key_prefix_added = ltx_key_prefix_to_add(file);
  // llama.cpp's Gemma 3 (a text encoder): its names read as the google/gemma-3 checkpoint's and
  // its config rebuilt from the gemma3.* metadata, so it is described as that text encoder.
  const bool llama_gemma = is_llama_cpp_gemma3(file);

  Header h;
  h.meta = file.string_metadata();
  if (llama_gemma) {
    s.gguf_layout = "llama.cpp Gemma 3";
    try {
      h.meta["gemma_config"] = llama_cpp_gemma3_config(file).dump();
    } catch (const Error& e) {
      s.warnings.push_back(e.what());
    }
  }
  std::map<std::string, StorageTypeSummary> types;
  uint64_t all_bytes = 0;
  int64_t all_params = 0;
  for (const GgufTensorInfo& ti : file.infos()) {
    const std::string type = ggml_type_name(ti.type);
    const std::string name = llama_gemma ? llama_cpp_gemma3_hf_name(ti.name).value_or(ti.name)
                                          : s.key_prefix_added + ti.name;
    h.items.push_back({name, type, ti.shape, ti.nbytes});
    h.names.insert(name);
    StorageTypeSummary& t = types[type];
    t.type = type;
    t.tensors += 1;
    t.params += ti.numel();
    t.bytes += ti.nbytes;
    all_bytes += ti.nbytes;
    all_params += ti.numel();
  }
  for (auto& [name, t] : types) {
    t.bits_per_weight = t.params > 0 ? 8.0 * static_cast<double>(t.bytes) / t.params : 0;
    s.storage_types.push_back(t);
  }
  std::stable_sort(s.storage_types.begin(), s.storage_types.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  s.bits_per_weight = all_params > 0 ? 8.0 * static_cast<double>(all_bytes) / all_params : 0;

  summarize(h, s);
  if (llama_gemma)
    for (ComponentSummary& c : s.components)
      if (c.id == "gemma")
        c.notes.push_back(
            "llama.cpp GGUF: the language model only (no vision tower: text prompts and text "
            "prompt enhancement); the tokenizer comes from the tokenizer.ggml.* metadata");
  if (!s.architecture.empty() && s.architecture != "ltxv" && s.family.empty())
    s.warnings.push_back(str("general.architecture '", s.architecture,
                             "' is not an LTX model; its key layout is not one ltx maps"));
  return s;
}

nlohmann::ordered_json to_json(const CheckpointSummary& s) {
  ojson j;
  j["path"] = s.path;
  j["format"] = s.format;
  j["file_size"] = s.file_size;
  j["header_size"] = s.header_size;
  if (!s.source_layout.empty()) {
    j["source_layout"] = s.source_layout;
    ojson types = ojson::object();
    for (const StorageTypeSummary& t : s.storage_types)
      types[t.type] = {{"tensors", t.tensors}, {"params", t.params}, {"bytes", t.bytes},
                       {"bits_per_weight", t.bits_per_weight}};
    j["storage"] = {{"types", types}, {"bits_per_weight", s.bits_per_weight}};
  }
  if (s.format == "GGUF") {
    ojson types = ojson::object();
    for (const StorageTypeSummary& t : s.storage_types)
      types[t.type] = {{"tensors", t.tensors},
                       {"params", t.params},
                       {"bytes", t.bytes},
                       {"bits_per_weight", t.bits_per_weight}};
    j["gguf"] = {{"version", s.gguf_version},
                 {"alignment", s.gguf_alignment},
                 {"architecture", s.architecture.empty() ? ojson(nullptr) : ojson(s.architecture)},
                 {"key_prefix_added", s.key_prefix_added},
                 {"layout", s.gguf_layout.empty() ? ojson(nullptr) : ojson(s.gguf_layout)},
                 {"types", std::move(types)},
                 {"bits_per_weight", s.bits_per_weight}};
  }
  j["tensors"] = s.tensors;
  j["params"] = s.params;
  j["metadata_keys"] = s.metadata_keys;
  j["layout"] = s.layout;
  j["family"] = s.family;
  j["version"] = s.version;
  j["version_name"] = s.version_name;
  j["version_source"] = s.version_source;
  j["model_version"] = s.model_version.empty() ? ojson(nullptr) : ojson(s.model_version);
  ojson comps = ojson::array();
  for (const ComponentSummary& c : s.components) {
    ojson cj;
    cj["id"] = c.id;
    cj["name"] = c.title;
    cj["tensors"] = c.tensors;
    cj["params"] = c.params;
    cj["bytes"] = c.bytes;
    ojson dts = ojson::object();
    for (const auto& [name, n] : c.dtype_tensors)
      dts[name] = {{"tensors", n}, {"params", c.dtype_params.at(name)}};
    cj["dtypes"] = dts;
    cj["config"] = c.config;
    cj["defaulted"] = ojson(std::vector<std::string>(c.defaulted.begin(), c.defaulted.end()));
    cj["notes"] = c.notes;
    comps.push_back(std::move(cj));
  }
  j["components"] = std::move(comps);
  j["warnings"] = s.warnings;
  return j;
}

std::string to_text(const CheckpointSummary& s) {
  std::ostringstream os;
  os << s.path << "\n";
  if (s.format == "GGUF") {
    os << "  format      GGUF v" << s.gguf_version << ", "
       << thousands(static_cast<int64_t>(s.file_size)) << " bytes, " << thousands(s.tensors)
       << " tensors, " << s.metadata_keys.size() << " metadata keys, alignment "
       << s.gguf_alignment << ", data at " << thousands(static_cast<int64_t>(s.header_size))
       << " (valid)\n";
  } else {
    os << "  format      " << s.format << ", " << thousands(static_cast<int64_t>(s.file_size))
       << " bytes, " << thousands(s.tensors) << " tensors, header "
       << thousands(static_cast<int64_t>(s.header_size)) << " bytes (valid)\n";
    os << "  on disk     " << s.source_layout << ";";
    for (const StorageTypeSummary& t : s.storage_types)
      os << " " << t.type << " " << thousands(t.params) << " params,";
    os << " " << std::fixed << std::setprecision(2) << s.bits_per_weight << " bits per weight\n";
    os.unsetf(std::ios::floatfield);
  }
  os << "  metadata    ";
  if (s.metadata_keys.empty()) os << "(none)";
  for (size_t i = 0; i < s.metadata_keys.size(); ++i) os << (i ? ", " : "") << s.metadata_keys[i];
  os << "\n";
  os << "  model       " << s.version_name;
  if (!s.version_source.empty()) os << "  [" << s.version_source << "]";
  os << "\n";
  os << "  layout      " << s.layout << "\n";
  os << "  parameters  " << thousands(s.params) << "\n";
  if (s.format == "GGUF") {
    os << "  arch        " << (s.architecture.empty() ? "(no general.architecture)" : s.architecture)
       << "\n";
    if (!s.key_prefix_added.empty())
      os << "  keys        bare transformer names (ComfyUI-GGUF layout), read under '"
         << s.key_prefix_added << "'\n";
    if (s.gguf_layout == "llama.cpp Gemma 3")
      os << "  keys        llama.cpp Gemma 3 names (token_embd, blk.N.*; norms stored as 1 + w), "
            "read as google/gemma-3's 'language_model.model.*'\n";
    // One line per GGML type, largest share first.
    for (size_t i = 0; i < s.storage_types.size(); ++i) {
      const StorageTypeSummary& t = s.storage_types[i];
      char line[160];
      std::snprintf(line, sizeof(line), "%-14s%-8s %7s tensors %13s bytes %6.2f bits/weight\n",
                    i == 0 ? "  storage" : "", t.type.c_str(), thousands(t.tensors).c_str(),
                    thousands(static_cast<int64_t>(t.bytes)).c_str(), t.bits_per_weight);
      os << line;
    }
    char bpw[32];
    std::snprintf(bpw, sizeof(bpw), "%.2f", s.bits_per_weight);
    os << "  bits/weight " << bpw << " over all tensors\n";
  }

  if (!s.components.empty()) {
    size_t w = 9;
    for (const auto& c : s.components) w = std::max(w, c.title.size());
    auto row = [&](const std::string& a, const std::string& b, const std::string& c,
                   const std::string& d) {
      os << "  " << a << std::string(w - a.size() + 2, ' ')
         << std::string(8 - std::min<size_t>(8, b.size()), ' ') << b << "  "
         << std::string(14 - std::min<size_t>(14, c.size()), ' ') << c << "  " << d << "\n";
    };
    os << "\n";
    row("component", "tensors", "params", "dtype");
    std::map<std::string, int64_t> all_t;
    for (const auto& c : s.components) {
      row(c.title, thousands(c.tensors), thousands(c.params), dtype_summary(c.dtype_tensors));
      for (const auto& [k, n] : c.dtype_tensors) all_t[k] += n;
    }
    row("total", thousands(s.tensors), thousands(s.params), dtype_summary(all_t));
  }

  // Per-component configuration, wrapped.
  bool any_default = false;
  // Pairs shown as one "heads=AxB" entry.
  const std::pair<const char*, const char*> kPairs[] = {
      {"num_attention_heads", "attention_head_dim"},
      {"audio_num_attention_heads", "audio_attention_head_dim"}};
  for (const auto& c : s.components) {
    if (c.config.empty() && c.notes.empty()) continue;
    std::vector<std::string> items;
    std::set<std::string> done;
    for (auto it = c.config.begin(); it != c.config.end(); ++it) {
      const std::string& key = it.key();
      if (done.count(key)) continue;
      bool paired = false;
      for (const auto& [h, d] : kPairs) {
        if (key == h && c.config.contains(d)) {
          const bool dflt = c.defaulted.count(h) || c.defaulted.count(d);
          any_default = any_default || dflt;
          items.push_back(str(key == "num_attention_heads" ? "heads" : "audio_heads", "=",
                              value_text(it.value()), "x", value_text(c.config[d]),
                              dflt ? "*" : ""));
          done.insert(d);
          paired = true;
        }
      }
      if (paired) continue;
      const bool dflt = c.defaulted.count(key) != 0;
      any_default = any_default || dflt;
      items.push_back(str(key, "=", value_text(it.value()), dflt ? "*" : ""));
    }
    os << "\n  " << c.title << ":";
    size_t col = 4 + c.title.size();
    for (const auto& item : items) {
      if (col + 1 + item.size() > 100) {
        os << "\n     ";
        col = 5;
      }
      os << " " << item;
      col += 1 + item.size();
    }
    for (const auto& n : c.notes) os << "\n     - " << n;
  }
  if (!s.components.empty()) os << "\n";
  if (!s.warnings.empty()) {
    os << "\n  warnings:\n";
    for (const auto& wmsg : s.warnings) os << "     ! " << wmsg << "\n";
  }
  if (any_default) os << "\n  (* = absent from the file's config: the reference's default)\n";
  return os.str();
}

}  // namespace ltx::io
