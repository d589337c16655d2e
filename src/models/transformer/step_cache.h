#pragma once
// Step caching (`ltx generate --cache`): between adjacent model calls of one denoising loop,
// reuse the work of most transformer blocks when a cheap signal says it barely changed.
//
// fbcache (first-block cache, the signal of Cache-DiT's DBCache with Fn first blocks and no Bn
// tail): every call runs the first `first_blocks` blocks; their residual R1 = x_after - x_in is
// compared with R1 of the last fully computed call by the relative L1 distance
// sum|R1 - R1_prev| / sum|R1_prev|, per sample and per stream (video, audio). When every sample of
// every stream that runs is below `threshold`, the remaining blocks are skipped and their residual
// from the last computed call is added instead: x_out = x_after_first + R_rest_prev. Otherwise
// they run and R1, R_rest are kept for the next calls.
//
// One LTXModel::forward call holds all the guidance passes of a step (cond, uncond, STG,
// isolated modality: samples of one batch, pipelines::GuidedDenoiser), so each pass keeps its
// own residuals (its rows of the batch) but the decision is one per call: skipping the tail for
// some rows only would split the batch, and a fresh cond next to a stale uncond would let the
// guidance scale amplify the stale part of their difference.
//
// The decision reads one small tensor back from the device per call (the distances); with the
// cache off nothing changes and nothing is read back.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ltx::models::transformer {

enum class StepCacheMode {
  None,        // every call runs every block (default)
  FirstBlock,  // fbcache, above
};
const char* step_cache_mode_name(StepCacheMode mode);  // "none", "fbcache"
// Throws ltx::Error naming --cache and the valid modes.
StepCacheMode parse_step_cache_mode(const std::string& name);

struct StepCacheParams {
  StepCacheMode mode = StepCacheMode::None;
  // Relative L1 distance below which a call reuses (0: never reuse; Cache-DiT's default 0.08).
  double threshold = 0.08;
  // The first steps always computed in full (the last step is too; Cache-DiT's default 8).
  int64_t warmup_steps = 8;
  // Blocks that always run and give the signal (Cache-DiT's command line uses 1 by default).
  int64_t first_blocks = 1;

  bool enabled() const { return mode != StepCacheMode::None; }
  // Throws ltx::Error naming the flag (--cache-threshold, --cache-warmup-steps,
  // --cache-first-blocks) when a value is out of range.
  void validate() const;
  // "fbcache (threshold 0.08, warm-up 8 steps, first 1 block)" or "none".
  std::string str() const;
};

// The state of one denoising loop (owned by its denoiser; one per loop, as the text K / V cache).
class StepCache {
 public:
  explicit StepCache(const StepCacheParams& params);
  const StepCacheParams& params() const { return params_; }

  // Before each model call: whether this call may reuse (false in the warm-up and the last step),
  // and the layout of its batch (the passes and samples, in order): a call whose layout differs
  // from the kept residuals' computes in full.
  void begin_call(bool reuse_allowed, const std::string& layout);

  // Blocks that always run in a model of `num_blocks` blocks.
  int64_t first_blocks(int64_t num_blocks) const;

  // The decision, from each stream's residual of the first blocks (undefined: the stream does not
  // run in this call). True: the caller adds rest_residual(stream) to its states instead of the
  // remaining blocks. False: the caller runs them and calls store_rest.
  bool decide(const Tensor& video_first, const Tensor& audio_first);
  const Tensor& rest_residual(int stream) const { return rest_[stream]; }
  // After a computed call: the residual of the remaining blocks per stream (0 video, 1 audio).
  void store_rest(const Tensor& video_rest, const Tensor& audio_rest);

  // Calls computed in full and calls that reused, so far.
  int64_t computed() const { return computed_; }
  int64_t reused() const { return reused_; }
  // The largest distance of the last call that compared (-1: none yet).
  double last_distance() const { return last_distance_; }

 private:
  StepCacheParams params_;
  bool reuse_allowed_ = false;
  std::string layout_, kept_layout_;
  Tensor first_[2], rest_[2];  // kept from the last computed call, per stream
  Tensor pending_first_[2];    // this call's, kept by store_rest
  int64_t computed_ = 0, reused_ = 0;
  double last_distance_ = -1.0;
};

// What step caching did in one denoising stage: its model calls computed in full and reused.
struct StepCacheReport {
  std::string stage;  // "stage 1"
  int64_t computed = 0, reused = 0;
};
// "step cache fbcache (threshold 0.08, ...): stage 1 computed 12 of 20 model calls, reused 8";
// "" when `reports` is empty.
std::string format_step_cache(const StepCacheParams& params, const std::vector<StepCacheReport>& reports);

// Per sample of [B, ...] tensors: sum|a - b| / sum|b| in f32, [B] on their device.
Tensor relative_l1_per_sample(const Tensor& a, const Tensor& b);

}  // namespace ltx::models::transformer
