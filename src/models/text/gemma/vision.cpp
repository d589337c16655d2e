#include "models/text/gemma/vision.h"

#include <cmath>
#include <memory>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/norm.h"
#include "ops/reduce.h"

namespace ltx::text {

using nlohmann::json;

namespace {

int64_t read_int(const json& obj, const char* key, int64_t def, const std::string& where) {
  if (!obj.contains(key) || obj.at(key).is_null()) return def;
  const json& v = obj.at(key);
  LTX_CHECK(v.is_number_integer(), "Gemma config ", where, ": '", key,
            "' must be an integer, got ", v.dump());
  return v.get<int64_t>();
}

double read_number(const json& obj, const char* key, double def, const std::string& where) {
  if (!obj.contains(key) || obj.at(key).is_null()) return def;
  const json& v = obj.at(key);
  LTX_CHECK(v.is_number(), "Gemma config ", where, ": '", key, "' must be a number, got ",
            v.dump());
  return v.get<double>();
}

std::string read_string(const json& obj, const char* key, const std::string& def) {
  if (!obj.contains(key) || !obj.at(key).is_string()) return def;
  return obj.at(key).get<std::string>();
}

}  // namespace

bool has_gemma3_vision_config(const json& config) {
  return config.is_object() && read_string(config, "model_type", "") == "gemma3" &&
         config.contains("vision_config") && config.at("vision_config").is_object();
}

int64_t GemmaVisionConfig::tokens_per_side() const {
  return static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(mm_tokens_per_image))));
}

GemmaVisionConfig GemmaVisionConfig::from_json(const json& config, const std::string& source) {
  const std::string model_type =
      config.is_object() ? read_string(config, "model_type", "(none)") : "(none)";
  LTX_CHECK(model_type == "gemma3",
            "image-aware prompt enhancement (--enhance-prompt with --image) runs the Gemma 3 vision "
            "tower; ", source, " is a '", model_type,
            "' model. Supported: a Gemma 3 checkpoint with its vision tower (model_type gemma3, "
            "e.g. google/gemma-3-12b-it); drop --image or --enhance-prompt otherwise");
  LTX_CHECK(config.contains("vision_config") && config.at("vision_config").is_object(),
            "image-aware prompt enhancement: the Gemma 3 config of ", source,
            " has no vision_config, so the model has no vision tower; use the full Gemma 3 "
            "checkpoint (with vision_tower.* and multi_modal_projector.* tensors)");
  const json& v = config.at("vision_config");
  const std::string where = source + " vision_config";
  GemmaVisionConfig c;
  c.source = source;
  const std::string vtype = read_string(v, "model_type", "siglip_vision_model");
  LTX_CHECK(vtype == "siglip_vision_model", "Gemma config ", where, ": model_type '", vtype,
            "' is not supported (only siglip_vision_model, Gemma 3's tower)");
  c.hidden_size = read_int(v, "hidden_size", 768, where);
  c.intermediate_size = read_int(v, "intermediate_size", 3072, where);
  c.num_layers = read_int(v, "num_hidden_layers", 12, where);
  c.num_heads = read_int(v, "num_attention_heads", 12, where);
  c.num_channels = read_int(v, "num_channels", 3, where);
  c.image_size = read_int(v, "image_size", 224, where);
  c.patch_size = read_int(v, "patch_size", 16, where);
  c.layer_norm_eps = read_number(v, "layer_norm_eps", 1e-6, where);
  const std::string act = read_string(v, "hidden_act", "gelu_pytorch_tanh");
  LTX_CHECK(act == "gelu_pytorch_tanh", "Gemma config ", where, ": hidden_act '", act,
            "' is not supported (Gemma 3's tower uses gelu_pytorch_tanh)");
  LTX_CHECK(c.hidden_size > 0 && c.intermediate_size > 0 && c.num_layers >= 0 &&
                c.num_heads > 0 && c.hidden_size % c.num_heads == 0,
            "Gemma config ", where, ": hidden_size ", c.hidden_size,
            " must be a positive multiple of num_attention_heads ", c.num_heads);
  LTX_CHECK(c.num_channels == 3, "Gemma config ", where, ": num_channels ", c.num_channels,
            " is not supported (RGB images: 3)");
  LTX_CHECK(c.patch_size > 0 && c.image_size > 0 && c.image_size % c.patch_size == 0,
            "Gemma config ", where, ": image_size ", c.image_size,
            " must be a positive multiple of patch_size ", c.patch_size);

  const json& t = config.contains("text_config") && config.at("text_config").is_object()
                      ? config.at("text_config")
                      : config;
  c.text_hidden_size = read_int(t, "hidden_size", 2304, source + " text_config");
  c.mm_tokens_per_image = read_int(config, "mm_tokens_per_image", 256, source);
  // HF's Gemma 3 configs name these *_index (older) or *_id.
  auto token = [&](const char* index_key, const char* id_key, int64_t def) {
    return read_int(config, index_key, read_int(config, id_key, def, source), source);
  };
  c.boi_token_id = token("boi_token_index", "boi_token_id", 255999);
  c.eoi_token_id = token("eoi_token_index", "eoi_token_id", 256000);
  c.image_token_id = token("image_token_index", "image_token_id", 262144);
  const int64_t t_side = c.tokens_per_side();
  LTX_CHECK(c.mm_tokens_per_image > 0 && t_side * t_side == c.mm_tokens_per_image &&
                c.patches_per_side() % t_side == 0,
            "Gemma config ", source, ": mm_tokens_per_image ", c.mm_tokens_per_image,
            " must be a square whose side divides the ", c.patches_per_side(),
            " patches per side");
  return c;
}

