#pragma once
// The error a device allocation throws when it cannot be served: the driver has no memory left,
// or serving it would take the allocator past its memory limit (--max-gpu-memory). A distinct type
// so that a caller holding memory it can give back (the resident engine's model cache) can tell
// this failure from every other one, free what it holds and try again.
#include <string>

#include "core/error.h"

namespace ltx {

class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(const std::string& message) : Error(message) {}
};

// What a message about running out of device memory suggests, after its first sentence.
inline constexpr const char* kOutOfMemoryHelp =
    "what helps: a larger --max-gpu-memory (when the device has it), --quantization fp8-cast, "
    "--offload cpu, or a smaller --width / --height / --num-frames";

}  // namespace ltx
