#include "generate/engine.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <utility>

#include "backend/device_query.h"
#include "core/error.h"
#include "core/log.h"
#include "core/out_of_memory.h"
#include "generate/memory_budget.h"
#include "generate/offload_plan.h"
#include "generate/model_provider.h"
#include "generate/placement.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae.h"
#include "pipelines/hdr_ic_lora.h"
#include "pipelines/pipeline.h"

namespace ltx::generate {

namespace {

using pipelines::PipelineKind;

std::string where_key(const nn::LoadOptions& where) {
  return str(where.device.str(), "/", dtype_name(where.dtype), "/",
             quantization::mode_name(where.quantization));
}

// A streamed model holds other device memory than a resident one: another cache entry.
std::string offload_key(const models::BlockStreaming& streaming) {
  if (!streaming.enabled()) return "";
  return str("|streamed, ", streaming.slots, " slots", streaming.from_file ? ", from file" : "",
             streaming.resident > 0 ? str(", ", streaming.resident, " resident") : "");
}

// The model flags a pipeline runs with, from the flags an engine was given (which may name the
// files of several pipelines): what the pipeline does not use is dropped, as `ltx generate`
// would reject it.
ModelFlags flags_for_pipeline(ModelFlags flags, PipelineKind kind) {
  if (kind != PipelineKind::Dfr) {
    flags.temporal_upsampler_path.clear();
    flags.detailing_lora.reset();
  }
  if (kind == PipelineKind::Distilled || kind == PipelineKind::HdrIcLora) {
    if (!flags.distilled_checkpoint_path.empty()) flags.checkpoint_path.clear();
    flags.distilled_lora.reset();
  } else {
    flags.distilled_checkpoint_path.clear();
  }
  if (kind == PipelineKind::OneStage) {
    flags.spatial_upsampler_path.clear();
    flags.distilled_lora.reset();
  }
  return flags;
}

// "LTX-2.3 (22B)" -> "ltx-2.3-22b"
std::string model_id_of(const std::string& version_name) {
  std::string id;
  for (const char c : version_name) {
    if (c == '(' || c == ')') continue;
    id += c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return id.empty() ? "ltx" : id;
}

}  // namespace

// The engine's ModelCache behind the ModelProvider seam: every model under a key of its
// component, file(s) and placement.
class Engine::ResidentProvider final : public ModelProvider {
 public:
  explicit ResidentProvider(Engine& engine) : e_(engine) {}

  std::shared_ptr<text::PromptEncoder> prompt_encoder(
      const ModelPaths& paths, const nn::LoadOptions& where,
      const models::BlockStreaming& streaming) override {
    std::string key = str("text encoder|", paths.text_encoder.path);
    for (const std::string& p : paths.embeddings_weight_paths) key += "|" + p;
    key += "|" + where_key(where) + offload_key(streaming);
    return e_.cache_->acquire<text::PromptEncoder>(
        "text encoder", key,
        [&] {
          // Streamed: unknown before the load (the layers' names depend on the file's layout);
          // the load measures the resident part and the slots.
          return streaming.enabled() ? int64_t{0}
                                     : stored_bytes(paths.text_encoder.path, {}, where.dtype);
        },
        [&] {
          text::PromptEncoderOptions options;
          options.load = where;
          options.keep_loaded = true;
          options.streaming = streaming;
          auto encoder = std::make_shared<text::PromptEncoder>(
              paths.text_encoder.path, paths.embeddings_weight_paths, options);
          // Both models now, so the cache measures them and a generation loads nothing.
          encoder->text_encoder();
          encoder->embeddings_processor();
          return encoder;
        });
  }

