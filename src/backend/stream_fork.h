#pragma once
// Two lines of work inside one computation, run side by side on a GPU. The transformer issues
// each block's audio half on the side line while the video half runs on the main line: the
// audio tokens (~126) make chains of small, latency-bound kernels that leave most of the GPU
// idle, and beside the video's large GEMMs they cost little more than the SMs they borrow.
//
// The main line is the calling thread's current stream; the side line is the device's side
// stream (cuda::side_stream, highest priority). The caller:
//   - issues side work inside on_side(f);
//   - orders the lines where one reads what the other made: fork() makes later side work wait for
//     the main work issued so far, join() makes later main work wait for the side work so far
//     (the destructor joins);
//   - declares each tensor made on one line and read by work on the other with read_on_side() /
//     read_on_main(), so that its memory is not reused when its owner drops it while the reader
//     is still running (the allocator's record_stream).
// Inactive on the CPU, while the main stream is being captured into a CUDA graph, and when side
// streams are disabled (set_side_streams_enabled, LTX_SIDE_STREAMS=0): then every call is a no-op
// and on_side runs f on the main line. Kernels are the same either way, so the results are equal
// bit for bit.
#include <functional>
#include <memory>

#include "core/device.h"
#include "core/tensor.h"

namespace ltx::backend {

// Whether new StreamForks may use a side stream (default: on unless the environment variable
// LTX_SIDE_STREAMS is "0"). For A/B timing and tests.
bool side_streams_enabled();
void set_side_streams_enabled(bool enabled);

class StreamFork {
 public:
  explicit StreamFork(Device device);
  ~StreamFork();  // join()s, never throws
  StreamFork(const StreamFork&) = delete;
  StreamFork& operator=(const StreamFork&) = delete;

  bool active() const;
  void fork();
  void join();
  void on_side(const std::function<void()>& f);
  void read_on_side(const Tensor& made_on_main);
  void read_on_main(const Tensor& made_on_side);

 private:
  // Declares `t` read by the side line (side) or by the main line.
  void read_on(const Tensor& t, bool side);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ltx::backend
