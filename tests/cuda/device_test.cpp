// Device management, error checking, streams and events. The CudaNoDevice test is the one meant
// for machines without a GPU; everything else skips there.
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/allocator.h"
#include "backend/cuda/device.h"
#include "backend/cuda/stream.h"
#include "profiling/gpu_monitor.h"
#include "ops/linalg.h"
#include "core/device_hooks.h"
#include "core/tensor.h"
#include "support/test_support.h"

namespace ltx {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using test::error_of;

TEST(CudaNoDevice, AllocationFailsCleanlyNamingTheMissingDevice) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_TRUE(detail::cuda_compiled());
  EXPECT_FALSE(test::cuda_available());
  const std::string msg = error_of([] { Tensor::empty({4}, DType::F32, Device::cuda(0)); });
  EXPECT_TRUE(contains(msg, "cuda:0")) << msg;
  EXPECT_TRUE(contains(msg, "no CUDA device is available")) << msg;
  EXPECT_FALSE(cuda::no_device_reason().empty());
  EXPECT_TRUE(contains(msg, cuda::no_device_reason())) << msg;
  // Host -> device copies fail the same way, and the CPU keeps working.
  Tensor host = Tensor::full({3}, 2.0);
  EXPECT_THROW(host.to(Device::cuda(0)), Error);
  EXPECT_EQ(host.to_float_vector(), (std::vector<float>{2, 2, 2}));
  EXPECT_THROW(cuda::set_device(0), Error);
}

TEST(CudaCheck, ErrorNamesCallCodeAndLocation) {
  // Works with or without a GPU: an invalid device index fails either way.
  const std::string msg = error_of([] { LTX_CUDA_CHECK(cudaSetDevice(12345)); });
  EXPECT_TRUE(contains(msg, "cudaSetDevice(12345)")) << msg;
  EXPECT_TRUE(contains(msg, "device_test.cpp:")) << msg;
  EXPECT_TRUE(contains(msg, "cudaError")) << msg;
}

TEST(CudaDevice, QueriesDescribeTheGpu) {
  LTX_REQUIRE_CUDA();
  ASSERT_GE(cuda::device_count(), 1);
  EXPECT_TRUE(cuda::no_device_reason().empty());
  EXPECT_FALSE(cuda::device_name(0).empty());
  const cuda::ComputeCapability cc = cuda::compute_capability(0);
  EXPECT_GE(cc.major, 7);
  const cuda::MemoryInfo mem = cuda::memory_info(0);
  EXPECT_GT(mem.total_bytes, size_t{1} << 30);
  EXPECT_LE(mem.free_bytes, mem.total_bytes);
  EXPECT_GT(cuda::multiprocessor_count(0), 0);
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_NO_THROW(cuda::synchronize(0));
}

// The clock / power monitor `ltx bench` runs during its timed calls: on a GPU with the NVIDIA
// driver it samples the SM clock (within the GPU's maximum), the power draw and the power limit
// while the GPU works.
TEST(CudaDevice, MonitorSamplesClockAndPowerWhileTheGpuWorks) {
  LTX_REQUIRE_CUDA();
  const std::string pci = cuda::pci_bus_id(0);
  EXPECT_EQ(pci.size(), 12u) << pci;  // "0000:19:00.0"
  const Tensor a = Tensor::full({4096, 4096}, 0.5, DType::BF16, Device::cuda(0));
  profiling::GpuMonitor monitor(Device::cuda(0), std::chrono::milliseconds(5));
  for (int i = 0; i < 200; ++i) (void)ops::matmul(a, a);
  cuda::synchronize(0);
  const std::optional<profiling::GpuStateSummary> s = monitor.finish();
  ASSERT_TRUE(s.has_value()) << "no samples: is the driver's libnvidia-ml.so.1 there?";
  std::printf("[gpu monitor] %s\n", profiling::describe(*s).c_str());
  EXPECT_GE(s->samples, 1);
  EXPECT_GT(s->mean_sm_mhz, 0);
  EXPECT_GT(s->max_sm_mhz, 0);
  EXPECT_LE(s->min_sm_mhz, s->max_sm_mhz);
  EXPECT_GT(s->mean_power_w, 0);
  EXPECT_GT(s->power_limit_w, 0);
}

