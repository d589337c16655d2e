// The GPU clock / power summary `ltx bench` prints next to its times (profiling/gpu_monitor.h): the
// arithmetic on given samples, and that the CPU gets no samples. The sampling itself needs a GPU
// and the NVIDIA driver (tests/cuda/device_test.cpp).
#include <gtest/gtest.h>

#include "profiling/gpu_monitor.h"

namespace ltx {
namespace {

TEST(GpuStateSummary, AveragesTheSamplesAndCountsThePowerCappedOnes) {
  const std::vector<profiling::GpuSample> samples = {
      {1980, 120, false}, {1600, 690, true}, {1500, 700, true}, {1700, 650, true}};
  const profiling::GpuStateSummary s = profiling::summarize_gpu_samples(samples, 1980, 700);
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.mean_sm_mhz, (1980.0 + 1600 + 1500 + 1700) / 4);
  EXPECT_DOUBLE_EQ(s.min_sm_mhz, 1500);
  EXPECT_DOUBLE_EQ(s.max_sm_mhz, 1980);
  EXPECT_DOUBLE_EQ(s.mean_power_w, (120.0 + 690 + 700 + 650) / 4);
  EXPECT_DOUBLE_EQ(s.power_limit_w, 700);
  EXPECT_DOUBLE_EQ(s.power_capped_fraction, 0.75);
  EXPECT_EQ(profiling::describe(s),
            "SM clock 1695 MHz mean (1500 min, 1980 max of the GPU), 540 W of the 700 W limit, "
            "power-capped in 75 % of 4 samples");
}

TEST(GpuStateSummary, NoSamplesGiveZeros) {
  const profiling::GpuStateSummary s = profiling::summarize_gpu_samples({}, 1980, 700);
  EXPECT_EQ(s.samples, 0);
  EXPECT_EQ(s.mean_sm_mhz, 0);
  EXPECT_EQ(s.power_capped_fraction, 0);
}

TEST(GpuMonitor, SamplesNothingOnTheCpu) {
  profiling::GpuMonitor m(Device::cpu(), std::chrono::milliseconds(1));
  EXPECT_FALSE(m.finish().has_value());
}

}  // namespace
}  // namespace ltx
