#pragma once
// `ltx bench engine`: jobs per minute through the resident generate::Engine (what `ltx serve`
// runs), one job at a time versus batches of B jobs sharing one denoising run, on the built-in demo
// bundle. Each job has its own prompt and seed; text encoding, denoising and decoding (into
// memory: the MP4 encode is left out) all count. The models are loaded and one job is run before
// the clock starts, so the numbers are those of a warm server.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"

namespace ltx::bench {

struct EngineThroughputOptions {
  Device device = Device::cpu();
  std::string pipeline = "distilled";
  int64_t width = 768, height = 512, frames = 49;
  int64_t steps = 0;              // guided pipelines' stage-1 steps; 0: the pipeline's default
  int64_t jobs = 8;               // per batch size, a multiple of every batch size
  std::vector<int64_t> batches = {1, 4};
  std::string demo_dir;           // empty: the default demo bundle folder
  int64_t max_gpu_memory_bytes = 0;  // the engine's --max-gpu-memory (0: none)
};

struct EngineThroughputRow {
  int64_t batch = 1;
  int64_t jobs = 0;
  double seconds = 0;         // wall time of all jobs
  double jobs_per_minute = 0;
  double seconds_per_job = 0;
};

// Runs the measurement; `on_row` hears each batch size's row as it is done. Throws ltx::Error for
// impossible options (naming the flag) or when the pipeline cannot batch.
std::vector<EngineThroughputRow> run_engine_throughput(
    const EngineThroughputOptions& options,
    const std::function<void(const EngineThroughputRow&)>& on_row = {});

std::string format_engine_throughput(const EngineThroughputOptions& options,
                                     const std::vector<EngineThroughputRow>& rows);
nlohmann::json engine_throughput_json(const EngineThroughputOptions& options,
                                      const std::vector<EngineThroughputRow>& rows);

}  // namespace ltx::bench
