#include "server/video_request.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

#include "core/error.h"
#include "io/json_unique_keys.h"
#include "io/safetensors.h"
#include "media/hdr.h"
#include "pipelines/pipeline.h"
#include "server/api_error.h"
#include "server/tar_archive.h"
#include "server/upload_exr_frames.h"
#include "server/upload_image.h"
#include "server/upload_media.h"

namespace ltx::server {

namespace {

using json = nlohmann::json;
using pipelines::PipelineKind;

[[noreturn]] void malformed(const std::string& param, const std::string& code,
                            const std::string& message) {
  throw ApiError(400, code, message, param);
}
[[noreturn]] void impossible(const std::string& param, const std::string& code,
                             const std::string& message) {
  throw ApiError(422, code, message, param);
}

// The field of `pipeline` whose clip sets its size (or duration), or null.
const PipelineField* clip_field(const std::string& pipeline, bool size) {
  for (const PipelineField& f : pipeline_fields())
    if ((size ? f.sets_size : f.sets_duration) &&
        std::find(f.pipelines.begin(), f.pipelines.end(), pipeline) != f.pipelines.end())
      return &f;
  return nullptr;
}
// The field of `pipeline` whose clip gives its frame rate alone (sets_rate), or null.
const PipelineField* rate_field(const std::string& pipeline) {
  for (const PipelineField& f : pipeline_fields())
    if (f.sets_rate && std::find(f.pipelines.begin(), f.pipelines.end(), pipeline) != f.pipelines.end())
      return &f;
  return nullptr;
}
// Whether some entry named `name` belongs to `pipeline` (a name may have an entry per pipeline).
bool field_of(const std::string& name, const std::string& pipeline) {
  for (const PipelineField& f : pipeline_fields())
    if (f.name == name && std::find(f.pipelines.begin(), f.pipelines.end(), pipeline) != f.pipelines.end())
      return true;
  return false;
}
// ---------------------------------------------------------------- the fields of a body

// The create fields, by kind. A form (multipart) sends every scalar as text, so readers parse
// numbers and booleans from strings there; JSON is typed strictly.
const std::set<std::string>& known_fields() {
  static const std::set<std::string> k = {"prompt",
                                          "model",
                                          "size",
                                          "seconds",
                                          "width",
                                          "height",
                                          "num_frames",
                                          "fps",
                                          "seed",
                                          "negative_prompt",
                                          "num_inference_steps",
                                          "guidance_scale",
                                          "pipeline",
                                          "enhance_prompt",
                                          "auto_duration",
                                          "generate_audio",
                                          "images",
                                          "input_reference",
                                          "loras",
                                          "video_cfg_guidance_scale",
                                          "video_stg_guidance_scale",
                                          "video_rescale_scale",
                                          "video_stg_blocks",
                                          "a2v_guidance_scale",
                                          "video_skip_step",
                                          "audio_cfg_guidance_scale",
                                          "audio_stg_guidance_scale",
                                          "audio_rescale_scale",
                                          "audio_stg_blocks",
                                          "v2a_guidance_scale",
                                          "audio_skip_step",
                                          "distilled_lora_strength_stage_1",
                                          "distilled_lora_strength_stage_2",
                                          "num_generated_keyframes",
                                          "temporal_upsample_rounds",
                                          "cache",
                                          "cache_threshold",
                                          "cache_warmup_steps",
                                          "cache_first_blocks",
                                          "output_format",
                                          "hdr"};
  static const std::set<std::string> with_pipeline_fields = [] {
    std::set<std::string> all = k;
    for (const PipelineField& f : pipeline_fields()) all.insert(f.name);
    return all;
  }();
  return with_pipeline_fields;
}
// The members of the fields that hold objects.
const std::map<std::string, std::set<std::string>>& known_members() {
  static const std::map<std::string, std::set<std::string>> k = {
      {"images", {"image", "frame_index", "strength", "crf"}},
      {"loras", {"name", "strength"}},
      {"video_conditioning", {"video", "strength"}},
      {"conditioning_attention_mask", {"video", "strength"}},
      {"input_reference", {"image_url", "file_id"}}};
  return k;
}

// The request's fields: a JSON object; a file part is a binary value (JSON text never makes one).
struct Fields {
  json obj = json::object();
  bool form = false;
};

// A multipart part name: `key`, `key[]`, `key[member]`, `key[][member]` or `key[N][member]`.
struct PartName {
  std::string key;
  bool array = false;            // key[] or key[...][member]
  std::optional<int64_t> index;  // key[N][member]
  std::string member;            // key[member], key[][member], key[N][member]
};

PartName parse_part_name(const std::string& name) {
  const auto bad_shape = [&] {
    malformed(name, "invalid_field_name",
              str("form field '", name,
                  "' has an unsupported shape (use key, key[], key[member], key[][member] or "
                  "key[N][member])"));
  };
  PartName p;
  const size_t open = name.find('[');
  p.key = name.substr(0, open);
  std::vector<std::string> segs;
  for (size_t i = open; i != std::string::npos && i < name.size();) {
    const size_t close = name.find(']', i);
    if (name[i] != '[' || close == std::string::npos) bad_shape();
    segs.push_back(name.substr(i + 1, close - i - 1));
    if (segs.back().find('[') != std::string::npos) bad_shape();
    i = close + 1;
  }
  if (p.key.empty() || segs.size() > 2) bad_shape();
  if (segs.size() == 1) {
    if (segs[0].empty())
      p.array = true;
    else
      p.member = segs[0];
  } else if (segs.size() == 2) {
    if (segs[1].empty()) bad_shape();
    p.array = true;
    p.member = segs[1];
    if (!segs[0].empty()) {
      if (segs[0].size() > 3 || !std::all_of(segs[0].begin(), segs[0].end(), ::isdigit))
        bad_shape();
      p.index = std::stoll(segs[0]);
    }
  }
  return p;
}

json part_value(const FormPart& part) {
  if (part.filename.empty()) return part.content;
  return json::binary(std::vector<uint8_t>(part.content.begin(), part.content.end()));
}

// The form's parts as fields: SDK arrays of objects (`images[][image]`, `images[][frame_index]`,
// ...) start their next object when a member repeats; `key[N][member]` are ordered by N.
Fields fields_from_form(const std::vector<FormPart>& parts) {
  Fields f;
  f.form = true;
  enum class Shape { Scalar, List, Object, ObjectList, IndexedList };
  std::map<std::string, Shape> shapes;
  std::map<std::string, std::map<int64_t, json>> indexed;
  for (const FormPart& part : parts) {
    const PartName n = parse_part_name(part.name);
    const Shape shape = !n.array && n.member.empty() ? Shape::Scalar
                        : !n.array                   ? Shape::Object
                        : n.member.empty()           ? Shape::List
                        : n.index                    ? Shape::IndexedList
                                                     : Shape::ObjectList;
    const auto [it, first] = shapes.emplace(n.key, shape);
    if (!first && it->second != shape)
      malformed(n.key, "invalid_field_name",
                str("form field '", n.key, "' is sent in two shapes (e.g. both ", n.key, " and ",
                    n.key, "[...]); send it one way"));
    json& slot = f.obj[n.key];
    switch (shape) {
      case Shape::Scalar:
        if (!first)
          malformed(n.key, "duplicate_field",
                    str("form field '", n.key, "' is given more than once; send it once"));
        slot = part_value(part);
        break;
      case Shape::List:
        slot.push_back(part_value(part));
        break;
      case Shape::Object:
        if (slot.contains(n.member))
          malformed(part.name, "duplicate_field",
                    str("form field '", part.name, "' is given more than once; send it once"));
        slot[n.member] = part_value(part);
        break;
      case Shape::ObjectList:
        if (slot.empty() || slot.back().contains(n.member)) slot.push_back(json::object());
        slot.back()[n.member] = part_value(part);
        break;
      case Shape::IndexedList: {
        json& o = indexed[n.key][*n.index];
        if (o.contains(n.member))
          malformed(part.name, "duplicate_field",
                    str("form field '", part.name, "' is given more than once; send it once"));
        o[n.member] = part_value(part);
        break;
      }
    }
  }
  for (auto& [key, objects] : indexed) {
    json& list = f.obj[key] = json::array();
    for (auto& [idx, o] : objects) list.push_back(std::move(o));
  }
  return f;
}

Fields fields_from_json(const std::string& text) {
  Fields f;
  // A key given twice in one object is refused, as a duplicated form part is (the parser would
  // keep the last one silently).
  io::RepeatedJsonKey repeated;
  try {
    f.obj = io::parse_json_unique_keys(text, repeated);
  } catch (const json::exception& e) {  // also a number out of range ("1e999")
    malformed("", "invalid_json", str("the request body is not valid JSON: ", e.what()));
  }
  if (repeated.found)
    malformed(repeated.key, "duplicate_field",
              str("'", repeated.key, "' is given more than once; send it once"));
  if (!f.obj.is_object()) malformed("", "invalid_json", "the request body must be a JSON object");
  return f;
}

// `extra_body` (what OpenAI SDKs send for fields outside their types) joins the top level.
void merge_extra_body(Fields& f) {
  if (!f.obj.contains("extra_body")) return;
  json extra = f.obj["extra_body"];
  f.obj.erase("extra_body");
  if (f.form && extra.is_string()) {
    try {
      extra = json::parse(extra.get<std::string>());
    } catch (const json::exception& e) {
      malformed("extra_body", "invalid_json", str("extra_body is not valid JSON: ", e.what()));
    }
  }
  if (extra.is_null()) return;
  if (!extra.is_object())
    malformed("extra_body", "invalid_type", "extra_body must be a JSON object");
  for (auto& [k, v] : extra.items()) {
    if (f.obj.contains(k))
      malformed(k, "duplicate_field",
                str("'", k, "' is given both in extra_body and at the top level; send it once"));
    f.obj[k] = v;
  }
}

// Every field the server does not know, in one error.
void reject_unknown_fields(const Fields& f) {
  std::vector<std::string> unknown;
  for (const auto& [k, v] : f.obj.items()) {
    if (!known_fields().count(k)) {
      unknown.push_back(k);
      continue;
    }
    const auto members = known_members().find(k);
    if (members == known_members().end()) continue;
    const auto check = [&](const json& o, const std::string& prefix) {
      if (!o.is_object()) return;  // the field's reader names the wrong type
      for (const auto& [m, mv] : o.items())
        if (!members->second.count(m)) unknown.push_back(str(prefix, "[", m, "]"));
    };
    if (v.is_array())
      for (const json& o : v) check(o, k + "[]");
    else
      check(v, k);
  }
  if (unknown.empty()) return;
  std::string names;
  for (const auto& n : unknown) names += (names.empty() ? "" : ", ") + n;
  impossible(unknown.front(), "unknown_field",
             str(unknown.size() == 1 ? "unknown field: " : "unknown fields: ", names,
                 " (see GET /v1/models and docs/SERVER.md for the fields of POST /v1/videos)"));
}

// ---------------------------------------------------------------- typed readers

const char* kind_of(const json& v) {
  if (v.is_binary()) return "a file";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

[[noreturn]] void wrong_type(const std::string& param, const json& v, const char* want) {
  malformed(param, "invalid_type",
            str(param, " must be ", want, ", got ", kind_of(v),
                v.is_string() ? str(" (\"", v.get<std::string>(), "\")") : std::string()));
}

bool is_integer_text(const std::string& s) {
  size_t i = s.size() > 0 && s[0] == '-' ? 1 : 0;
  return i < s.size() && std::all_of(s.begin() + static_cast<std::ptrdiff_t>(i), s.end(),
                                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A whole-string number in a form or a JSON string (`seconds`): strtod must use every character.
std::optional<double> number_from_text(const std::string& s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

int64_t read_int(const json& v, const std::string& param, bool form) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      impossible(param, "invalid_value", str(param, " ", v.dump(), " is out of range"));
    return v.get<int64_t>();
  }
  if (form && v.is_string()) {
    const std::string s = v.get<std::string>();
    if (is_integer_text(s)) {
      errno = 0;
      const long long r = std::strtoll(s.c_str(), nullptr, 10);
      if (errno == ERANGE)
        impossible(param, "invalid_value", str(param, " ", s, " is out of range"));
      return r;
    }
  }
  wrong_type(param, v, "an integer");
}

double read_number(const json& v, const std::string& param, bool form) {
  if (v.is_number()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) wrong_type(param, v, "a finite number");
    return d;
  }
  if (form && v.is_string())
    if (const auto d = number_from_text(v.get<std::string>())) return *d;
  wrong_type(param, v, "a number");
}

bool read_bool(const json& v, const std::string& param, bool form) {
  if (v.is_boolean()) return v.get<bool>();
  if (form && v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "true" || s == "1") return true;
    if (s == "false" || s == "0") return false;
  }
  wrong_type(param, v, form ? "true, false, 1 or 0" : "a boolean");
}

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. Returns the number of
// code points, or nullopt.
std::optional<int64_t> utf8_code_points(const std::string& s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return std::nullopt;
    }
    if (i + static_cast<size_t>(len) > s.size()) return std::nullopt;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr std::array<uint32_t, 5> kMin = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[static_cast<size_t>(len)] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return std::nullopt;
    i += static_cast<size_t>(len);
  }
  return n;
}

