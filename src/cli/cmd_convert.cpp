// `ltx convert IN... --to gguf|gguf-bf16|gguf-f16|safetensors --out OUT [--dtype bf16|f32]
// [--allow-lossy] [--json] [--overwrite]`: between GGUF and safetensors. A conversion that can
// change a value (f32 -> bf16, GGUF blocks -> bf16, bf16 <-> f16) is refused up front unless
// --allow-lossy. Progress and summary as `ltx quantize`.
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/export_output.h"
#include "core/error.h"
#include "quantization/checkpoint_export.h"

namespace ltx::cli {

namespace {

struct ConvertFlags {
  quantization::ConvertOptions options;
  std::string to;
  std::string dtype = "bf16";
  bool json = false;
};

}  // namespace

Command add_convert(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "convert", "Convert a checkpoint between safetensors and GGUF without changing its values");
  auto f = std::make_shared<ConvertFlags>();
  sub->add_option("inputs", f->options.inputs, "safetensors or GGUF file(s) of one checkpoint")
      ->required();
  sub->add_option("--to", f->to,
                  "gguf (every tensor in its own type), gguf-bf16 / gguf-f16 (ComfyUI-GGUF's "
                  "convert.py layout), safetensors")
      ->required();
  sub->add_option("--out", f->options.output, "output file")->required();
  sub->add_option("--dtype", f->dtype,
                  "safetensors output: what GGUF blocks dequantise to, bf16 (lossy: needs "
                  "--allow-lossy) or f32 (exact)");
  sub->add_flag("--allow-lossy", f->options.allow_lossy,
                "allow conversions that round values (f32 -> bf16, blocks -> bf16, bf16 <-> f16)");
  sub->add_flag("--overwrite", f->options.overwrite, "replace OUT if it exists");
  sub->add_flag("--json", f->json, "print the summary as JSON");
  return {sub, [f]() -> int {
            const auto target = quantization::parse_convert_target(f->to);
            LTX_CHECK(target.has_value(), "unknown --to '", f->to,
                      "' (gguf, gguf-bf16, gguf-f16 or safetensors)");
            LTX_CHECK(f->dtype == "bf16" || f->dtype == "f32", "unknown --dtype '", f->dtype,
                      "' (bf16 or f32)");
            f->options.target = *target;
            f->options.dequantize_to = f->dtype == "f32" ? DType::F32 : DType::BF16;
            f->options.progress = export_progress_lines("convert");
            print_export_summary(quantization::convert_checkpoint(f->options), f->json);
            return 0;
          }};
}

}  // namespace ltx::cli
