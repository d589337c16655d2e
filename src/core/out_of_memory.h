#pragma once
// The error a device allocation throws when it cannot be served: the driver has no memory left,
// or serving it would take the allocator past its memory limit (--max-gpu-memory). A distinct type
// so that a caller holding memory it can give back (the resident engine's model cache) can tell
// this failure from every other one, free what it holds and try again.
//
// Its message names what was being allocated: the tensor (shape and dtype, filled in by
// Tensor::empty on the way out), what the thread was doing (MemoryScope: the generation's stage,
// the weight being loaded), the bytes, the device's free and total memory and the flags that help.
#include <cstddef>
#include <optional>
#include <string>

#include "core/error.h"

namespace ltx {

// What a message about running out of device memory suggests, after its first sentence.
inline constexpr const char* kOutOfMemoryHelp =
    "what helps: a larger --max-gpu-memory (when the device has it), --quantization fp8-cast, "
    "--offload cpu, or a smaller --width / --height / --num-frames";

// The facts of one failed device allocation.
struct OutOfMemoryReport {
  int device = 0;
  size_t requested_bytes = 0;
  size_t allocated_bytes = 0;  // handed out by the allocator at the time
  size_t limit_bytes = 0;      // the --max-gpu-memory budget (0: none)
  size_t reserved_bytes = 0;   // held from the driver
  size_t free_bytes = 0, total_bytes = 0;  // the device's, as the driver reports them
  std::string tensor;  // "bf16[1, 4096, 4096]" when a tensor was being made, else ""
  std::string scope;   // memory_scope() at the failure, e.g. "stage 1" or "model loading, weight 'w'"
};

// "out of GPU memory on cuda:0 during stage 1: tried to allocate 48.00 MiB for a bf16[1, 4096,
// 4096] tensor (200.00 MiB allocated, no --max-gpu-memory budget, 12.00 MiB free of 81559.00 MiB
// on the device); what helps: ..."
std::string out_of_memory_message(const OutOfMemoryReport& r);

class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(const std::string& message) : Error(message) {}
  explicit OutOfMemory(OutOfMemoryReport r) : Error(out_of_memory_message(r)), report_(std::move(r)) {}
  // The facts behind the message, when an allocator threw it.
  const std::optional<OutOfMemoryReport>& report() const { return report_; }

 private:
  std::optional<OutOfMemoryReport> report_;
};

// The stage of work the calling thread is in ("stage 1", "video decode"; "" for none), named first by
// an out-of-memory error. Set by generate::Progress at every stage start and cleared at its end
// (several Progress objects of one batch set the same names on one thread).
void set_memory_stage(const std::string& stage);

// Names what the calling thread allocates for while it lives, after the stage ("during stage 1,
// weight 'x'"); scopes nest and restore the outer text when they end (strictly nested lifetimes).
class MemoryScope {
 public:
  explicit MemoryScope(const std::string& what);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  std::string saved_;
};

// The calling thread's stage and scopes, outermost first ("" when none).
std::string memory_scope();

}  // namespace ltx
