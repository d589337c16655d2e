#pragma once
// Catches a NaN or an infinity in the latents of a denoising loop and names where it appeared
// (stage, step, video or audio latent) instead of letting it reach the output as black or noise
// frames. The check is one sum per latent per model call: a sum over a tensor holding a NaN or an
// infinity is itself NaN or infinite (finite latents cannot overflow the double accumulation), so
// the loop needs no extra kernel. On the CPU each sum is read at once and the run stops at that
// step; on a GPU the sums stay on the device and are read together when the loop ends (nothing is
// read back inside a step), naming the same first step.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ltx::sampling {

class NonFiniteWatch {
 public:
  // `stage` names the loop in the error ("stage 1").
  explicit NonFiniteWatch(std::string stage) : stage_(std::move(stage)) {}

  // Checks `x` (undefined: nothing to check). `latent` is "video" or "audio"; `when` says at what
  // point of the loop, e.g. "the transformer's prediction at step 3 of 30". Throws ltx::Error at
  // once for a host tensor holding a NaN or Inf; a device tensor's sum is kept for finish().
  void check(const Tensor& x, const char* latent, std::string when);
  // Reads the kept sums (one read-back) and throws for the first non-finite one; a watch with
  // none kept costs nothing.
  void finish();

 private:
  struct Pending {
    Tensor sum;
    std::string latent, when;
  };
  std::string stage_;
  std::vector<Pending> pending_;

  [[noreturn]] void report(const std::string& latent, const std::string& when) const;
};

}  // namespace ltx::sampling
