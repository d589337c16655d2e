#pragma once
// Where a generation's models run and in which dtype their weights are loaded (`ltx generate
// --device`). Every model of the run goes to the one device: the CPU computes in f32 (bf16
// checkpoints are widened at load, as always); a GPU keeps the reference's inference dtype, bf16,
// unless a full-precision run asks for f32. The audio VAE decoder and vocoder load f32 weights on
// every device (their loaders take f32 only).
#include <optional>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "models/block_streaming.h"
#include "nn/module.h"
#include "quantization/mode.h"

namespace ltx::generate {

// --offload (the reference's OffloadMode): where the transformer's blocks and the Gemma text
// encoder's layers wait between uses. None: resident on the device. Cpu: in page-locked host
// memory, streamed to the GPU one by one through kOffloadSlots device slots
// (models/block_streaming.h); the rest of each model stays resident.
// Disk: the same slots, filled at every pass from the mapped files through two page-locked
// staging buffers (host memory: two blocks; LoRA-fused weights stay in host buffers).
// Auto: the memory planner (generate/offload_plan.h) keeps each model resident when it fits the
// GPU budget and otherwise streams its blocks past the most that fit (the default with
// --max-gpu-memory on a GPU; on the CPU, none).
enum class Offload { None, Cpu, Disk, Auto };
inline constexpr int64_t kOffloadSlots = 2;
// "none" / "cpu" / "disk" / "auto"; anything else throws naming --offload and the choices.
Offload parse_offload(const std::string& text);
const char* offload_name(Offload offload);
// The block streaming `offload` asks for on `device` (Auto: none; plan_streaming decides); throws
// naming --offload cpu|disk on the CPU.
models::BlockStreaming block_streaming(Offload offload, Device device);

// {f32, cpu} on the CPU; {dtype or bf16, device} on a GPU.
nn::LoadOptions model_placement(Device device, std::optional<DType> dtype = std::nullopt);

// `where` for the transformer: its Linears stored as `quantization` says (--quantization; the
// reference applies the policy to the transformer only).
nn::LoadOptions transformer_placement(const nn::LoadOptions& where, quantization::Mode quantization);

// "NVIDIA H200 (139.8 GiB) cuda:0, bf16 weights" / "CPU (16 threads), f32 weights", for the
// per-component device lines of the progress log.
std::string describe_placement(const nn::LoadOptions& where);

// Logs "<component> runs on <describe_placement(where)>" (info level).
void log_placement(const std::string& component, const nn::LoadOptions& where);

}  // namespace ltx::generate