std::string read_text(const json& v, const std::string& param, int64_t max_chars) {
  if (!v.is_string()) wrong_type(param, v, "a string");
  const std::string s = v.get<std::string>();
  const auto n = utf8_code_points(s);
  if (!n) malformed(param, "invalid_encoding", str(param, " is not valid UTF-8"));
  if (*n > max_chars)
    impossible(param, "string_above_max_length",
               str(param, " has ", *n, " characters; at most ", max_chars, " are allowed"));
  return s;
}

// A list of integers: a JSON array, a form's repeated `key[]`, or "28,29" in one string.
std::vector<int64_t> read_int_list(const json& v, const std::string& param, bool form) {
  std::vector<int64_t> out;
  if (v.is_array()) {
    for (const json& e : v) out.push_back(read_int(e, param, form));
    return out;
  }
  if (form && v.is_string()) {
    std::stringstream ss(v.get<std::string>());
    for (std::string item; std::getline(ss, item, ',');) out.push_back(read_int(item, param, true));
    if (!out.empty()) return out;
  }
  wrong_type(param, v,
             form ? "a list of integers (key[] parts or \"28,29\")" : "an array of integers");
}

// ---------------------------------------------------------------- images

// The bytes of an image given as a file part or a `data:` URL.
std::string image_bytes(const json& v, const std::string& param, const RequestLimits& limits) {
  if (v.is_binary()) {
    const auto& b = v.get_binary();
    return std::string(b.begin(), b.end());
  }
  if (!v.is_string()) wrong_type(param, v, "an image (a file part or a data: URL)");
  return image_from_data_url(v.get<std::string>(), param, limits.max_image_bytes);
}

// A conditioning image whose bytes passed check_upload_image.
RequestImage check_image(std::string bytes, const std::string& param, const RequestLimits& limits) {
  const ImageHeader header =
      check_upload_image(bytes, param, limits.max_image_bytes, limits.max_image_pixels);
  RequestImage im;
  im.bytes = std::move(bytes);
  im.format = header.format;
  im.width = header.width;
  im.height = header.height;
  return im;
}

// ---------------------------------------------------------------- the request

// An ltx::Error of generate::validate_options in the API's words: flags become field names.
ApiError from_validation(const Error& e) {
  std::string first;
  const std::string out = flags_as_fields(e.what(), &first);
  return ApiError(422, "invalid_value", out, first);
}

// "wxh" as two positive integers; malformed text is a 400.
std::pair<int64_t, int64_t> parse_size(const std::string& s) {
  const size_t x = s.find('x');
  const auto digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 6 &&
           std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  };
  if (x == std::string::npos || !digits(s.substr(0, x)) || !digits(s.substr(x + 1)))
    malformed("size", "invalid_value",
              str("size '", s, "' must be WIDTHxHEIGHT in pixels, e.g. \"768x512\""));
  return {std::stoll(s.substr(0, x)), std::stoll(s.substr(x + 1))};
}

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The key that says which jobs may share a batch (docs/SERVER.md, "Scheduling"): everything
// that fixes the shape of the denoising or the passes it runs. Guidance scales differ per sample;
// which guidance passes run does not. It is at least as strict as the engine's
// (generate::Engine::batch_key, over pipelines::batch_key): every field of that key is here or
// follows from the served model and these fields (a guidance value left to the preset keys
// apart from one given, even an equal one), and where the engine never batches (pipelines
// without batching, auto duration, prompt enhancement) the key is empty. The engine runner
// checks the engine's key too, so a disagreement costs a batch, never a result.
std::string make_batch_key(const VideoRequest& r) {
  const generate::GenerateOptions& o = r.options;
  if (o.auto_duration) return {};  // its frame count is known only when it runs
  if (o.enhance_prompt) return {};  // its prompt is known only when it runs
  if (o.hdr) return {};  // its HDR master is written by a sink of its own (engine_runner.h)
  if (!pipelines::supports_batching(pipelines::parse_pipeline_kind(o.pipeline))) return {};
  std::ostringstream k;
  k << std::setprecision(17) << r.model << "|" << o.pipeline << "|" << r.size << "|"
    << o.num_frames.value_or(0) << "f|" << o.frame_rate.value_or(0)
    << "fps|steps=" << o.num_inference_steps.value_or(0) << "|audio=" << r.generate_audio
    << "|out=" << r.output_format;
  const auto on = [](const std::optional<double>& v, double off) {
    return !v ? "preset" : (*v == off ? "off" : "on");
  };
  for (const auto& [name, g] :
       {std::pair{"video", &o.video_guidance}, std::pair{"audio", &o.audio_guidance}}) {
    k << "|" << name << ":cfg=" << on(g->cfg, 1.0) << ",stg=" << on(g->stg, 0.0)
      << ",modality=" << on(g->modality, 1.0) << ",skip=";
    if (g->skip_step)
      k << *g->skip_step;
    else
      k << "preset";
    k << ",blocks=";
    if (g->stg_blocks)
      for (int64_t b : *g->stg_blocks) k << b << ".";
    else
      k << "preset";
  }
  k << "|images=";
  for (const auto& im : r.images) k << im.frame_index << "@" << im.strength << ".";
  k << "|loras=";
  for (const auto& l : r.loras) k << l.name << "@" << l.strength << ".";
  const auto opt = [&](const char* n, const auto& v) {
    k << "|" << n << "=";
    if (v)
      k << *v;
    else
      k << "preset";
  };
  opt("dl1", o.distilled_lora_strength_stage_1);
  opt("dl2", o.distilled_lora_strength_stage_2);
  opt("keyframes", o.num_generated_keyframes);
  opt("temporal", o.temporal_upsample_rounds);
  k << "|cache=" << o.step_cache.str();
  return k.str();
}

