#include "models/video_vae/model_configurator.h"

#include <algorithm>

namespace ltx::models::video_vae {

const char* name(NormLayer v) { return v == NormLayer::GroupNorm ? "group_norm" : "pixel_norm"; }

const char* name(LogVarianceType v) {
  switch (v) {
    case LogVarianceType::PerChannel: return "per_channel";
    case LogVarianceType::Uniform: return "uniform";
    case LogVarianceType::Constant: return "constant";
    case LogVarianceType::None: return "none";
  }
  return "?";
}

const char* name(PaddingMode v) {
  switch (v) {
    case PaddingMode::Zeros: return "zeros";
    case PaddingMode::Reflect: return "reflect";
    case PaddingMode::Replicate: return "replicate";
    case PaddingMode::Circular: return "circular";
  }
  return "?";
}

ops::PadMode to_pad_mode(PaddingMode v) {
  switch (v) {
    case PaddingMode::Reflect: return ops::PadMode::Reflect;
    case PaddingMode::Replicate: return ops::PadMode::Replicate;
    case PaddingMode::Circular: return ops::PadMode::Circular;
    case PaddingMode::Zeros: break;
  }
  return ops::PadMode::Constant;
}

namespace {

using nlohmann::json;

// Reads typed values from one JSON object, recording which keys took their defaults.
class Reader {
 public:
  Reader(const json& obj, std::string where, std::vector<std::string>* defaulted)
      : obj_(obj), where_(std::move(where)), defaulted_(defaulted) {}

  bool has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const json& raw(const char* key) const { return obj_[key]; }

  int64_t integer(const char* key, int64_t dflt) const {
    if (!has(key)) return note(key), dflt;
    const json& v = obj_[key];
    LTX_CHECK(v.is_number_integer(), where_, ": '", key, "' must be an integer, got ", v.dump());
    return v.get<int64_t>();
  }
  bool boolean(const char* key, bool dflt) const {
    if (!has(key)) return note(key), dflt;
    const json& v = obj_[key];
    LTX_CHECK(v.is_boolean(), where_, ": '", key, "' must be true or false, got ", v.dump());
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& dflt) const {
    if (!has(key)) return note(key), dflt;
    const json& v = obj_[key];
    LTX_CHECK(v.is_string(), where_, ": '", key, "' must be a string, got ", v.dump());
    return v.get<std::string>();
  }
  const std::string& where() const { return where_; }

