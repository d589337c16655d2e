#pragma once
// CUDA device management: enumeration, selection, queries, synchronisation and error checking.
// Every failure is an ltx::Error that names the CUDA call, the CUDA error text and file:line.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace ltx::cuda {

// Number of usable CUDA devices; 0 when there is no GPU or no (recent enough) driver. Never throws.
int device_count();
// Why device_count() is 0 ("no CUDA-capable device is detected", ...); empty when it is not.
std::string no_device_reason();
// Throws ltx::Error unless `index` names an existing device ("cuda:3 was requested but this machine
// has 1 CUDA device (cuda:0)"); `what` prefixes the message (an op or flag name).
void check_device(int index, const char* what = "cuda");

// The calling thread's current device (cudaGetDevice).
int current_device();
// Makes `index` the calling thread's current device; checks it first.
void set_device(int index);

// Restores the previous current device on scope exit; switches only when it differs.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
  int current_;
};

struct MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};
struct ComputeCapability {
  int major = 0;
  int minor = 0;
};

std::string device_name(int index);
// "0000:19:00.0": the PCI bus id, which names the same GPU to the driver's tools (NVML).
std::string pci_bus_id(int index);
MemoryInfo memory_info(int index);
ComputeCapability compute_capability(int index);
int multiprocessor_count(int index);

// Waits for all work on device `index` (every stream) to finish; -1: the current device.
void synchronize(int index = -1);

// Throws ltx::Error("CUDA error in <call> at <file>:<line>: <name>: <text>").
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

}  // namespace ltx::cuda

// LTX_CUDA_CHECK(cudaMalloc(&p, n)): throws ltx::Error when the call does not return cudaSuccess.
// The error is also cleared from the runtime's last-error slot, so later calls start clean.
#define LTX_CUDA_CHECK(call)                                                 \
  do {                                                                       \
    const cudaError_t ltx_cuda_err_ = (call);                                \
    if (ltx_cuda_err_ != cudaSuccess) {                                      \
      (void)cudaGetLastError();                                              \
      ::ltx::cuda::throw_cuda_error(ltx_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                        \
  } while (0)

// After a kernel launch: reports launch-configuration errors (asynchronous faults surface at the
// next synchronising call).
#define LTX_CUDA_CHECK_LAUNCH() LTX_CUDA_CHECK(cudaGetLastError())
