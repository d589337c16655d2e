// Host -> device uploads (backend/cuda/host_upload.h): large pageable sources go through the
// page-locked staging buffers chunk by chunk, everything else straight to cudaMemcpyAsync; either
// way the device gets the source's bytes, in stream order, and the source is free once the call
// returns. Sizes sit around the staging threshold and the chunk size.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/host_upload.h"
#include "backend/cuda/stream.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "cuda/cuda_test_util.h"
#include "ops/elementwise.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
constexpr size_t kUploadStagingMin = cuda::kStagedUploadMinBytes;
constexpr size_t kUploadChunk = cuda::kStagingChunkBytes;

// `n` pseudo-random bytes from `seed` (splitmix64 words), so that a misplaced chunk shows.
std::vector<unsigned char> upload_pattern_bytes(size_t n, uint64_t seed) {
  std::vector<unsigned char> out(n);
  uint64_t x = seed;
  for (size_t at = 0; at < n; at += 8) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(out.data() + at, &z, std::min<size_t>(8, n - at));
  }
  return out;
}

// A CPU tensor over `n` bytes at `p` (not owned).
Tensor upload_host_bytes(const void* p, size_t n, DType dt = DType::U8) {
  const auto numel = static_cast<int64_t>(n / dtype_size(dt));
  return Tensor::from_blob(const_cast<void*>(p), {numel}, dt, Device::cpu(), nullptr);
}

// True when the device tensor `d` holds exactly the `n` bytes at `want`.
bool device_holds_bytes(const Tensor& d, const void* want, size_t n) {
  const Tensor back = d.to(Device::cpu());
  return back.nbytes() == n && (n == 0 || std::memcmp(back.raw_data(), want, n) == 0);
}

TEST(CudaHostUpload, PageableUploadsAroundTheThresholdAndTheChunkSizeArriveIntact) {
  LTX_REQUIRE_CUDA();
  const size_t tail = 3 * kUploadChunk + 12345;  // several chunks and an odd tail
  const std::vector<unsigned char> src = upload_pattern_bytes(tail + 16, 1);
  const size_t sizes[] = {0,           1,           kUploadStagingMin - 1, kUploadStagingMin,
                          kUploadChunk - 1, kUploadChunk, kUploadChunk + 1,      tail};
  for (const size_t n : sizes) {
    for (const size_t offset : {size_t{0}, size_t{3}}) {  // 3: an unaligned source and destination
      SCOPED_TRACE(std::to_string(n) + " bytes at offset " + std::to_string(offset));
      const void* from = src.data() + offset;
      EXPECT_EQ(cuda::upload_path(0, from, n),
                n >= kUploadStagingMin ? cuda::UploadPath::Staged : cuda::UploadPath::Direct);
      const Tensor whole = Tensor::zeros({static_cast<int64_t>(n + offset)}, DType::U8, kGpu);
      const Tensor dst = whole.narrow(0, static_cast<int64_t>(offset), static_cast<int64_t>(n));
      dst.copy_from(upload_host_bytes(from, n));
      EXPECT_TRUE(device_holds_bytes(dst, from, n));
    }
  }
}

TEST(CudaHostUpload, PageLockedRegisteredAndSmallSourcesGoDirect) {
  LTX_REQUIRE_CUDA();
  const size_t n = 2 * kUploadStagingMin + 5;
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, n, cudaHostAllocDefault), cudaSuccess);
  const std::unique_ptr<void, void (*)(void*)> free_pinned(pinned,
                                                           [](void* p) { (void)cudaFreeHost(p); });
  const std::vector<unsigned char> want = upload_pattern_bytes(n, 2);
  std::memcpy(pinned, want.data(), n);
  EXPECT_EQ(cuda::upload_path(0, pinned, n), cuda::UploadPath::Direct);
  EXPECT_TRUE(device_holds_bytes(upload_host_bytes(pinned, n).to(kGpu), want.data(), n));

  std::vector<unsigned char> registered = upload_pattern_bytes(n, 3);
  ASSERT_EQ(cudaHostRegister(registered.data(), n, cudaHostRegisterDefault), cudaSuccess);
  EXPECT_EQ(cuda::upload_path(0, registered.data() + 1, n - 1), cuda::UploadPath::Direct);
  EXPECT_TRUE(
      device_holds_bytes(upload_host_bytes(registered.data(), n).to(kGpu), registered.data(), n));
  ASSERT_EQ(cudaHostUnregister(registered.data()), cudaSuccess);

  EXPECT_EQ(cuda::upload_path(0, registered.data(), kUploadStagingMin - 1),
            cuda::UploadPath::Direct);
  EXPECT_EQ(cuda::upload_path(0, registered.data(), kUploadStagingMin), cuda::UploadPath::Staged);
}