class Reader {
 public:
  Reader(Fields f, const ServedModel& model) : f_(std::move(f)), model_(model) {}

  VideoRequest read() {
    VideoRequest r;
    generate::GenerateOptions& o = r.options;
    const RequestLimits& lim = model_.limits;

    // the prompt first: a request without one is malformed whatever else it asks (hdr-ic-lora's
    // precomputed text_embeddings stand for it: then it has none)
    const json* prompt = get("prompt");
    const bool embeddings = get("text_embeddings") != nullptr;
    if (!prompt && !embeddings)
      malformed("prompt", "missing_required_parameter", "prompt is required");
    if (prompt && embeddings)
      malformed("prompt", "invalid_value",
                "prompt and text_embeddings both give the text; send one of them");
    if (prompt) {
      o.prompt = read_text(*prompt, "prompt", lim.max_prompt_chars);
      if (std::all_of(o.prompt.begin(), o.prompt.end(),
                      [](unsigned char c) { return std::isspace(c) != 0; }))
        malformed("prompt", "empty_prompt", "prompt is empty: describe the video to generate");
    }
    if (const json* v = get("negative_prompt"))
      o.negative_prompt = read_text(*v, "negative_prompt", lim.max_prompt_chars);

    // then the model and the pipeline, whose defaults fill what the request leaves out
    if (const json* v = get("model")) {
      if (!v->is_string()) wrong_type("model", *v, "a string");
      if (v->get<std::string>() != model_.id)
        throw ApiError(404, "model_not_found",
                       str("model '", v->get<std::string>(), "' is not served here; this ",
                           "server serves '", model_.id, "' (GET /v1/models)"),
                       "model");
    }
    r.model = model_.id;
    std::string asked = model_.default_pipeline;
    if (const json* v = get("pipeline")) {
      if (!v->is_string()) wrong_type("pipeline", *v, "a string");
      asked = v->get<std::string>();
    }
    std::optional<PipelineKind> parsed_kind;
    try {
      parsed_kind = pipelines::parse_pipeline_kind(asked);  // also takes '_' for '-'
    } catch (const Error&) {
    }
    o.pipeline = parsed_kind ? pipelines::pipeline_name(*parsed_kind) : asked;
    if (!parsed_kind || std::find(model_.pipelines.begin(), model_.pipelines.end(), o.pipeline) ==
                            model_.pipelines.end()) {
      std::string names;
      for (const auto& n : model_.pipelines) names += (names.empty() ? "" : ", ") + n;
      impossible("pipeline", "invalid_value",
                 str("pipeline '", asked, "' is not served by this model; use one of: ", names));
    }
    const PipelineKind kind = *parsed_kind;
    const auto d = model_.defaults.find(o.pipeline);
    LTX_CHECK(d != model_.defaults.end(), "the served model has no defaults for pipeline ",
              o.pipeline);
    const PipelineDefaults& def = d->second;

    // scalars
    o.seed = int_field("seed").value_or(10);
    o.num_inference_steps = int_field("num_inference_steps");
    if (!o.num_inference_steps && kind != PipelineKind::Distilled)
      o.num_inference_steps = def.steps;
    read_guidance(o);
    o.distilled_lora_strength_stage_1 = number_field("distilled_lora_strength_stage_1");
    o.distilled_lora_strength_stage_2 = number_field("distilled_lora_strength_stage_2");
    o.num_generated_keyframes = int_field("num_generated_keyframes");
    o.temporal_upsample_rounds = int_field("temporal_upsample_rounds");
    read_step_cache(o);
    if (const json* v = get("enhance_prompt"))
      o.enhance_prompt = read_bool(*v, "enhance_prompt", f_.form);
    if (const json* v = get("generate_audio"))
      r.generate_audio = read_bool(*v, "generate_audio", f_.form);
    if (const json* v = get("hdr")) {
      if (!v->is_string())
        wrong_type("hdr", *v, "a string (SRGB_LINEAR, ACESCG or ACESCCT)");
      try {
        o.hdr = media::parse_hdr_color_space(v->get<std::string>(), "hdr");
      } catch (const Error& e) {
        impossible("hdr", "invalid_value", e.what());
      }
    }
    if (!pipelines::makes_video(kind) && !r.generate_audio)
      impossible("generate_audio", "invalid_value",
                 str("the ", o.pipeline, " pipeline generates audio: it cannot run with "
                     "generate_audio false"));

    // where a field's clip decides the size or the duration, the request gives neither
    if (const PipelineField* clip = clip_field(o.pipeline, true)) {
      for (const char* f : {"size", "width", "height"})
        if (get(f))
          impossible(f, "invalid_value",
                     str(f, ": the ", o.pipeline, " pipeline takes the size of ", clip->name,
                         "; leave it out"));
    } else if (!takes_size(o.pipeline)) {
      for (const char* f : {"size", "width", "height"})
        if (get(f))
          impossible(f, "invalid_value",
                     str(f, ": the ", o.pipeline, " pipeline generates audio only (its length is "
                            "seconds, or num_frames / fps); leave it out"));
    } else {
      read_size(r, kind, def);
    }
    const PipelineField* rate_clip = rate_field(o.pipeline);
    if (const PipelineField* clip = clip_field(o.pipeline, false)) {
      // A tar of EXR frames has no rate: then the request gives it (`ltx generate` needs
      // --frame-rate with an EXR frame folder).
      const json* clip_value = get(clip->name);
      const bool exr_frames =
          clip->takes_exr_frames && clip_value && clip_value->is_binary() &&
          is_tar(std::string_view(reinterpret_cast<const char*>(clip_value->get_binary().data()),
                                  clip_value->get_binary().size()));
      for (const char* f : {"seconds", "num_frames", "fps", "auto_duration"})
        if (get(f) && !(exr_frames && std::string_view(f) == "fps"))
          impossible(f, "invalid_value",
                     str(f, ": the ", o.pipeline, " pipeline takes the frame count",
                         exr_frames ? "" : " and frame rate", " of ", clip->name,
                         "; leave it out"));
      if (exr_frames) {
        if (!get("fps"))
          malformed("fps", "missing_required_parameter",
                    str(clip->name, " is a tar of EXR frames, which have no frame rate: give "
                                    "fps"));
        o.frame_rate = number_field("fps");
        if (!(*o.frame_rate > 0.0))
          impossible("fps", "invalid_value",
                     str("fps ", number_text(*o.frame_rate), " must be positive"));
      }
    } else if (rate_clip) {
      for (const char* f : {"fps", "auto_duration"})
        if (get(f))
          impossible(f, "invalid_value",
                     str(f, ": the ", o.pipeline, " pipeline takes the frame rate of ", rate_clip->name,
                         "; leave it out (give num_frames or seconds)"));
    } else {
      read_duration(r, def);
    }
    read_images(r);
    read_loras(r);
    if (kind == PipelineKind::HdrIcLora) {
      // Refused here rather than when the job runs: the pipeline conditions on its clip alone, with
      // its HDR IC-LoRA alone.
      if (!r.images.empty())
        impossible(get("images") ? "images" : "input_reference", "invalid_value",
                   "the hdr-ic-lora pipeline conditions on video_conditioning only; send no images");
      if (!r.loras.empty())
        impossible("loras", "invalid_value",
                   "the hdr-ic-lora pipeline runs with its HDR IC-LoRA alone; send no loras");
    }
    read_pipeline_fields(r);
    check_hdr_inputs(r);
    // EXR frames last their count at the request's rate (the retake window is checked on it).
    for (RequestMedia& m : r.media)
      if (m.frames && o.frame_rate && *o.frame_rate > 0) {
        m.header.fps = *o.frame_rate;
        m.header.duration = static_cast<double>(m.header.frames) / *o.frame_rate;
      }
    // The frame count at the clip's rate, which the pipeline keeps (its options name no rate).
    double clip_fps = 0.0;
    if (rate_clip) {
      for (const RequestMedia& m : r.media)
        if (m.field == rate_clip->name) clip_fps = m.header.fps;
      PipelineDefaults at_clip_rate = def;
      at_clip_rate.fps = clip_fps;
      read_duration(r, at_clip_rate);
      o.frame_rate.reset();
    }
    read_output_format(r, kind);

    // the rules `ltx generate` checks, on the resolved options (images are checked above: the
    // engine gets them as stored files, not paths named in the request)
    try {
      generate::validate_options(o, /*to_file=*/false);
    } catch (const Error& e) {
      throw from_validation(e);
    }
    if (o.width && *o.width > lim.max_width)
      impossible(get("size") ? "size" : "width", "invalid_value",
                 str("width ", *o.width, " is above this server's limit of ", lim.max_width,
                     " (--max-width)"));
    if (o.height && *o.height > lim.max_height)
      impossible(get("size") ? "size" : "height", "invalid_value",
                 str("height ", *o.height, " is above this server's limit of ", lim.max_height,
                     " (--max-height)"));
    const double fps = o.frame_rate.value_or(clip_fps);
    if (o.num_frames && *o.num_frames > lim.max_frames)
      impossible(get("seconds") ? "seconds" : "num_frames", "invalid_value",
                 str(*o.num_frames, " frames is above this server's limit of ", lim.max_frames,
                     " (--max-frames: ", format_seconds(static_cast<double>(lim.max_frames) / fps),
                     " s at ", number_text(fps), " fps)"));
    check_media_ranges(r);
    r.size = o.width && o.height ? str(*o.width, "x", *o.height) : std::string();
    r.seconds = o.num_frames ? format_seconds(static_cast<double>(*o.num_frames) / fps) : "auto";
    for (const RequestMedia& m : r.media) {  // the clip's size and length where it sets them
      const PipelineField* size = clip_field(o.pipeline, true);
      const PipelineField* duration = clip_field(o.pipeline, false);
      if (size && size->name == m.field) r.size = str(m.header.width, "x", m.header.height);
      if (duration && duration->name == m.field)
        r.seconds = format_seconds(static_cast<double>(m.header.frames) / m.header.fps);
    }
    if (o.skip_stage_2 && o.width && o.height) {
      // stage 1 runs at half size and is what the job decodes
      const std::string half = str(*o.width / 2, "x", *o.height / 2);
      r.adjustments.push_back(
          {"size", r.size, half, "skip_stage_2 decodes stage 1's half-size result"});
      r.size = half;
    }
    r.batch_key = make_batch_key(r);
    return r;
  }

