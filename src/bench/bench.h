#pragma once
// The `ltx bench` library: times one denoising forward of the transformer, the conv video VAE
// decode and the LTX-2.5 diffusion video decode at full (or preset) size with random weights made
// on the target device, measures peak device memory, and sets each case next to its analytic FLOP
// floor and, when given, the official Python stack's numbers from the same GPU
// (tools/bench/bench_official.py's and tools/bench/bench_official_diffdec.py's JSON).
//
//   bench::BenchOptions o;  o.preset = "tiny";  o.device = Device::cpu();
//   bench::BenchReport r = bench::plan(o, bench::BenchTarget::All);   // shapes + FLOPs
//   bench::run(o, r);                                                 // timings, memory
//   std::cout << bench::format_table(r);
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiling/gpu_monitor.h"
#include "bench/flops.h"
#include "bench/presets.h"
#include "core/device.h"
#include "core/dtype.h"
#include "quantization/mode.h"

namespace ltx::bench {

// All: the transformer, the conv VAE and (presets that have one) the diffusion decoder.
enum class BenchTarget { All, Transformer, Vae, DiffusionDecoder };

struct BenchOptions {
  std::string preset = "ltx23-22b";
  Device device = Device::cpu();
  std::optional<DType> dtype;  // default: bf16 on CUDA, f32 on the CPU (its backend computes in f32)
  // --quantization: the transformer's Linears stored as the mode says (its random weights made in
  // the stored dtype, e4m3 under fp8-cast).
  quantization::Mode quantization = quantization::Mode::None;
  // --weights-format: "dense" (every weight in the model dtype; "bf16" says the same under
  // --dtype bf16), or a quantized type of `ltx quantize --type` (Q8_0, Q6_K, Q5_K, Q5_K_M, Q4_K,
  // Q4_K_M, Q5_0, Q4_0; any case): the transformer's linear weights that `ltx quantize` quantises
  // made as GGML blocks of it (bench/random_weights.h), run as a GGUF file's are; the rest dense.
  std::string weights_format = "dense";
  int64_t warmup = 2;
  int64_t iters = 5;
  uint64_t seed = 0;
  std::vector<VideoSize> sizes;     // transformer sizes; empty: the preset's
  std::optional<VideoSize> vae_size;   // both video decoders
  std::optional<int64_t> frames;       // default: the preset's (121)
  std::optional<int64_t> text_tokens;  // default: the preset's (1024)
  bool audio = true;
  bool vae_tiling = true;  // the pipelines' automatic decode tiling (else one tile)
  // The transformer step recorded once as a CUDA graph and replayed (backend/step_graph.h);
  // the recording runs before the timed calls.
  bool cuda_graph = false;
  // --offload cpu / disk: the transformer's blocks streamed from page-locked host memory (disk:
  // from where they were made, through staging buffers, at every pass) through this many device
  // slots (models/block_streaming.h); 0: resident. Timed eagerly (no --cuda-graph).
  int64_t offload_slots = 0;
  bool offload_from_file = false;
  // The transformer case as one step of the guided denoiser with the default guidance of the
  // preset's generation (2.3: video cfg 3 / STG 1 on block 28 / modality 3, audio cfg 7 / STG 1 / modality 3: cond,
  // uncond, perturbed and isolated-modality passes in one batch of 4), a negative context of
  // its own; FLOPs counted as passes x one forward (the skipped STG block and cross-modal
  // attentions, and the shared text K / V, make the true count a little lower).
  bool guided = false;
  // Guided: the passes that read the positive prompt share their text K / V (the pipelines'
  // default); false recomputes them per pass, as the reference does (for A/B timing).
  bool share_text_kv = true;
  // The timesteps per token ([B, T, 1], as the reference builds them) instead of per sample
  // where every token has the same one (pipelines::TimestepForm; the pipelines' default, and
  // every bench case has no conditioning tokens); for A/B timing.
  bool per_token_timesteps = false;
  // The first latent frame's tokens conditioned (denoise mask 0), as an image at frame 0 makes
  // them (image-to-video): two runs of timesteps per sample instead of one.
  bool image_conditioned = false;
  // Memory budget of the diffusion decoder's automatic tiling (the reference's free_bytes);
  // nullopt: what is free on the device when the cases are planned (CUDA: the driver's free
  // memory, as the official script reads it before building the decoder; CPU: the host's).
  std::optional<int64_t> decode_free_bytes;
  double sigma = 0.725;    // the official benchmark's mid-schedule step
  Ceilings ceilings;

