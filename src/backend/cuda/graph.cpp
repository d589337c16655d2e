#include "backend/cuda/graph.h"

#include <exception>
#include <string>

#include "backend/cuda/allocator.h"
#include "backend/cuda/device.h"
#include "core/error.h"

namespace ltx::cuda {

CudaGraph::CudaGraph(int device) : device_(device), stream_(device) {
  pin_stream_memory(stream_.get(), true);
}

CudaGraph::~CudaGraph() {
  DeviceGuard guard(device_);
  (void)cudaStreamSynchronize(stream_.get().handle());
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
  pin_stream_memory(stream_.get(), false);
}

void CudaGraph::run(const std::function<void()>& call) {
  DeviceGuard guard(device_);
  const Stream caller = current_stream(device_);
  const Stream own = stream_.get();
  Event ready;
  ready.record(caller);
  ready.wait(own);
  if (runs_ == 0) {
    StreamGuard on(own);
    call();
  } else {
    if (exec_ == nullptr) {
      StreamGuard on(own);
      // Relaxed: the allocator may still cudaMalloc a segment while the call is recorded.
      LTX_CUDA_CHECK(cudaStreamBeginCapture(own.handle(), cudaStreamCaptureModeRelaxed));
      try {
        call();
      } catch (const std::exception& e) {
        cudaGraph_t partial = nullptr;
        (void)cudaStreamEndCapture(own.handle(), &partial);
        if (partial != nullptr) (void)cudaGraphDestroy(partial);
        (void)cudaGetLastError();
        fail("CUDA graph capture of the step failed (the step must not wait for the host or copy "
             "from host memory while it is recorded): ", e.what());
      }
      const cudaError_t ended = cudaStreamEndCapture(own.handle(), &graph_);
      if (ended != cudaSuccess) {
        (void)cudaGetLastError();
        graph_ = nullptr;
        fail("CUDA graph capture of the step failed: ", cudaGetErrorString(ended),
             " (something in the step is not capturable: a host wait, a copy from host memory, "
             "or work on another stream)");
      }
      LTX_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    }
    LTX_CUDA_CHECK(cudaGraphLaunch(exec_, own.handle()));
  }
  ++runs_;
  Event done;
  done.record(own);
  done.wait(caller);
}

}  // namespace ltx::cuda
