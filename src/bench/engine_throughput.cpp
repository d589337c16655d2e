#include "bench/engine_throughput.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "backend/device_query.h"
#include "core/error.h"
#include "core/log.h"
#include "generate/engine.h"

namespace ltx::bench {

namespace {

using Clock = std::chrono::steady_clock;

generate::GenerateOptions job_options(const EngineThroughputOptions& o, int64_t i) {
  generate::GenerateOptions g;
  g.pipeline = o.pipeline;
  g.prompt = "job " + std::to_string(i) + ": a red fox runs through fresh snow at dawn";
  g.seed = 1000 + i;
  g.width = o.width;
  g.height = o.height;
  g.num_frames = o.frames;
  if (o.steps > 0) g.num_inference_steps = o.steps;
  return g;
}

// The jobs [first, first + count) as one call: run() for one, run_batch() for more.
void run_jobs(generate::Engine& engine, const EngineThroughputOptions& o, int64_t first,
              int64_t count) {
  std::vector<generate::GenerateOptions> options;
  std::vector<std::unique_ptr<generate::MemorySink>> sinks;
  std::vector<generate::MediaSink*> sink_ptrs;
  for (int64_t i = 0; i < count; ++i) {
    options.push_back(job_options(o, first + i));
    sinks.push_back(std::make_unique<generate::MemorySink>());
    sink_ptrs.push_back(sinks.back().get());
  }
  if (count == 1) {
    engine.run(options[0], {}, *sinks[0]);
    return;
  }
  const std::vector<generate::JobControl> controls(static_cast<size_t>(count));
  const auto results = engine.run_batch(options, controls, sink_ptrs);
  for (const auto& r : results)
    if (r.error) std::rethrow_exception(r.error);
}

}  // namespace

std::vector<EngineThroughputRow> run_engine_throughput(
    const EngineThroughputOptions& o, const std::function<void(const EngineThroughputRow&)>& on_row) {
  LTX_CHECK(o.jobs >= 1, "--jobs ", o.jobs, " must be at least 1");
  LTX_CHECK(!o.batches.empty(), "--batch: give at least one batch size");
  for (const int64_t b : o.batches)
    LTX_CHECK(b >= 1 && o.jobs % b == 0, "--batch ", b, ": must divide --jobs ", o.jobs,
              " (every batch full, so that the sizes compare)");
  generate::EngineOptions eo;
  eo.device = o.device;
  eo.demo_dir = o.demo_dir;
  eo.max_gpu_memory_bytes = o.max_gpu_memory_bytes;
  generate::Engine engine(eo);
  const std::string key = engine.batch_key(job_options(o, 0));
  for (const int64_t b : o.batches)
    LTX_CHECK(b == 1 || !key.empty(), "--batch ", b, ": the ", o.pipeline,
              " pipeline does not batch; use --batch 1, or another --pipeline");

  // Warm: the models loaded and every kernel and allocation path taken once at each batch size.
  engine.preload(o.pipeline);
  for (const int64_t b : o.batches) run_jobs(engine, o, 0, b);

  std::vector<EngineThroughputRow> rows;
  for (const int64_t b : o.batches) {
    backend::synchronize(o.device);
    const auto t0 = Clock::now();
    for (int64_t first = 0; first < o.jobs; first += b) run_jobs(engine, o, first, b);
    backend::synchronize(o.device);
    EngineThroughputRow row;
    row.batch = b;
    row.jobs = o.jobs;
    row.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    row.seconds_per_job = row.seconds / static_cast<double>(o.jobs);
    row.jobs_per_minute = 60.0 / row.seconds_per_job;
    rows.push_back(row);
    if (on_row) on_row(row);
  }
  return rows;
}

std::string format_engine_throughput(const EngineThroughputOptions& o,
                                     const std::vector<EngineThroughputRow>& rows) {
  char line[256];
  std::snprintf(line, sizeof line,
                "engine throughput: demo bundle, %s, %lldx%lld, %lld frames, %s\n", o.pipeline.c_str(),
                static_cast<long long>(o.width), static_cast<long long>(o.height),
                static_cast<long long>(o.frames), o.device.str().c_str());
  std::string out = line;
  out += "batch   jobs   seconds   s/job   jobs/min   vs batch 1\n";
  const double base = rows.empty() ? 0 : rows.front().batch == 1 ? rows.front().jobs_per_minute : 0;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%5lld  %5lld  %8.2f  %6.3f  %9.1f   %s\n",
                  static_cast<long long>(r.batch), static_cast<long long>(r.jobs), r.seconds,
                  r.seconds_per_job, r.jobs_per_minute,
                  base > 0 ? (std::to_string(r.jobs_per_minute / base).substr(0, 4) + "x").c_str()
                           : "-");
    out += line;
  }
  return out;
}

nlohmann::json engine_throughput_json(const EngineThroughputOptions& o,
                                      const std::vector<EngineThroughputRow>& rows) {
  nlohmann::json r = nlohmann::json::array();
  for (const auto& row : rows)
    r.push_back({{"batch", row.batch},
                 {"jobs", row.jobs},
                 {"seconds", row.seconds},
                 {"seconds_per_job", row.seconds_per_job},
                 {"jobs_per_minute", row.jobs_per_minute}});
  return {{"what", "engine"},    {"model", "demo"},       {"device", o.device.str()},
          {"pipeline", o.pipeline}, {"width", o.width},   {"height", o.height},
          {"frames", o.frames},     {"steps", o.steps},   {"rows", r}};
}

}  // namespace ltx::bench
