#include "models/audio_vae/config.h"

#include <cmath>

#include "core/error.h"

namespace ltx::models::audio_vae {

using json = nlohmann::json;

const char* causality_axis_name(CausalityAxis a) {
  switch (a) {
    case CausalityAxis::None: return "none";
    case CausalityAxis::Width: return "width";
    case CausalityAxis::Height: return "height";
    case CausalityAxis::WidthCompatibility: return "width-compatibility";
  }
  return "?";
}

const char* norm_type_name(NormType n) { return n == NormType::Group ? "group" : "pixel"; }

namespace {

// A JSON object being read, with its dotted path for error messages.
struct Section {
  const json* obj;
  std::string path;   // "config.audio_vae.model"
  std::string where;  // the file

  bool has(const char* key) const { return obj->contains(key); }
  const json& at(const char* key) const { return (*obj)[key]; }
  std::string key_path(const char* key) const { return path + "." + key; }

  [[noreturn]] void bad(const char* key, const std::string& what) const {
    fail(where, ": ", key_path(key), " ", what, " (got ", at(key).dump(), ")");
  }

  // A nested object; absent gives an empty one (the reference's `.get(key, {})`).
  Section sub(const char* key) const {
    static const json kEmpty = json::object();
    if (!has(key)) return {&kEmpty, key_path(key), where};
    if (!at(key).is_object()) bad(key, "must be an object");
    return {&at(key), key_path(key), where};
  }

  static bool as_int(const json& v, int64_t* out) {
    if (v.is_number_integer()) {
      *out = v.get<int64_t>();
      return true;
    }
    if (v.is_number_float()) {  // 16000.0 works in the reference too
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
        *out = static_cast<int64_t>(d);
        return true;
      }
    }
    return false;
  }

  int64_t get_int(const char* key, int64_t def, int64_t min_value = 1) const {
    if (!has(key)) return def;
    int64_t v = 0;
    if (!as_int(at(key), &v)) bad(key, "must be an integer");
    if (v < min_value) bad(key, str("must be >= ", min_value));
    return v;
  }
  bool get_bool(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!at(key).is_boolean()) bad(key, "must be true or false");
    return at(key).get<bool>();
  }
  std::string get_string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    if (!at(key).is_string()) bad(key, "must be a string");
    return at(key).get<std::string>();
  }
  std::vector<int64_t> get_int_list(const char* key, const std::vector<int64_t>& def,
                                    int64_t min_value = 1, bool allow_empty = false) const {
    if (!has(key)) return def;
    const json& v = at(key);
    if (!v.is_array()) bad(key, "must be a list of integers");
    std::vector<int64_t> out;
    for (const json& e : v) {
      int64_t x = 0;
      if (!as_int(e, &x)) bad(key, "must be a list of integers");
      if (x < min_value) bad(key, str("entries must be >= ", min_value));
      out.push_back(x);
    }
    if (out.empty() && !allow_empty) bad(key, "must not be empty");
    return out;
  }
  // The reference's check_config_value: the key must be present and equal `expected`.
  void require_string(const char* key, const char* expected) const {
    if (!has(key) || !at(key).is_string() || at(key).get<std::string>() != expected)
      fail(where, ": ", key_path(key), " must be \"", expected, "\" (got ",
           has(key) ? at(key).dump() : std::string("nothing"), ")");
  }
  // check_config_value(cfg, key, True): Python equality, so true and 1 pass.
  void require_true(const char* key) const {
    int64_t i = 0;
    const bool ok = has(key) && ((at(key).is_boolean() && at(key).get<bool>()) ||
                                 (as_int(at(key), &i) && i == 1));
    if (!ok)
      fail(where, ": ", key_path(key), " must be true (got ",
           has(key) ? at(key).dump() : std::string("nothing"), ")");
  }
};

// The value of a Python `or` chain: null, absent, 0, false and "" fall through.
std::optional<int64_t> truthy_int(const Section& s, const char* key) {
  if (!s.has(key)) return std::nullopt;
  const json& v = s.at(key);
  if (v.is_null()) return std::nullopt;
  if (v.is_boolean()) {
    if (!v.get<bool>()) return std::nullopt;
    s.bad(key, "must be an integer");
  }
  const int64_t x = s.get_int(key, 0, 0);
  if (x == 0) return std::nullopt;
  return x;
}

Section root_section(const json& config, const char* name, const std::string& where) {
  static const json kEmpty = json::object();
  if (config.is_null()) return {&kEmpty, std::string("config.") + name, where};
  if (!config.is_object()) fail(where, ": the `config` metadata is not a JSON object");
  Section root{&config, "config", where};
  return root.sub(name);
}

