// `ltx inspect FILE... [--json]`: describes checkpoint files, safetensors or GGUF (components,
// model version, parameter counts, dtypes, key config values, which quantized form the weights are
// in and which --quantization modes load them; for GGUF the version, architecture, GGML storage
// types and bits per weight). Every file is checked completely before anything about it is
// printed; a file that fails gives one error line on stderr naming it (and nothing on stdout), the
// others are still reported, and the exit code is 1 if any file failed.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "quantization/file_format.h"

namespace ltx::cli {

namespace {

struct InspectOptions {
  std::vector<std::string> files;
  bool json = false;
};

int run_inspect(const InspectOptions& opt) {
  int rc = 0;
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  bool first = true;
  for (const std::string& path : opt.files) {
    std::string text;
    try {
      io::CheckpointSummary s = io::inspect_checkpoint(path);
      nlohmann::ordered_json quant;
      std::string quant_text;
      if (s.format == "GGUF") {
        // Every tensor keeps its own GGML type (the summary's storage line); the
        // --quantization modes are about safetensors weights.
        quant = {{"format", "GGUF"}, {"modes", nlohmann::ordered_json::array()}};
        quant_text =
            "quantization: GGUF blocks per tensor (storage above); --quantization modes do not "
            "apply; `ltx generate --transformer-path` loads it\n";
      } else {
        const quantization::FileQuantization q =
            quantization::inspect_file(*io::SafetensorsFile::open(path));
        std::string modes;
        for (const std::string& m : quantization::fitting_modes(q.format))
          modes += (modes.empty() ? "" : ", ") + m;
        quant = {{"format", quantization::format_name(q.format)},
                 {"fp8_per_tensor", q.fp8_per_tensor},
                 {"fp8_input_scales", q.fp8_input_scales},
                 {"fp8_unscaled", q.fp8_unscaled},
                 {"fp8_blockwise", q.fp8_blockwise},
                 {"nvfp4", q.nvfp4},
                 {"dense_weights", q.dense_weights},
                 {"modes", quantization::fitting_modes(q.format)}};
        quant_text = "quantization: " + quantization::describe(q) +
                     "\n  --quantization modes that load it: " + modes +
                     " (this build: " + quantization::available_modes() + ")\n";
      }
      if (opt.json) {
        auto j = io::to_json(s);
        j["quantization"] = std::move(quant);
        all.push_back(j);
      } else {
        text = io::to_text(s) + quant_text;
      }
    } catch (const Error& e) {
      std::fprintf(stderr, "ltx: error: %s\n", e.what());
      rc = 1;
      continue;
    }
    if (!opt.json) {
      if (!first) std::cout << "\n";
      std::cout << text << std::flush;
      first = false;
    }
  }
  if (opt.json) std::cout << all.dump(2) << std::endl;
  return rc;
}

}  // namespace

Command add_inspect(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "inspect",
      "Describe checkpoint files: components, model version, parameters, dtypes, config");
  auto opt = std::make_shared<InspectOptions>();
  sub->add_option("files", opt->files,
                  "safetensors or GGUF files (checkpoints, VAEs, text encoders, LoRAs, ...)")
      ->required();
  sub->add_flag("--json", opt->json, "Print one JSON array (one object per file) instead of text");
  return {sub, [opt]() -> int { return run_inspect(*opt); }};
}

}  // namespace ltx::cli
