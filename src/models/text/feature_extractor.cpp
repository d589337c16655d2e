#include "models/text/feature_extractor.h"

#include <cctype>
#include <cmath>

#include "core/error.h"
#include "models/text/token_mask.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace ltx::models::text {

using json = nlohmann::json;

const char* feature_extractor_version_name(FeatureExtractorVersion v) {
  return v == FeatureExtractorVersion::V1 ? "V1" : "V2";
}

namespace {

// The V2 selection keys and the only values the reference accepts (_V2_EXPECTED_CONFIG).
struct V2Key {
  const char* key;
  bool value;
};
constexpr V2Key kV2Keys[] = {{"caption_proj_before_connector", true},
                             {"caption_projection_first_linear", false},
                             {"caption_proj_input_norm", false},
                             {"caption_projection_second_linear", false}};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

FeatureExtractorConfig FeatureExtractorConfig::from_config(const ConfigReader& r,
                                                           const GemmaTextDims& gemma, bool audio) {
  LTX_CHECK(gemma.hidden_size > 0 && gemma.num_hidden_layers >= 0,
            "feature extractor: bad Gemma text config (hidden_size ", gemma.hidden_size,
            ", num_hidden_layers ", gemma.num_hidden_layers, ")");
  FeatureExtractorConfig c;
  c.embedding_dim = gemma.hidden_size;
  c.num_layers = gemma.num_hidden_layers + 1;  // + the embedding output

  std::vector<std::string> present, missing, wrong;
  for (const V2Key& k : kV2Keys) {
    const json* v = r.find(k.key);
    if (!v) {
      missing.push_back(k.key);
      continue;
    }
    present.push_back(k.key);
    if (!py_equal(*v, json(k.value)))
      wrong.push_back(str(k.key, "=", v->dump(), " (expected ", k.value ? "true" : "false", ")"));
  }
  const auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
    return s;
  };
  if (present.empty()) {
    // V1: the projection is D*L -> D and the caption projection lives in the transformer.
    c.version = FeatureExtractorVersion::V1;
    c.video_dim = c.embedding_dim;
    c.audio_dim = audio ? c.embedding_dim : 0;
    return c;
  }
  if (!missing.empty())
    fail(r.source(), ": config.transformer has a partial text-projection (V2 feature extractor) "
         "configuration, missing ", join(missing), "; the reference refuses it (NotImplementedError)");
  if (!wrong.empty())
    fail(r.source(), ": config.transformer has an unknown text-projection configuration: ",
         join(wrong), "; the reference refuses it (NotImplementedError)");

  c.version = FeatureExtractorVersion::V2;
  std::vector<const char*> keys = {"num_attention_heads", "attention_head_dim"};
  if (audio) keys.insert(keys.end(), {"audio_num_attention_heads", "audio_attention_head_dim"});
  for (const char* key : keys)
    if (!r.has(key))
      r.error(key, "is required by the V2 feature extractor (its projection widths), but absent");
  c.video_dim = r.integer("num_attention_heads", 0) * r.integer("attention_head_dim", 0);
  c.audio_dim =
      audio ? r.integer("audio_num_attention_heads", 0) * r.integer("audio_attention_head_dim", 0)
            : 0;
  // Read by nobody in the reference; every V2 file says per-token RMS (in either case). Anything
  // else would be a model this code would silently run with the wrong normalisation.
  if (r.has("text_encoder_norm_type")) {
    const std::string t = r.string("text_encoder_norm_type", "");
    if (lower(t) != "per_token_rms")
      r.error("text_encoder_norm_type",
              str("is \"", t, "\", but the V2 feature extractor normalises per token (per_token_rms)"));
  }
  return c;
}

FeatureExtractor FeatureExtractor::load(io::WeightMap& w, const FeatureExtractorConfig& config,
                                        const nn::LoadOptions& opt) {
  LTX_CHECK(config.embedding_dim > 0 && config.num_layers > 0 && config.video_dim > 0 &&
                config.audio_dim >= 0,
            "feature extractor: bad configuration (D ", config.embedding_dim, ", ", config.num_layers,
            " hidden states, widths ", config.video_dim, " / ", config.audio_dim, ")");
  FeatureExtractor f;
  f.config_ = config;
  const int64_t flat = config.flat_dim();
  if (config.version == FeatureExtractorVersion::V1) {
    LTX_CHECK(config.video_dim == config.embedding_dim &&
                  (config.audio_dim == config.embedding_dim || config.audio_dim == 0),
              "feature extractor V1 projects to the Gemma width ", config.embedding_dim);
    f.aggregate_embed_ = nn::Linear::load(w, "aggregate_embed", flat, config.embedding_dim, false, opt);
  } else {
    f.video_aggregate_embed_ = nn::Linear::load(w, "video_aggregate_embed", flat, config.video_dim, true, opt);
    if (config.audio_dim > 0)
      f.audio_aggregate_embed_ =
          nn::Linear::load(w, "audio_aggregate_embed", flat, config.audio_dim, true, opt);
  }
  return f;
}

