#include "models/transformer/step_cache.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace ltx::models::transformer {

const char* step_cache_mode_name(StepCacheMode mode) {
  switch (mode) {
    case StepCacheMode::None: return "none";
    case StepCacheMode::FirstBlock: return "fbcache";
  }
  return "?";
}

StepCacheMode parse_step_cache_mode(const std::string& name) {
  for (StepCacheMode m : {StepCacheMode::None, StepCacheMode::FirstBlock})
    if (name == step_cache_mode_name(m)) return m;
  fail("--cache ", name, ": unknown mode; use none (default) or fbcache");
}

void StepCacheParams::validate() const {
  LTX_CHECK(std::isfinite(threshold) && threshold >= 0.0, "--cache-threshold ", threshold,
            " must be a number >= 0 (0: never reuse; the public reports use 0.05 to 0.2)");
  LTX_CHECK(warmup_steps >= 0, "--cache-warmup-steps ", warmup_steps, " must be >= 0");
  LTX_CHECK(first_blocks >= 1, "--cache-first-blocks ", first_blocks, " must be >= 1");
}

std::string StepCacheParams::str() const {
  if (!enabled()) return "none";
  std::ostringstream s;
  s << step_cache_mode_name(mode) << " (threshold " << threshold << ", warm-up " << warmup_steps
    << (warmup_steps == 1 ? " step" : " steps") << ", first " << first_blocks
    << (first_blocks == 1 ? " block)" : " blocks)");
  return s.str();
}

std::string format_step_cache(const StepCacheParams& params, const std::vector<StepCacheReport>& reports) {
  if (reports.empty()) return {};
  std::string s = "step cache " + params.str() + ":";
  for (size_t i = 0; i < reports.size(); ++i) {
    const StepCacheReport& r = reports[i];
    s += std::string(i ? "; " : " ") + r.stage + " computed " + std::to_string(r.computed) + " of " +
         std::to_string(r.computed + r.reused) + " model calls, reused " + std::to_string(r.reused);
  }
  return s;
}

StepCache::StepCache(const StepCacheParams& params) : params_(params) { params_.validate(); }

void StepCache::begin_call(bool reuse_allowed, const std::string& layout) {
  reuse_allowed_ = reuse_allowed;
  layout_ = layout;
  for (Tensor& t : pending_first_) t = Tensor();
}

int64_t StepCache::first_blocks(int64_t num_blocks) const {
  return std::min(params_.first_blocks, num_blocks);
}

Tensor relative_l1_per_sample(const Tensor& a, const Tensor& b) {
  LTX_CHECK(a.shape() == b.shape() && a.dim() >= 2, "step cache: residuals ", a.shape().str(), " and ",
            b.shape().str(), " differ");
  const Tensor b32 = b.to(DType::F32);
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < a.dim(); ++d) dims.push_back(d);
  const Tensor num = ops::sum(ops::abs(ops::sub(a.to(DType::F32), b32)), dims);
  const Tensor den = ops::sum(ops::abs(b32), dims);
  return ops::div(num, den);
}

bool StepCache::decide(const Tensor& video_first, const Tensor& audio_first) {
  const Tensor* now[2] = {&video_first, &audio_first};
  bool comparable = reuse_allowed_ && layout_ == kept_layout_ && params_.threshold > 0.0 &&
                    (video_first.defined() || audio_first.defined());
  for (int s = 0; s < 2 && comparable; ++s)
    comparable = now[s]->defined() == first_[s].defined() &&
                 (!now[s]->defined() || now[s]->shape() == first_[s].shape());
  bool reuse = false;
  if (comparable) {
    // Every stream's distances in one read-back.
    std::vector<Tensor> parts;
    for (int s = 0; s < 2; ++s)
      if (now[s]->defined()) parts.push_back(relative_l1_per_sample(*now[s], first_[s]));
    const std::vector<float> d = (parts.size() == 1 ? parts.front() : ops::concat(parts, 0)).to_float_vector();
    double worst = 0.0;
    bool finite = true;
    for (float v : d) {
      finite = finite && std::isfinite(v);
      worst = std::max(worst, static_cast<double>(v));
    }
    last_distance_ = finite ? worst : INFINITY;
    reuse = finite && worst < params_.threshold;
    log_debug("step cache: first-block change ", last_distance_, reuse ? " < " : " >= ", params_.threshold,
              reuse ? ": reused" : ": computed");
  }
  if (reuse) {
    ++reused_;
  } else {
    ++computed_;
    for (int s = 0; s < 2; ++s) pending_first_[s] = *now[s];
  }
  return reuse;
}

void StepCache::store_rest(const Tensor& video_rest, const Tensor& audio_rest) {
  for (int s = 0; s < 2; ++s) first_[s] = std::move(pending_first_[s]);
  rest_[0] = video_rest;
  rest_[1] = audio_rest;
  kept_layout_ = layout_;
}

}  // namespace ltx::models::transformer
