#include "profiling/gpu_monitor.h"

#include <dlfcn.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "core/error.h"
#if LTX_WITH_CUDA
#include "backend/cuda/device.h"
#endif

namespace ltx::profiling {

GpuStateSummary summarize_gpu_samples(const std::vector<GpuSample>& samples, double max_sm_mhz,
                                      double power_limit_w) {
  GpuStateSummary s;
  s.max_sm_mhz = max_sm_mhz;
  s.power_limit_w = power_limit_w;
  s.samples = static_cast<int64_t>(samples.size());
  if (samples.empty()) return s;
  double clock = 0, power = 0;
  int64_t capped = 0;
  s.min_sm_mhz = samples.front().sm_mhz;
  for (const GpuSample& g : samples) {
    clock += g.sm_mhz;
    power += g.power_w;
    capped += g.power_capped ? 1 : 0;
    s.min_sm_mhz = std::min(s.min_sm_mhz, g.sm_mhz);
  }
  const double n = static_cast<double>(samples.size());
  s.mean_sm_mhz = clock / n;
  s.mean_power_w = power / n;
  s.power_capped_fraction = static_cast<double>(capped) / n;
  return s;
}

std::string describe(const GpuStateSummary& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "SM clock %.0f MHz mean (%.0f min, %.0f max of the GPU), %.0f W of the %.0f W "
                "limit, power-capped in %.0f %% of %lld samples",
                s.mean_sm_mhz, s.min_sm_mhz, s.max_sm_mhz, s.mean_power_w, s.power_limit_w,
                100.0 * s.power_capped_fraction, static_cast<long long>(s.samples));
  return buf;
}

namespace {

// The few NVML entry points used, declared here (the CUDA toolkit on the build machines ships no
// nvml.h): the C ABI of libnvidia-ml.so.1. Return value 0 is NVML_SUCCESS.
using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlInitFn = int (*)();
using NvmlShutdownFn = int (*)();
using NvmlHandleByPciFn = int (*)(const char*, NvmlDevice*);
using NvmlClockFn = int (*)(NvmlDevice, int, unsigned*);       // MHz
using NvmlPowerFn = int (*)(NvmlDevice, unsigned*);            // milliwatts
using NvmlReasonsFn = int (*)(NvmlDevice, unsigned long long*);  // a bit mask
constexpr int kNvmlClockSm = 1;                                   // NVML_CLOCK_SM
constexpr unsigned long long kReasonSwPowerCap = 0x4;             // ...ReasonSwPowerCap

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

class Nvml {
 public:
  Nvml() = default;
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml() {
    if (initialised_) shutdown_();
    if (lib_ != nullptr) dlclose(lib_);
  }

  // Opens the driver's library and finds the GPU at PCI bus id `pci`; false when any step fails.
  bool open(const std::string& pci) {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return false;
    const auto init = symbol<NvmlInitFn>(lib_, "nvmlInit_v2");
    shutdown_ = symbol<NvmlShutdownFn>(lib_, "nvmlShutdown");
    const auto by_pci = symbol<NvmlHandleByPciFn>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
    clock_ = symbol<NvmlClockFn>(lib_, "nvmlDeviceGetClockInfo");
    max_clock_ = symbol<NvmlClockFn>(lib_, "nvmlDeviceGetMaxClockInfo");
    power_ = symbol<NvmlPowerFn>(lib_, "nvmlDeviceGetPowerUsage");
    limit_ = symbol<NvmlPowerFn>(lib_, "nvmlDeviceGetEnforcedPowerLimit");
    reasons_ = symbol<NvmlReasonsFn>(lib_, "nvmlDeviceGetCurrentClocksEventReasons");
    if (reasons_ == nullptr)  // drivers before the rename
      reasons_ = symbol<NvmlReasonsFn>(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (init == nullptr || shutdown_ == nullptr || by_pci == nullptr || clock_ == nullptr ||
        max_clock_ == nullptr || power_ == nullptr || limit_ == nullptr || reasons_ == nullptr)
      return false;
    if (init() != 0) return false;
    initialised_ = true;
    return by_pci(pci.c_str(), &device_) == 0;
  }

  double max_sm_mhz() const {
    unsigned v = 0;
    return max_clock_(device_, kNvmlClockSm, &v) == 0 ? v : 0.0;
  }
  double power_limit_w() const {
    unsigned mw = 0;
    return limit_(device_, &mw) == 0 ? mw / 1000.0 : 0.0;
  }
  // One sample; false when the driver did not answer.
  bool sample(GpuSample* g) const {
    unsigned mhz = 0, mw = 0;
    unsigned long long reasons = 0;
    if (clock_(device_, kNvmlClockSm, &mhz) != 0 || power_(device_, &mw) != 0 ||
        reasons_(device_, &reasons) != 0)
      return false;
    g->sm_mhz = mhz;
    g->power_w = mw / 1000.0;
    g->power_capped = (reasons & kReasonSwPowerCap) != 0;
    return true;
  }

 private:
  void* lib_ = nullptr;
  bool initialised_ = false;
  NvmlShutdownFn shutdown_ = nullptr;
  NvmlClockFn clock_ = nullptr, max_clock_ = nullptr;
  NvmlPowerFn power_ = nullptr, limit_ = nullptr;
  NvmlReasonsFn reasons_ = nullptr;
  NvmlDevice device_ = nullptr;
};

}  // namespace

struct GpuMonitor::Impl {
  Nvml nvml;
  double max_sm_mhz = 0, power_limit_w = 0;
  std::vector<GpuSample> samples;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;

  void stop_thread() {
    if (!thread.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    wake.notify_all();
    thread.join();
  }
};

GpuMonitor::GpuMonitor(Device d, std::chrono::milliseconds interval) : impl_(std::make_unique<Impl>()) {
#if LTX_WITH_CUDA
  if (!d.is_cuda()) return;
  std::string pci;
  try {
    pci = cuda::pci_bus_id(d.index);
  } catch (const Error&) {
    return;  // no such GPU: nothing to sample (the caller's own device checks report it)
  }
  Impl& m = *impl_;
  if (!m.nvml.open(pci)) return;
  m.max_sm_mhz = m.nvml.max_sm_mhz();
  m.power_limit_w = m.nvml.power_limit_w();
  m.thread = std::thread([&m, interval] {
    std::unique_lock<std::mutex> lock(m.mutex);
    while (!m.stop) {
      GpuSample g;
      if (m.nvml.sample(&g)) m.samples.push_back(g);
      m.wake.wait_for(lock, interval, [&m] { return m.stop; });
    }
  });
#else
  (void)d;
  (void)interval;
#endif
}

GpuMonitor::~GpuMonitor() { impl_->stop_thread(); }

std::optional<GpuStateSummary> GpuMonitor::finish() {
  impl_->stop_thread();
  if (impl_->samples.empty()) return std::nullopt;
  return summarize_gpu_samples(impl_->samples, impl_->max_sm_mhz, impl_->power_limit_w);
}

}  // namespace ltx::profiling