  std::shared_ptr<const models::duration_head::DurationHead> duration_head(
      const std::string& path, const nn::LoadOptions& where) override {
    // The answer "this file has none" is kept too, so it is not asked of the file again.
    struct Holder {
      std::optional<models::duration_head::DurationHead> head;
    };
    const auto holder = e_.cache_->acquire<const Holder>(
        "duration head", str("duration head|", path, "|", where_key(where)),
        [&] { return stored_bytes(path, {"duration_head."}, where.dtype); },
        [&] {
          return std::make_shared<const Holder>(
              Holder{models::duration_head::DurationHead::try_from_file(path, where)});
        });
    if (!holder->head) return nullptr;
    return {holder, &*holder->head};  // a lease of the holder
  }

  std::shared_ptr<const lora::LoraFile> lora_file(const std::string& path) override {
    const auto it = e_.lora_files_.find(path);
    LTX_CHECK(it != e_.lora_files_.end(), "engine: the LoRA file '", path,
              "' was not opened when the engine started");
    return it->second;
  }

  std::shared_ptr<StageTransformer> transformer(const ModelPaths& paths,
                                                const std::vector<lora::LoraSet>& stage_sets,
                                                const nn::LoadOptions& where,
                                                const models::BlockStreaming& streaming) override {
    // The fuser covers every LoRA file the engine opened, so any job's sets apply.
    for (const lora::LoraSet& set : stage_sets)
      for (const lora::WeightedLora& l : set)
        LTX_CHECK(lora_file(l.lora->path()) == l.lora, "engine: the LoRA '", l.lora->path(),
                  "' is not the one the resident transformer was prepared for");
    std::vector<lora::LoraSet> every;
    for (const auto& [path, file] : e_.lora_files_) every.push_back({{file, 1.0}});
    const nn::LoadOptions tw = transformer_placement(where, paths.quantization);
    return e_.cache_->acquire<StageTransformer>(
        // A streamed model holds only its resident part and its slots on the device (what the
        // cache measures), so it is another entry than the resident one.
        "transformer",
        str("transformer|", paths.transformer.path, "|", where_key(tw), offload_key(streaming)),
        [&] {
          // The text connectors share the prefix in a single-file checkpoint: a small overcount.
          const bool split = paths.layout == ModelPaths::Layout::Split;
          // Quantized Linears at their stored size (one byte an e4m3 weight).
          const int64_t all =
              split ? stored_bytes(paths.transformer.path, {}, where.dtype, tw.quantization)
                    : stored_bytes(paths.transformer.path, {"model.diffusion_model."}, where.dtype,
                                   tw.quantization);
          if (!streaming.enabled()) return all;
          // Streamed: the resident part (the slots are small next to it; the load measures them).
          const char* blocks =
              split ? "transformer_blocks." : "model.diffusion_model.transformer_blocks.";
          return all - stored_bytes(paths.transformer.path, {blocks}, where.dtype, tw.quantization);
        },
        [&] { return load_stage_transformer(paths.transformer.path, every, tw, streaming); });
  }

  std::shared_ptr<const models::video_vae::VideoEncoder> video_encoder(
      const std::string& path, const nn::LoadOptions& where) override {
    return e_.cache_->acquire<const models::video_vae::VideoEncoder>(
        "video encoder", str("video encoder|", path, "|", where_key(where)),
        [&] {
          return stored_bytes(path, {"vae.encoder.", "encoder."}, where.dtype);
        },
        [&] {
          return std::make_shared<const models::video_vae::VideoEncoder>(
              models::video_vae::VideoEncoder::from_file(path, where));
        });
  }

  std::shared_ptr<const models::upsampler::LatentUpsampler> latent_upsampler(
      const std::string& path, const nn::LoadOptions& where) override {
    return e_.cache_->acquire<const models::upsampler::LatentUpsampler>(
        "latent upsampler", str("latent upsampler|", path, "|", where_key(where)),
        [&] { return stored_bytes(path, {}, where.dtype); },
        [&] {
          return std::make_shared<const models::upsampler::LatentUpsampler>(
              models::upsampler::LatentUpsampler::from_file(path, where));
        });
  }

