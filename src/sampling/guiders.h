#pragma once
// Guidance: how the passes of one denoising step (cond, uncond, perturbed, isolated-modality) are
// combined into the x0 prediction. All maths in float32 like the reference. MultiModalGuider,
// CFGGuider and STGGuider compute with tensor ops on their inputs' device (results there); the
// projection-based guiders read their inputs on the host and return f32 CPU tensors.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ltx::sampling {

// MultiModalGuiderParams, with the reference's defaults (a guider with these defaults only runs
// the conditioned pass and returns it unchanged).
struct GuiderParams {
  double cfg_scale = 1.0;       // classifier-free guidance
  double stg_scale = 0.0;       // spatio-temporal guidance (perturbed self-attention)
  std::vector<int> stg_blocks;  // transformer blocks whose self-attention the STG pass skips
  double rescale_scale = 0.0;   // blend toward std(cond)/std(pred) rescaling
  double modality_scale = 1.0;  // isolated-modality guidance (A2V/V2A cross-attention skipped)
  int skip_step = 0;            // 0 = never; k = reuse the previous result except every (k+1)-th step

  bool operator==(const GuiderParams& o) const = default;
  std::string str() const;
};

// One pass result: a tensor, or "not run" (the reference then passes the float 0.0).
using PassOutput = std::optional<Tensor>;

class MultiModalGuider {
 public:
  MultiModalGuider() = default;
  explicit MultiModalGuider(GuiderParams params) : params_(std::move(params)) {}
  const GuiderParams& params() const { return params_; }

  // pred = cond + (cfg-1)(cond-uncond) + stg(cond-ptb) + (mod-1)(cond-mod), then, when
  // rescale != 0, pred *= rescale * std(cond)/std(pred) + (1 - rescale) with the unbiased std over
  // the WHOLE tensor (all batch entries). A pass that was not run counts as 0.0, as in the
  // reference. Computed in f32; returned in cond's dtype (bf16 in the pipelines), as the reference.
  Tensor calculate(const Tensor& cond, const PassOutput& uncond, const PassOutput& perturbed,
                   const PassOutput& modality) const;

  // Which extra passes the guider needs (the reference's math.isclose tests).
  bool do_unconditional_generation() const;
  bool do_perturbed_generation() const;
  bool do_isolated_modality_generation() const;
  // True when step `step` reuses the previous denoised result (skip_step > 0).
  bool should_skip_step(int step) const;

 private:
  GuiderParams params_;
};

// Sigma-binned guider parameters (MultiModalGuiderFactory). Keys are bin upper bounds: a sigma
// uses the smallest key >= sigma, or the largest key when sigma is above every key.
class MultiModalGuiderFactory {
 public:
  // The same params for every sigma.
  static MultiModalGuiderFactory constant(const GuiderParams& params);
  // From (sigma upper bound, params) pairs in any order; throws when empty or a key repeats.
  static MultiModalGuiderFactory from_bins(std::vector<std::pair<double, GuiderParams>> bins);
  const GuiderParams& params(double sigma) const;
  MultiModalGuider build(double sigma) const { return MultiModalGuider(params(sigma)); }
  // Bins sorted by descending key.
  const std::vector<std::pair<double, GuiderParams>>& bins() const { return bins_; }

 private:
  std::vector<std::pair<double, GuiderParams>> bins_;
};

// The guided denoiser's passes for one step (the reference's `_guided_denoise`), in batch order.
// A present modality without its own guider uses the positive-only guider (default params).
struct GuidancePass {
  enum class Kind { Cond, Uncond, Perturbed, IsolatedModality };
  Kind kind = Kind::Cond;
  bool negative_context = false;                   // uncond: the negative prompt's contexts
  std::optional<std::vector<int>> skip_video_self_attn;  // blocks (set only for Perturbed)
  std::optional<std::vector<int>> skip_audio_self_attn;  // blocks (set only for Perturbed)
  bool skip_cross_modal_attn = false;              // A2V and V2A skipped in every block
  const char* name() const;
};
struct GuidancePlan {
  bool skip_video = false;  // video guider skips this step: reuse its last denoised result
  bool skip_audio = false;
  bool skip_all = false;    // both skip: no transformer call at all
  std::vector<GuidancePass> passes;
  int index_of(GuidancePass::Kind kind) const;  // -1 when absent
};
// `force_uncond_pass` adds the uncond pass even at cfg 1 (the CFG++ sampler needs it).
GuidancePlan plan_guidance(const MultiModalGuider& video, const MultiModalGuider& audio, bool has_video,
                           bool has_audio, int step_index, bool force_uncond_pass = false);

// Batch-wise projection coefficient <a, b> / (|b|^2 + 1e-8) over all but dim 0; shape (B, 1).
Tensor projection_coef(const Tensor& to_project, const Tensor& project_onto);

// The single guiders (not used by the pipelines; kept for parity). Each delta is what is added to
// cond. Batch 1 only where projection_coef is involved (the reference's (B,1) broadcast is only
// right for B == 1).
struct CFGGuider {
  double scale = 1.0;
  Tensor delta(const Tensor& cond, const Tensor& uncond) const;  // (s-1)(cond - uncond)
  bool enabled() const { return scale != 1.0; }
};
struct CFGStarRescalingGuider {
  double scale = 1.0;
  Tensor delta(const Tensor& cond, const Tensor& uncond) const;  // (s-1)(cond - coef*uncond)
  bool enabled() const { return scale != 1.0; }
};
struct STGGuider {
  double scale = 0.0;
  Tensor delta(const Tensor& cond, const Tensor& perturbed) const;  // s(cond - perturbed)
  bool enabled() const { return scale != 0.0; }
};
// Adaptive projected guidance: the guidance split into parts parallel / orthogonal to cond.
struct LtxAPGGuider {
  double scale = 1.0;
  double eta = 1.0;
  double norm_threshold = 0.0;  // > 0: clip the guidance's L2 norm over the last three dims
  Tensor delta(const Tensor& cond, const Tensor& uncond) const;
  bool enabled() const { return scale != 1.0; }
};
// APG with a running average of the guidance across calls (one instance per denoising run and
// modality). Its delta is scaled by `scale` (not scale - 1).
class LegacyStatefulAPGGuider {
 public:
  LegacyStatefulAPGGuider(double scale, double eta, double norm_threshold = 5.0, double momentum = 0.0)
      : scale_(scale), eta_(eta), norm_threshold_(norm_threshold), momentum_(momentum) {}
  Tensor delta(const Tensor& cond, const Tensor& uncond);
  bool enabled() const { return scale_ != 0.0; }
  void reset() { running_avg_.clear(); }

 private:
  double scale_, eta_, norm_threshold_, momentum_;
  std::vector<float> running_avg_;
};

}  // namespace ltx::sampling
