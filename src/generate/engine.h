#pragma once
// A resident generation engine: the model files are resolved and checked once, the models stay
// loaded between generations in a ModelCache (within a memory budget, least recently used first
// out), and every generation runs the same steps as `ltx generate` (generate_with) with the same
// results bit for bit.
//
//   generate::EngineOptions eo;                  // no model file: the built-in demo bundle
//   eo.lora_library = {{"style", "/loras/style.safetensors"}};
//   generate::Engine engine(eo);
//   generate::GenerateOptions job;  job.pipeline = "one-stage";  job.prompt = "...";
//   job.library_loras = {{"style", 0.8}};
//   generate::MemorySink sink;
//   engine.run(job, {&token, Deadline::after(600), listener}, sink);
//
// LoRAs: the resident transformer's fuser covers every LoRA a generation may ask for (the
// library, the model flags' LoRAs, the distilled and detailing LoRAs), so any set applies without
// a reload; each stage applies its own set, so every generation gets exact weights and the next
// one the base weights back, bit for bit.
//
// Memory: a job that fails with ltx::OutOfMemory before any media reached its sink, while the
// cache held models no job leases, is run once more after they are evicted, with each model
// loaded for its step and freed after it (the `ltx generate` order, the smallest peak); a second
// failure fails the job.
//
// Threads: run() and run_batch() are for one thread at a time (a server runs one worker per device); info() and
// cache_stats() may be called from any thread.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/cancel.h"
#include "core/device.h"
#include "generate/generate.h"
#include "generate/model_cache.h"
#include "generate/progress.h"

namespace ltx::generate {

struct EngineOptions {
  Device device = Device::cpu();
  std::optional<DType> dtype;      // as GenerateOptions::dtype
  Offload offload = Offload::None;  // as GenerateOptions::offload
  ModelFlags models;               // the model flags of `ltx generate`; none: the demo bundle
  std::string demo_dir;            // where the demo bundle lives (empty: default_demo_dir())
  // Resident models at most this large; 0: on CUDA the default of generate/memory_budget.h (the
  // GPU budget minus an activation headroom, at least the largest model), on the CPU no limit.
  int64_t model_budget_bytes = 0;
  // --max-gpu-memory: the device allocator's limit (0: none; CUDA only). Pipelines whose largest
  // model cannot fit it are unavailable; when none can run, the constructor throws.
  int64_t max_gpu_memory_bytes = 0;
  std::string budget_option = "--model-memory-budget";  // how the budget is set, for messages
  std::map<std::string, std::string> lora_library;      // name -> LoRA file
  // hdr-ic-lora's HDR IC-LoRA (`ltx serve --hdr-lora`); empty: the demo bundle's with the demo,
  // and no hdr-ic-lora with model files.
  std::string hdr_lora;
};

// What a pipeline does by default and what it accepts, with the engine's files.
struct PipelineInfo {
  std::string name;  // "one-stage", ...
  int64_t width = 0, height = 0, num_frames = 0;
  double frame_rate = 0.0;
  int64_t num_inference_steps = 0;  // the distilled pipeline: its fixed stage-1 schedule
  bool steps_configurable = true;   // false for the fixed distilled schedules (distilled, retake, ic-lora, dubit)
  int64_t size_multiple = 32;       // width and height are multiples of it (64: two-stage)
  int64_t frame_multiple = 8;       // num_frames = k * frame_multiple + 1
  int64_t max_width = 0, max_height = 0, max_num_frames = 0;
  bool images = true;    // can take conditioning images (the video encoder is present)
  bool guidance = true;  // takes the guidance flags (not distilled)
  // a2vid: the channel count its audio VAE encoder takes (the soundtrack must have it); 0 elsewhere.
  int64_t input_audio_channels = 0;
};

struct EngineInfo {
  std::string model_id;      // "ltx-demo" for the demo bundle, else e.g. "ltx-2.3-22b"
  std::string version_name;  // "LTX-2.3 (22B)", or the demo's description
  bool demo = false;
  std::string default_pipeline;
  std::vector<PipelineInfo> pipelines;             // those that can run with the files given
  std::map<std::string, std::string> unavailable;  // pipeline -> why not
  std::vector<std::string> loras;                  // the library's names
};

// How the caller steers one run: stop on request, stop at a deadline, hear progress (stage
// changes, steps, decoded chunks; StageEnd carries each stage's time).
struct JobControl {
  const CancelToken* cancel = nullptr;
  std::optional<Deadline> deadline;
  ProgressListener listener;
};

class Engine {
 public:
  // Resolves the model files (or writes / finds the demo bundle), checks them per pipeline and
  // opens the LoRA files; loads no model. Throws when no pipeline can run or a library LoRA is
  // unreadable.
  explicit Engine(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineInfo& info() const { return info_; }

  // One generation with the engine's models. `options` names no model file (the engine's are
  // used) and no device / dtype (the engine's); LoRAs come by library name
  // (options.library_loras). Throws ltx::Error for bad options (naming them), Cancelled /
  // DeadlineExceeded when stopped; the cache stays valid after any of them.
  GenerateResult run(const GenerateOptions& options, const JobControl& control, MediaSink& sink);

  // What must match for jobs to share run_batch (generate::batch_key with the engine's model
  // files, the job's LoRA set and strengths, the device and dtype), or "" when the job runs
  // alone (a pipeline that does not batch, auto duration, prompt enhancement). Throws as run()
  // does for bad options.
  std::string batch_key(const GenerateOptions& options) const;

  // Several jobs of one batch_key in one denoising run (generate_batch_with): each its own prompt,
  // seed, guidance, images and sink; on the CPU each job's media are bit for bit those run() gives
  // it alone, on a GPU close to them. controls[i] steers job i; a job stopped during the
  // denoising keeps its place in the run and its result is dropped (it reports Cancelled /
  // DeadlineExceeded); the run stops early only when every job was stopped. Errors in one job's
  // text encoding, images or decode fail that job only. Throws ltx::Error before any work when a
  // job's options are bad or the jobs cannot share a run (empty or different batch keys: run
  // them with run()); throws what the shared denoising throws.
  std::vector<BatchMemberResult> run_batch(std::span<const GenerateOptions> options,
                                           std::span<const JobControl> controls,
                                           std::span<MediaSink* const> sinks);

  // Loads the models of `pipeline` (the text encoder, transformer, encoder, upsamplers and
  // decoders) ahead of the first run (a server's readiness).
  void preload(const std::string& pipeline);

  ModelCache::Stats cache_stats() const { return cache_->stats(); }
  ModelCache& cache() { return *cache_; }

 private:
  class ResidentProvider;
  struct Timing;
  struct Resolved {
    ResolvedModels models;
    bool images = true;
  };
  // A job's options checked and completed with the engine's device, dtype and files (its
  // library LoRAs among them).
  struct Prepared {
    GenerateOptions options;
    Resolved resolved;
  };
  Prepared prepare(const GenerateOptions& options) const;
  void set_memory_budgets();
  void settle_after_failure();
  EngineOptions options_;
  EngineInfo info_;
  std::map<std::string, Resolved> resolved_;                                 // by pipeline name
  std::map<std::string, std::shared_ptr<const lora::LoraFile>> lora_files_;  // by path
  std::unique_ptr<ModelCache> cache_;

  const Resolved& resolved_for(const std::string& pipeline) const;
};

}  // namespace ltx::generate