  DecodeModels decode_models(const ModelPaths& paths, const nn::LoadOptions& where, bool audio) {
    DecodeModels m;
    if (audio)
      m.audio = e_.cache_->acquire<const AudioDecodeModels>(
          "audio decoder", str("audio decoder|", paths.audio_vae.path, "|", where_key(where)),
          [&] {
            return stored_bytes(paths.audio_vae.path, {"audio_vae.decoder.", "vocoder."},
                                   where.dtype);
          },
          [&] { return load_audio_decode_models(paths.audio_vae.path, where); });
    m.video = e_.cache_->acquire<const VideoDecodeModel>(
        "video decoder", str("video decoder|", paths.video_vae.path, "|", where_key(where)),
        [&] {
          return stored_bytes(paths.video_vae.path, {"vae.decoder.", "decoder."}, where.dtype);
        },
        [&] { return load_video_decode_model(paths.video_vae.path, where); });
    return m;
  }

  DecodeResult decode(const Tensor& video_latent, const Tensor& audio_latent,
                      const ModelPaths& paths, MediaSink& sink, const DecodeOptions& options,
                      Progress* progress) override {
    const DecodeModels m = decode_models(paths, model_placement(options.device, options.dtype),
                                         audio_latent.defined());
    return decode_latents(video_latent, audio_latent, m, sink, options, progress);
  }

 private:
  Engine& e_;
};

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
  backend::check_device(options_.device, "--device");
  LTX_CHECK(!options_.dtype || *options_.dtype == DType::BF16 || *options_.dtype == DType::F32,
            "engine: dtype ", options_.dtype ? dtype_name(*options_.dtype) : "",
            " is not supported (bf16 or f32)");
  Progress quiet(nullptr, Progress::Mode::Off);
  const bool demo = options_.models.empty();
  std::optional<DemoBundle> bundle;
  if (demo) {
    bundle = ensure_demo_bundle(options_.demo_dir.empty() ? default_demo_dir() : options_.demo_dir);
    log_warn(
        "no model files given: serving the built-in DEMO bundle (tiny model with RANDOM "
        "weights, from ",
        bundle->dir, "); its videos are noise");
  }

  for (const std::string& name : pipelines::pipeline_names()) {
    const PipelineKind kind = pipelines::parse_pipeline_kind(name);
    if (kind == PipelineKind::HdrIcLora && !demo && options_.hdr_lora.empty()) {
      info_.unavailable[name] = str("the ", name, " pipeline needs its HDR IC-LoRA: start the engine with "
                                    "--hdr-lora PATH");
      continue;
    }
    GenerateOptions probe;
    probe.pipeline = name;
    probe.models = demo ? demo_model_flags(*bundle, name, kind == PipelineKind::Dfr)
                        : flags_for_pipeline(options_.models, kind);
    if (kind == PipelineKind::HdrIcLora) {
      // resolve_models adds the HDR IC-LoRA (the given one, else the demo's) to both stages.
      probe.models.loras.clear();
      probe.hdr_lora = demo && options_.hdr_lora.empty() ? bundle->hdr_lora : options_.hdr_lora;
    }
    probe.models.quantization = options_.models.quantization;
    ComponentNeeds needs = component_needs(probe);
    needs.temporal_upsampler = !probe.models.temporal_upsampler_path.empty();
    try {
      Resolved r;
      ComponentNeeds with_images = needs;
      with_images.video_encoder = true;
      try {
        r.models = resolve_models(probe, with_images, quiet);
      } catch (const Error&) {  // runs, but without images (no video encoder)
        r.models = resolve_models(probe, needs, quiet);
        r.images = false;
      }
      r.models.demo = demo;
      // The HDR IC-LoRA's metadata (its working space) before any job needs it.
      if (kind == PipelineKind::HdrIcLora)
        pipelines::hdr_ic_lora::read_hdr_lora_config(r.models.hdr_lora, "--hdr-lora");
      resolved_.emplace(name, std::move(r));
    } catch (const Error& e) {
      info_.unavailable[name] = e.what();
    }
  }
  if (resolved_.empty()) {
    std::string why;
    for (const auto& [name, reason] : info_.unavailable) why += str("\n  ", name, ": ", reason);
    fail("engine: no pipeline can run with the model files given:", why);
  }
  set_memory_budgets();