// A file written here and mapped read-only, as the weight loaders map checkpoints.
class UploadTestMappedFile {
 public:
  explicit UploadTestMappedFile(const std::vector<unsigned char>& bytes)
      : path_(::testing::TempDir() + "ltx_host_upload_" + std::to_string(getpid()) + ".bin"),
        size_(bytes.size()) {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr) return;
    const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    if (std::fclose(f) != 0 || !written) return;
    const int fd = open(path_.c_str(), O_RDONLY);
    if (fd < 0) return;
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p != MAP_FAILED) base_ = static_cast<const unsigned char*>(p);
  }
  ~UploadTestMappedFile() {
    if (base_ != nullptr) munmap(const_cast<unsigned char*>(base_), size_);
    std::remove(path_.c_str());
  }
  UploadTestMappedFile(const UploadTestMappedFile&) = delete;
  UploadTestMappedFile& operator=(const UploadTestMappedFile&) = delete;
  const unsigned char* data() const { return base_; }

 private:
  std::string path_;
  size_t size_;
  const unsigned char* base_ = nullptr;
};

TEST(CudaHostUpload, MappedFileRegionUploadsBitExactAndConvertsBf16ToF32) {
  LTX_REQUIRE_CUDA();
  // A 6-byte "header", then bf16 values filling a chunk and an odd tail: the region starts at an
  // unaligned offset of the mapping, like a safetensors data section.
  const size_t header = 6, elements = kUploadChunk / 2 + 4099, n = elements * 2;
  const std::vector<unsigned char> bytes = upload_pattern_bytes(header + n, 4);
  const UploadTestMappedFile file(bytes);
  ASSERT_NE(file.data(), nullptr);
  const unsigned char* region = file.data() + header;
  EXPECT_EQ(cuda::upload_path(0, region, n), cuda::UploadPath::Staged);
  const Tensor host = upload_host_bytes(region, n, DType::BF16);
  EXPECT_TRUE(device_holds_bytes(host.to(kGpu), bytes.data() + header, n));
  const Tensor f32 = host.to(kGpu, DType::F32);  // staged upload, then the conversion kernel
  EXPECT_EQ(f32.dtype(), DType::F32);
  const Tensor want = host.to(DType::F32);
  EXPECT_TRUE(device_holds_bytes(f32, want.raw_data(), want.nbytes()));
}

TEST(CudaHostUpload, SourceMayBeOverwrittenAsSoonAsTheUploadReturns) {
  LTX_REQUIRE_CUDA();
  const size_t n = 2 * kUploadChunk + 77;
  const std::vector<unsigned char> want = upload_pattern_bytes(n, 5);
  std::vector<unsigned char> src = want;
  const Tensor d = upload_host_bytes(src.data(), n).to(kGpu);
  std::fill(src.begin(), src.end(), static_cast<unsigned char>(0xEE));
  EXPECT_TRUE(device_holds_bytes(d, want.data(), n));
}

TEST(CudaHostUpload, KernelsQueuedRightAfterTheUploadSeeTheData) {
  LTX_REQUIRE_CUDA();
  const cuda::OwnedStream stream(0);
  const cuda::StreamGuard on(stream.get());  // a non-default current stream
  std::vector<float> x(kUploadChunk / sizeof(float) + 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 4093) * 0.5f;
  const Tensor host = Tensor::from_blob(x.data(), {static_cast<int64_t>(x.size())}, DType::F32,
                                        Device::cpu(), nullptr);
  ASSERT_EQ(cuda::upload_path(0, x.data(), host.nbytes()), cuda::UploadPath::Staged);
  const Tensor d = host.to(kGpu);
  const Tensor twice = ops::add(d, d);  // enqueued behind the copies on the current stream
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = 2 * x[i];
  EXPECT_TRUE(device_holds_bytes(twice, want.data(), want.size() * sizeof(float)));
}

TEST(CudaHostUpload, ConcurrentUploadsFromSeveralThreadsArriveIntact) {
  LTX_REQUIRE_CUDA();
  constexpr int kThreads = 4;
  const size_t n = 2 * kUploadChunk + 777;
  std::vector<int> ok(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<unsigned char> src =
          upload_pattern_bytes(n + 1, 10 + static_cast<uint64_t>(t));
      const auto run = [&] {
        bool good = true;
        for (int rep = 0; rep < 2; ++rep) {
          const unsigned char* from = src.data() + rep;  // aligned and not
          good = good && device_holds_bytes(upload_host_bytes(from, n).to(kGpu), from, n);
        }
        ok[static_cast<size_t>(t)] = good ? 1 : 0;
      };
      if (t < 2) return run();  // the device's default stream, shared
      const cuda::OwnedStream own(0);
      const cuda::StreamGuard on(own.get());
      run();
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(ok[static_cast<size_t>(t)], 1) << "thread " << t;
}

TEST(CudaHostUpload, UploadsFromInsideParallelForTasksArriveIntact) {
  LTX_REQUIRE_CUDA();
  constexpr int64_t kTasks = 8;  // more than the staging buffers
  const size_t n = kUploadChunk + 99;
  const std::vector<unsigned char> src = upload_pattern_bytes(n + kTasks, 6);
  std::vector<int> ok(kTasks, 0);
  parallel_for(0, kTasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const unsigned char* from = src.data() + i;
      const bool good = device_holds_bytes(upload_host_bytes(from, n).to(kGpu), from, n);
      ok[static_cast<size_t>(i)] = good ? 1 : 0;
    }
  });
  for (int64_t i = 0; i < kTasks; ++i) EXPECT_EQ(ok[static_cast<size_t>(i)], 1) << "task " << i;
}

}  // namespace
}  // namespace ltx
