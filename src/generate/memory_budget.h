#pragma once
// The GPU memory budget of a generation (--max-gpu-memory) and the share of it the resident
// models may keep (--model-memory-budget, and its default on CUDA).
//
// Rules (docs/SERVER.md "Memory"):
//   * activation headroom: what a budget keeps free for the work of a stage beyond the weights,
//     max(1/5 of the budget, min(6 GiB, 1/2 of it)): 6 GiB of 24 or 16 GiB, 16 GiB of 80;
//   * default model budget on CUDA: the --max-gpu-memory budget (else the device's total
//     memory) minus that headroom;
//   * a run is refused up front, before any model loads, when its largest component (its
//     weights as they are stored on the device) plus kMinActivationHeadroom passes the budget.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "generate/model_paths.h"

namespace ltx::generate {

// The least memory beside the largest model that a stage is assumed to need.
inline constexpr int64_t kMinActivationHeadroom = int64_t{1} << 30;

// max(budget / 5, min(6 GiB, budget / 2)) bytes; budget_bytes > 0.
int64_t activation_headroom(int64_t budget_bytes);
// budget_bytes - activation_headroom(budget_bytes): what the model cache may keep resident.
int64_t default_model_budget(int64_t budget_bytes);

// "--max-gpu-memory" as GiB (decimals allowed, e.g. 23.5) -> bytes. Throws ltx::Error naming
// `flag` for a non-number or a value <= 0.
int64_t parse_gib(const std::string& text, const char* flag = "--max-gpu-memory");

// The bytes the tensors of `path` under `prefixes` take once loaded in `dtype` (floating tensors
// converted, others as stored; under a `quantization` mode the Linear weights it stores in e4m3 at
// one byte each and NVFP4 layers at their packed size, as nn::Linear binds them); no prefix: every tensor. A folder (a Gemma root): its
// .safetensors files summed. 0 for a path that is neither.
int64_t stored_bytes(const std::string& path, std::initializer_list<const char*> prefixes,
                     DType dtype, quantization::Mode quantization = quantization::Mode::None);

struct ComponentSize {
  std::string component;  // "transformer", "text encoder", ...
  int64_t bytes = 0;
};
// The models a generation with `paths` may load, each at its stored_bytes in `dtype` (the audio
// decoder and vocoder in f32, as they load; the transformer under paths.quantization).
std::vector<ComponentSize> component_sizes(const ModelPaths& paths, DType dtype);

// Throws ltx::Error when the largest of `components` plus kMinActivationHeadroom passes
// `budget_bytes` (> 0): one line naming the component, its size, the budget (set by
// `budget_flag`) and the flags that help.
void check_budget_fits(const std::vector<ComponentSize>& components, int64_t budget_bytes,
                       const std::string& budget_flag = "--max-gpu-memory");

// Sets `bytes` (> 0) as the limit of the allocator of `device` for the rest of the process. Throws
// ltx::Error naming `flag` on the CPU or when it is more than the device's memory.
void apply_gpu_budget(Device device, int64_t bytes, const char* flag = "--max-gpu-memory");

// "23.50 GiB"
std::string gib_text(int64_t bytes);

}  // namespace ltx::generate