  // Every LoRA file a job may use, opened once: the resident transformer's fuser covers them all.
  std::vector<std::string> lora_paths;
  for (const auto& [name, path] : options_.lora_library) {
    LTX_CHECK(!name.empty() && !path.empty(), "LoRA library: the entry '", name, "=", path,
              "' needs a name and a file");
    try {
      if (!lora_files_.count(path)) lora_files_[path] = lora::LoraFile::open(path);
    } catch (const Error& e) {
      fail("LoRA library: the entry '", name, "': ", e.what());
    }
    info_.loras.push_back(name);
  }
  for (const auto& [name, r] : resolved_) {
    const ModelPaths& p = r.models.paths;
    for (const LoraSpec& l : p.loras) lora_paths.push_back(l.path);
    if (p.distilled_lora) lora_paths.push_back(p.distilled_lora->path);
    if (p.detailing_lora) lora_paths.push_back(p.detailing_lora->path);
  }
  for (const std::string& path : lora_paths)
    if (!lora_files_.count(path)) lora_files_[path] = lora::LoraFile::open(path);

  // What the pipelines do by default and accept.
  const ResolvedModels& first = resolved_.begin()->second.models;
  info_.demo = demo;
  info_.version_name =
      demo ? "built-in demo (tiny, LTX-2.3 layout, random weights)" : first.report.version_name;
  info_.model_id = demo ? "ltx-demo" : model_id_of(first.report.version_name);
  for (const auto& [name, r] : resolved_) {
    const PipelineKind kind = pipelines::parse_pipeline_kind(name);
    const pipelines::GenerationRequest req =
        pipelines::default_request(kind, r.models.report.model_version);
    PipelineInfo p;
    p.name = name;
    p.width = demo ? kDemoWidth : req.width;
    p.height = demo ? kDemoHeight : req.height;
    p.num_frames = demo ? kDemoNumFrames : req.num_frames;
    p.frame_rate = req.frame_rate;
    // The distilled schedules are fixed: distilled, and the pipelines that run it.
    p.steps_configurable = kind != PipelineKind::Distilled && kind != PipelineKind::Retake &&
                           kind != PipelineKind::IcLora && kind != PipelineKind::DubIt &&
                           kind != PipelineKind::HdrIcLora;
    p.num_inference_steps = p.steps_configurable ? req.num_inference_steps : 8;
    p.guidance = pipelines::uses_guidance(kind);
    p.size_multiple = pipelines::is_two_stage(kind) ? 64 : 32;
    p.max_width = demo ? 512 : 2048;
    p.max_height = demo ? 512 : 2048;
    p.max_num_frames = demo ? 49 : 257;
    p.images = r.images;
    if (kind == PipelineKind::A2Vid) {
      const std::string& vae = r.models.paths.audio_vae.path;
      const auto file = io::SafetensorsFile::open(vae);
      p.input_audio_channels =
          models::audio_vae::AudioVaeConfig::from_config(file->metadata_json("config"), vae).in_channels;
    }
    info_.pipelines.push_back(p);
  }
  info_.default_pipeline = resolved_.count("two-stage") ? "two-stage" : resolved_.begin()->first;
  log_info(
      "engine: ", info_.model_id, " on ", options_.device.str(), ", pipelines ",
      [&] {
        std::string s;
        for (const PipelineInfo& p : info_.pipelines) s += (s.empty() ? "" : ", ") + p.name;
        return s;
      }(),
      cache_->budget_bytes() > 0 ? str(", model memory budget ", gib_text(cache_->budget_bytes()))
                                 : std::string(", no model memory budget"),
      options_.max_gpu_memory_bytes > 0
          ? str(", --max-gpu-memory ", gib_text(options_.max_gpu_memory_bytes))
          : std::string());
}

void Engine::set_memory_budgets() {
  const Device device = options_.device;
  int64_t model_budget = options_.model_budget_bytes;
  LTX_CHECK(options_.max_gpu_memory_bytes == 0 || device.is_cuda(),
            "--max-gpu-memory budgets GPU memory; it does not apply to --device cpu (drop it, or "
            "add --device cuda)");
  if (device.is_cuda()) {
    const bool flag = options_.max_gpu_memory_bytes > 0;
    const int64_t gpu = flag ? options_.max_gpu_memory_bytes : backend::total_memory_bytes(device);
    // Up front, before anything loads: a pipeline whose largest model cannot fit never runs.
    const DType dtype = model_placement(device, options_.dtype).dtype;
    int64_t largest = 0;
    std::string first_failure;
    for (auto it = resolved_.begin(); it != resolved_.end();) {
      // With streaming the transformer and the text encoder are planned per job with its shape.
      std::vector<ComponentSize> sizes = component_sizes(it->second.models.paths, dtype);
      if (options_.offload != Offload::None) sizes = unplanned_components(sizes, device);
      try {
        check_budget_fits(sizes, gpu, flag ? "--max-gpu-memory" : str(device.str(), " memory"));
      } catch (const Error& e) {
        if (first_failure.empty()) first_failure = e.what();
        info_.unavailable[it->first] = e.what();
        log_warn("engine: pipeline ", it->first, " is unavailable: ", e.what());
        it = resolved_.erase(it);
        continue;
      }
      for (const ComponentSize& c : sizes) largest = std::max(largest, c.bytes);
      ++it;
    }
    if (resolved_.empty()) throw Error(first_failure);
    if (model_budget == 0) {
      // Room for the activations of the largest stage; the largest model always fits (alone).
      model_budget = std::max(default_model_budget(gpu), largest);
      log_info("engine: model memory budget ", gib_text(model_budget), " = ",
               flag ? "--max-gpu-memory " : str(device.str(), "'s "), gib_text(gpu), " less ",
               gib_text(activation_headroom(gpu)),
               " kept for activations (at least the largest model); --model-memory-budget sets "
               "another");
    } else {
      LTX_CHECK(model_budget <= gpu, options_.budget_option, " ", gib_text(model_budget),
                " is more than the GPU budget of ", gib_text(gpu),
                flag ? " (--max-gpu-memory)" : str(" (", device.str(), "'s memory)"),
                "; lower it or leave it out for the default");
    }
    if (flag) apply_gpu_budget(device, gpu);
  }
  cache_ = std::make_unique<ModelCache>(device, model_budget, options_.budget_option);
}

Engine::~Engine() = default;

const Engine::Resolved& Engine::resolved_for(const std::string& pipeline) const {
  const std::string name = pipelines::pipeline_name(pipelines::parse_pipeline_kind(pipeline));
  const auto it = resolved_.find(name);
  if (it == resolved_.end()) {
    const auto why = info_.unavailable.find(name);
    fail("pipeline ", name, " cannot run with the model files this engine serves",
         why != info_.unavailable.end() ? ": " + why->second : std::string());
  }
  return it->second;
}

Engine::Prepared Engine::prepare(const GenerateOptions& options) const {
  LTX_CHECK(options.models.empty(),
            "engine: a job cannot name model files; the engine serves the files it was started "
            "with");
  LTX_CHECK(options.models.quantization == quantization::Mode::None ||
                options.models.quantization == options_.models.quantization,
            "engine: a job cannot choose --quantization ",
            quantization::mode_name(options.models.quantization), "; the engine serves its models "
            "with --quantization ", quantization::mode_name(options_.models.quantization));
  LTX_CHECK(options.hdr_lora.empty(), "engine: a job cannot name --hdr-lora; the engine serves the HDR "
            "IC-LoRA it was started with");
  LTX_CHECK(options.library_loras.empty() ||
                pipelines::parse_pipeline_kind(options.pipeline) != PipelineKind::HdrIcLora,
            "LoRA '", options.library_loras.empty() ? "" : options.library_loras.front().name,
            "': the hdr-ic-lora pipeline runs with its HDR IC-LoRA alone");
  Prepared p{options, resolved_for(options.pipeline)};
  GenerateOptions& job = p.options;
  job.device = options_.device;
  job.dtype = options_.dtype;
  job.offload = options_.offload;
  job.max_gpu_memory_bytes = options_.max_gpu_memory_bytes;  // the budget the planner reads
  validate_options(job, /*to_file=*/false);
  Resolved& r = p.resolved;
  LTX_CHECK(job.images.empty() || r.images, "pipeline ", job.pipeline,
            ": conditioning images need the video VAE's encoder, which the model files lack");
  LTX_CHECK(
      job.temporal_upsample_rounds.value_or(0) == 0 || r.models.paths.temporal_upsampler.given(),
      "--temporal-upsample-rounds ", job.temporal_upsample_rounds.value_or(0),
      " needs the temporal x2 upsampler, which this engine was not given");
  for (const LibraryLora& l : job.library_loras) {
    const auto it = options_.lora_library.find(l.name);
    if (it == options_.lora_library.end()) {
      std::string names;
      for (const std::string& n : info_.loras) names += (names.empty() ? "" : ", ") + n;
      fail("LoRA '", l.name, "' is not in the LoRA library (",
           names.empty() ? std::string("the library is empty") : "it has " + names, ")");
    }
    LTX_CHECK(std::isfinite(l.strength), "LoRA '", l.name, "': strength ", l.strength,
              " must be a finite number");
    r.models.paths.loras.push_back({it->second, l.strength});
  }
  job.library_loras.clear();
  return p;
}

namespace {

// The model files a generation reads, its LoRA set with strengths and its placement: what, beside
// the request, must match for generations to share a run.
std::string models_key(const ModelPaths& p, Device device, std::optional<DType> dtype) {
  std::ostringstream k;
  k << std::setprecision(17) << "device=" << device.str()
    << ";dtype=" << (dtype ? dtype_name(*dtype) : "default") << ";transformer=" << p.transformer.path
    << ";text=" << p.text_encoder.path << ";video_vae=" << p.video_vae.path
    << ";audio_vae=" << p.audio_vae.path << ";upsampler=" << p.spatial_upsampler.path
    << ";temporal=" << p.temporal_upsampler.path << ";duration=" << p.duration_head.path
    << ";quantization=" << quantization::mode_name(p.quantization);
  for (const std::string& e : p.embeddings_weight_paths) k << ";embeddings=" << e;
  for (const LoraSpec& l : p.loras) k << ";lora=" << l.path << "@" << l.strength;
  if (p.distilled_lora) k << ";distilled=" << p.distilled_lora->path << "@" << p.distilled_lora->strength;
  if (p.detailing_lora) k << ";detailing=" << p.detailing_lora->path << "@" << p.detailing_lora->strength;
  return k.str();
}

}  // namespace

std::string Engine::batch_key(const GenerateOptions& options) const {
  const Prepared p = prepare(options);
  return generate::batch_key(p.options, p.resolved.models,
                             models_key(p.resolved.models.paths, options_.device, options_.dtype));
}

namespace {

// Forwards to a sink and notes whether any media reached it: a job can be run again only
// while its sink has seen nothing.
class SinkWatch final : public MediaSink {
 public:
  explicit SinkWatch(MediaSink& sink) : sink_(sink) {}
  void begin(const MediaFormat& format) override {
    used_ = true;
    sink_.begin(format);
  }
  void write_frames(const Tensor& frames) override {
    used_ = true;
    sink_.write_frames(frames);
  }
  void write_audio(const Tensor& waveform) override {
    used_ = true;
    sink_.write_audio(waveform);
  }
  void finish() override {
    used_ = true;
    sink_.finish();
  }
  bool used() const { return used_; }

