#include "server/engine_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "backend/device_query.h"
#include "core/cancel.h"
#include "core/error.h"
#include "core/input_limits.h"
#include "core/log.h"
#include "core/out_of_memory.h"
#include "generate/decode.h"
#include "media/support.h"
#include "generate/hdr_output.h"
#include "pipelines/hdr_ic_lora.h"
#include "pipelines/pipeline.h"
#include "server/tar_archive.h"
#include "server/thumbnail_sink.h"
#include "server/upload_media.h"
#include "server/video_request.h"

namespace ltx::server {

namespace {

using nlohmann::json;

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string output_format_of(const Job& job) {
  return video_request_from_json(json::parse(job.request_json)).output_format;
}

generate::GenerateOptions options_of(const Job& job, const DataDir& dir) {
  const VideoRequest request = video_request_from_json(json::parse(job.request_json));
  std::vector<std::string> files;
  for (const JobInput& in : job.inputs) files.push_back(dir.input_path(job.id, in.file));
  generate::GenerateOptions o = to_generate_options(request, files);
  o.audio = request.generate_audio;
  for (const RequestLora& l : request.loras) o.library_loras.push_back({l.name, l.strength});
  return o;
}

// An hdr job's EXR frame folders are stored as the tars they were uploaded as: each is unpacked
// into a scratch folder (held by the returned list for the run), whose path replaces the tar's.
std::vector<std::shared_ptr<const ScratchFolder>> unpack_frame_archives(
    generate::GenerateOptions& o) {
  std::vector<std::shared_ptr<const ScratchFolder>> held;
  const auto unpack = [&](std::string& path) {
    if (!path.ends_with(".tar")) return;
    const std::string bytes =
        limits::read_file_within(path, std::numeric_limits<int64_t>::max(), "job input");
    auto folder = std::make_shared<const ScratchFolder>();
    unpack_exr_tar(bytes, folder->path(), std::numeric_limits<int64_t>::max(),
                   std::numeric_limits<int64_t>::max());
    path = folder->path();
    held.push_back(std::move(folder));
  };
  unpack(o.video_path);
  for (generate::VideoConditioningFlag& v : o.video_conditionings) unpack(v.path);
  return held;
}

const generate::PipelineInfo* pipeline_info(const generate::EngineInfo& info,
                                            const std::string& name) {
  for (const auto& p : info.pipelines)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace

ServedModel served_model(const generate::EngineInfo& info, RequestLimits limits) {
  ServedModel m;
  m.id = info.model_id;
  m.demo = info.demo;
  m.default_pipeline = info.default_pipeline;
  m.loras = info.loras;
  int64_t max_w = 0, max_h = 0, max_f = 0;
  for (const generate::PipelineInfo& p : info.pipelines) {
    m.pipelines.push_back(p.name);
    PipelineDefaults d;
    d.width = p.width;
    d.height = p.height;
    d.num_frames = p.num_frames;
    d.fps = p.frame_rate;
    if (p.steps_configurable) d.steps = p.num_inference_steps;
    d.input_audio_channels = p.input_audio_channels;
    m.defaults[p.name] = d;
    max_w = std::max(max_w, p.max_width);
    max_h = std::max(max_h, p.max_height);
    max_f = std::max(max_f, p.max_num_frames);
  }
  if (max_w > 0) limits.max_width = std::min(limits.max_width, max_w);
  if (max_h > 0) limits.max_height = std::min(limits.max_height, max_h);
  if (max_f > 0) limits.max_frames = std::min(limits.max_frames, max_f);
  m.limits = limits;
  return m;
}

namespace {

// hdr-ic-lora: stage 1 (the distilled 8 steps at half the clip's 64-aligned size), the upsample,
// then stage 2 as one refinement of 2 steps per latent tile, named as the pipeline reports them.
ProgressPlan hdr_progress_plan(const VideoRequest& request, const generate::GenerateOptions& o,
                               int64_t frames, double load_share) {
  namespace hdr = pipelines::hdr_ic_lora;
  int64_t w = 64, h = 64;
  for (const RequestMedia& m : request.media)
    if (m.field == "video_conditioning") w = m.header.width, h = m.header.height;
  const hdr::HdrResolution size = hdr::align_resolution(std::max<int64_t>(h, 1), std::max<int64_t>(w, 1));
  const int64_t latent_frames = (hdr::generated_frames(frames, o.high_quality) - 1) / 8 + 1;
  const int64_t tokens = (size.gen_width / 32) * (size.gen_height / 32) * latent_frames;
  const auto tiles = hdr::stage2_tiles(latent_frames, size.gen_height / 32, size.gen_width / 32,
                                       hdr::default_stage2_tiling());
  StandardPlan plan;
  plan.load_share = load_share;
  plan.audio = false;
  plan.upsample = true;
  plan.denoising.push_back({"stage 1", 8, std::max<int64_t>(1, tokens / 4)});
  const auto n = static_cast<int64_t>(tiles.size());
  for (int64_t t = 0; t < n; ++t)
    plan.denoising.push_back({str("stage 2 tile ", t + 1, "/", n), 2, std::max<int64_t>(1, tokens / n)});
  return standard_progress_plan(plan);
}

}  // namespace

ProgressPlan EngineRunner::progress_plan(const Job& job) {
  const generate::GenerateOptions o = options_of(job, dir_);
  const generate::PipelineInfo* p = pipeline_info(engine_.info(), o.pipeline);
  const int64_t w = o.width.value_or(p ? p->width : 512);
  const int64_t h = o.height.value_or(p ? p->height : 512);
  const int64_t f = o.num_frames.value_or(p ? p->num_frames : 121);
  // Latent tokens at full resolution (32x spatial, 8x temporal compression); only ratios matter.
  const int64_t tokens = std::max<int64_t>(1, (w / 32) * (h / 32) * ((f - 1) / 8 + 1));
  const int64_t steps1 = o.num_inference_steps.value_or(p ? p->num_inference_steps : 30);
  StandardPlan plan;
  // Once any model is resident, what is left per job is the light part (LoRA switches, small
  // components); before the first job everything is read from disk.
  plan.load_share = engine_.cache_stats().entries > 0 ? 0.2 : 1.0;
  if (pipelines::parse_pipeline_kind(o.pipeline) == pipelines::PipelineKind::HdrIcLora)
    return hdr_progress_plan(video_request_from_json(json::parse(job.request_json)), o, f,
                             plan.load_share);
  plan.audio = o.audio;
  // A two-stage pipeline's first stage runs at half width and height; its second stage is the
  // distilled refinement's three steps.
  plan.upsample = pipelines::is_two_stage(pipelines::parse_pipeline_kind(o.pipeline)) &&
                  !o.skip_stage_2;
  const int64_t tokens1 = plan.upsample ? std::max<int64_t>(1, tokens / 4) : tokens;
  plan.denoising.push_back({"stage 1", std::max<int64_t>(1, steps1), tokens1});
  if (plan.upsample) plan.denoising.push_back({"stage 2", 3, tokens});
  return standard_progress_plan(plan);
}

generate::JobControl EngineRunner::control_of(const RunItem& item,
                                              std::chrono::steady_clock::time_point t0,
                                              bool time_steps) {
  using Kind = generate::ProgressEvent::Kind;
  generate::JobControl control;
  control.cancel = item.cancel;
  if (item.deadline != std::chrono::steady_clock::time_point::max())
    control.deadline = Deadline{item.deadline,
                                std::chrono::duration<double>(item.deadline - t0).count()};
  // The denoising steps' wall times feed ltx_step_duration_seconds{stage} (once per run: the
  // members of a batch hear the same steps).
  Metrics* metrics = time_steps ? metrics_ : nullptr;
  auto last = std::make_shared<std::optional<std::chrono::steady_clock::time_point>>();
  control.listener = [progress = item.progress, metrics, last](const generate::ProgressEvent& e) {
    if (metrics != nullptr && (e.stage == "stage 1" || e.stage == "stage 2")) {
      const auto now = std::chrono::steady_clock::now();
      if (e.kind == Kind::Step && e.done >= 1 && *last)
        metrics->observe("ltx_step_duration_seconds",
                         std::chrono::duration<double>(now - **last).count(), {{"stage", e.stage}});
      *last = e.kind == Kind::StageEnd ? std::nullopt : std::optional(now);
    }
    if (e.kind == Kind::StageEnd || !progress) return;
    progress({e.stage, e.kind == Kind::Step ? e.done : 0, e.total});
  };
  return control;
}

std::vector<RunOutcome> EngineRunner::run(const std::vector<RunItem>& items) {
  if (items.size() > 1) {
    if (auto options = batchable(items)) return run_batch(items, *options);
  }
  std::vector<RunOutcome> out;
  for (const RunItem& item : items) {
    if (metrics_ != nullptr) metrics_->observe("ltx_batch_size", 1);
    out.push_back(run_one(item));
  }
  return out;
}

std::optional<std::vector<generate::GenerateOptions>> EngineRunner::batchable(
    const std::vector<RunItem>& items) const {
  // The scheduler groups by the request's batch key, which is at least as strict as the engine's
  // (video_request.cpp); the engine's is checked too, so that a disagreement costs a batch, never
  // a result. A job whose options the engine rejects fails alone in run_one.
  std::vector<generate::GenerateOptions> options;
  std::string key;
  try {
    for (const RunItem& item : items) {
      if (output_format_of(*item.job) != "mp4") return std::nullopt;  // the batch writes MP4s
      options.push_back(options_of(*item.job, dir_));
      const std::string k = engine_.batch_key(options.back());
      if (k.empty() || (!key.empty() && k != key)) {
        log_info("jobs ", item.job->id, " and ", items.front().job->id,
                 " cannot share a denoising run; they run one after another");
        return std::nullopt;
      }
      key = k;
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  return options;
}

namespace {

// What a job is told for the exception that ended it.
RunOutcome outcome_of(std::exception_ptr error) {
  RunOutcome outcome;
  try {
    std::rethrow_exception(error);
  } catch (const Cancelled&) {
    outcome.status = RunStatus::Cancelled;
  } catch (const OutOfMemory& e) {
    outcome.status = RunStatus::Failed;
    outcome.error = {"out_of_memory", e.what()};
  } catch (const Error& e) {
    outcome.status = RunStatus::Failed;
    // The engine speaks in `ltx generate`'s flags; the client sent fields.
    outcome.error = {"generation_error", flags_as_fields(e.what())};
  }
  return outcome;
}

}  // namespace

std::vector<RunOutcome> EngineRunner::run_batch(
    const std::vector<RunItem>& items, const std::vector<generate::GenerateOptions>& options) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  backend::reset_peak_memory(device_);
  std::vector<generate::JobControl> controls;
  std::vector<std::string> outputs;
  std::vector<std::unique_ptr<generate::Mp4Sink>> sinks;
  std::vector<std::unique_ptr<ThumbnailSink>> thumbnails;
  std::vector<generate::MediaSink*> sink_ptrs;
  media::Mp4Options mp4;
  mp4.faststart = true;  // a browser plays it while it downloads
  for (const RunItem& item : items) {
    controls.push_back(control_of(item, t0, controls.empty()));
    outputs.push_back(dir_.output_path(item.job->id));
    sinks.push_back(std::make_unique<generate::Mp4Sink>(outputs.back(), mp4));
    sink_ptrs.push_back(sinks.back().get());
    if (media::image_io_available()) {
      thumbnails.push_back(
          std::make_unique<ThumbnailSink>(*sinks.back(), dir_.thumbnail_path(item.job->id)));
      sink_ptrs.back() = thumbnails.back().get();
    }
  }
  std::vector<RunOutcome> out(items.size());
  std::vector<generate::BatchMemberResult> results;
  try {
    results = engine_.run_batch(options, controls, sink_ptrs);
  } catch (const Error&) {
    for (size_t i = 0; i < items.size(); ++i) {
      out[i] = outcome_of(std::current_exception());
      dir_.remove_job_outputs(items[i].job->id);
    }
    return out;
  }
  thumbnails.clear();
  sinks.clear();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double peak_mb =
      static_cast<double>(backend::memory_stats(device_).peak_bytes) / (1024.0 * 1024.0);
  std::string ids;
  for (size_t i = 0; i < items.size(); ++i) {
    ids += (i ? ", " : "") + items[i].job->id;
    if (results[i].error) {
      out[i] = outcome_of(results[i].error);
      dir_.remove_job_outputs(items[i].job->id);
      continue;
    }
    out[i] = completed(*items[i].job, results[i].result, outputs[i], seconds, peak_mb,
                       static_cast<int64_t>(items.size()));
  }
  log_info("batch of ", items.size(), " jobs: ids ", ids, ", ", fixed(seconds, 2), " s");
  if (metrics_ != nullptr) metrics_->observe("ltx_batch_size", static_cast<double>(items.size()));
  return out;
}

RunOutcome EngineRunner::completed(const Job& job, const generate::GenerateResult& result,
                                   const std::string& output, double seconds, double peak_mb,
                                   int64_t batch_size) {
  double text_seconds = 0;
  json stages = json::array();
  for (const auto& [stage, s] : result.stage_seconds) {
    stages.push_back({{"stage", stage}, {"seconds", s}});
    if (stage == "text encoding") text_seconds += s;
  }
  const double queue_s =
      job.started_at ? *job.started_at - static_cast<double>(job.created_at) : 0.0;
  log_info("job ", job.id, " ttfs ", fixed(result.time_to_first_step_s, 2), " s (queue ",
           fixed(queue_s, 1), " s, text ", fixed(text_seconds, 2), " s, loads ",
           result.models_loaded, "), done in ", fixed(seconds, 2), " s",
           batch_size > 1 ? str(" (batch of ", batch_size, ")") : std::string());
  RunOutcome outcome;
  outcome.status = RunStatus::Completed;
  outcome.output_file = output;
  json metrics{{"inference_time_s", seconds},
               {"time_to_first_step_s", result.time_to_first_step_s},
               {"peak_memory_mb", peak_mb},
               {"models_loaded", result.models_loaded},
               {"device", device_.str()},
               {"stages", stages}};
  if (batch_size > 1) metrics["batch_size"] = batch_size;
  outcome.metrics_json = metrics.dump();
  return outcome;
}

generate::GenerateResult EngineRunner::run_with_thumbnail(const Job& job,
                                                          const generate::GenerateOptions& o,
                                                          const generate::JobControl& control,
                                                          generate::MediaSink& sink,
                                                          ThumbnailFrames frames) {
  if (!media::image_io_available()) return engine_.run(o, control, sink);
  ThumbnailSink with_thumbnail(sink, dir_.thumbnail_path(job.id), frames);
  return engine_.run(o, control, with_thumbnail);
}

generate::GenerateResult EngineRunner::run_into_parts(const Job& job,
                                                      const generate::GenerateOptions& o,
                                                      const generate::JobControl& control,
                                                      const std::string& output, bool archive,
                                                      ThumbnailFrames frames,
                                                      const PartsSinkMaker& make_sink) {
  const std::string parts = dir_.parts_path(job.id);
  std::error_code ec;
  std::filesystem::remove_all(parts, ec);  // a leftover of an interrupted run
  std::filesystem::create_directories(parts);
  generate::GenerateResult result;
  try {
    {
      const std::unique_ptr<generate::MediaSink> files = make_sink(parts);
      result = run_with_thumbnail(job, o, control, *files, frames);
    }
    if (archive) write_tar(parts, output);
  } catch (...) {
    std::filesystem::remove_all(parts, ec);
    throw;
  }
  std::filesystem::remove_all(parts, ec);
  return result;
}

generate::GenerateResult EngineRunner::run_hdr(const Job& job, const generate::GenerateOptions& o,
                                               const generate::JobControl& control,
                                               const std::string& output) {
  // The files as `ltx generate --pipeline hdr-ic-lora` writes them for a clip named after the job
  // (<id>_exr/frame_00000.exr ..., <id>.mp4), archived whole.
  return run_into_parts(job, o, control, output, /*archive=*/true, ThumbnailFrames::SceneLinear,
                        [&](const std::string& parts) -> std::unique_ptr<generate::MediaSink> {
                          return std::make_unique<generate::ExrOutputSink>(
                              generate::hdr_output_paths(parts, job.id + ".mp4"), o.skip_mp4);
                        });
}

generate::GenerateResult EngineRunner::run_hdr_master(const Job& job,
                                                      const generate::GenerateOptions& o,
                                                      const generate::JobControl& control,
                                                      const std::string& output, bool archive) {
  // The files as `ltx generate --hdr` writes them for a clip named after the job (<id>.mp4, the
  // HLG master, and <id>_exr/frame_00000.exr ...), archived whole; or the master alone at the
  // output (its EXR frames, which the sink writes in the same pass, dropped).
  return run_into_parts(job, o, control, output, archive, ThumbnailFrames::AcesCct,
                        [&](const std::string& parts) -> std::unique_ptr<generate::MediaSink> {
                          generate::HdrMasterPaths paths = generate::hdr_master_paths(
                              (std::filesystem::path(parts) / (job.id + ".mp4")).string());
                          if (!archive) paths.mp4 = output;
                          return std::make_unique<generate::HdrMasterSink>(paths, *o.hdr);
                        });
}

RunOutcome EngineRunner::run_one(const RunItem& item) {
  using Clock = std::chrono::steady_clock;
  const Job& job = *item.job;
  const auto t0 = Clock::now();
  backend::reset_peak_memory(device_);
  const generate::JobControl control = control_of(item, t0);

  std::string output;
  generate::GenerateResult result;
  try {
    generate::GenerateOptions o = options_of(job, dir_);
    const auto frame_folders = unpack_frame_archives(o);
    const std::string format = output_format_of(job);
    output = dir_.output_path(job.id, format == "exr" ? "tar" : format);
    media::Mp4Options mp4;
    mp4.faststart = true;  // a browser plays it while it downloads
    generate::Mp4Sink sink(output, mp4);  // opens nothing until a video begins
    if (format == "wav") {
      generate::WavSink wav(output);
      result = engine_.run(o, control, wav);
    } else if (o.hdr) {
      result = run_hdr_master(job, o, control, output, /*archive=*/format == "exr");
    } else if (format == "exr") {
      result = run_hdr(job, o, control, output);
    } else if (format == "png") {
      // One frame (the request checked it): the file itself, which is its own thumbnail.
      generate::PngSink png(output, output + ".frames");
      result = engine_.run(o, control, png);
    } else {
      result = run_with_thumbnail(job, o, control, sink, ThumbnailFrames::Display);
    }
  } catch (const Error&) {
    dir_.remove_job_outputs(job.id);
    return outcome_of(std::current_exception());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return completed(job, result, output, seconds,
                   static_cast<double>(backend::memory_stats(device_).peak_bytes) /
                       (1024.0 * 1024.0),
                   1);
}

}  // namespace ltx::server
