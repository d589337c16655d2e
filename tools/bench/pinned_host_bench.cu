// Page-locking speed of the ways to put a streamed model's blocks in page-locked host memory
// (backend/cuda/block_ring.cpp pinned_host_allocate): cudaHostAlloc, or anonymous memory (with and
// without transparent huge pages) touched by 8 threads then cudaHostRegister; 20 blocks of 400 MiB,
// and the host-to-device bandwidth from each. On the GPU machine:
//   nvcc -O2 -std=c++17 -o /tmp/pin tools/bench/pinned_host_bench.cu && /tmp/pin
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
using clk = std::chrono::steady_clock;
static double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }
static void touch(char* p, size_t n, int threads) {
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i)
    ts.emplace_back([=] { size_t a = n * i / threads, b = n * (i + 1) / threads; memset(p + a, 1, b - a); });
  for (auto& t : ts) t.join();
}
int main() {
  cudaFree(0);
  const size_t block = size_t(400) << 20; const int blocks = 20;
  for (int mode = 0; mode < 4; ++mode) {
    std::vector<void*> ptrs;
    auto t0 = clk::now();
    double fill = 0;
    for (int i = 0; i < blocks; ++i) {
      void* p = nullptr;
      if (mode == 0 || mode == 1) {
        cudaHostAlloc(&p, block, cudaHostAllocDefault);
        auto t1 = clk::now(); touch((char*)p, block, mode == 0 ? 1 : 8); fill += since(t1);
      } else {
        p = mmap(nullptr, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mode == 3) madvise(p, block, MADV_HUGEPAGE);
        auto t1 = clk::now(); touch((char*)p, block, 8); fill += since(t1);
        cudaHostRegister(p, block, cudaHostRegisterDefault);
      }
      ptrs.push_back(p);
    }
    double total = since(t0);
    // H2D bandwidth from the last block
    void* d; cudaMalloc(&d, block); auto t2 = clk::now();
    for (int r = 0; r < 5; ++r) cudaMemcpy(d, ptrs.back(), block, cudaMemcpyHostToDevice);
    double bw = 5.0 * block / since(t2) / 1e9; cudaFree(d);
    const char* names[] = {"cudaHostAlloc + 1-thread fill", "cudaHostAlloc + 8-thread fill",
                           "mmap + 8-thread fill + cudaHostRegister", "mmap + THP + 8-thread fill + cudaHostRegister"};
    printf("%-48s %.2f GiB: %.2f s (fill %.2f s) -> %.2f GiB/s; H2D %.1f GB/s; err %s\n", names[mode],
           blocks * block / 1073741824.0, total, fill, blocks * block / 1073741824.0 / total, bw,
           cudaGetErrorString(cudaGetLastError()));
    for (void* p : ptrs) {
      if (mode < 2) cudaFreeHost(p); else { cudaHostUnregister(p); munmap(p, block); }
    }
  }
}
