#pragma once
// A call recorded once as a CUDA graph and replayed (the transformer step once its shapes are
// fixed: one launch instead of a few thousand). The call runs on a private stream: the first run
// eagerly (one-time work such as kernel attributes and GEMM plans happens outside the capture),
// the second is captured and launched, later runs launch the graph. Each run is ordered after the
// work already queued on the caller's current stream, and that stream's later work after it.
//
// What the call may do: read tensors that stay alive at the same addresses between runs (write
// new inputs into them with copy_from before a run), and leave its results in such tensors. It
// must not wait for the host or copy from host memory (a capture fails then, with an ltx::Error
// that says so). Tensors it makes and drops are blocks of the private stream's cache, which stays
// pinned (allocator.h: pin_stream_memory) so the replays can write them.
#include <functional>

#include <cuda_runtime.h>

#include "backend/cuda/stream.h"

namespace ltx::cuda {

class CudaGraph {
 public:
  explicit CudaGraph(int device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void run(const std::function<void()>& call);
  // Whether the graph is recorded (after the second run).
  bool captured() const { return exec_ != nullptr; }

 private:
  int device_;
  OwnedStream stream_;
  int runs_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace ltx::cuda
