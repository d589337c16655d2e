#pragma once
// What a GPU's clock and power did while a benchmark ran: a thread samples the SM clock, the
// board's power draw and the active clock-event reasons through NVML (the NVIDIA driver's
// management library, opened with dlopen when sampling starts, so nothing links against it and a
// machine without the driver simply gets no samples). A full-size transformer step holds an H200
// at its 700 W limit, where the driver lowers the SM clock well below its maximum: the benchmark
// table says so next to the times (bench/RESULTS.md).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"

namespace ltx::profiling {

struct GpuSample {
  double sm_mhz = 0;          // current SM clock
  double power_w = 0;         // board power draw
  bool power_capped = false;  // the driver's software power cap is among the clock-event reasons
};

struct GpuStateSummary {
  int64_t samples = 0;
  double mean_sm_mhz = 0, min_sm_mhz = 0;
  double max_sm_mhz = 0;  // the device's maximum SM clock (not the samples')
  double mean_power_w = 0;
  double power_limit_w = 0;  // the enforced limit
  double power_capped_fraction = 0;  // of the samples
};

// The summary of `samples` (none: samples == 0 and zeros) for a device whose maximum SM clock and
// enforced power limit are given.
GpuStateSummary summarize_gpu_samples(const std::vector<GpuSample>& samples, double max_sm_mhz,
                                      double power_limit_w);

// One line for people: "SM clock 1601 MHz mean (1305 min, 1980 max of the GPU), 688 W of the
// 700 W limit, power-capped in 68 % of 45 samples".
std::string describe(const GpuStateSummary& s);

// Samples device `d` every `interval` from construction until finish(). On the CPU, in a build
// without CUDA, or when NVML cannot be opened or does not know the GPU, it samples nothing and
// finish() returns nullopt.
class GpuMonitor {
 public:
  explicit GpuMonitor(Device d, std::chrono::milliseconds interval = std::chrono::milliseconds(50));
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // Stops sampling; the summary of what was sampled (nullopt: nothing could be).
  std::optional<GpuStateSummary> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ltx::profiling
