#pragma once
// `ltx bench kernels`: single CUDA kernels timed on the full-size shapes of the models (the
// LTX-2.3 transformer step at 768 x 512 and 1536 x 1024, the conv VAE decoder's tiles, the LTX-2.5
// diffusion decoder's stages), each next to the unfused ops or the other kernels of the same op.
// These are the baselines of kernel work; bench/RESULTS.md records what they measured.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"

namespace ltx::bench {

// One timed call: the mean over a few calls after one warm-up.
struct KernelTiming {
  std::string harness;  // e.g. "fused-glue"
  std::string dtype;    // "bf16" or "f32"
  // What was timed, padded into the table's columns ("attention video self       wgmma ");
  // the JSON report collapses the padding.
  std::string name;
  double ms = 0;
  double rate = 0;      // throughput in `unit`, 0 when the row has none
  std::string unit;     // "TFLOP/s", "TFLOP/s (window)", "GB/s" or empty
  // The table line: "[timing bf16] <name> <ms> ms  <rate> <unit>".
  std::string line() const;
};

// Every harness, in the order `ltx bench kernels` runs them.
const std::vector<std::string>& kernel_harness_names();

// The harnesses that `filters` (values of --filter, each a harness name) select, in run order;
// every harness when `filters` is empty. An unknown name is an ltx::Error naming --filter and the
// valid names.
std::vector<std::string> select_kernel_harnesses(const std::vector<std::string>& filters);

// Runs `harnesses` on `device` (a CUDA device; anything else is an ltx::Error naming `what`),
// calling `on_row` as each timing is measured. Returns every row.
std::vector<KernelTiming> run_kernel_timings(const std::vector<std::string>& harnesses, Device device,
                                             const std::function<void(const KernelTiming&)>& on_row,
                                             const char* what = "--device");

// {"tool": "ltx bench kernels", "device": ..., "rows": [{harness, dtype, name, ms, rate, unit}]}.
nlohmann::json kernel_timings_json(const std::vector<KernelTiming>& rows, const std::string& device);

}  // namespace ltx::bench