Tensor SiglipLayerNorm::operator()(const Tensor& x) const {
  return ops::layer_norm(x, weight, bias, eps);
}

GemmaVisionTower GemmaVisionTower::load(const GemmaAssets& assets, const nn::LoadOptions& opt) {
  LTX_CHECK(!assets.weight_paths.empty(), "Gemma vision tower: ", assets.source,
            " has no weight files (model*.safetensors)");
  return load(GemmaVisionConfig::from_json(assets.config, assets.source), assets.weight_paths, opt);
}

GemmaVisionTower GemmaVisionTower::load(const GemmaVisionConfig& config,
                                        const std::vector<std::string>& weight_paths,
                                        const nn::LoadOptions& opt) {
  LTX_CHECK(!weight_paths.empty(), "Gemma vision tower (", config.source, "): no weight files");
  std::vector<std::shared_ptr<const io::SafetensorsFile>> files;
  for (const auto& p : weight_paths) files.push_back(io::SafetensorsFile::open(p));
  io::KeyMap keys("Gemma 3 vision tower + projector");
  keys.keep(kGemmaVisionTowerPrefix).keep(kGemmaProjectorPrefix);
  io::WeightMap all(files, keys);
  std::string where = weight_paths.front();
  if (weight_paths.size() > 1) where += str(" (+", weight_paths.size() - 1, " more)");
  LTX_CHECK(all.size() > 0, "image-aware prompt enhancement needs the Gemma 3 vision tower, but ",
            where, " has no ", kGemmaVisionTowerPrefix, "* / ", kGemmaProjectorPrefix,
            "* tensors (a text-only Gemma file); use the full Gemma 3 checkpoint, or drop --image "
            "or --enhance-prompt");

  GemmaVisionTower m;
  m.config_ = config;
  const GemmaVisionConfig& c = m.config_;
  const int64_t D = c.hidden_size, P = c.patches_per_side() * c.patches_per_side();
  const DType f = opt.dtype;
  io::WeightMap vt = all.scoped(kGemmaVisionTowerPrefix);
  io::WeightMap mp = all.scoped(kGemmaProjectorPrefix);
  auto layer_norm = [&](io::WeightMap& s, const std::string& name) {
    SiglipLayerNorm n;
    n.weight = s.take(name + ".weight", {D}, f, opt.device);
    n.bias = s.take(name + ".bias", {D}, f, opt.device);
    n.eps = c.layer_norm_eps;
    return n;
  };
  auto linear = [&](io::WeightMap& s, const std::string& name, int64_t in, int64_t out) {
    return nn::Linear::load(s, name, in, out, true, opt);
  };

  const int64_t K = c.num_channels * c.patch_size * c.patch_size;
  {
    const Tensor w = vt.take("embeddings.patch_embedding.weight",
                             {D, c.num_channels, c.patch_size, c.patch_size}, f, opt.device);
    m.patch_embedding.weight = w.defined() ? w.view({D, K}) : w;
    m.patch_embedding.bias = vt.take("embeddings.patch_embedding.bias", {D}, f, opt.device);
  }
  m.position_embedding = vt.take("embeddings.position_embedding.weight", {P, D}, f, opt.device);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    io::WeightMap s = vt.scoped(str("encoder.layers.", i, "."));
    SiglipEncoderLayer L;
    L.layer_norm1 = layer_norm(s, "layer_norm1");
    L.layer_norm2 = layer_norm(s, "layer_norm2");
    L.q_proj = linear(s, "self_attn.q_proj", D, D);
    L.k_proj = linear(s, "self_attn.k_proj", D, D);
    L.v_proj = linear(s, "self_attn.v_proj", D, D);
    L.out_proj = linear(s, "self_attn.out_proj", D, D);
    L.fc1 = linear(s, "mlp.fc1", D, c.intermediate_size);
    L.fc2 = linear(s, "mlp.fc2", c.intermediate_size, D);
    m.layers_.push_back(std::move(L));
  }
  m.post_layernorm = layer_norm(vt, "post_layernorm");
  // SigLIP's pooling head (vision_use_head) is not part of Gemma 3's image path.
  vt.ignore("head.");

  const Tensor norm_w = mp.take("mm_soft_emb_norm.weight", {D}, f, opt.device);
  if (norm_w.defined()) m.soft_emb_norm_scale = ops::add(norm_w, 1.0);
  const Tensor proj =
      mp.take("mm_input_projection_weight", {D, c.text_hidden_size}, f, opt.device);
  if (proj.defined()) m.input_projection = proj.transpose(0, 1).contiguous();
  all.finish(str("Gemma 3 vision tower (", kGemmaVisionTowerPrefix, "*, ", kGemmaProjectorPrefix,
                 "*) from ", where));
  return m;
}