TEST(CudaDevice, OutOfRangeIndexNamesRequestAndCount) {
  LTX_REQUIRE_CUDA();
  const int n = cuda::device_count();
  const std::string msg = error_of([n] { cuda::set_device(n); });
  EXPECT_TRUE(contains(msg, "cuda:" + std::to_string(n) + " was requested")) << msg;
  EXPECT_TRUE(contains(msg, "has " + std::to_string(n) + " CUDA device")) << msg;
  EXPECT_THROW(cuda::set_device(-1), Error);
  EXPECT_THROW(cuda::device_name(n), Error);
  // Through core: a tensor on a device that does not exist.
  const std::string msg2 = error_of([n] { Tensor::empty({2}, DType::F32, Device::cuda(n)); });
  EXPECT_TRUE(contains(msg2, "cuda:" + std::to_string(n))) << msg2;
  // The process is still usable.
  EXPECT_EQ(Tensor::full({2}, 1.5, DType::F32, Device::cuda(0)).to_float_vector(),
            (std::vector<float>{1.5f, 1.5f}));
}

TEST(CudaDevice, GuardRestoresTheCurrentDevice) {
  LTX_REQUIRE_CUDA();
  cuda::set_device(0);
  {
    cuda::DeviceGuard g(cuda::device_count() - 1);
    EXPECT_EQ(cuda::current_device(), cuda::device_count() - 1);
  }
  EXPECT_EQ(cuda::current_device(), 0);
  EXPECT_THROW(cuda::DeviceGuard(cuda::device_count()), Error);
  EXPECT_EQ(cuda::current_device(), 0);
}

TEST(CudaStream, DefaultIsPerDeviceNonBlockingAndGuardSwitches) {
  LTX_REQUIRE_CUDA();
  const cuda::Stream def = cuda::current_stream(0);
  EXPECT_EQ(def, cuda::default_stream(0));
  EXPECT_NE(def.handle(), nullptr);  // not the legacy NULL stream
  unsigned flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(def.handle(), &flags), cudaSuccess);
  EXPECT_EQ(flags & cudaStreamNonBlocking, static_cast<unsigned>(cudaStreamNonBlocking));
  cuda::OwnedStream other(0);
  {
    cuda::StreamGuard g(other.get());
    EXPECT_EQ(cuda::current_stream(0), other.get());
    EXPECT_EQ(cuda::current_stream(), other.get());
  }
  EXPECT_EQ(cuda::current_stream(0), def);
}

TEST(CudaStream, EventOrdersWorkAcrossStreams) {
  LTX_REQUIRE_CUDA();
  cuda::OwnedStream a(0), b(0);
  const int64_t n = 1 << 20;
  Tensor x, y;
  cuda::Event produced;
  {
    cuda::StreamGuard g(a.get());
    x = Tensor::full({n}, 3.0, DType::F32, Device::cuda(0));  // H2D + kernels on stream a
    produced.record(a.get());
  }
  EXPECT_TRUE(produced.recorded());
  {
    cuda::StreamGuard g(b.get());
    produced.wait(b.get());
    y = x.to(DType::BF16);  // convert kernel on stream b, after a's work
    // x is now read on b too; let the allocator know before x can be freed.
    cuda::record_stream(x.raw_data(), b.get());
    cuda::Event done;
    done.record(b.get());
    done.synchronize();
    EXPECT_TRUE(done.query());
  }
  const std::vector<float> v = y.to_float_vector();
  ASSERT_EQ(static_cast<int64_t>(v.size()), n);
  for (int64_t i = 0; i < n; i += 4097) ASSERT_EQ(v[static_cast<size_t>(i)], 3.0f) << i;
  EXPECT_TRUE(a.get().query());
}

}  // namespace
}  // namespace ltx
