#pragma once
// The text encoder / LTX checkpoint compatibility check (the reference's _check_gemma_version in
// encoder_configurator.py, run when the embeddings processor is built):
//
//   * the LTX checkpoint declares `gemma_source_checkpoint` (LTX-2.5): its `gemma_version` must
//   equal
//     the Gemma config's top-level `gemma_version` (both absent counts as equal);
//   * otherwise, a `model_version` >= 2.4.0 must declare it -- an error, unless the Gemma config
//   has
//     no `gemma_version` either (then the reference only warns and skips the check);
//   * otherwise (LTX-2 / 2.3) the Gemma config must be a Gemma 3 one (model_type "gemma3").
//
// Errors name both files and the values that disagree.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/text/gemma/config.h"

namespace ltx::text {

struct GemmaCompatibility {
  std::vector<std::string> warnings;  // the check passed but was skipped, and why
};

// `ltx_metadata`: the LTX checkpoint's decoded `__metadata__`
// (io::SafetensorsFile::metadata_json()) read from `ltx_path`; `gemma`: the text encoder's config,
// loaded from `gemma_path`.
GemmaCompatibility check_gemma_version(const nlohmann::json& ltx_metadata,
                                       const std::string& ltx_path, const GemmaTextConfig& gemma,
                                       const std::string& gemma_path);

// Opens `ltx_path` and checks it against `gemma` (see above).
GemmaCompatibility check_gemma_version(const std::string& ltx_path, const GemmaTextConfig& gemma,
                                       const std::string& gemma_path);

}  // namespace ltx::text
