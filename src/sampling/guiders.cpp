#include "sampling/guiders.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ltx::sampling {
namespace {

// Python's math.isclose(a, b) with its defaults (rel_tol 1e-9, abs_tol 0).
bool py_isclose(double a, double b) {
  if (a == b) return true;
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

std::vector<float> host_f32(const Tensor& t, const char* what) {
  LTX_CHECK(t.defined(), "guider: ", what, " is an undefined tensor");
  return t.to_float_vector();
}

void check_same_shape(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  LTX_CHECK(a.shape() == b.shape(), op, ": ", an, " ", a.describe(), " and ", bn, " ", b.describe(),
            " must have the same shape");
}

// Per-batch <a, b> / (|b|^2 + 1e-8), in float32 (sums accumulated in double, then rounded).
std::vector<float> batch_projection(const std::vector<float>& a, const std::vector<float>& b, int64_t batch) {
  const int64_t per = static_cast<int64_t>(a.size()) / batch;
  std::vector<float> coef(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) {
    double dot = 0, sq = 0;
    for (int64_t j = i * per; j < (i + 1) * per; ++j) {
      dot += static_cast<double>(a[j] * b[j]);
      sq += static_cast<double>(b[j] * b[j]);
    }
    const float denom = static_cast<float>(sq) + 1e-8f;
    coef[static_cast<size_t>(i)] = static_cast<float>(dot) / denom;
  }
  return coef;
}

// Adaptive projected guidance on a per-batch basis (shared by both APG guiders).
Tensor apg_delta(std::vector<float> guidance, const Tensor& cond_t, double eta, double norm_threshold,
                 double out_scale) {
  const std::vector<float> cond = host_f32(cond_t, "cond");
  const int64_t batch = cond_t.dim() > 0 ? cond_t.size(0) : 1;
  if (norm_threshold > 0) {
    // L2 norm over the last three dims (all dims when the tensor has at most three).
    const int64_t groups = cond_t.dim() > 3 ? cond_t.numel() / (cond_t.size(-1) * cond_t.size(-2) * cond_t.size(-3)) : 1;
    const int64_t per = static_cast<int64_t>(guidance.size()) / groups;
    const float thr = static_cast<float>(norm_threshold);
    for (int64_t g = 0; g < groups; ++g) {
      double ss = 0;
      for (int64_t j = g * per; j < (g + 1) * per; ++j) ss += static_cast<double>(guidance[j]) * guidance[j];
      const float norm = static_cast<float>(std::sqrt(ss));
      // threshold / norm is reciprocal(norm) * threshold in torch.
      const float factor = std::min(1.0f, (1.0f / norm) * thr);
      for (int64_t j = g * per; j < (g + 1) * per; ++j) guidance[j] = guidance[j] * factor;
    }
  }
  const std::vector<float> coef = batch_projection(guidance, cond, batch);
  const int64_t per = static_cast<int64_t>(cond.size()) / batch;
  const float e = static_cast<float>(eta), s = static_cast<float>(out_scale);
  std::vector<float> out(cond.size());
  for (size_t j = 0; j < cond.size(); ++j) {
    const float parallel = coef[j / static_cast<size_t>(per)] * cond[j];
    const float orth = guidance[j] - parallel;
    out[j] = (parallel * e + orth) * s;
  }
  return Tensor::from_vector(out, cond_t.shape());
}

}  // namespace

std::string GuiderParams::str() const {
  std::ostringstream os;
  os << "cfg " << cfg_scale << ", stg " << stg_scale << " blocks [";
  for (size_t i = 0; i < stg_blocks.size(); ++i) os << (i ? "," : "") << stg_blocks[i];
  os << "], rescale " << rescale_scale << ", modality " << modality_scale << ", skip_step " << skip_step;
  return os.str();
}

Tensor MultiModalGuider::calculate(const Tensor& cond_t, const PassOutput& uncond, const PassOutput& perturbed,
                                   const PassOutput& modality) const {
  LTX_CHECK(cond_t.defined(), "guider: cond is an undefined tensor");
  // f32 ops on cond's device, one rounding per op as the reference's torch expression.
  const Tensor c = cond_t.to(DType::F32);
  // cond - pass; a pass that was not run is the float 0.0, and cond - 0.0 == cond.
  auto delta = [&](const PassOutput& p, const char* name) -> Tensor {
    if (!p) return c;
    LTX_CHECK(p->defined(), "guider: ", name, " is an undefined tensor");
    check_same_shape("MultiModalGuider::calculate", cond_t, "cond", *p, name);
    return ops::sub(c, p->to(DType::F32));
  };
  const Tensor du = delta(uncond, "uncond"), dp = delta(perturbed, "perturbed"), dm = delta(modality, "modality");
  const float cfg = static_cast<float>(params_.cfg_scale - 1);
  const float stg = static_cast<float>(params_.stg_scale);
  const float mod = static_cast<float>(params_.modality_scale - 1);
  // ((c + cfg du) + stg dp) + mod dm: every term is kept (even at scale 0) so signed zeros and
  // non-finite values propagate exactly as in the reference.
  Tensor pred = ops::add(ops::add(ops::add(c, ops::mul(du, cfg)), ops::mul(dp, stg)), ops::mul(dm, mod));
  if (params_.rescale_scale != 0) {
    // factor = rescale * std(cond) / std(pred) + (1 - rescale), as 0-d tensors on the device (no
    // host sync). ops::std is two-pass in double over the whole tensor, rounded to f32 once.
    LTX_CHECK(c.numel() >= 2, "guider rescale: std needs at least 2 elements, got ", c.numel());
    const Tensor ratio = ops::div(ops::std(c), ops::std(pred));
    const Tensor factor = ops::add(ops::mul(ratio, static_cast<float>(params_.rescale_scale)),
                                   static_cast<float>(1 - params_.rescale_scale));
    pred = ops::mul(pred, factor);
  }
  return pred.to(cond_t.dtype());
}

bool MultiModalGuider::do_unconditional_generation() const { return !py_isclose(params_.cfg_scale, 1.0); }
bool MultiModalGuider::do_perturbed_generation() const { return !py_isclose(params_.stg_scale, 0.0); }
bool MultiModalGuider::do_isolated_modality_generation() const {
  return !py_isclose(params_.modality_scale, 1.0);
}
bool MultiModalGuider::should_skip_step(int step) const {
  if (params_.skip_step == 0) return false;
  return step % (params_.skip_step + 1) != 0;
}

MultiModalGuiderFactory MultiModalGuiderFactory::constant(const GuiderParams& params) {
  MultiModalGuiderFactory f;
  f.bins_.emplace_back(std::numeric_limits<double>::infinity(), params);
  return f;
}

MultiModalGuiderFactory MultiModalGuiderFactory::from_bins(std::vector<std::pair<double, GuiderParams>> bins) {
  LTX_CHECK(!bins.empty(), "MultiModalGuiderFactory: give at least one (sigma, params) bin");
  std::sort(bins.begin(), bins.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 1; i < bins.size(); ++i)
    LTX_CHECK(bins[i].first != bins[i - 1].first, "MultiModalGuiderFactory: sigma key ", bins[i].first,
              " given twice");
  MultiModalGuiderFactory f;
  f.bins_ = std::move(bins);
  return f;
}

const GuiderParams& MultiModalGuiderFactory::params(double sigma) const {
  LTX_CHECK(!bins_.empty(), "MultiModalGuiderFactory: no bins");
  // Smallest key >= sigma (keys descend); above every key: the first (largest) bin.
  const GuiderParams* found = &bins_.front().second;
  for (const auto& [key, p] : bins_)
    if (key >= sigma) found = &p;
  return *found;
}

const char* GuidancePass::name() const {
  switch (kind) {
    case Kind::Cond: return "cond";
    case Kind::Uncond: return "uncond";
    case Kind::Perturbed: return "ptb";
    case Kind::IsolatedModality: return "mod";
  }
  return "?";
}

int GuidancePlan::index_of(GuidancePass::Kind kind) const {
  for (size_t i = 0; i < passes.size(); ++i)
    if (passes[i].kind == kind) return static_cast<int>(i);
  return -1;
}

GuidancePlan plan_guidance(const MultiModalGuider& video, const MultiModalGuider& audio, bool has_video,
                           bool has_audio, int step_index, bool force_uncond_pass) {
  GuidancePlan plan;
  plan.skip_video = video.should_skip_step(step_index);
  plan.skip_audio = audio.should_skip_step(step_index);
  if (plan.skip_video && plan.skip_audio) {
    plan.skip_all = true;
    return plan;
  }
  plan.passes.push_back({});
  const bool v_neg = video.do_unconditional_generation() || (force_uncond_pass && has_video);
  const bool a_neg = audio.do_unconditional_generation() || (force_uncond_pass && has_audio);
  if (v_neg || a_neg) {
    GuidancePass p;
    p.kind = GuidancePass::Kind::Uncond;
    p.negative_context = true;
    plan.passes.push_back(p);
  }
  if (video.do_perturbed_generation() || audio.do_perturbed_generation()) {
    GuidancePass p;
    p.kind = GuidancePass::Kind::Perturbed;
    if (video.do_perturbed_generation()) p.skip_video_self_attn = video.params().stg_blocks;
    if (audio.do_perturbed_generation()) p.skip_audio_self_attn = audio.params().stg_blocks;
    plan.passes.push_back(p);
  }
  if (video.do_isolated_modality_generation() || audio.do_isolated_modality_generation()) {
    GuidancePass p;
    p.kind = GuidancePass::Kind::IsolatedModality;
    p.skip_cross_modal_attn = true;
    plan.passes.push_back(p);
  }
  return plan;
}

Tensor projection_coef(const Tensor& to_project, const Tensor& project_onto) {
  check_same_shape("projection_coef", to_project, "to_project", project_onto, "project_onto");
  LTX_CHECK(to_project.dim() >= 1 && to_project.numel() > 0, "projection_coef: need a non-empty batched tensor, got ",
            to_project.describe());
  const int64_t batch = to_project.size(0);
  const std::vector<float> coef = batch_projection(host_f32(to_project, "to_project"),
                                                   host_f32(project_onto, "project_onto"), batch);
  return Tensor::from_vector(coef, Shape{batch, 1});
}

Tensor CFGGuider::delta(const Tensor& cond_t, const Tensor& uncond_t) const {
  check_same_shape("CFGGuider::delta", cond_t, "cond", uncond_t, "uncond");
  return ops::mul(ops::sub(cond_t.to(DType::F32), uncond_t.to(DType::F32)), static_cast<float>(scale - 1));
}

Tensor CFGStarRescalingGuider::delta(const Tensor& cond_t, const Tensor& uncond_t) const {
  check_same_shape("CFGStarRescalingGuider::delta", cond_t, "cond", uncond_t, "uncond");
  const std::vector<float> c = host_f32(cond_t, "cond"), u = host_f32(uncond_t, "uncond");
  const int64_t batch = cond_t.size(0);
  const std::vector<float> coef = batch_projection(c, u, batch);
  const size_t per = c.size() / static_cast<size_t>(batch);
  const float s = static_cast<float>(scale - 1);
  std::vector<float> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = s * (c[i] - coef[i / per] * u[i]);
  return Tensor::from_vector(out, cond_t.shape());
}

Tensor STGGuider::delta(const Tensor& cond_t, const Tensor& perturbed_t) const {
  check_same_shape("STGGuider::delta", cond_t, "cond", perturbed_t, "perturbed");
  return ops::mul(ops::sub(cond_t.to(DType::F32), perturbed_t.to(DType::F32)), static_cast<float>(scale));
}

Tensor LtxAPGGuider::delta(const Tensor& cond_t, const Tensor& uncond_t) const {
  check_same_shape("LtxAPGGuider::delta", cond_t, "cond", uncond_t, "uncond");
  const std::vector<float> c = host_f32(cond_t, "cond"), u = host_f32(uncond_t, "uncond");
  std::vector<float> g(c.size());
  for (size_t i = 0; i < c.size(); ++i) g[i] = c[i] - u[i];
  return apg_delta(std::move(g), cond_t, eta, norm_threshold, scale - 1);
}

Tensor LegacyStatefulAPGGuider::delta(const Tensor& cond_t, const Tensor& uncond_t) {
  check_same_shape("LegacyStatefulAPGGuider::delta", cond_t, "cond", uncond_t, "uncond");
  const std::vector<float> c = host_f32(cond_t, "cond"), u = host_f32(uncond_t, "uncond");
  std::vector<float> g(c.size());
  for (size_t i = 0; i < c.size(); ++i) g[i] = c[i] - u[i];
  if (momentum_ != 0) {
    if (running_avg_.empty()) {
      running_avg_ = g;
    } else {
      LTX_CHECK(running_avg_.size() == g.size(), "LegacyStatefulAPGGuider: shape changed between calls (",
                running_avg_.size(), " vs ", g.size(), " elements); use one guider per run and modality");
      const float m = static_cast<float>(momentum_);
      for (size_t i = 0; i < g.size(); ++i) running_avg_[i] = m * running_avg_[i] + g[i];
    }
    g = running_avg_;
  }
  return apg_delta(std::move(g), cond_t, eta_, norm_threshold_, scale_);
}

}  // namespace ltx::sampling
