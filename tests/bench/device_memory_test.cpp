#include <gtest/gtest.h>

#include "bench/device.h"
#include "support/test_support.h"

namespace ltx {
namespace {

TEST(AvailableMemory, HostReportsSomethingFree) {
  EXPECT_GT(bench::available_memory_bytes(Device::cpu()), 0);
}

TEST(AvailableMemory, AGpuThisBuildCannotUseIsAnError) {
  if (test::cuda_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(bench::available_memory_bytes(Device::cuda(0)), Error);
}

}  // namespace
}  // namespace ltx