 private:
  const json& obj_;
  std::string where_;
  std::vector<std::string>* defaulted_;
  void note(const char* key) const {
    if (defaulted_ != nullptr) defaulted_->push_back(key);
  }
};

NormLayer parse_norm(const std::string& s, const std::string& where) {
  if (s == "pixel_norm") return NormLayer::PixelNorm;
  if (s == "group_norm") return NormLayer::GroupNorm;
  fail(where, ": unknown norm_layer '", s, "' (expected pixel_norm or group_norm)");
}

LogVarianceType parse_log_var(const std::string& s, const std::string& where) {
  if (s == "uniform") return LogVarianceType::Uniform;
  if (s == "per_channel") return LogVarianceType::PerChannel;
  if (s == "constant") return LogVarianceType::Constant;
  if (s == "none") return LogVarianceType::None;
  fail(where, ": unknown latent_log_var '", s,
       "' (expected uniform, per_channel, constant or none)");
}

PaddingMode parse_padding(const std::string& s, const std::string& where) {
  if (s == "zeros") return PaddingMode::Zeros;
  if (s == "reflect") return PaddingMode::Reflect;
  if (s == "replicate") return PaddingMode::Replicate;
  if (s == "circular") return PaddingMode::Circular;
  fail(where, ": unknown spatial padding mode '", s,
       "' (expected zeros, reflect, replicate or circular)");
}

const char* const kEncoderBlocks[] = {"res_x",          "res_x_y",           "compress_time",
                                      "compress_space", "compress_all",      "compress_all_x_y",
                                      "compress_all_res", "compress_space_res", "compress_time_res",
                                      "attn"};
const char* const kDecoderBlocks[] = {"res_x",         "attn_res_x",     "res_x_y",
                                      "compress_time", "compress_space", "compress_all",
                                      "attn"};

std::vector<BlockSpec> parse_blocks(const json& list, const std::string& where, const char* key,
                                    bool decoder) {
  LTX_CHECK(list.is_array(), where, ": '", key, "' must be a list of [name, params] pairs, got ",
            list.dump());
  std::vector<BlockSpec> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    const std::string at = str(where, ": ", key, "[", i, "]");
    LTX_CHECK(e.is_array() && e.size() == 2 && e[0].is_string(), at,
              " must be [name, params], got ", e.dump());
    BlockSpec b;
    b.name = e[0].get<std::string>();
    bool known = false;
    if (decoder) {
      for (const char* n : kDecoderBlocks) known = known || b.name == n;
    } else {
      for (const char* n : kEncoderBlocks) known = known || b.name == n;
    }
    LTX_CHECK(known, at, ": unknown ", decoder ? "decoder" : "encoder", " block '", b.name, "'");
    const json& p = e[1];
    if (p.is_number_integer()) {
      b.num_layers = p.get<int64_t>();
    } else {
      LTX_CHECK(p.is_object(), at, ": params must be an integer (num_layers) or an object, got ",
                p.dump());
      Reader r(p, at, nullptr);
      if (r.has("num_layers")) b.num_layers = r.integer("num_layers", 1);
      if (r.has("multiplier")) b.multiplier = r.integer("multiplier", 1);
      b.residual = r.boolean("residual", false);
      b.inject_noise = r.boolean("inject_noise", false);
    }
    const bool needs_layers = b.name == "res_x" || b.name == "attn_res_x";
    LTX_CHECK(!needs_layers || b.num_layers.has_value(), at, ": block '", b.name,
              "' needs num_layers");
    LTX_CHECK(!b.num_layers || *b.num_layers >= 0, at, ": num_layers must be >= 0");
    LTX_CHECK(!b.multiplier || *b.multiplier >= 1, at, ": multiplier must be >= 1");
    // Things the reference accepts in a config but cannot build or run.
    LTX_CHECK(b.name != "attn_res_x", at,
              ": 'attn_res_x' decoder blocks are not supported (the reference cannot build them "
              "either: UNetMidBlock3D takes no attention_head_dim)");
    LTX_CHECK(!b.inject_noise, at,
              ": inject_noise is not supported (no published LTX-2.x VAE uses it; its noise comes "
              "from the reference's torch generator)");
    out.push_back(b);
  }
  return out;
}

const json& vae_section(const json& metadata, const std::string& where) {
  LTX_CHECK(metadata.is_object() && metadata.contains("config") && metadata["config"].is_object(),
            where, ": no 'config' metadata (a video VAE file needs config.vae)");
  const json& config = metadata["config"];
  LTX_CHECK(config.contains("vae") && config["vae"].is_object(), where,
            ": the 'config' metadata has no 'vae' section (not a video VAE file?)");
  return config["vae"];
}

}  // namespace

tiling::ScaleFactors scale_factors_from_blocks(const std::vector<BlockSpec>& blocks,
                                               int64_t patch_size) {
  int64_t space = 0, time = 0;
  for (const BlockSpec& b : blocks) {
    if (b.name.starts_with("compress_space") || b.name.starts_with("compress_all")) ++space;
    if (b.name.starts_with("compress_time") || b.name.starts_with("compress_all")) ++time;
  }
  const int64_t s = patch_size * (int64_t{1} << space);
  return {int64_t{1} << time, s, s};
}

int64_t DecoderConfig::bottleneck_channels() const {
  int64_t mult = 1;
  for (const BlockSpec& b : blocks) {
    if (b.name == "compress_time" || b.name == "compress_space" || b.name == "compress_all")
      mult *= b.multiplier_or(1);
    else if (b.name == "res_x_y")
      mult *= b.multiplier_or(2);
  }
  return base_channels * mult;
}

