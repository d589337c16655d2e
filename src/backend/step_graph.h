#pragma once
// A call recorded once and replayed: on a CUDA device a CUDA graph (backend/cuda/graph.h says
// what the call may do: read and write only tensors that stay in place between runs, never wait
// for the host); on the CPU every run simply makes the call.
#include <functional>
#include <memory>

#include "core/device.h"

namespace ltx::backend {

class StepGraph {
 public:
  explicit StepGraph(Device device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // CUDA: the first run is eager, the second records and launches the graph, later runs launch
  // it. Throws an ltx::Error when the call cannot be recorded.
  void run(const std::function<void()>& call);
  // Whether runs now replay a recorded graph.
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ltx::backend