  DType model_dtype() const;
  // The quantized type --weights-format names ("Q4_K_M"); nullopt for dense weights.
  std::optional<std::string> ggml_weights() const;
  // Throws ltx::Error naming the flag for values that cannot run (counts, frames, dtype).
  void validate() const;
};

// Timings and memory of one case (absent until run()).
struct Timing {
  std::vector<double> ms;  // each timed iteration
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int64_t peak_bytes = 0;           // peak allocated during warm-up + timed iterations (weights included)
  int64_t peak_reserved_bytes = 0;  // CUDA: peak held from the driver
  int64_t weights_bytes = 0;        // parameters made for the model (GGML weights: their block bytes)
  int64_t ggml_weights = 0;         // --weights-format: the weights made as GGML blocks
  double setup_s = 0;               // making the weights (shared by the cases of one model)
  // The GPU's clock and power during the timed calls (profiling/gpu_monitor.h); absent on the CPU
  // or without the NVIDIA driver's NVML.
  std::optional<profiling::GpuStateSummary> gpu;
};

// The official stack's number for one case (one section of bench_official.json).
struct OfficialValue {
  std::string section;  // "LTX-2.3 compiled+capture", "VAE decode", ...
  double median_ms = 0, min_ms = 0;
  std::optional<double> peak_gib;
  std::optional<double> analytic_flops;  // its own FLOP count, when it wrote one
  std::optional<int64_t> tiles;          // diffusion decode: its tile count
  std::string tiling;                    // diffusion decode: its tiling, as it printed it
};

struct BenchCase {
  std::string kind;   // "transformer", "vae_decode" or "diffusion_decode"
  std::string label;  // "transformer 768x512x121 +audio"
  VideoSize size;
  int64_t frames = 0;
  TransformerTokens tokens;  // transformer only
  int64_t passes = 1;        // transformer: guidance passes batched in one call (--guided)
  Shape latent;              // decoders: [B, C, F, H, W]
  int64_t tiles = 1;         // decoders
  // diffusion decode: the tiling it runs with (nullopt: one tile), the free bytes it was chosen
  // for, and the stage-5 mode.
  std::optional<models::tiling::TilingConfig> decode_tiling;
  std::optional<int64_t> decode_free_bytes;
  std::string mode;
  FlopCount flops;
  double floor_ms = 0;
  std::optional<Timing> ours;
  // transformer under --quantization: rel L2 (||q - d|| / ||d||) of the video / audio velocity
  // output against one unquantized step with the same random weights and inputs (audio: when
  // the case has audio). Under a quantized --weights-format: against one step with the dense
  // bf16 values the blocks were quantised from in their place (the same windows of the pool).
  std::optional<double> quant_rel_l2_video, quant_rel_l2_audio;
  std::vector<OfficialValue> official;  // every matching section
  std::optional<size_t> official_choice;  // index into `official` shown in the table

  // ours / official and floor / ours (percent), when both sides exist.
  std::optional<double> ratio() const;
  std::optional<double> percent_of_floor() const;
};

struct BenchReport {
  BenchOptions options;
  std::string preset_description;
  std::string device_description;
  std::vector<BenchCase> cases;
  std::vector<std::string> official_files;  // each --official FILE attached
  std::vector<nlohmann::json> official_envs;  // their "env" objects
};

// The cases of `target` with their shapes and FLOPs (nothing runs; no device needed).
BenchReport plan(const BenchOptions& options, BenchTarget target);
// Builds each model once with random weights on the device and times its cases. Errors from the
// model (e.g. an op without a CUDA version yet) are rethrown naming the case and the device.
void run(BenchReport& report);

// Which official section the table shows: the fastest one that has the case ("best"), or the
// eager / torch.compile / compile + CUDA-graph run ("eager", "compiled", "capture").
enum class OfficialChoice { Best, Eager, Compiled, Capture };
OfficialChoice parse_official_choice(const std::string& text);
// Reads an official result (`--official FILE`, repeatable) and attaches the values whose shapes
// match each case; the file's kind decides which cases it fills (and clears):
//  - bench_official.py: {"env": ..., "sections": {"LTX-2.3 eager": {"stage1 768x512":
//    {"median_ms": ...}, ...}, "LTX-2.5 eager": ..., "VAE decode": {"median_ms": ...}, ...}}: the
//    transformer cases (121 frames, 1024 text tokens, audio on; the LTX-2.3 sections for preset
//    ltx23-22b, "LTX-2.5 eager" for ltx25-22b) and the conv VAE decode (1536x1024x121 tiled);
//  - bench_official_diffdec.py: {"env": ..., "mode": {"mode": "chunked_eager", ...},
//    "free_bytes": ..., "runs": [{"label", "latent", "n_tiles", "wall_s", "peak_allocated_GiB",
//    ...}], ...}: the diffusion decode of preset ltx25-22b with automatic tiling, from the runs of
//    its latent except the cold calibration run: the median and minimum wall time of the warm runs
//    (all but the first when there are several, the script's own rule) and the largest peak; a
//    warning when its tile count differs from ours (another free-memory budget).
// Throws naming the file when it is neither.
void attach_official(BenchReport& report, const std::string& path, OfficialChoice choice);
// Same from an already parsed document (`source` names it in errors).
void attach_official(BenchReport& report, const nlohmann::json& doc, const std::string& source,
                     OfficialChoice choice);

// The short table (ours, official, ratio, % of floor) and the full JSON document.
std::string format_table(const BenchReport& report);
nlohmann::ordered_json to_json(const BenchReport& report);

}  // namespace ltx::bench
