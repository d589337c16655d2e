#include "sampling/non_finite_watch.h"

#include <cmath>

#include "core/error.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace ltx::sampling {

namespace {

// The sum of every element, in a dtype the reductions take on x's device (f32 on the CPU, f32 or
// bf16 on CUDA: a bf16 sum has f32's exponent range, so a finite latent's sum stays finite).
Tensor total(const Tensor& x) {
  const bool native = x.dtype() == DType::F32 || (x.device().is_cuda() && x.dtype() == DType::BF16);
  return ops::sum(native ? x : x.to(DType::F32)).reshape(Shape{1});
}

}  // namespace

void NonFiniteWatch::check(const Tensor& x, const char* latent, std::string when) {
  if (!x.defined() || x.numel() == 0) return;
  Tensor s = total(x);
  if (!x.device().is_cuda()) {
    if (!std::isfinite(s.item())) report(latent, when);
    return;
  }
  pending_.push_back({std::move(s), latent, std::move(when)});
}

void NonFiniteWatch::finish() {
  if (pending_.empty()) return;
  std::vector<Tensor> sums;
  sums.reserve(pending_.size());
  for (const Pending& p : pending_) sums.push_back(p.sum.to(DType::F32));
  const std::vector<float> v = ops::concat(sums, 0).to_float_vector();
  std::vector<Pending> pending = std::move(pending_);
  pending_.clear();
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) report(pending[i].latent, pending[i].when);
}

void NonFiniteWatch::report(const std::string& latent, const std::string& when) const {
  fail(stage_, ": the ", latent, " latent holds NaN or Inf values (", when,
       "); a model weight or an input is not finite, or a value overflowed its dtype (check the "
       "model files with `ltx inspect`; bf16 overflow: try --quantization none or f32 on the CPU); "
       "nothing was written");
}

}  // namespace ltx::sampling