GeneratorConfig generator_from(const Section& s) {
  GeneratorConfig g;
  g.resblock_kernel_sizes = s.get_int_list("resblock_kernel_sizes", g.resblock_kernel_sizes);
  g.upsample_rates = s.get_int_list("upsample_rates", g.upsample_rates);
  g.upsample_kernel_sizes = s.get_int_list("upsample_kernel_sizes", g.upsample_kernel_sizes);
  if (s.has("resblock_dilation_sizes")) {
    const json& v = s.at("resblock_dilation_sizes");
    if (!v.is_array()) s.bad("resblock_dilation_sizes", "must be a list of lists of integers");
    g.resblock_dilation_sizes.clear();
    for (const json& row : v) {
      if (!row.is_array()) s.bad("resblock_dilation_sizes", "must be a list of lists of integers");
      std::vector<int64_t> r;
      for (const json& e : row) {
        int64_t x = 0;
        if (!Section::as_int(e, &x) || x < 1)
          s.bad("resblock_dilation_sizes", "must hold positive integers");
        r.push_back(x);
      }
      g.resblock_dilation_sizes.push_back(std::move(r));
    }
  }
  g.upsample_initial_channel = s.get_int("upsample_initial_channel", g.upsample_initial_channel);
  g.resblock = s.get_string("resblock", g.resblock);
  g.output_sampling_rate = s.get_int("output_sampling_rate", g.output_sampling_rate);
  g.activation = s.get_string("activation", g.activation);
  g.use_tanh_at_final = s.get_bool("use_tanh_at_final", g.use_tanh_at_final);
  g.use_bias_at_final = s.get_bool("use_bias_at_final", g.use_bias_at_final);

  // What the reference's constructor needs to build at all (zip(..., strict=True), 3 dilations
  // per block, channel halving per stage).
  if (g.upsample_rates.size() != g.upsample_kernel_sizes.size())
    fail(s.where, ": ", s.path, ": upsample_rates has ", g.upsample_rates.size(),
         " entries but upsample_kernel_sizes ", g.upsample_kernel_sizes.size());
  if (g.resblock_kernel_sizes.size() != g.resblock_dilation_sizes.size())
    fail(s.where, ": ", s.path, ": resblock_kernel_sizes has ", g.resblock_kernel_sizes.size(),
         " entries but resblock_dilation_sizes ", g.resblock_dilation_sizes.size());
  for (const auto& d : g.resblock_dilation_sizes)
    if (d.size() < 3)
      fail(s.where, ": ", s.path, ".resblock_dilation_sizes: every block needs 3 dilations");
  for (size_t i = 0; i < g.upsample_rates.size(); ++i)
    if (g.upsample_kernel_sizes[i] < g.upsample_rates[i])
      fail(s.where, ": ", s.path, ": upsample kernel ", g.upsample_kernel_sizes[i],
           " is smaller than its rate ", g.upsample_rates[i]);
  if (g.final_channels() < 1)
    fail(s.where, ": ", s.path, ".upsample_initial_channel ", g.upsample_initial_channel,
         " is too small for ", g.upsample_rates.size(), " halving stages");
  return g;
}

}  // namespace

int64_t GeneratorConfig::upsample_factor() const {
  int64_t f = 1;
  for (int64_t r : upsample_rates) f *= r;
  return f;
}

int64_t GeneratorConfig::final_channels() const {
  return upsample_initial_channel >> static_cast<int>(upsample_rates.size());
}

