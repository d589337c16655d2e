#include "models/text/gemma/compat.h"

#include <cctype>

#include "core/error.h"
#include "io/safetensors.h"

namespace ltx::text {

using json = nlohmann::json;

namespace {

// The reference's parse_model_version: dot-separated parts up to the first one that is not a
// plain integer ("2.4-rc2" -> (2,)).
std::vector<long long> parse_version(const std::string& v) {
  std::vector<long long> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t dot = v.find('.', start);
    if (dot == std::string::npos) dot = v.size();
    const std::string part = v.substr(start, dot - start);
    bool digits = !part.empty() && part.size() <= 18;
    for (const char ch : part) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
    if (!digits) break;
    out.push_back(std::stoll(part));
    start = dot + 1;
  }
  return out;
}

std::string quoted(const std::optional<std::string>& v) {
  return v ? "'" + *v + "'" : std::string("none");
}

}  // namespace

GemmaCompatibility check_gemma_version(const json& meta, const std::string& ltx_path,
                                       const GemmaTextConfig& gemma,
                                       const std::string& gemma_path) {
  GemmaCompatibility result;
  const json gsc = meta.is_object() && meta.contains("gemma_source_checkpoint")
                       ? meta.at("gemma_source_checkpoint")
                       : json();
  if (!gsc.is_null()) {
    LTX_CHECK(gsc.is_object(), "Gemma version check: gemma_source_checkpoint in ", ltx_path,
              " is not a JSON object (", gsc.dump(), ")");
    std::optional<std::string> expected;
    if (gsc.contains("gemma_version") && !gsc.at("gemma_version").is_null())
      expected = gsc.at("gemma_version").is_string() ? gsc.at("gemma_version").get<std::string>()
                                                     : gsc.at("gemma_version").dump();
    LTX_CHECK(expected == gemma.gemma_version, "Gemma version mismatch: the LTX checkpoint ",
              ltx_path, " was trained with gemma_version ", quoted(expected),
              " (gemma_source_checkpoint), but the text encoder ", gemma_path,
              " has gemma_version ", quoted(gemma.gemma_version),
              "; use the text encoder published with this checkpoint");
    return result;
  }

  std::string model_version;
  if (meta.is_object() && meta.contains("model_version") && !meta.at("model_version").is_null()) {
    const json& mv = meta.at("model_version");
    model_version = mv.is_string() ? mv.get<std::string>() : mv.dump();
  }
  if (!model_version.empty() && parse_version(model_version) >= std::vector<long long>{2, 4, 0}) {
    if (!gemma.gemma_version) {
      result.warnings.push_back(
          str("the LTX checkpoint ", ltx_path, " (model_version ", model_version,
              ") does not declare gemma_source_checkpoint.gemma_version and the text encoder ",
              gemma_path, " has no gemma_version either: compatibility not checked"));
      return result;
    }
    fail("Gemma version check: the LTX checkpoint ", ltx_path, " has model_version ", model_version,
         " and must declare gemma_source_checkpoint.gemma_version, but does not "
         "(the text encoder ",
         gemma_path, " has gemma_version '", *gemma.gemma_version, "')");
  }
  LTX_CHECK(gemma.model_type == "gemma3", "Gemma version check: the LTX checkpoint ", ltx_path,
            " (model_version ", model_version.empty() ? std::string("unset") : model_version,
            ") has no gemma_source_checkpoint, so it expects a Gemma 3 text encoder (model_type "
            "gemma3), but ",
            gemma_path, " has model_type ", gemma.model_type);
  return result;
}

GemmaCompatibility check_gemma_version(const std::string& ltx_path, const GemmaTextConfig& gemma,
                                       const std::string& gemma_path) {
  const io::SafetensorsFile f(ltx_path);
  return check_gemma_version(f.metadata_json(), ltx_path, gemma, gemma_path);
}

}  // namespace ltx::text
