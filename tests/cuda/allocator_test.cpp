// The caching allocator: rounding, reuse without cudaMalloc, stream safety, stats, OOM.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/device.h"
#include "backend/cuda/stream.h"
#include "core/out_of_memory.h"
#include "core/tensor.h"
#include "support/test_support.h"

namespace ltx {
namespace {

char* ptr(const std::shared_ptr<void>& p) { return static_cast<char*>(p.get()); }

TEST(CudaAllocator, RoundsRequestsTo512Bytes) {
  // Pure arithmetic, no GPU needed.
  EXPECT_EQ(cuda::round_allocation_size(0), 512u);
  EXPECT_EQ(cuda::round_allocation_size(1), 512u);
  EXPECT_EQ(cuda::round_allocation_size(512), 512u);
  EXPECT_EQ(cuda::round_allocation_size(513), 1024u);
  EXPECT_EQ(cuda::round_allocation_size((3u << 20) + 1), (3u << 20) + 512);
}

TEST(CudaAllocator, SameStreamReusesFreedBlocksWithoutCudaMalloc) {
  LTX_REQUIRE_CUDA();
  cuda::OwnedStream s(0);
  cuda::StreamGuard guard(s.get());
  void* first = nullptr;
  {
    auto a = cuda::allocate(1000, 0);
    first = a.get();
  }
  auto again = cuda::allocate(1000, 0);
  EXPECT_EQ(again.get(), first);  // freed on this stream: reusable at once
  again.reset();

  // Steady state: a loop of allocations of recurring sizes does not call cudaMalloc.
  const std::vector<size_t> sizes = {100, 4096, 3 << 20, 12 << 20, 777};
  std::vector<std::shared_ptr<void>> warm;
  for (size_t sz : sizes) warm.push_back(cuda::allocate(sz, 0));
  warm.clear();
  const uint64_t mallocs = cuda::allocator_stats(0).num_device_mallocs;
  for (int it = 0; it < 50; ++it) {
    std::vector<std::shared_ptr<void>> live;
    for (size_t sz : sizes) live.push_back(cuda::allocate(sz, 0));
    Tensor t = Tensor::empty({257, 3}, DType::F32, Device::cuda(0));
    ASSERT_NE(t.raw_data(), nullptr);
  }
  EXPECT_EQ(cuda::allocator_stats(0).num_device_mallocs, mallocs);
}

TEST(CudaAllocator, SplitsSegmentsAndMergesFreedNeighbours) {
  LTX_REQUIRE_CUDA();
  cuda::OwnedStream s(0);
  cuda::StreamGuard guard(s.get());
  cuda::empty_cache(0);
  auto a = cuda::allocate(1000, 0);  // new 2 MiB small segment, split
  auto b = cuda::allocate(1000, 0);  // the rest of it
  EXPECT_EQ(ptr(b), ptr(a) + 1024);
  const uint64_t mallocs = cuda::allocator_stats(0).num_device_mallocs;
  a.reset();
  b.reset();
  // Both freed: the segment is whole again and can serve a 1 MiB request without cudaMalloc.
  auto big = cuda::allocate(1 << 20, 0);
  EXPECT_EQ(cuda::allocator_stats(0).num_device_mallocs, mallocs);
  big.reset();
}

TEST(CudaAllocator, OtherStreamsDoNotReuseABlockUntilItsEventsComplete) {
  LTX_REQUIRE_CUDA();
  cuda::OwnedStream sa(0), sb(0);
  // A block freed on stream a is not handed to stream b.
  void* pa = nullptr;
  {
    auto x = cuda::allocate(4096, sa.get());
    pa = x.get();
  }
  auto y = cuda::allocate(4096, sb.get());
  EXPECT_NE(y.get(), pa);
  y.reset();

  // Hold stream b busy with a host function until released, deterministically (no sleeps).
  std::atomic<bool> release{false};
  auto hold = [](void* flag) {
    auto* f = static_cast<std::atomic<bool>*>(flag);
    while (!f->load()) std::this_thread::yield();
  };
  ASSERT_EQ(cudaLaunchHostFunc(sb.get().handle(), hold, &release), cudaSuccess);
  void* used = nullptr;
  {
    auto x = cuda::allocate(4096, sa.get());
    used = x.get();
    cuda::record_stream(x.get(), sb.get());  // pretend b reads it
  }
  // b has not run past the free yet: the block must not come back on stream a.
  auto z = cuda::allocate(4096, sa.get());
  EXPECT_NE(z.get(), used);
  release.store(true);
  sb.get().synchronize();
  z.reset();
  auto w = cuda::allocate(4096, sa.get());
  // After b's event completed, the block is back in a's cache (z's block, freed later, may be
  // picked first: both are fine, but `used` must be among the reusable ones).
  auto w2 = cuda::allocate(4096, sa.get());
  EXPECT_TRUE(w.get() == used || w2.get() == used);
}

TEST(CudaAllocator, StatsTrackAllocatedReservedAndPeak) {
  LTX_REQUIRE_CUDA();
  cuda::synchronize(0);
  cuda::empty_cache(0);
  cuda::reset_peak_stats(0);
  const cuda::AllocatorStats s0 = cuda::allocator_stats(0);
  EXPECT_EQ(s0.peak_allocated_bytes, s0.allocated_bytes);
  size_t bytes = (64u << 20) + 100;
  auto big = cuda::allocate(bytes, 0);
  const cuda::AllocatorStats s1 = cuda::allocator_stats(0);
  EXPECT_EQ(s1.allocated_bytes - s0.allocated_bytes, cuda::round_allocation_size(bytes));
  EXPECT_EQ(s1.requested_bytes - s0.requested_bytes, bytes);
  EXPECT_GE(s1.reserved_bytes - s0.reserved_bytes, size_t{64} << 20);
  EXPECT_GE(s1.reserved_bytes, s1.allocated_bytes);
  EXPECT_EQ(s1.num_allocs, s0.num_allocs + 1);
  big.reset();
  const cuda::AllocatorStats s2 = cuda::allocator_stats(0);
  EXPECT_EQ(s2.allocated_bytes, s0.allocated_bytes);
  EXPECT_EQ(s2.reserved_bytes, s1.reserved_bytes);  // cached, not returned to the driver
  EXPECT_GE(s2.peak_allocated_bytes, s1.allocated_bytes);
  EXPECT_EQ(s2.num_frees, s0.num_frees + 1);
  cuda::empty_cache(0);
  const cuda::AllocatorStats s3 = cuda::allocator_stats(0);
  EXPECT_LE(s3.reserved_bytes + (size_t{64} << 20), s2.reserved_bytes);
  EXPECT_GT(s3.num_device_frees, s2.num_device_frees);
  cuda::reset_peak_stats(0);
  EXPECT_EQ(cuda::allocator_stats(0).peak_allocated_bytes, s3.allocated_bytes);
}

TEST(CudaAllocator, OutOfMemoryThrowsAClearErrorAndTheProcessStaysUsable) {
  LTX_REQUIRE_CUDA();
  const size_t petabyte = size_t{1} << 50;
  const uint64_t ooms = cuda::allocator_stats(0).num_ooms;
  std::string msg;
  try {
    (void)cuda::allocate(petabyte, 0);
  } catch (const OutOfMemory& e) {  // the driver's refusal: the same type as the budget's
    msg = e.what();
  }
  EXPECT_NE(msg.find("out of GPU memory on cuda:0: tried to allocate 1073741824.00 MiB"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("MiB allocated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MiB free of"), std::string::npos) << msg;
  EXPECT_NE(msg.find(kOutOfMemoryHelp), std::string::npos) << msg;
  EXPECT_EQ(cuda::allocator_stats(0).num_ooms, ooms + 1);
  // Through core too, and the device still works afterwards.
  EXPECT_THROW(Tensor::empty({int64_t{1} << 48}, DType::F32, Device::cuda(0)), OutOfMemory);
  Tensor t = Tensor::full({5}, 7.0, DType::F32, Device::cuda(0));
  EXPECT_EQ(t.to_float_vector(), (std::vector<float>{7, 7, 7, 7, 7}));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaAllocator, ConcurrentThreadsKeepStatsBalanced) {
  LTX_REQUIRE_CUDA();
  cuda::synchronize(0);
  const cuda::AllocatorStats before = cuda::allocator_stats(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      cuda::set_device(0);
      for (int i = 0; i < 200; ++i) {
        auto a = cuda::allocate(static_cast<size_t>(512 * (1 + (i + t) % 7)), 0);
        auto b = cuda::allocate(static_cast<size_t>((2 << 20) + 4096 * (i % 3)), 0);
      }
    });
  }
  for (auto& th : threads) th.join();
  const cuda::AllocatorStats after = cuda::allocator_stats(0);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.requested_bytes, before.requested_bytes);
  EXPECT_EQ(after.num_allocs - before.num_allocs, 4u * 200u * 2u);
  EXPECT_EQ(after.num_frees - before.num_frees, 4u * 200u * 2u);
}

}  // namespace
}  // namespace ltx
