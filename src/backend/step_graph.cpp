#include "backend/step_graph.h"

#include "backend/device_query.h"
#if LTX_WITH_CUDA
#include "backend/cuda/graph.h"
#endif

namespace ltx::backend {

struct StepGraph::Impl {
#if LTX_WITH_CUDA
  std::unique_ptr<cuda::CudaGraph> graph;
#endif
};

StepGraph::StepGraph(Device device) : impl_(std::make_unique<Impl>()) {
  check_device(device);
#if LTX_WITH_CUDA
  if (device.is_cuda()) impl_->graph = std::make_unique<cuda::CudaGraph>(device.index);
#endif
}

StepGraph::~StepGraph() = default;

void StepGraph::run(const std::function<void()>& call) {
#if LTX_WITH_CUDA
  if (impl_->graph) {
    impl_->graph->run(call);
    return;
  }
#endif
  call();
}

bool StepGraph::captured() const {
#if LTX_WITH_CUDA
  return impl_->graph && impl_->graph->captured();
#else
  return false;
#endif
}

}  // namespace ltx::backend
