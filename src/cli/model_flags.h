#pragma once
// The model-file flags `ltx generate` and `ltx serve` share (the reference's names), and the number
// parsing their multi-value flags need.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/model_source.h"
#include "core/device.h"
#include "generate/model_paths.h"
#include "quantization/mode.h"
#include "generate/placement.h"

namespace ltx::cli {

struct ModelFlagsCli {
  generate::ModelFlags models;
  std::vector<std::vector<std::string>> loras;
  std::vector<std::string> distilled_lora, detailing_lora;
  std::string device = "cpu";
  std::string max_gpu_memory;  // GiB; empty: no budget
  std::string quantization = "none";
  std::string offload;  // empty: auto with --max-gpu-memory on CUDA, else none
  std::string model;    // --model PRESET (hub/presets.h); empty: none
  HubFlags hub;         // where --model's files come from
  CLI::App* sub = nullptr;  // to tell given flags from defaults
};

// --checkpoint-path ... --duration-head-path, --lora, --distilled-lora, --detailing-lora, --device,
// --quantization, --model PRESET with the hub flags (--cache-dir, --token, --offline, --yes).
void add_model_flags(CLI::App* sub, ModelFlagsCli& flags);
// --quantization MODE alone (the reference's flag; `ltx parity` and `ltx bench` take it too), read
// with quantization::parse_mode.
void add_quantization_flag(CLI::App* sub, std::string& mode);
// The LoRA and quantization flags parsed into flags.models (throws ltx::Error naming the flag),
// and the device. With --model, the preset's quantization when --quantization is not given; its
// files come from resolve_preset_files.
generate::ModelFlags resolved_models(const ModelFlagsCli& flags);
// --model: its preset (nullptr without the flag).
const hub::Preset* model_preset(const ModelFlagsCli& flags);
// --model: the preset's files `needs` uses (every file when null) downloaded when missing (asking
// unless --yes) and set in `models` where no explicit flag named one.
void resolve_preset_files(const ModelFlagsCli& flags, generate::ModelFlags& models,
                          const generate::ComponentNeeds* needs);
Device resolved_device(const ModelFlagsCli& flags);
// --max-gpu-memory in bytes (0 when not given). Throws ltx::Error naming the flag for a
// non-number, a value <= 0, or --device cpu.
int64_t resolved_gpu_budget(const ModelFlagsCli& flags);
// The help of --max-gpu-memory (generate, serve and bench share it).
extern const char* const kMaxGpuMemoryHelp;
// --offload, checked against --device (streaming needs a GPU).
generate::Offload resolved_offload(const ModelFlagsCli& flags);

// A whole-string number (every character used), else an ltx::Error "<what>: 'x' is not a number".
double parse_number(const std::string& s, const std::string& what);
int64_t parse_integer(const std::string& s, const std::string& what);

}  // namespace ltx::cli