EncoderConfig encoder_config_from_json(const json& vae, const std::string& where_) {
  const std::string where = where_ + " (config.vae)";
  LTX_CHECK(vae.is_object(), where, ": must be an object");
  EncoderConfig c;
  Reader top(vae, where, nullptr);
  const bool nested = top.has("encoder");
  if (nested) LTX_CHECK(vae["encoder"].is_object(), where, ": 'encoder' must be an object");
  const json& enc = nested ? vae["encoder"] : vae;
  const std::string enc_where = nested ? where + ".encoder" : where;
  Reader r(enc, enc_where, &c.defaulted);

  c.dims = r.has("dims") ? r.integer("dims", 3) : top.integer("dims", 3);
  c.in_channels = r.integer("in_channels", 3);
  if (nested) {
    c.latent_channels = r.has("out_channels") ? r.integer("out_channels", 128)
                                              : top.integer("latent_channels", 128);
  } else {
    c.latent_channels = r.integer("latent_channels", 128);
  }
  const char* blocks_key = nested && r.has("blocks") ? "blocks" : "encoder_blocks";
  LTX_CHECK(r.has(blocks_key), enc_where, ": no '", blocks_key,
            "' (the encoder's block list is required)");
  c.blocks = parse_blocks(r.raw(blocks_key), enc_where, blocks_key, false);
  c.patch_size = r.integer("patch_size", 4);
  c.norm_layer = parse_norm(r.string("norm_layer", "pixel_norm"), enc_where);
  c.latent_log_var = parse_log_var(r.string("latent_log_var", "uniform"), enc_where);
  // Flat configs: spatial_padding_mode wins over encoder_spatial_padding_mode (default zeros).
  std::string pad;
  if (r.has("spatial_padding_mode"))
    pad = r.string("spatial_padding_mode", "zeros");
  else
    pad = top.string("encoder_spatial_padding_mode", "zeros");
  c.spatial_padding_mode = parse_padding(pad, enc_where);

  LTX_CHECK(c.dims == 3, enc_where, ": dims=", c.dims, " is not supported (only 3-D VAEs)");
  LTX_CHECK(c.in_channels >= 1 && c.latent_channels >= 1 && c.patch_size >= 1, enc_where,
            ": in_channels, latent_channels and patch_size must be positive");
  LTX_CHECK(c.latent_log_var != LogVarianceType::None, enc_where,
            ": latent_log_var 'none' is not supported (the reference's encoder then halves the "
            "channels and cannot normalise them)");
  return c;
}

DecoderConfig decoder_config_from_json(const json& vae, const std::string& where_) {
  const std::string where = where_ + " (config.vae)";
  LTX_CHECK(vae.is_object(), where, ": must be an object");
  DecoderConfig c;
  Reader r(vae, where, &c.defaulted);
  const std::string cls = r.string("_class_name", "CausalVideoAutoencoder");
  LTX_CHECK(cls == "CausalVideoAutoencoder", where, ": _class_name '", cls,
            "' is not the convolutional video VAE (CausalVideoAutoencoder); a diffusion video "
            "decoder needs the diffusion-decoder component");
  c.dims = r.integer("dims", 3);
  c.latent_channels = r.integer("latent_channels", 128);
  c.out_channels = r.integer("out_channels", 3);
  LTX_CHECK(r.has("decoder_blocks"), where, ": no 'decoder_blocks' (the decoder's block list is "
            "required)");
  c.blocks = parse_blocks(r.raw("decoder_blocks"), where, "decoder_blocks", true);
  c.patch_size = r.integer("patch_size", 4);
  c.norm_layer = parse_norm(r.string("norm_layer", "pixel_norm"), where);
  c.causal = r.boolean("causal_decoder", false);
  c.timestep_conditioning = r.boolean("timestep_conditioning", true);
  c.spatial_padding_mode = parse_padding(r.string("spatial_padding_mode", "reflect"), where);
  c.base_channels = r.integer("decoder_base_channels", 128);

  LTX_CHECK(c.dims == 3, where, ": dims=", c.dims, " is not supported (only 3-D VAEs)");
  LTX_CHECK(c.latent_channels >= 1 && c.out_channels >= 1 && c.patch_size >= 1 &&
                c.base_channels >= 1,
            where, ": latent_channels, out_channels, patch_size and decoder_base_channels must "
            "be positive");
  return c;
}

EncoderConfig encoder_config_from_metadata(const json& metadata, const std::string& where) {
  return encoder_config_from_json(vae_section(metadata, where), where);
}

DecoderConfig decoder_config_from_metadata(const json& metadata, const std::string& where) {
  return decoder_config_from_json(vae_section(metadata, where), where);
}

namespace {
// The reference's COMFY key filters: keep `vae.<part>.` / `<part>.` and the per-channel statistics,
// with the prefixes stripped.
io::KeyMap part_key_map(const char* filter_name, const std::string& part) {
  io::KeyMap k(filter_name);
  k.keep("vae." + part + ".").keep("vae.per_channel_statistics.").keep(part + ".")
      .keep("per_channel_statistics.");
  k.replace("vae." + part + ".", "")
      .replace("vae.per_channel_statistics.", "per_channel_statistics.")
      .replace(part + ".", "");
  return k;
}
}  // namespace

