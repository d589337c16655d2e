// The out-of-memory message (core/out_of_memory.h): what the CUDA allocator reports, formatted on
// any machine; the scopes that name what a thread was allocating for.
#include <gtest/gtest.h>

#include <string>

#include "core/out_of_memory.h"

namespace ltx {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(OutOfMemoryMessage, NamesTheTensorTheScopeTheMemoryAndTheFlags) {
  OutOfMemoryReport r;
  r.device = 1;
  r.requested_bytes = 48 * kMiB;
  r.allocated_bytes = 200 * kMiB;
  r.free_bytes = 12 * kMiB;
  r.total_bytes = 81559 * kMiB;
  r.tensor = "bf16[1, 4096, 6144]";
  r.scope = "stage 1";
  EXPECT_EQ(out_of_memory_message(r),
            std::string("out of GPU memory on cuda:1 during stage 1: tried to allocate 48.00 MiB for a "
                        "bf16[1, 4096, 6144] tensor (200.00 MiB allocated, no --max-gpu-memory budget, "
                        "12.00 MiB free of 81559.00 MiB on the device); ") +
                kOutOfMemoryHelp);
  // Under a budget, without a tensor or a scope (a raw allocation outside any stage).
  r.tensor.clear();
  r.scope.clear();
  r.limit_bytes = 1024 * kMiB;
  r.reserved_bytes = 1000 * kMiB;
  const std::string m = out_of_memory_message(r);
  EXPECT_EQ(m.find("out of GPU memory on cuda:1: tried to allocate 48.00 MiB (200.00 MiB allocated, a "
                   "--max-gpu-memory budget of 1024.00 MiB, 1000.00 MiB of it held, 12.00 MiB free of"),
            0u)
      << m;
  for (const char* flag : {"--max-gpu-memory", "--quantization", "--offload", "--width"})
    EXPECT_NE(m.find(flag), std::string::npos) << flag;
  const OutOfMemory e(r);
  EXPECT_EQ(std::string(e.what()), m);
  ASSERT_TRUE(e.report().has_value());
  EXPECT_EQ(e.report()->requested_bytes, 48 * kMiB);
}

TEST(MemoryScope, TheStageThenNestedScopesRestoringTheOuterText) {
  EXPECT_EQ(memory_scope(), "");
  {
    const MemoryScope load("model loading");
    EXPECT_EQ(memory_scope(), "model loading");
    {
      const MemoryScope weight("weight 'proj_out.weight'");
      EXPECT_EQ(memory_scope(), "model loading, weight 'proj_out.weight'");
      set_memory_stage("stage 1");
      EXPECT_EQ(memory_scope(), "stage 1, model loading, weight 'proj_out.weight'");
    }
    EXPECT_EQ(memory_scope(), "stage 1, model loading");
  }
  EXPECT_EQ(memory_scope(), "stage 1");
  set_memory_stage("");
  EXPECT_EQ(memory_scope(), "");
}

}  // namespace
}  // namespace ltx
