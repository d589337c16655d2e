#include "generate/placement.h"

#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"

namespace ltx {
namespace {

TEST(Placement, CpuComputesInF32AndGpusInBf16UnlessF32IsAsked) {
  const nn::LoadOptions cpu = generate::model_placement(Device::cpu());
  EXPECT_EQ(cpu.dtype, DType::F32);
  EXPECT_TRUE(cpu.device.is_cpu());
  // The CPU has no bf16 compute: a bf16 request still loads f32 there.
  EXPECT_EQ(generate::model_placement(Device::cpu(), DType::BF16).dtype, DType::F32);
  const nn::LoadOptions gpu = generate::model_placement(Device::cuda(1));
  EXPECT_EQ(gpu.dtype, DType::BF16);
  EXPECT_EQ(gpu.device, Device::cuda(1));
  EXPECT_EQ(generate::model_placement(Device::cuda(0), DType::F32).dtype, DType::F32);
}

TEST(Placement, DescriptionNamesTheDeviceAndTheDtype) {
  const std::string d = generate::describe_placement(generate::model_placement(Device::cpu()));
  EXPECT_EQ(d.rfind("CPU (", 0), 0u) << d;
  EXPECT_NE(d.find(", f32 weights"), std::string::npos) << d;
}

}  // namespace
}  // namespace ltx

namespace ltx {
namespace {

TEST(Offload, ParsesTheReferenceModesThisBuildStreams) {
  EXPECT_EQ(generate::parse_offload("none"), generate::Offload::None);
  EXPECT_EQ(generate::parse_offload("cpu"), generate::Offload::Cpu);
  EXPECT_EQ(generate::parse_offload("disk"), generate::Offload::Disk);
  EXPECT_STREQ(generate::offload_name(generate::Offload::Cpu), "cpu");
  EXPECT_STREQ(generate::offload_name(generate::Offload::Disk), "disk");
  EXPECT_EQ(generate::parse_offload("auto"), generate::Offload::Auto);
  EXPECT_STREQ(generate::offload_name(generate::Offload::Auto), "auto");
  EXPECT_ERROR_HAS(generate::parse_offload("gpu"), "--offload: 'gpu' is not a mode");
}

TEST(Offload, CpuStreamsTwoSlotsToAGpuAndIsAnErrorOnTheCpu) {
  EXPECT_FALSE(generate::block_streaming(generate::Offload::None, Device::cpu()).enabled());
  EXPECT_EQ(generate::block_streaming(generate::Offload::Cpu, Device::cuda(0)).slots,
            generate::kOffloadSlots);
  const models::BlockStreaming disk = generate::block_streaming(generate::Offload::Disk, Device::cuda(0));
  EXPECT_EQ(disk.slots, generate::kOffloadSlots);
  EXPECT_TRUE(disk.from_file);
  EXPECT_FALSE(generate::block_streaming(generate::Offload::Cpu, Device::cuda(0)).from_file);
  // Auto: nothing until the planner (generate/offload_plan.h) decides; on the CPU, none.
  EXPECT_FALSE(generate::block_streaming(generate::Offload::Auto, Device::cuda(0)).enabled());
  EXPECT_FALSE(generate::block_streaming(generate::Offload::Auto, Device::cpu()).enabled());
  EXPECT_ERROR_HAS(generate::block_streaming(generate::Offload::Disk, Device::cpu()),
                   "--offload disk streams");
  EXPECT_ERROR_HAS(generate::block_streaming(generate::Offload::Cpu, Device::cpu()),
                   "--offload cpu streams the transformer's blocks to a GPU; with --device cpu");
}

}  // namespace
}  // namespace ltx