io::KeyMap encoder_key_map() { return part_key_map("VAE_ENCODER_COMFY_KEYS_FILTER", "encoder"); }

io::KeyMap decoder_key_map() { return part_key_map("VAE_DECODER_COMFY_KEYS_FILTER", "decoder"); }

io::KeyMap diffusion_decoder_key_map() {
  io::KeyMap k("DIFFUSION_VAE_DECODER_COMFY_KEYS_FILTER");
  k.keep("vae.decoder.").keep("decoder.").keep("vae.per_channel_statistics.")
      .keep("per_channel_statistics.");
  k.replace("vae.decoder.", "")
      .replace("decoder.", "")
      .replace("t_embedder.mlp.0.", "t_embedder.timestep_embedder.linear_1.")
      .replace("t_embedder.mlp.2.", "t_embedder.timestep_embedder.linear_2.")
      .replace("vae.per_channel_statistics.", "per_channel_statistics.");
  return k;
}

bool is_diffusion_video_vae(const json& metadata) {
  const json* cfg = metadata.is_object() && metadata.contains("config") ? &metadata["config"]
                                                                         : nullptr;
  json decoded;
  if (cfg != nullptr && cfg->is_string()) {
    decoded = json::parse(cfg->get<std::string>(), nullptr, false);
    cfg = &decoded;
  }
  if (cfg == nullptr || !cfg->is_object() || !cfg->contains("vae") || !(*cfg)["vae"].is_object())
    return false;
  const json& vae = (*cfg)["vae"];
  const auto it = vae.find("_class_name");
  return it != vae.end() && it->is_string() && it->get<std::string>() != "CausalVideoAutoencoder";
}

namespace {

std::vector<int64_t> int_list(const Reader& r, const char* key, std::vector<int64_t> dflt) {
  if (!r.has(key)) return r.integer(key, 0), dflt;  // records the default
  const json& v = r.raw(key);
  LTX_CHECK(v.is_array(), r.where(), ": '", key, "' must be a list of integers, got ", v.dump());
  std::vector<int64_t> out;
  for (const json& e : v) {
    LTX_CHECK(e.is_number_integer() && e.get<int64_t>() >= 1, r.where(), ": '", key,
              "' must hold positive integers, got ", v.dump());
    out.push_back(e.get<int64_t>());
  }
  return out;
}

Axis3 axis3(const json& v, const std::string& where, const std::string& key) {
  LTX_CHECK(v.is_array() && v.size() == 3, where, ": '", key, "' entries must be [t, h, w], got ",
            v.dump());
  Axis3 a{};
  for (int i = 0; i < 3; ++i) {
    LTX_CHECK(v[i].is_number_integer() && v[i].get<int64_t>() >= 1, where, ": '", key,
              "' must hold positive integers, got ", v.dump());
    a[i] = v[i].get<int64_t>();
  }
  return a;
}

}  // namespace