 private:
  MediaSink& sink_;
  bool used_ = false;
};

// After a generation failed with `e`: true when no media reached any of `sinks` and the cache
// had unleased models to give back (now evicted), so one more run may fit.
bool may_retry_after_oom(const OutOfMemory& e, ModelCache& cache,
                         const std::vector<const SinkWatch*>& sinks) {
  for (const SinkWatch* s : sinks)
    if (s->used()) return false;
  if (cache.evict_unleased(str("to run the job again after: ", e.what())) == 0) return false;
  log_warn("engine: the job ran out of GPU memory with other models resident; running it once "
           "more with each model loaded only for its step");
  return true;
}

}  // namespace

// Times one generation for its GenerateResult: the time to its first denoising step (from
// `start`), each stage's wall time; forwards every event to the caller's listener.
struct Engine::Timing {
  std::chrono::steady_clock::time_point start;
  std::optional<double> first_step;
  std::vector<std::pair<std::string, double>> stage_seconds;

  void attach(Progress& progress, const JobControl& control) {
    progress.set_cancel_token(control.cancel);
    progress.set_deadline(control.deadline);
    progress.set_listener([this, listener = control.listener](const ProgressEvent& e) {
      // Steps before the decode are the denoising stages' (the text encoding reports none).
      if (e.kind == ProgressEvent::Kind::Step && e.done >= 1 && !first_step)
        first_step =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (e.kind == ProgressEvent::Kind::StageEnd)
        stage_seconds.emplace_back(e.stage, e.stage_seconds);
      if (listener) listener(e);
    });
  }
  void fill(GenerateResult& result, int64_t models_loaded) {
    result.time_to_first_step_s = first_step.value_or(0.0);
    result.models_loaded = models_loaded;
    result.stage_seconds = std::move(stage_seconds);
  }
};

void Engine::settle_after_failure() {
  // The models stay valid (a fuser's next apply sets its state); the device finishes the work
  // already queued before the next job starts.
  try {
    backend::synchronize(options_.device);
  } catch (const std::exception& e) {
    log_warn("engine: after a failed job the device reports: ", e.what());
  }
}

GenerateResult Engine::run(const GenerateOptions& options, const JobControl& control,
                           MediaSink& sink) {
  const Prepared p = prepare(options);
  Timing timing{std::chrono::steady_clock::now(), {}, {}};
  const int64_t loads_before = cache_->stats().loads;
  Progress progress(nullptr, Progress::Mode::Off);
  timing.attach(progress, control);
  ResidentProvider provider(*this);
  try {
    SinkWatch watch(sink);
    GenerateResult result = [&] {
      try {
        return generate_with(p.options, p.resolved.models, provider, progress, watch);
      } catch (const OutOfMemory& e) {
        if (!may_retry_after_oom(e, *cache_, {&watch})) throw;
        settle_after_failure();
        OneShotProvider one_shot;
        return generate_with(p.options, p.resolved.models, one_shot, progress, watch);
      }
    }();
    timing.fill(result, cache_->stats().loads - loads_before);
    log_info("engine: ", result.pipeline, " ", result.decoded.width, "x", result.decoded.height,
             ", ", result.decoded.frames, " frames: time to first step ",
             result.time_to_first_step_s, " s, ", result.models_loaded, " models loaded");
    return result;
  } catch (...) {
    settle_after_failure();
    throw;
  }
}

std::vector<BatchMemberResult> Engine::run_batch(std::span<const GenerateOptions> options,
                                                 std::span<const JobControl> controls,
                                                 std::span<MediaSink* const> sinks) {
  const size_t n = options.size();
  LTX_CHECK(n >= 1 && controls.size() == n && sinks.size() == n, "engine batch: ", n,
            " jobs need as many controls and sinks (got ", controls.size(), " and ", sinks.size(),
            ")");
  std::vector<Prepared> prepared;
  std::vector<GenerateOptions> jobs;
  std::string key;
  for (size_t i = 0; i < n; ++i) {
    prepared.push_back(prepare(options[i]));
    const Prepared& p = prepared.back();
    const std::string k = generate::batch_key(
        p.options, p.resolved.models,
        models_key(p.resolved.models.paths, options_.device, options_.dtype));
    LTX_CHECK(!k.empty(), "engine batch: job ", i, " (pipeline ", p.options.pipeline,
              ") runs alone: its pipeline does not batch, or its frame count or prompt is known "
              "only when it runs (auto duration, prompt enhancement); run it with run()");
    if (i == 0) key = k;
    LTX_CHECK(k == key, "engine batch: job ", i, " cannot share a run with job 0 (batch keys ",
              "differ: ", k, " vs ", key, "); run them apart");
    jobs.push_back(p.options);
  }

  const auto start = std::chrono::steady_clock::now();
  const int64_t loads_before = cache_->stats().loads;
  std::vector<Timing> timings(n, Timing{start, {}, {}});
  std::vector<std::unique_ptr<Progress>> progress;
  std::vector<Progress*> progress_ptrs;
  for (size_t i = 0; i < n; ++i) {
    progress.push_back(std::make_unique<Progress>(nullptr, Progress::Mode::Off));
    timings[i].attach(*progress.back(), controls[i]);
    progress_ptrs.push_back(progress.back().get());
  }
  ResidentProvider provider(*this);
  std::vector<BatchMemberResult> results;
  try {
    std::vector<std::unique_ptr<SinkWatch>> watches;
    std::vector<MediaSink*> watched;
    std::vector<const SinkWatch*> watch_ptrs;
    for (MediaSink* s : sinks) {
      watches.push_back(std::make_unique<SinkWatch>(*s));
      watched.push_back(watches.back().get());
      watch_ptrs.push_back(watches.back().get());
    }
    try {
      results = generate_batch_with(jobs, prepared.front().resolved.models, provider,
                                    progress_ptrs, watched);
    } catch (const OutOfMemory& e) {
      if (!may_retry_after_oom(e, *cache_, watch_ptrs)) throw;
      settle_after_failure();
      OneShotProvider one_shot;
      results = generate_batch_with(jobs, prepared.front().resolved.models, one_shot,
                                    progress_ptrs, watched);
    }
  } catch (...) {
    settle_after_failure();
    throw;
  }
  const int64_t loads = cache_->stats().loads - loads_before;
  bool failed = false;
  for (size_t i = 0; i < n; ++i) {
    if (results[i].error) {
      failed = true;
      continue;
    }
    timings[i].fill(results[i].result, loads);
  }
  if (failed) settle_after_failure();
  log_info("engine: batch of ", n, " ", jobs.front().pipeline, " jobs, time to first step ",
           timings.front().first_step.value_or(0.0), " s, ", loads, " models loaded");
  return results;
}

void Engine::preload(const std::string& pipeline) {
  const Resolved& r = resolved_for(pipeline);
  const PipelineKind kind = pipelines::parse_pipeline_kind(pipeline);
  const nn::LoadOptions where = model_placement(options_.device, options_.dtype);
  const ModelPaths& p = r.models.paths;
  // Streamed as a job of the pipeline's default size is planned (plan_run_streaming), so that
  // such a job finds these entries.
  GenerateOptions sized;
  sized.pipeline = pipeline;
  sized.device = options_.device;
  sized.dtype = options_.dtype;
  sized.offload = options_.offload;
  sized.max_gpu_memory_bytes = options_.max_gpu_memory_bytes;
  const StreamingPlan plan = plan_run_streaming(sized, r.models);
  ResidentProvider provider(*this);
  provider.prompt_encoder(p, where, plan.text_encoder);
  if (p.duration_head.given()) provider.duration_head(p.duration_head.path, where);
  provider.transformer(p, {}, where, plan.transformer);
  if (pipelines::is_two_stage(kind)) provider.video_encoder(p.video_vae.path, where);
  if (pipelines::is_two_stage(kind)) provider.latent_upsampler(p.spatial_upsampler.path, where);
  if (p.temporal_upsampler.given()) provider.latent_upsampler(p.temporal_upsampler.path, where);
  provider.decode_models(p, where, /*audio=*/true);
}

}  // namespace ltx::generate