Tensor GemmaVisionTower::vision(const Tensor& pixel_values) const {
  const GemmaVisionConfig& c = config_;
  const int64_t S = c.image_size, p = c.patch_size, g = c.patches_per_side();
  LTX_CHECK(pixel_values.dim() == 4 && pixel_values.size(1) == c.num_channels &&
                pixel_values.size(2) == S && pixel_values.size(3) == S,
            "Gemma vision tower: pixel_values must be [batch, ", c.num_channels, ", ", S, ", ", S,
            "], got ", pixel_values.describe());
  const int64_t B = pixel_values.size(0), D = c.hidden_size, H = c.num_heads, Dh = D / H;
  const Device dev = position_embedding.device();
  const Tensor px = pixel_values.to(dev, position_embedding.dtype()).contiguous();
  // Patches in the convolution kernel's (channel, row, column) order, row-major over the grid.
  const Tensor patches = px.view({B, c.num_channels, g, p, g, p})
                             .permute({0, 2, 4, 1, 3, 5})
                             .reshape({B, g * g, c.num_channels * p * p});
  Tensor h = ops::add(patch_embedding(patches), position_embedding);
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  for (const SiglipEncoderLayer& L : layers_) {
    const Tensor x = L.layer_norm1(h);
    const int64_t T = x.size(1);
    const Tensor q = L.q_proj(x).view({B, T, H, Dh}).permute({0, 2, 1, 3});
    const Tensor k = L.k_proj(x).view({B, T, H, Dh}).permute({0, 2, 1, 3});
    const Tensor v = L.v_proj(x).view({B, T, H, Dh}).permute({0, 2, 1, 3});
    const Tensor a = ops::scaled_dot_product_attention(q, k, v, Tensor(), scale);
    h = ops::add(h, L.out_proj(a.permute({0, 2, 1, 3}).reshape({B, T, D})));
    h = ops::add(h, L.fc2(L.fc1.gelu_tanh(L.layer_norm2(h))));
  }
  return post_layernorm(h);
}

Tensor GemmaVisionTower::project(const Tensor& vision_out) const {
  const GemmaVisionConfig& c = config_;
  const int64_t g = c.patches_per_side(), t = c.tokens_per_side(), k = g / t;
  const int64_t D = c.hidden_size;
  LTX_CHECK(vision_out.dim() == 3 && vision_out.size(1) == g * g && vision_out.size(2) == D,
            "Gemma multi-modal projector: expected [batch, ", g * g, ", ", D, "], got ",
            vision_out.describe());
  const int64_t B = vision_out.size(0);
  // AvgPool2d(k, k) over the patch grid (patch index = row * g + column).
  const Tensor pooled = ops::mean(vision_out.contiguous().view({B, t, k, t, k, D}), {2, 4})
                            .reshape({B, t * t, D});
  const Tensor normed = ops::rms_norm(pooled, soft_emb_norm_scale, c.layer_norm_eps);
  return ops::linear(normed, input_projection);
}

}  // namespace ltx::text