AudioVaeConfig AudioVaeConfig::from_config(const json& config, const std::string& where) {
  const Section av = root_section(config, "audio_vae", where);
  const Section params = av.sub("model").sub("params");
  const Section dd = params.sub("ddconfig");
  const Section pre = av.sub("preprocessing");
  const Section stft = pre.sub("stft");
  const Section mel = pre.sub("mel");
  const Section vars = av.sub("variables");

  AudioVaeConfig c;
  c.sample_rate = params.get_int("sampling_rate", c.sample_rate);
  c.mel_hop_length = stft.get_int("hop_length", c.mel_hop_length);
  c.n_fft = stft.get_int("filter_length", c.n_fft);
  c.is_causal = stft.get_bool("causal", c.is_causal);
  c.mel_bins = truthy_int(dd, "mel_bins");
  if (!c.mel_bins) c.mel_bins = truthy_int(mel, "n_mel_channels");
  if (!c.mel_bins) c.mel_bins = truthy_int(vars, "mel_bins");

  c.ch = dd.get_int("ch", c.ch);
  c.out_ch = dd.get_int("out_ch", c.out_ch);
  c.ch_mult = dd.get_int_list("ch_mult", c.ch_mult);
  c.num_res_blocks = dd.get_int("num_res_blocks", c.num_res_blocks, 0);
  if (dd.has("attn_resolutions")) {
    const auto v = dd.get_int_list("attn_resolutions", {}, 0, /*allow_empty=*/true);
    c.attn_resolutions = std::set<int64_t>(v.begin(), v.end());
  }
  c.resolution = dd.get_int("resolution", c.resolution);
  c.z_channels = dd.get_int("z_channels", c.z_channels);
  c.double_z = dd.get_bool("double_z", c.double_z);
  c.resamp_with_conv = dd.get_bool("resamp_with_conv", c.resamp_with_conv);
  c.in_channels = dd.get_int("in_channels", c.in_channels);
  c.mid_block_add_attention = dd.get_bool("mid_block_add_attention", c.mid_block_add_attention);

  const std::string attn = dd.get_string("attn_type", "vanilla");
  if (attn == "vanilla") c.attn_type = AttentionType::Vanilla;
  else if (attn == "linear") c.attn_type = AttentionType::Linear;
  else if (attn == "none") c.attn_type = AttentionType::None;
  else dd.bad("attn_type", "must be \"vanilla\", \"linear\" or \"none\"");

  const std::string norm = dd.get_string("norm_type", "pixel");
  if (norm == "pixel") c.norm_type = NormType::Pixel;
  else if (norm == "group") c.norm_type = NormType::Group;
  else dd.bad("norm_type", "must be \"pixel\" or \"group\"");

  if (dd.has("causality_axis") && dd.at("causality_axis").is_null()) {
    c.causality_axis = CausalityAxis::None;  // CausalityAxis(None) in the reference
  } else {
    const std::string ax = dd.get_string("causality_axis", "height");
    if (ax == "height") c.causality_axis = CausalityAxis::Height;
    else if (ax == "width") c.causality_axis = CausalityAxis::Width;
    else if (ax == "width-compatibility") c.causality_axis = CausalityAxis::WidthCompatibility;
    else dd.bad("causality_axis", "must be null, \"width\", \"height\" or \"width-compatibility\"");
  }

  // Constructor-time errors of the reference, reported here with the key that causes them.
  if (c.norm_type == NormType::Group && c.causality_axis != CausalityAxis::None)
    fail(where, ": ", dd.path, ": norm_type \"group\" is not supported with a causal axis (",
         causality_axis_name(c.causality_axis), ") by the reference's ResnetBlock");
  return c;
}

VocoderConfig VocoderConfig::from_config(const json& config, const std::string& where) {
  const Section voc = root_section(config, "vocoder", where);
  VocoderConfig c;
  if (!voc.has("bwe")) {
    voc.require_string("resblock", "1");
    voc.require_true("stereo");
    c.vocoder = generator_from(voc);
    return c;
  }
  const Section main = voc.sub("vocoder");
  const Section bwe = voc.sub("bwe");
  main.require_string("resblock", "AMP1");
  main.require_true("stereo");
  main.require_string("activation", "snakebeta");
  bwe.require_string("resblock", "AMP1");
  bwe.require_true("stereo");
  bwe.require_string("activation", "snakebeta");
  for (const char* key :
       {"input_sampling_rate", "output_sampling_rate", "hop_length", "n_fft", "num_mels"})
    if (!bwe.has(key)) fail(where, ": ", bwe.key_path(key), " is required for the BWE vocoder");

  c.has_bwe = true;
  c.bwe.input_sampling_rate = bwe.get_int("input_sampling_rate", 0);
  c.bwe.output_sampling_rate = bwe.get_int("output_sampling_rate", 0);
  c.bwe.hop_length = bwe.get_int("hop_length", 0);
  c.bwe.n_fft = bwe.get_int("n_fft", 0);
  c.bwe.num_mels = bwe.get_int("num_mels", 0);
  if (c.bwe.n_fft < c.bwe.hop_length)
    fail(where, ": ", bwe.key_path("n_fft"), " (", c.bwe.n_fft, ") is smaller than hop_length (",
         c.bwe.hop_length, ")");
  if (c.bwe.output_sampling_rate < c.bwe.input_sampling_rate)
    fail(where, ": ", bwe.path, ": output_sampling_rate ", c.bwe.output_sampling_rate,
         " is below input_sampling_rate ", c.bwe.input_sampling_rate);

  c.vocoder = generator_from(main);
  c.vocoder.output_sampling_rate = c.bwe.input_sampling_rate;  // override, as the reference
  c.bwe_generator = generator_from(bwe);
  c.bwe_generator.apply_final_activation = false;
  c.bwe_generator.output_sampling_rate = c.bwe.output_sampling_rate;

  // VocoderWithBWE adds the generator's residual to the x(out/in) resampled waveform: their
  // lengths agree only when the generator upsamples one STFT hop to (out/in) hops.
  const int64_t ratio = c.bwe.output_sampling_rate / c.bwe.input_sampling_rate;
  if (c.bwe_generator.upsample_factor() != c.bwe.hop_length * ratio)
    fail(where, ": ", bwe.path, ": the BWE generator upsamples by ",
         c.bwe_generator.upsample_factor(), " (product of upsample_rates) but hop_length x ",
         "(output_sampling_rate // input_sampling_rate) = ", c.bwe.hop_length * ratio,
         "; the residual and the resampled skip would differ in length");
  return c;
}

}  // namespace ltx::models::audio_vae