Tensor norm_and_concat_v1(const Tensor& x) {
  LTX_CHECK(x.dim() == 3, "feature extractor V1: x must be [n, D, L], got ", x.describe());
  const int64_t n = x.size(0), d = x.size(1), l = x.size(2);
  if (n == 0) return Tensor::empty({0, d * l}, x.dtype(), x.device());
  // Per layer over all valid (t, d): mean = sum / (n D + 1e-6) (an f32 sum of an integer count and
  // 1e-6, as the reference), and the range max - min.
  const float denom = static_cast<float>(n * d) + 1e-6f;
  const Tensor mean = ops::div(ops::sum(x, {0, 1}), static_cast<double>(denom));  // [L]
  const Tensor range = ops::sub(ops::amax(x, {0, 1}), ops::amin(x, {0, 1}));
  const Tensor normed = ops::div(ops::mul(ops::sub(x, mean), 8.0), ops::add(range, 1e-6));
  return normed.view({n, d * l});
}

Tensor norm_and_concat_v2(const Tensor& x) {
  LTX_CHECK(x.dim() == 3, "feature extractor V2: x must be [n, D, L], got ", x.describe());
  const int64_t n = x.size(0), d = x.size(1), l = x.size(2);
  if (n == 0) return Tensor::empty({0, d * l}, x.dtype(), x.device());
  return ops::rms_norm_dim(x, 1, 1e-6).view({n, d * l});
}

namespace {

// Rows [T, W] of one batch item: `valid` (the valid tokens' rows, in order) at the valid
// positions, `pad_row` [W] everywhere else.
Tensor scatter_rows(const Tensor& valid, const Tensor& pad_row, const std::vector<TokenMask::Run>& runs) {
  const int64_t w = pad_row.size(0);
  std::vector<Tensor> parts;
  int64_t next = 0;
  for (const TokenMask::Run& r : runs) {
    if (r.valid) {
      parts.push_back(valid.narrow(0, next, r.length));
      next += r.length;
    } else {
      parts.push_back(pad_row.unsqueeze(0).expand({r.length, w}));
    }
  }
  return parts.size() == 1 ? parts[0].contiguous() : ops::concat(parts, 0);
}

Tensor pad_row_of(const nn::Linear& lin) {
  // The projection of a zeroed row: its bias, or zeros.
  return lin.bias.defined() ? lin.bias : Tensor::zeros({lin.out_features()}, lin.dtype(),
                                                       lin.weight.device());
}

}  // namespace

TextFeatures FeatureExtractor::operator()(const Tensor& stacked, const Tensor& attention_mask) const {
  LTX_CHECK(stacked.dim() == 4, "feature extractor: stacked hidden states must be [B, T, D, L], got ",
            stacked.describe());
  std::vector<Tensor> layers;
  for (int64_t l = 0; l < stacked.size(3); ++l) layers.push_back(stacked.select(3, l));
  return (*this)(layers, attention_mask);
}

TextFeatures FeatureExtractor::operator()(const std::vector<Tensor>& hidden_states,
                                          const Tensor& attention_mask) const {
  const FeatureExtractorConfig& c = config_;
  LTX_CHECK(static_cast<int64_t>(hidden_states.size()) == c.num_layers, "feature extractor: expected ",
            c.num_layers, " hidden states (Gemma's num_hidden_layers + 1), got ", hidden_states.size());
  const Tensor& h0 = hidden_states[0];
  LTX_CHECK(h0.dim() == 3 && h0.size(2) == c.embedding_dim,
            "feature extractor: hidden states must be [B, T, ", c.embedding_dim,
            "] (the Gemma hidden size), got ", h0.describe());
  for (const Tensor& h : hidden_states)
    LTX_CHECK(h.shape() == h0.shape(), "feature extractor: hidden states differ in shape: ",
              h.describe(), " vs ", h0.describe());
  const TokenMask mask = TokenMask::from_binary(attention_mask);
  LTX_CHECK(mask.batch() == h0.size(0) && mask.length() == h0.size(1), "feature extractor: the mask ",
            attention_mask.describe(), " does not match the hidden states ", h0.describe());

  const bool v1 = c.version == FeatureExtractorVersion::V1;
  std::vector<Tensor> video_rows, audio_rows;
  for (int64_t b = 0; b < mask.batch(); ++b) {
    const int64_t n = mask.count(b);
    Tensor x;  // [n, D, L]
    if (n > 0) {
      std::vector<Tensor> per_layer;
      for (const Tensor& h : hidden_states) per_layer.push_back(gather_valid_rows(h, mask, b));
      x = ops::stack(per_layer, -1);
    }
    const auto project = [&](const nn::Linear& lin, const Tensor& normed, double rescale) {
      Tensor valid;
      if (n > 0) valid = lin(rescale == 1.0 ? normed : ops::mul(normed, rescale));
      return scatter_rows(valid, pad_row_of(lin), mask.runs(b));
    };
    if (v1) {
      const Tensor normed = n > 0 ? norm_and_concat_v1(x) : Tensor();
      video_rows.push_back(project(*aggregate_embed_, normed, 1.0));
    } else {
      const Tensor normed = n > 0 ? norm_and_concat_v2(x) : Tensor();
      const double d = static_cast<double>(c.embedding_dim);
      video_rows.push_back(project(*video_aggregate_embed_, normed, std::sqrt(c.video_dim / d)));
      if (audio_aggregate_embed_)
        audio_rows.push_back(project(*audio_aggregate_embed_, normed, std::sqrt(c.audio_dim / d)));
    }
  }
  TextFeatures out;
  out.video = ops::stack(video_rows, 0);
  if (c.audio_dim > 0) out.audio = v1 ? out.video : ops::stack(audio_rows, 0);
  return out;
}

}  // namespace ltx::models::text