 private:
  // The field's value, or null when it is absent or JSON null (an unset optional field).
  const json* get(const std::string& key) const {
    const auto it = f_.obj.find(key);
    if (it == f_.obj.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::optional<int64_t> int_field(const std::string& key) const {
    if (const json* v = get(key)) return read_int(*v, key, f_.form);
    return std::nullopt;
  }
  // `ltx generate --cache ...` as fields: cache ("none" or "fbcache") and its three settings,
  // which need it (generate::validate_options checks their ranges and the pipeline).
  void read_step_cache(generate::GenerateOptions& o) const {
    namespace mt = models::transformer;
    if (const json* v = get("cache")) {
      if (!v->is_string()) wrong_type("cache", *v, "\"none\" or \"fbcache\"");
      try {
        o.step_cache.mode = mt::parse_step_cache_mode(v->get<std::string>());
      } catch (const Error& e) {
        throw from_validation(e);
      }
    }
    const std::optional<double> threshold = number_field("cache_threshold");
    const std::optional<int64_t> warmup = int_field("cache_warmup_steps");
    const std::optional<int64_t> first = int_field("cache_first_blocks");
    for (const auto& [given, name] : {std::pair{threshold.has_value(), "cache_threshold"},
                                      std::pair{warmup.has_value(), "cache_warmup_steps"},
                                      std::pair{first.has_value(), "cache_first_blocks"}})
      if (given && !o.step_cache.enabled())
        impossible(name, "invalid_value", str(name, " sets step caching, which is off: add "
                                                    "cache \"fbcache\""));
    if (threshold) o.step_cache.threshold = *threshold;
    if (warmup) o.step_cache.warmup_steps = *warmup;
    if (first) o.step_cache.first_blocks = *first;
  }

  std::optional<double> number_field(const std::string& key) const {
    if (const json* v = get(key)) return read_number(*v, key, f_.form);
    return std::nullopt;
  }

  void read_guidance(generate::GenerateOptions& o) const {
    // guidance_scale: SGLang's name for the video CFG scale
    const auto alias = number_field("guidance_scale");
    const auto cfg = number_field("video_cfg_guidance_scale");
    if (alias && cfg && *alias != *cfg)
      malformed("guidance_scale", "conflicting_fields",
                "guidance_scale is another name for video_cfg_guidance_scale, and the two differ; "
                "send one");
    o.video_guidance.cfg = cfg ? cfg : alias;
    for (auto [m, g, modality] :
         {std::tuple{std::string("video"), &o.video_guidance, "a2v_guidance_scale"},
          std::tuple{std::string("audio"), &o.audio_guidance, "v2a_guidance_scale"}}) {
      if (m == "audio") g->cfg = number_field("audio_cfg_guidance_scale");
      g->stg = number_field(m + "_stg_guidance_scale");
      g->rescale = number_field(m + "_rescale_scale");
      g->modality = number_field(modality);
      g->skip_step = int_field(m + "_skip_step");
      if (const json* v = get(m + "_stg_blocks"))
        g->stg_blocks = read_int_list(*v, m + "_stg_blocks", f_.form);
    }
  }

  void read_size(VideoRequest& r, PipelineKind kind, const PipelineDefaults& def) {
    generate::GenerateOptions& o = r.options;
    const json* size = get("size");
    if (size && (get("width") || get("height")))
      malformed("size", "conflicting_fields", "give size or width/height, not both");
    o.width = int_field("width").value_or(def.width);
    o.height = int_field("height").value_or(def.height);
    if (!size) return;
    if (!size->is_string()) wrong_type("size", *size, "a string \"WIDTHxHEIGHT\"");
    const auto [w, h] = parse_size(size->get<std::string>());
    if (w < 1 || h < 1)
      impossible("size", "invalid_value", str("size ", w, "x", h, " must be at least 1x1"));
    // snapped as `ltx generate` suggests a valid size
    const int64_t div = pipelines::is_two_stage(kind) ? 64 : 32;
    const auto snap = [div](int64_t v) {
      return std::max<int64_t>(div, (v + div / 2) / div * div);
    };
    o.width = snap(w);
    o.height = snap(h);
    if (*o.width != w || *o.height != h)
      r.adjustments.push_back({"size", str(w, "x", h), str(*o.width, "x", *o.height),
                               str("the ", o.pipeline, " pipeline needs multiples of ", div)});
  }

  void read_duration(VideoRequest& r, const PipelineDefaults& def) {
    generate::GenerateOptions& o = r.options;
    const RequestLimits& lim = model_.limits;
    o.frame_rate = number_field("fps").value_or(def.fps);
    if (!(*o.frame_rate > 0))
      impossible("fps", "invalid_value",
                 str("fps ", number_text(*o.frame_rate), " must be positive"));
    const json* seconds = get("seconds");
    const auto frames = int_field("num_frames");
    const json* auto_duration = get("auto_duration");
    if (seconds && frames)
      malformed("seconds", "conflicting_fields", "give seconds or num_frames, not both");
    if (auto_duration && (seconds || frames))
      malformed("auto_duration", "conflicting_fields",
                "auto_duration lets the model pick the duration: drop seconds / num_frames, or it");
    if (auto_duration) {
      if (!model_.duration_head)
        impossible("auto_duration", "invalid_value",
                   "auto_duration needs a model with a duration head (LTX-2.5); this one has none");
      std::vector<double> mm;
      if (auto_duration->is_array()) {
        for (const json& e : *auto_duration) mm.push_back(read_number(e, "auto_duration", f_.form));
      } else if (auto_duration->is_string()) {
        std::stringstream ss(auto_duration->get<std::string>());
        for (std::string item; std::getline(ss, item, ',');)
          mm.push_back(read_number(item, "auto_duration", true));
      }
      if (mm.size() != 2)
        wrong_type("auto_duration", *auto_duration, "[MIN_SECONDS, MAX_SECONDS] or \"MIN,MAX\"");
      if (mm[1] * *o.frame_rate > static_cast<double>(lim.max_frames))
        impossible("auto_duration", "invalid_value",
                   str("auto_duration's maximum ", number_text(mm[1]), " s at ",
                       number_text(*o.frame_rate), " fps is above this server's limit of ",
                       lim.max_frames, " frames (--max-frames)"));
      o.auto_duration = std::pair{mm[0], mm[1]};
      return;
    }
    if (frames) {
      o.num_frames = frames;  // strict, as `ltx generate --num-frames`
      return;
    }
    if (!seconds) {
      o.num_frames = def.num_frames;
      return;
    }
    // "4" or 4
    double s = 0;
    std::string requested;
    if (seconds->is_string()) {
      requested = seconds->get<std::string>();
      const auto v = number_from_text(requested);
      if (!v) wrong_type("seconds", *seconds, "a number of seconds (\"4\" or 4)");
      s = *v;
    } else {
      s = read_number(*seconds, "seconds", f_.form);
      requested = seconds->dump();
    }
    if (!(s > 0))
      impossible("seconds", "invalid_value", str("seconds ", requested, " must be positive"));
    const double n_real = std::ceil(s * *o.frame_rate - 1e-9);
    if (n_real > static_cast<double>(lim.max_frames))
      impossible("seconds", "invalid_value",
                 str("seconds ", requested, " at ", number_text(*o.frame_rate), " fps is ", n_real,
                     " frames, above this server's limit of ", lim.max_frames, " (--max-frames: ",
                     format_seconds(static_cast<double>(lim.max_frames) / *o.frame_rate), " s)"));
    const auto n = std::max<int64_t>(1, static_cast<int64_t>(n_real));
    o.num_frames = 8 * ((n - 1 + 7) / 8) + 1;
    const double used = static_cast<double>(*o.num_frames) / *o.frame_rate;
    if (std::abs(used - s) > 1e-9)
      r.adjustments.push_back({"seconds", requested, format_seconds(used),
                               str(*o.num_frames, " frames at ", number_text(*o.frame_rate),
                                   " fps (frame counts are 8k + 1)")});
  }

  RequestImage image_at(const json& obj, const std::string& param, int64_t frames) {
    if (!obj.is_object()) wrong_type(param, obj, "an object {image, frame_index, strength, crf}");
    const json* image = obj.contains("image") ? &obj["image"] : nullptr;
    if (!image || image->is_null())
      malformed(param, "missing_required_parameter", str(param, "[image] is required"));
    RequestImage im = check_image(image_bytes(*image, param + "[image]", model_.limits),
                                  param + "[image]", model_.limits);
    const auto member = [&](const char* m) -> const json* {
      const auto it = obj.find(m);
      return it == obj.end() || it->is_null() ? nullptr : &*it;
    };
    if (const json* v = member("frame_index"))
      im.frame_index = read_int(*v, param + "[frame_index]", f_.form);
    if (const json* v = member("strength"))
      im.strength = read_number(*v, param + "[strength]", f_.form);
    if (const json* v = member("crf")) {
      const int64_t crf = read_int(*v, param + "[crf]", f_.form);
      if (crf < 0 || crf > 51)
        impossible(param + "[crf]", "invalid_value",
                   str(param, "[crf] ", crf, " must be in [0, 51] (0: no re-encode)"));
      im.crf = static_cast<int>(crf);
    }
    if (im.frame_index < 0 || (frames > 0 && im.frame_index >= frames))
      impossible(param + "[frame_index]", "invalid_value",
                 str(param, "[frame_index] ", im.frame_index, " must be in [0, ", frames,
                     ") (the video has ", frames, " frames)"));
    if (!(im.strength >= 0.0 && im.strength <= 1.0))
      impossible(param + "[strength]", "invalid_value",
                 str(param, "[strength] ", number_text(im.strength), " must be in [0, 1]"));
    return im;
  }

  void read_images(VideoRequest& r) {
    const int64_t frames = r.options.num_frames.value_or(0);
    if (const json* ref = get("input_reference")) {
      // a file part, a data URL, or {image_url} (OpenAI's shape; file ids are OpenAI's storage)
      json image = *ref;
      if (ref->is_object()) {
        if (ref->contains("file_id"))
          impossible("input_reference[file_id]", "unsupported_value",
                     "input_reference[file_id]: this server keeps no files; send the image as "
                     "input_reference (a file part) or input_reference[image_url] (a data: URL)");
        if (!ref->contains("image_url"))
          malformed("input_reference", "missing_required_parameter",
                    "input_reference needs image_url (a data: URL) or a file part");
        image = (*ref)["image_url"];
      }
      r.images.push_back(check_image(image_bytes(image, "input_reference", model_.limits),
                                     "input_reference", model_.limits));
    }
    if (const json* list = get("images")) {
      if (!list->is_array())
        wrong_type("images", *list, "an array of {image, frame_index, strength}");
      for (size_t i = 0; i < list->size(); ++i)
        r.images.push_back(image_at((*list)[i], str("images[", i, "]"), frames));
    }
    if (static_cast<int64_t>(r.images.size()) > model_.limits.max_images)
      impossible("images", "too_many_images",
                 str(r.images.size(), " images given; this server takes at most ",
                     model_.limits.max_images, " (--max-images)"));
  }

  void read_loras(VideoRequest& r) {
    const json* list = get("loras");
    if (!list) return;
    if (!list->is_array()) wrong_type("loras", *list, "an array of {name, strength}");
    for (size_t i = 0; i < list->size(); ++i) {
      const json& o = (*list)[i];
      const std::string p = str("loras[", i, "]");
      if (!o.is_object()) wrong_type(p, o, "an object {name, strength}");
      if (!o.contains("name") || !o["name"].is_string())
        malformed(p + "[name]", "missing_required_parameter",
                  str(p, "[name] (a string) is required"));
      RequestLora l{o["name"].get<std::string>(), 1.0};
      if (o.contains("strength") && !o["strength"].is_null())
        l.strength = read_number(o["strength"], p + "[strength]", f_.form);
      if (std::find(model_.loras.begin(), model_.loras.end(), l.name) == model_.loras.end()) {
        std::string names;
        for (const auto& n : model_.loras) names += (names.empty() ? "" : ", ") + n;
        impossible(
            p + "[name]", "invalid_value",
            model_.loras.empty()
                ? str("LoRA '", l.name, "': this server has no LoRA library (--lora-library)")
                : str("LoRA '", l.name, "' is not in this server's library; use one of: ", names));
      }
      for (const auto& prev : r.loras)
        if (prev.name == l.name)
          impossible(p + "[name]", "invalid_value", str("LoRA '", l.name, "' is given twice"));
      r.loras.push_back(l);
    }
  }

  // The bytes of a file part (the server reads no paths and fetches no URLs) for `field`.
  static RequestMedia file_part(const json& v, const std::string& param, const std::string& field) {
    if (!v.is_binary()) {
      if (v.is_string() || v.is_object())
        malformed(param, "invalid_type",
                  str(param, " must be a file part of a multipart/form-data request (the server "
                             "reads no paths and fetches no URLs)"));
      wrong_type(param, v, "a file part");
    }
    const auto& b = v.get_binary();
    RequestMedia m;
    m.field = field;
    m.bytes.assign(b.begin(), b.end());
    return m;
  }

  // A file part of a media field, checked (upload_media.h).
  RequestMedia media_at(const json& v, const std::string& param, const std::string& field,
                        MediaKind kind, bool exr_frames = false) const {
    RequestMedia m = file_part(v, param, field);
    const RequestLimits& lim = model_.limits;
    const MediaLimits limits{lim.max_media_bytes, lim.max_image_pixels, lim.max_media_seconds};
    if (kind == MediaKind::Video && is_tar(m.bytes)) {
      if (!exr_frames)
        malformed(param, "invalid_media",
                  str(param, " is a tar archive; it takes a video file (a tar of EXR frames is "
                             "an hdr request's frame folder, for ",
                      exr_frame_fields(), ")"));
      CheckedMedia c = check_upload_exr_frames(m.bytes, param, limits, lim.max_frames);
      m.header = c.header;
      m.scratch = std::move(c.scratch);
      m.frames = std::move(c.frames);
      return m;
    }
    CheckedMedia c = check_upload_media(m.bytes, param, kind, limits);
    m.header = c.header;
    m.scratch = std::move(c.scratch);
    return m;
  }

  // hdr-ic-lora's text_embeddings: a safetensors file part holding video_context [1, tokens, dim]
  // (the reference script's precomputed contexts), checked here; the engine checks its width
  // against the transformer's when the job runs.
  RequestMedia embeddings_at(const json& v, const std::string& param) const {
    RequestMedia m = file_part(v, param, param);
    check_upload_bytes(m.bytes, param, model_.limits.max_media_bytes);
    auto scratch = std::make_shared<const ScratchFile>(m.bytes);
    try {
      const auto file = io::SafetensorsFile::open(scratch->path());
      LTX_CHECK(file->contains("video_context"),
                "it has no video_context tensor (the reference's script writes video_context "
                "and audio_context)");
      const io::TensorInfo& ctx = file->info("video_context");
      const bool shaped = (ctx.shape.size() == 3 && ctx.shape[0] == 1) || ctx.shape.size() == 2;
      LTX_CHECK(shaped && ctx.numel() > 0 && dtype_is_floating(ctx.dtype),
                "video_context must be a floating-point [1, tokens, dim]; it is ",
                dtype_name(ctx.dtype), " ", ctx.shape.str());
    } catch (const Error& e) {
      malformed(param, "invalid_media", str(param, " is not usable text embeddings: ", e.what()));
    }
    m.header.ext = "safetensors";
    m.scratch = std::move(scratch);
    return m;
  }

  double strength_of(const json& obj, const std::string& param) const {
    const auto it = obj.find("strength");
    if (it == obj.end() || it->is_null()) return 1.0;
    const double s = read_number(*it, param + "[strength]", f_.form);
    if (!(s >= 0.0 && s <= 1.0))
      impossible(param + "[strength]", "invalid_value",
                 str(param, "[strength] ", number_text(s), " must be in [0, 1]"));
    return s;
  }

  // "video_path (retake), video_conditioning (ic-lora)": the fields that take EXR frames.
  static std::string exr_frame_fields() {
    std::string out;
    for (const PipelineField& f : pipeline_fields())
      if (f.takes_exr_frames)
        for (const auto& p : f.pipelines)
          out += (out.empty() ? "" : ", ") + str(f.name, " (", p, ")");
    return out;
  }

  // {video, strength}
  RequestMedia video_with_strength(const json& obj, const std::string& param,
                                   const std::string& field, bool exr_frames = false) const {
    if (obj.is_binary())
      return media_at(obj, param, field, MediaKind::Video, exr_frames);  // strength 1
    if (!obj.is_object()) wrong_type(param, obj, "an object {video, strength}");
    const auto it = obj.find("video");
    if (it == obj.end() || it->is_null())
      malformed(param + "[video]", "missing_required_parameter",
                str(param, "[video] (a video file part) is required"));
    RequestMedia m = media_at(*it, param + "[video]", field, MediaKind::Video, exr_frames);
    m.strength = strength_of(obj, param);
    return m;
  }

  // The fields of pipeline_fields(): refused for other pipelines, required ones present, values
  // read into r.media / r.field_values and applied to the options (the media as their scratch
  // files, so the pipeline's own checks read them).
  void read_pipeline_fields(VideoRequest& r) {
    generate::GenerateOptions& o = r.options;
    for (const PipelineField& f : pipeline_fields()) {
      const json* v = get(f.name);
      const bool mine =
          std::find(f.pipelines.begin(), f.pipelines.end(), o.pipeline) != f.pipelines.end();
      if (!mine && field_of(f.name, o.pipeline)) continue;  // the pipeline's own entry reads it
      if (v && !mine) {
        std::string names;
        for (const PipelineField& g : pipeline_fields())
          if (g.name == f.name)
            for (const auto& n : g.pipelines) names += (names.empty() ? "" : ", ") + n;
        impossible(f.name, "invalid_value",
                   str(f.name, " is a field of the ", names, " pipeline",
                       names.find(',') != std::string::npos ? "s" : "",
                       "; this request runs ", o.pipeline, " (drop it, or set pipeline)"));
      }
      if (!mine) continue;
      if (!v) {
        if (f.required)
          malformed(f.name, "missing_required_parameter",
                    str("the ", o.pipeline, " pipeline needs ", f.name, " (",
                        field_type_name(f.type), "): ", f.description));
        continue;
      }
      FieldValue value;
      const size_t first_media = r.media.size();
      switch (f.type) {
        case FieldType::Number:
          value.number = read_number(*v, f.name, f_.form);
          r.field_values[f.name] = value.number;
          break;
        case FieldType::Flag:
          value.number = read_bool(*v, f.name, f_.form) ? 1.0 : 0.0;
          r.field_values[f.name] = value.number;
          break;
        case FieldType::Video:
        case FieldType::Audio:
          r.media.push_back(media_at(*v, f.name, f.name,
                                     f.type == FieldType::Video ? MediaKind::Video
                                                                : MediaKind::Audio,
                                     f.takes_exr_frames));
          break;
        case FieldType::VideoStrength:
          r.media.push_back(video_with_strength(*v, f.name, f.name, f.takes_exr_frames));
          break;
        case FieldType::Embeddings:
          r.media.push_back(embeddings_at(*v, f.name));
          break;
        case FieldType::VideoList: {
          if (!v->is_array()) {
            r.media.push_back(video_with_strength(*v, f.name, f.name, f.takes_exr_frames));
            break;
          }
          if (v->empty())
            malformed(f.name, "missing_required_parameter",
                      str(f.name, " is empty: give at least one video"));
          for (size_t i = 0; i < v->size(); ++i)
            r.media.push_back(video_with_strength((*v)[i], str(f.name, "[", i, "]"), f.name,
                                                  f.takes_exr_frames));
          break;
        }
      }
      for (size_t i = first_media; i < r.media.size(); ++i)
        value.files.emplace_back(
            r.media[i].frames ? r.media[i].frames->path() : r.media[i].scratch->path(),
            r.media[i].strength);
      f.apply(o, value);
    }
  }

  void read_output_format(VideoRequest& r, PipelineKind kind) {
    const generate::GenerateOptions& o = r.options;
    const int64_t frames = o.num_frames.value_or(0);
    r.output_format = default_output_format(o.pipeline, frames, o.hdr.has_value());
    const json* v = get("output_format");
    if (!v) return;
    if (!v->is_string()) wrong_type("output_format", *v, "a string (mp4, wav, png or exr)");
    const std::string asked = v->get<std::string>();
    if (asked != "mp4" && asked != "wav" && asked != "png" && asked != "exr")
      impossible("output_format", "invalid_value",
                 str("output_format '", asked, "' must be mp4, wav, png or exr"));
    if (o.hdr && pipelines::makes_video(kind)) {
      // An HDR master: its EXR frames and HLG MP4 in a tar, or the MP4 alone.
      if (asked != "exr" && asked != "mp4")
        impossible("output_format", "invalid_value",
                   str("output_format ", asked, ": an hdr request writes exr (a tar of its EXR "
                       "frames and HLG MP4 master) or mp4 (the HLG master alone)"));
      r.output_format = asked;
      return;
    }
    const bool hdr = kind == PipelineKind::HdrIcLora;
    if (hdr != (asked == "exr"))
      impossible("output_format", "invalid_value",
                 hdr ? str("output_format ", asked, ": the hdr-ic-lora pipeline writes exr (a tar of its "
                           "EXR frames and sRGB preview)")
                     : str("output_format exr is the output of the hdr-ic-lora pipeline and of "
                           "hdr requests; the ", o.pipeline,
                           " pipeline writes ", pipelines::makes_video(kind) ? "mp4 (or png for one frame)"
                                                                            : "wav"));
    if (!pipelines::makes_video(kind) && asked != "wav")
      impossible("output_format", "invalid_value",
                 str("output_format ", asked, ": the ", o.pipeline,
                     " pipeline generates audio only, which this server writes as wav"));
    if (pipelines::makes_video(kind) && asked == "wav")
      impossible("output_format", "invalid_value",
                 str("output_format wav holds audio only: it is the output of the audio-only "
                     "pipelines (t2a); the ", o.pipeline, " pipeline writes mp4 (or png for one "
                     "frame)"));
    if (asked == "png" && frames != 1)
      impossible("output_format", "invalid_value",
                 str("output_format png is served for one frame (num_frames 1); this request "
                     "makes ", frames == 0 ? std::string("a clip") : str(frames, " frames"),
                     ": ask for mp4, or num_frames 1"));
    r.output_format = asked;
  }

  // EXR stills are HDR inputs, as `ltx generate` takes them: they need `hdr` (their colour
  // space), and a request's conditioning is all EXR or all SDR (uploaded clips are SDR; an
  // attention mask is a mask, neither).
  void check_hdr_inputs(const VideoRequest& r) const {
    const char* images = get("images") ? "images" : "input_reference";
    std::string exr, sdr;
    for (const RequestImage& im : r.images)
      if (im.format == "exr")
        exr = images;
      else if (sdr.empty())
        sdr = images;
    for (const RequestMedia& m : r.media)
      if (m.frames)
        exr = m.field;
      else if (sdr.empty() && (m.field == "video_path" || m.field == "video_conditioning"))
        sdr = m.field;
    if (exr.empty()) return;
    if (!r.options.hdr)
      impossible(exr, "invalid_value",
                 str(exr, ": OpenEXR frames are HDR inputs; set hdr to their colour space (",
                     media::hdr_color_space_choices(), ")"));
    if (!sdr.empty())
      impossible(exr, "invalid_value",
                 str(exr, ": the conditioning is all EXR or all SDR; ", sdr,
                     " holds SDR (PNG, JPEG or video) inputs beside OpenEXR ones"));
  }

  // The time ranges against the uploaded media, and the clip against the limits.
  void check_media_ranges(const VideoRequest& r) const {
    const generate::GenerateOptions& o = r.options;
    const RequestLimits& lim = model_.limits;
    const PipelineField* size = clip_field(o.pipeline, true);
    const PipelineField* duration = clip_field(o.pipeline, false);
    for (const RequestMedia& m : r.media) {
      const MediaHeader& h = m.header;
      const std::string& f = m.field;
      if (size && size->name == f && (h.width > lim.max_width || h.height > lim.max_height))
        impossible(f, "invalid_value",
                   str(f, " is ", h.width, "x", h.height, ", above this server's limit of ",
                       lim.max_width, "x", lim.max_height, " (--max-width / --max-height)"));
      if (duration && duration->name == f && h.frames > lim.max_frames)
        impossible(f, "invalid_value",
                   str(f, " has ", h.frames, " frames, above this server's limit of ",
                       lim.max_frames, " (--max-frames)"));
      if (m.field == "video_path") {
        if (o.start_time && *o.start_time >= h.duration)
          malformed("start_time", "time_range_outside_clip",
                    str("start_time ", number_text(*o.start_time), " s is not inside video_path (",
                        format_seconds(h.duration), " s long)"));
        if (o.end_time && *o.end_time > h.duration + 1e-6)
          malformed("end_time", "time_range_outside_clip",
                    str("video_path is ", format_seconds(h.duration),
                        " s long, shorter than the retake range (end_time ",
                        number_text(*o.end_time), " s); give an end_time within the clip"));
      }
      if (m.field == "audio_path") {
        // The audio encoder takes a fixed channel count (stereo on every published model); the
        // engine would refuse the job only when it runs.
        const auto def = model_.defaults.find(o.pipeline);
        const int64_t want = def == model_.defaults.end() ? 0 : def->second.input_audio_channels;
        if (want > 0 && h.channels != want)
          malformed("audio_path", "invalid_media",
                    str("audio_path has ", h.channels, " channel(s) but this model's audio encoder takes ", want,
                        "; convert it first, e.g. ffmpeg -i in.wav -ac ", want, " out.wav"));
      }
      if (m.field == "audio_path" && o.audio_start_time && *o.audio_start_time >= h.duration)
        malformed("audio_start_time", "time_range_outside_clip",
                  str("audio_start_time ", number_text(*o.audio_start_time),
                      " s is not inside audio_path (", format_seconds(h.duration), " s long)"));
    }
  }

  Fields f_;
  const ServedModel& model_;
};

json opt_json(const auto& v) { return v ? json(*v) : json(); }
template <typename T>
std::optional<T> opt_from(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

json guidance_json(const generate::GuidanceFlags& g) {
  return {{"cfg", opt_json(g.cfg)},
          {"stg", opt_json(g.stg)},
          {"rescale", opt_json(g.rescale)},
          {"modality", opt_json(g.modality)},
          {"skip_step", opt_json(g.skip_step)},
          {"stg_blocks", opt_json(g.stg_blocks)}};
}
generate::GuidanceFlags guidance_from(const json& j) {
  generate::GuidanceFlags g;
  g.cfg = opt_from<double>(j, "cfg");
  g.stg = opt_from<double>(j, "stg");
  g.rescale = opt_from<double>(j, "rescale");
  g.modality = opt_from<double>(j, "modality");
  g.skip_step = opt_from<int64_t>(j, "skip_step");
  g.stg_blocks = opt_from<std::vector<int64_t>>(j, "stg_blocks");
  return g;
}

}  // namespace

std::string flags_as_fields(const std::string& msg, std::string* first_field) {
  std::string out;
  static const std::map<std::string, std::string> renamed = {{"frame_rate", "fps"},
                                                             {"image", "images"}};
  for (size_t i = 0; i < msg.size();) {
    const bool flag = msg.compare(i, 2, "--") == 0 && i + 2 < msg.size() &&
                      std::islower(static_cast<unsigned char>(msg[i + 2])) &&
                      (i == 0 || !std::isalnum(static_cast<unsigned char>(msg[i - 1])));
    if (!flag) {
      out += msg[i++];
      continue;
    }
    size_t j = i + 2;
    std::string name;
    while (j < msg.size() && (std::isalnum(static_cast<unsigned char>(msg[j])) || msg[j] == '-'))
      name += msg[j] == '-' ? '_' : msg[j], ++j;
    if (const auto r = renamed.find(name); r != renamed.end()) name = r->second;
    if (i == 0 && first_field != nullptr) *first_field = name;  // the message is about this field
    out += name;
    i = j;
  }
  return out;
}

const char* field_type_name(FieldType type) {
  switch (type) {
    case FieldType::Number: return "number";
    case FieldType::Flag: return "boolean";
    case FieldType::Video: return "video file";
    case FieldType::Audio: return "audio file";
    case FieldType::VideoList: return "[{video: video file, strength: number}]";
    case FieldType::VideoStrength: return "{video: video file, strength: number}";
    case FieldType::Embeddings: return "safetensors file";
  }
  return "";
}

const std::vector<PipelineField>& pipeline_fields() {
  using O = generate::GenerateOptions;
  using V = FieldValue;
  static const std::vector<PipelineField> fields = {
      {"video_path", {"retake"}, FieldType::Video, true,
       "the clip to retake; the job takes its size, frame count and frame rate (with hdr also a "
       "tar of EXR frames, whose rate is fps)",
       [](O& o, const V& v) { o.video_path = v.files.at(0).first; }, true, true, false, true},
      {"start_time", {"retake"}, FieldType::Number, true,
       "the start of the window to regenerate, in seconds",
       [](O& o, const V& v) { o.start_time = v.number; }},
      {"end_time", {"retake"}, FieldType::Number, true,
       "the end of the window to regenerate, in seconds (within the clip)",
       [](O& o, const V& v) { o.end_time = v.number; }},
      {"audio_path", {"a2vid"}, FieldType::Audio, true,
       "the soundtrack to generate the video to (any file with an audio stream FFmpeg decodes)",
       [](O& o, const V& v) { o.audio_path = v.files.at(0).first; }},
      {"audio_start_time", {"a2vid"}, FieldType::Number, false,
       "where in audio_path the soundtrack starts, in seconds (default 0)",
       [](O& o, const V& v) { o.audio_start_time = v.number; }},
      {"audio_max_duration", {"a2vid"}, FieldType::Number, false,
       "the most seconds of audio_path used (default: the video's duration)",
       [](O& o, const V& v) { o.audio_max_duration = v.number; }},
      {"video_conditioning", {"ic-lora"}, FieldType::VideoList, true,
       "the reference videos with their strengths in [0, 1] (with hdr also tars of EXR frames)",
       [](O& o, const V& v) {
         for (const auto& [path, strength] : v.files)
           o.video_conditionings.push_back({path, strength});
       },
       false, false, false, true},
      {"conditioning_attention_mask", {"ic-lora"}, FieldType::VideoStrength, false,
       "a grayscale mask clip weighting the reference's attention, times strength",
       [](O& o, const V& v) { o.conditioning_attention_mask = v.files.at(0); }},
      {"skip_stage_2", {"ic-lora"}, FieldType::Flag, false,
       "decode stage 1's half-size result (no refinement)",
       [](O& o, const V& v) { o.skip_stage_2 = v.number != 0.0; }},
      {"reference_video", {"dubit"}, FieldType::Video, true,
       "a clip with sound: the dub keeps its frame count (8k + 1 down), frame rate, motion and voice",
       [](O& o, const V& v) { o.reference_video = v.files.at(0).first; }, false, true},
      {"reference_strength", {"dubit"}, FieldType::Number, false,
       "the video reference's conditioning strength in [0, 1] (default 1)",
       [](O& o, const V& v) { o.reference_strength = v.number; }},
      {"video_conditioning", {"hdr-ic-lora"}, FieldType::VideoStrength, true,
       "the SDR clip to make HDR (strength 1 unless given); the job keeps its size and frame rate",
       [](O& o, const V& v) { o.video_conditionings = {{v.files.at(0).first, v.files.at(0).second}}; },
       true, false, true},
      {"high_quality", {"hdr-ic-lora"}, FieldType::Flag, false,
       "generate twice the frames and keep every other one (smoother, about 2x slower)",
       [](O& o, const V& v) { o.high_quality = v.number != 0.0; }},
      {"spatial_tile", {"hdr-ic-lora"}, FieldType::Number, false,
       "the VAE decode's spatial tile in pixels, a multiple of 32 above 256 (default 1280; lower "
       "needs less memory)",
       [](O& o, const V& v) {
         if (v.number != std::floor(v.number) || std::abs(v.number) > 1e9)
           throw ApiError(422, "invalid_value",
                          str("spatial_tile ", number_text(v.number), " must be a whole number of pixels"),
                          "spatial_tile");
         o.spatial_tile = static_cast<int64_t>(v.number);
       }},
      {"skip_mp4", {"hdr-ic-lora"}, FieldType::Flag, false,
       "write the EXR frames only, no sRGB H.264 preview",
       [](O& o, const V& v) { o.skip_mp4 = v.number != 0.0; }},
      {"text_embeddings", {"hdr-ic-lora"}, FieldType::Embeddings, false,
       "precomputed text contexts instead of a prompt (a safetensors file with video_context "
       "[1, tokens, dim], as the reference's script writes them for this model); send no prompt",
       [](O& o, const V& v) { o.text_embeddings = v.files.at(0).first; }},
  };
  return fields;
}

std::string default_output_format(const std::string& pipeline, int64_t num_frames, bool hdr) {
  const PipelineKind kind = pipelines::parse_pipeline_kind(pipeline);
  if (!pipelines::makes_video(kind)) return "wav";
  if (kind == PipelineKind::HdrIcLora || hdr) return "exr";
  return num_frames == 1 ? "png" : "mp4";
}

bool takes_size(const std::string& pipeline) {
  return pipelines::makes_video(pipelines::parse_pipeline_kind(pipeline)) &&
         clip_field(pipeline, true) == nullptr;
}
bool takes_duration(const std::string& pipeline) { return clip_field(pipeline, false) == nullptr; }

std::string content_type_of(const std::string& file_name) {
  if (file_name.ends_with(".wav")) return "audio/wav";
  if (file_name.ends_with(".png")) return "image/png";
  if (file_name.ends_with(".tar")) return "application/x-tar";
  return "video/mp4";
}

std::string Adjustment::text() const {
  return str(param, " ", requested, " -> ", used, " (", reason, ")");
}

std::string format_seconds(double seconds) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << std::round(seconds * 100.0) / 100.0;
  std::string s = os.str();
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

VideoRequest parse_create(const CreateBody& body, const ServedModel& model) {
  Fields f = body.multipart ? fields_from_form(body.parts) : fields_from_json(body.json);
  merge_extra_body(f);
  reject_unknown_fields(f);
  return Reader(std::move(f), model).read();
}

nlohmann::json to_json(const VideoRequest& r) {
  const generate::GenerateOptions& o = r.options;
  json images = json::array();
  for (const auto& im : r.images)
    images.push_back({{"format", im.format},
                      {"width", im.width},
                      {"height", im.height},
                      {"frame_index", im.frame_index},
                      {"strength", im.strength},
                      {"crf", opt_json(im.crf)}});
  json loras = json::array();
  for (const auto& l : r.loras) loras.push_back({{"name", l.name}, {"strength", l.strength}});
  json media = json::array();
  for (const auto& m : r.media)
    media.push_back({{"field", m.field},
                     {"strength", m.strength},
                     {"ext", m.header.ext},
                     {"duration", m.header.duration},
                     {"width", m.header.width},
                     {"height", m.header.height},
                     {"frames", m.header.frames},
                     {"fps", m.header.fps},
                     {"sample_rate", m.header.sample_rate},
                     {"channels", m.header.channels}});
  json adjustments = json::array();
  for (const auto& a : r.adjustments)
    adjustments.push_back(
        {{"param", a.param}, {"requested", a.requested}, {"used", a.used}, {"reason", a.reason}});
  return {
      {"version", 1},
      {"model", r.model},
      {"pipeline", o.pipeline},
      {"prompt", o.prompt},
      {"negative_prompt", opt_json(o.negative_prompt)},
      {"seed", opt_json(o.seed)},
      {"width", opt_json(o.width)},
      {"height", opt_json(o.height)},
      {"num_frames", opt_json(o.num_frames)},
      {"fps", opt_json(o.frame_rate)},
      {"num_inference_steps", opt_json(o.num_inference_steps)},
      {"step_cache",
       {{"mode", models::transformer::step_cache_mode_name(o.step_cache.mode)},
        {"threshold", o.step_cache.threshold},
        {"warmup_steps", o.step_cache.warmup_steps},
        {"first_blocks", o.step_cache.first_blocks}}},
      {"video_guidance", guidance_json(o.video_guidance)},
      {"audio_guidance", guidance_json(o.audio_guidance)},
      {"distilled_lora_strength_stage_1", opt_json(o.distilled_lora_strength_stage_1)},
      {"distilled_lora_strength_stage_2", opt_json(o.distilled_lora_strength_stage_2)},
      {"num_generated_keyframes", opt_json(o.num_generated_keyframes)},
      {"temporal_upsample_rounds", opt_json(o.temporal_upsample_rounds)},
      {"auto_duration",
       o.auto_duration ? json::array({o.auto_duration->first, o.auto_duration->second}) : json()},
      {"enhance_prompt", o.enhance_prompt},
      {"generate_audio", r.generate_audio},
      {"images", images},
      {"loras", loras},
      {"adjustments", adjustments},
      {"size", r.size},
      {"seconds", r.seconds},
      {"batch_key", r.batch_key},
      {"output_format", r.output_format},
      {"hdr", o.hdr ? json(media::hdr_color_space_name(*o.hdr)) : json()},
      {"media", media},
      {"field_values", r.field_values},
  };
}

VideoRequest video_request_from_json(const nlohmann::json& j) {
  try {
    LTX_CHECK(j.is_object() && j.value("version", 0) == 1,
              "stored request: not a version-1 request object");
    VideoRequest r;
    generate::GenerateOptions& o = r.options;
    r.model = j.at("model").get<std::string>();
    o.pipeline = j.at("pipeline").get<std::string>();
    o.prompt = j.at("prompt").get<std::string>();
    o.negative_prompt = opt_from<std::string>(j, "negative_prompt");
    o.seed = opt_from<int64_t>(j, "seed");
    o.width = opt_from<int64_t>(j, "width");
    o.height = opt_from<int64_t>(j, "height");
    o.num_frames = opt_from<int64_t>(j, "num_frames");
    o.frame_rate = opt_from<double>(j, "fps");
    o.num_inference_steps = opt_from<int64_t>(j, "num_inference_steps");
    if (const auto it = j.find("step_cache"); it != j.end()) {  // jobs stored before it: off
      o.step_cache.mode = models::transformer::parse_step_cache_mode(it->at("mode").get<std::string>());
      o.step_cache.threshold = it->at("threshold").get<double>();
      o.step_cache.warmup_steps = it->at("warmup_steps").get<int64_t>();
      o.step_cache.first_blocks = it->at("first_blocks").get<int64_t>();
    }
    o.video_guidance = guidance_from(j.at("video_guidance"));
    o.audio_guidance = guidance_from(j.at("audio_guidance"));
    o.distilled_lora_strength_stage_1 = opt_from<double>(j, "distilled_lora_strength_stage_1");
    o.distilled_lora_strength_stage_2 = opt_from<double>(j, "distilled_lora_strength_stage_2");
    o.num_generated_keyframes = opt_from<int64_t>(j, "num_generated_keyframes");
    o.temporal_upsample_rounds = opt_from<int64_t>(j, "temporal_upsample_rounds");
    if (const auto ad = opt_from<std::vector<double>>(j, "auto_duration")) {
      LTX_CHECK(ad->size() == 2, "stored request: auto_duration must hold 2 numbers");
      o.auto_duration = std::pair{(*ad)[0], (*ad)[1]};
    }
    o.enhance_prompt = j.at("enhance_prompt").get<bool>();
    r.generate_audio = j.at("generate_audio").get<bool>();
    for (const json& im : j.at("images")) {
      RequestImage x;
      x.format = im.at("format").get<std::string>();
      x.width = im.at("width").get<int64_t>();
      x.height = im.at("height").get<int64_t>();
      x.frame_index = im.at("frame_index").get<int64_t>();
      x.strength = im.at("strength").get<double>();
      x.crf = opt_from<int>(im, "crf");
      r.images.push_back(std::move(x));
    }
    for (const json& l : j.at("loras"))
      r.loras.push_back({l.at("name").get<std::string>(), l.at("strength").get<double>()});
    for (const json& a : j.at("adjustments"))
      r.adjustments.push_back({a.at("param").get<std::string>(),
                               a.at("requested").get<std::string>(),
                               a.at("used").get<std::string>(), a.at("reason").get<std::string>()});
    r.size = j.at("size").get<std::string>();
    r.seconds = j.at("seconds").get<std::string>();
    r.batch_key = j.at("batch_key").get<std::string>();
    // Requests stored before the pipeline fields existed have none of these.
    r.output_format = j.value("output_format", std::string("mp4"));
    if (const auto hdr = opt_from<std::string>(j, "hdr"))
      o.hdr = media::parse_hdr_color_space(*hdr, "stored request: hdr");
    if (j.contains("media"))
      for (const json& m : j.at("media")) {
        RequestMedia x;
        x.field = m.at("field").get<std::string>();
        x.strength = m.at("strength").get<double>();
        x.header.ext = m.at("ext").get<std::string>();
        x.header.duration = m.at("duration").get<double>();
        x.header.width = m.at("width").get<int64_t>();
        x.header.height = m.at("height").get<int64_t>();
        x.header.frames = m.at("frames").get<int64_t>();
        x.header.fps = m.at("fps").get<double>();
        x.header.sample_rate = m.at("sample_rate").get<int64_t>();
        x.header.channels = m.at("channels").get<int64_t>();
        r.media.push_back(std::move(x));
      }
    if (j.contains("field_values"))
      r.field_values = j.at("field_values").get<std::map<std::string, double>>();
    return r;
  } catch (const json::exception& e) {
    fail("stored request: ", e.what());
  }
}

generate::GenerateOptions to_generate_options(const VideoRequest& request,
                                              const std::vector<std::string>& input_files) {
  LTX_CHECK(input_files.size() == request.images.size() + request.media.size(), "job request: ",
            request.images.size(), " images and ", request.media.size(), " media files but ",
            input_files.size(), " stored input files");
  generate::GenerateOptions o = request.options;
  o.images.clear();
  for (size_t i = 0; i < request.images.size(); ++i) {
    const RequestImage& im = request.images[i];
    generate::ImageFlag flag;
    flag.path = input_files[i];
    flag.frame_index = im.frame_index;
    flag.strength = im.strength;
    flag.crf = im.crf;
    o.images.push_back(std::move(flag));
  }
  // The pipeline fields, applied from the stored values and files (any paths the options held
  // while the request was checked are replaced).
  o.video_path.clear();
  o.audio_path.clear();
  o.video_conditionings.clear();
  o.conditioning_attention_mask.reset();
  for (const PipelineField& f : pipeline_fields()) {
    if (std::find(f.pipelines.begin(), f.pipelines.end(), o.pipeline) == f.pipelines.end()) continue;
    FieldValue value;
    bool given = false;
    if (const auto it = request.field_values.find(f.name); it != request.field_values.end()) {
      value.number = it->second;
      given = true;
    }
    for (size_t i = 0; i < request.media.size(); ++i)
      if (request.media[i].field == f.name) {
        value.files.emplace_back(input_files[request.images.size() + i],
                                 request.media[i].strength);
        given = true;
      }
    if (given) f.apply(o, value);
  }
  return o;
}

}  // namespace ltx::server
