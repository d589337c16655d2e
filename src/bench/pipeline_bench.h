#pragma once
// `ltx bench pipeline`: one whole clip through the pipelines of `ltx generate` (generate_with: the
// same stages, models asked of a ModelProvider in the same order and freed at the same points) at
// a preset's full size, with every model's weights made on the device (bench::RandomWeights with
// the official benchmark's inits) instead of read from files. The seam is the provider
// (SyntheticModelProvider below): each model is built by its own loader from an
// io::WeightMap::synthetic; nothing else in the run knows it is a benchmark.
//
// What is not a published model file:
//   * the tokenizer is the demo bundle's (a cut of Gemma 3's); every prompt is padded to 1024
//     tokens, so Gemma and the connectors do the work of any prompt;
//   * no LoRA file exists, so the two-stage pipelines run their second stage without the distilled
//     LoRA (no LoRA switch is timed; the report says so).
//
// Timing: the calling thread's stream is synchronised at every stage start, step and stage end
// (the progress events), so each stage's time is its device work. The decode's tail overlaps its
// parts (generate::TailPlan): the audio decode stage is then only its issue, its device work runs
// beside the video decode, whose stage holds the tail's wall time; the tail's report gives each
// part's busy time. Weight synthesis happens inside the stages
// that load models (text encoding, model loading, the decodes); its time is measured (synchronised
// per tensor) and subtracted: the end-to-end number is the clip's wall time without it, i.e. as
// if the weights had been in memory already (not a file load).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/random_weights.h"
#include "core/device.h"
#include "core/dtype.h"
#include "generate/decode.h"
#include "generate/placement.h"
#include "models/transformer/step_cache.h"
#include "quantization/mode.h"

namespace ltx::bench {

struct Preset;

// Stand-ins for a preset's transformer, Gemma and spatial upsampler files, in a temporary folder
// removed with the object: safetensors headers naming every parameter those models load (names
// as their loaders ask for them, floating tensors bf16 as published) over a sparse data section
// that reads as zeros and takes no disk space. The pipeline bench hands them to the run as its
// model paths, so that the memory planner, the budget checks and the quantization checks read
// the run's sizes from files as they do for real checkpoints; the weights themselves come from
// the synthetic provider. With `transformer_ggml` (--weights-format), the transformer is a GGUF
// file instead, the tensors that rule types stored as those GGML blocks, the rest bf16, as a
// community GGUF transformer. With `fp8_text_encoder` (--text-encoder-format fp8), Gemma's Linear
// weights are e4m3 with a scalar f32 weight_scale each, as ComfyUI's FP8 Gemma.
class StandInModelFiles {
 public:
  explicit StandInModelFiles(const Preset& preset, const GgmlRule& transformer_ggml = {},
                             bool fp8_text_encoder = false);
  ~StandInModelFiles();
  StandInModelFiles(const StandInModelFiles&) = delete;
  StandInModelFiles& operator=(const StandInModelFiles&) = delete;

  std::string transformer() const;
  std::string text_encoder() const;
  std::string upsampler() const;

 private:
  std::filesystem::path dir_;
  bool transformer_gguf_ = false;
};

struct PipelineBenchOptions {
  std::string preset = "ltx23-22b";  // a preset with pipeline configs (presets.h): ltx23-22b, tiny
  std::string pipeline = "distilled";  // distilled, two-stage, two-stage-hq
  Device device = Device::cpu();
  std::optional<DType> dtype;  // unset: the pipelines' (bf16 on a GPU, f32 on the CPU)
  int64_t width = 768, height = 512, frames = 121;
  std::optional<int64_t> steps;  // unset: the pipeline's default
  int64_t seed = 0;
  bool audio = true;
  // --max-gpu-memory in bytes (0: none): as `ltx generate` takes it, the allocator's limit, and a
  // run whose largest model cannot fit is refused before anything is made.
  int64_t max_gpu_memory_bytes = 0;
  // --quantization (the transformer's Linears) and --offload (none or cpu: the transformer's
  // blocks and Gemma's layers streamed from host memory), as `ltx generate` takes them. disk has
  // no files to stream from here.
  quantization::Mode quantization = quantization::Mode::None;
  generate::Offload offload = generate::Offload::None;
  // --weights-format, as `ltx bench transformer` takes it (bench/random_weights.h,
  // check_weights_format): dense, or the transformer's linear weights made as GGML blocks of a
  // quantized `ltx quantize` type, loaded and planned as a GGUF transformer's.
  std::string weights_format = "dense";
  // --text-encoder-format: dense (Gemma in the run's dtype), or fp8 (its Linear weights stored
  // e4m3 with per-tensor scales, as ComfyUI's FP8 Gemma; held at a byte in a bf16 run).
  std::string text_encoder_format = "dense";
  // Where the MP4 goes when FFmpeg is built in; empty: a temporary file, removed afterwards.
  std::string mp4_path;
  // --cache and its flags, as `ltx generate` takes them (two-stage, two-stage-hq: stage 1).
  models::transformer::StepCacheParams step_cache;
};

struct PipelineStageTiming {
  std::string stage;
  double seconds = 0;            // wall time, synthesis included
  double synthesis_seconds = 0;  // weight synthesis inside it
  int64_t steps = 0;             // denoising steps (decoded chunks for the video decode)
  double step_median_ms = 0;     // median step time (0 without steps)
  int64_t peak_bytes = 0;        // the device's peak allocation during the stage
};

struct PipelineBenchResult {
  std::string preset, pipeline, device_name;
  int64_t width = 0, height = 0, frames = 0;
  int64_t max_gpu_memory_bytes = 0;  // the budget it ran under (0: none)
  std::string quantization, offload;  // the modes it ran with
  std::string weights_format = "dense";  // the transformer's GGML type ("Q4_K"), or dense
  std::string text_encoder_format = "dense";  // dense or fp8
  std::vector<PipelineStageTiming> stages;
  double total_seconds = 0;      // generate_with's wall time
  double synthesis_seconds = 0;  // all weight synthesis
  double end_to_end_seconds = 0;  // total - synthesis
  int64_t peak_bytes = 0;        // the largest stage peak
  int64_t parameters = 0;        // elements synthesized
  int64_t weight_bytes = 0;      // bytes synthesized
  bool mp4 = false;              // the MP4 encode ran (FFmpeg built in)
  double mp4_seconds = 0;        // time inside the MP4 writer (part of the video decode stage;
                                 // on the decode's sink thread when the tail overlaps)
  generate::TailTiming tail;     // the decode's tail: its wall time and each part's busy time
  bool lora_switch = false;      // a LoRA was switched between stages (never, see the header)
  int64_t decoded_frames = 0, audio_samples = 0;
  std::string step_cache = "none";  // StepCacheParams::str()
  std::vector<models::transformer::StepCacheReport> step_cache_stages;  // model calls computed / reused
};

// Checks the options (each error names its flag) and runs the clip. Throws ltx::Error.
PipelineBenchResult run_pipeline_bench(const PipelineBenchOptions& options);

// The short table and the JSON report (--out).
std::string format_pipeline_bench(const PipelineBenchResult& result);
nlohmann::ordered_json pipeline_bench_json(const PipelineBenchResult& result);

}  // namespace ltx::bench
