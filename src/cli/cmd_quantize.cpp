// `ltx quantize IN... --type TYPE --out OUT [--json] [--overwrite]`: writes the LTX transformer of
// a safetensors checkpoint as a GGUF file the community loaders take (Q8_0, Q6_K, Q5_K[_M],
// Q4_K[_M], Q5_0, Q4_0, BF16, F16), or the checkpoint in the official FP8 layout (`--type fp8`).
// Progress lines on stderr (unless --quiet), a summary (types, bits per weight, size) on stdout,
// as JSON with --json; errors are one line, exit code 1, no output file.
#include <memory>

#include "cli/commands.h"
#include "cli/export_output.h"
#include "quantization/checkpoint_export.h"
#include "quantization/gguf_policy.h"

namespace ltx::cli {

namespace {

struct QuantizeFlags {
  quantization::QuantizeOptions options;
  bool json = false;
};

}  // namespace

Command add_quantize(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "quantize",
      "Write a checkpoint's transformer as a quantized GGUF file (the community layout) or the "
      "checkpoint in the official FP8 layout");
  auto f = std::make_shared<QuantizeFlags>();
  sub->add_option("inputs", f->options.inputs,
                  "safetensors checkpoint (or its files, when split); a BF16/F16 GGUF also works")
      ->required();
  sub->add_option("--type", f->options.type,
                  "GGUF: " + quantization::gguf_quant_type_names() +
                      " (Q4_K / Q5_K: every quantised tensor that type; *_K_M: to_v and "
                      "ff.net.2 in Q6_K); fp8: the official *-fp8.safetensors layout")
      ->required();
  sub->add_option("--out", f->options.output, "output file (.gguf, or .safetensors for fp8)")
      ->required();
  sub->add_flag("--overwrite", f->options.overwrite, "replace OUT if it exists");
  sub->add_flag("--json", f->json, "print the summary as JSON");
  return {sub, [f]() -> int {
            f->options.progress = export_progress_lines("quantize");
            print_export_summary(quantization::quantize_checkpoint(f->options), f->json);
            return 0;
          }};
}

}  // namespace ltx::cli