DiffusionDecoderConfig diffusion_decoder_config_from_json(const json& vae,
                                                          const std::string& where_) {
  const std::string where = where_ + " (config.vae)";
  LTX_CHECK(vae.is_object(), where, ": must be an object");
  DiffusionDecoderConfig c;
  Reader top(vae, where, nullptr);
  const bool nested = top.has("decoder");
  if (nested) LTX_CHECK(vae["decoder"].is_object(), where, ": 'decoder' must be an object");
  const json& dec = nested ? vae["decoder"] : vae;
  const std::string dwhere = nested ? where_ + " (config.vae.decoder)" : where;
  Reader r(dec, dwhere, &c.defaulted);

  c.in_channels = r.has("in_channels") ? r.integer("in_channels", 128)
                                       : top.integer("latent_channels", 128);
  c.out_channels = r.integer("out_channels", 3);
  c.patch_size = r.integer("patch_size", 4);
  c.head_dim = r.has("head_dim") ? r.integer("head_dim", 64) : r.integer("na_head_dim", 64);
  c.stage_channels = int_list(r, "stage_channels", c.stage_channels);
  c.stage_depths = int_list(r, "stage_depths", c.stage_depths);
  if (r.has("stage_kernels")) {
    const json& v = r.raw("stage_kernels");
    LTX_CHECK(v.is_array(), dwhere, ": 'stage_kernels' must be a list of [t, h, w], got ",
              v.dump());
    c.stage_kernels.clear();
    for (const json& e : v) c.stage_kernels.push_back(axis3(e, dwhere, "stage_kernels"));
  } else {
    r.integer("stage_kernels", 0);
  }
  if (r.has("upsamples")) {
    const json& v = r.raw("upsamples");
    LTX_CHECK(v.is_array(), dwhere, ": 'upsamples' must be a list of [[t, h, w], reduction]");
    c.upsamples.clear();
    for (const json& e : v) {
      LTX_CHECK(e.is_array() && e.size() == 2 && e[1].is_number_integer() &&
                    e[1].get<int64_t>() >= 1,
                dwhere, ": 'upsamples' entries must be [[t, h, w], reduction], got ", e.dump());
      c.upsamples.push_back({axis3(e[0], dwhere, "upsamples"), e[1].get<int64_t>()});
    }
  } else {
    r.integer("upsamples", 0);
  }
  c.stage5_kernel = r.has("stage5_kernel") ? axis3(r.raw("stage5_kernel"), dwhere, "stage5_kernel")
                                           : (r.integer("stage5_kernel", 0), c.stage5_kernel);
  if (r.has("stage5_channels")) c.stage5_channels = r.integer("stage5_channels", 0);
  c.t_emb_dim = r.integer("t_emb_dim", 384);
  c.default_num_inference_steps = r.integer("default_num_inference_steps", 2);
  if (r.has("timestep_scale_multiplier")) {
    const json& v = r.raw("timestep_scale_multiplier");
    LTX_CHECK(v.is_number(), dwhere, ": 'timestep_scale_multiplier' must be a number, got ",
              v.dump());
    c.timestep_scale_multiplier = v.get<double>();
  } else {
    r.integer("timestep_scale_multiplier", 0);
  }
  const std::string out_type = top.string("model_output_type", "v");
  if (!top.has("model_output_type")) c.defaulted.push_back("model_output_type");
  LTX_CHECK(out_type == "v" || out_type == "x0", where, ": model_output_type '", out_type,
            "' is not supported (expected v or x0)");
  c.model_output_type = out_type == "x0" ? ModelOutputType::X0 : ModelOutputType::Velocity;

  // The decoder runs exactly three deterministic stages, stage 4 and the diffusion stage.
  const size_t n = c.stage_channels.size();
  LTX_CHECK(n == 5 && c.stage_depths.size() == 5 && c.stage_kernels.size() == 5 &&
                c.upsamples.size() == 4,
            dwhere, ": expected 5 stage_channels / stage_depths / stage_kernels and 4 upsamples, "
            "got ", n, " / ", c.stage_depths.size(), " / ", c.stage_kernels.size(), " / ",
            c.upsamples.size());
  LTX_CHECK(c.head_dim >= 8 && c.head_dim % 8 == 0, dwhere, ": head_dim ", c.head_dim,
            " must be a positive multiple of 8");
  for (size_t s = 0; s < n; ++s)
    LTX_CHECK(c.stage_channels[s] % c.head_dim == 0, dwhere, ": stage_channels ",
              c.stage_channels[s], " is not a multiple of head_dim ", c.head_dim);
  LTX_CHECK(c.diffusion_channels() >= 1 && c.diffusion_channels() % c.head_dim == 0, dwhere,
            ": stage5_channels ", c.diffusion_channels(), " is not a multiple of head_dim ",
            c.head_dim);
  for (size_t s = 0; s < 4; ++s) {
    const int64_t next = s + 1 < 4 ? c.stage_channels[s + 1] : c.context_channels();
    LTX_CHECK(c.stage_channels[s] % c.upsamples[s].reduction == 0 &&
                  c.stage_channels[s] / c.upsamples[s].reduction == next,
              dwhere, ": upsamples[", s, "] turns ", c.stage_channels[s], " channels into ",
              c.stage_channels[s] / c.upsamples[s].reduction, ", but the next stage has ", next);
  }
  LTX_CHECK(c.default_num_inference_steps >= 1 && c.timestep_scale_multiplier > 0, dwhere,
            ": default_num_inference_steps and timestep_scale_multiplier must be positive");
  return c;
}

DiffusionDecoderConfig diffusion_decoder_config_from_metadata(const json& metadata,
                                                              const std::string& where) {
  return diffusion_decoder_config_from_json(vae_section(metadata, where), where);
}

}  // namespace ltx::models::video_vae
