#include "backend/cuda/device.h"

#include <mutex>

#include "core/error.h"

namespace ltx::cuda {

namespace {

struct DeviceCount {
  int count = 0;
  std::string reason;
};

// Queried once: the answer cannot change during a process's life (CUDA_VISIBLE_DEVICES is read
// at driver initialisation).
const DeviceCount& cached_device_count() {
  static const DeviceCount dc = [] {
    DeviceCount r;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      r.reason = str(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
      return r;
    }
    r.count = n;
    if (n == 0) r.reason = "the CUDA driver reports 0 devices";
    return r;
  }();
  return dc;
}

}  // namespace

int device_count() { return cached_device_count().count; }

std::string no_device_reason() { return cached_device_count().reason; }

void check_device(int index, const char* what) {
  const DeviceCount& dc = cached_device_count();
  if (dc.count == 0)
    fail(what, ": cuda:", index, " was requested but no CUDA device is available (", dc.reason,
         "); use --device cpu, or run on a machine with an NVIDIA GPU and a working driver");
  if (index < 0 || index >= dc.count)
    fail(what, ": cuda:", index, " was requested but this machine has ", dc.count, " CUDA device",
         dc.count == 1 ? "" : "s", " (cuda:0", dc.count > 1 ? str(" .. cuda:", dc.count - 1) : "",
         "); pick an index in that range");
}

int current_device() {
  check_device(0, "current_device");
  int d = 0;
  LTX_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int index) {
  check_device(index, "set_device");
  LTX_CUDA_CHECK(cudaSetDevice(index));
}

DeviceGuard::DeviceGuard(int index) : previous_(current_device()), current_(index) {
  if (index != previous_) set_device(index);
}

DeviceGuard::~DeviceGuard() {
  // Never throws from a destructor; a failure here would mean the driver is gone anyway.
  if (current_ != previous_) (void)cudaSetDevice(previous_);
}

std::string device_name(int index) {
  check_device(index, "device_name");
  cudaDeviceProp prop{};
  LTX_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

std::string pci_bus_id(int index) {
  check_device(index, "pci_bus_id");
  char id[32] = {};
  LTX_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id, index));
  return id;
}

MemoryInfo memory_info(int index) {
  DeviceGuard guard(index);
  MemoryInfo m;
  LTX_CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
  return m;
}

ComputeCapability compute_capability(int index) {
  check_device(index, "compute_capability");
  ComputeCapability cc;
  LTX_CUDA_CHECK(cudaDeviceGetAttribute(&cc.major, cudaDevAttrComputeCapabilityMajor, index));
  LTX_CUDA_CHECK(cudaDeviceGetAttribute(&cc.minor, cudaDevAttrComputeCapabilityMinor, index));
  return cc;
}

int multiprocessor_count(int index) {
  static std::mutex mu;
  static int cache[64] = {};
  check_device(index, "multiprocessor_count");
  std::lock_guard<std::mutex> lock(mu);
  if (index < 64 && cache[index] > 0) return cache[index];
  int n = 0;
  LTX_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, index));
  if (index < 64) cache[index] = n;
  return n;
}

void synchronize(int index) {
  DeviceGuard guard(index < 0 ? current_device() : index);
  LTX_CUDA_CHECK(cudaDeviceSynchronize());
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  fail("CUDA error in ", call, " at ", file, ":", line, ": ", cudaGetErrorName(err), ": ",
       cudaGetErrorString(err));
}

}  // namespace ltx::cuda
