// The per-step sampling maths runs as tensor ops (so it stays on the device of the states). These
// tests pin it BIT FOR BIT to the plain host formulas it replaced (written out below as naive
// scalar loops with the same float32 operation order and the same bf16 rounding points).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "sampling/guiders.h"
#include "sampling/latent.h"
#include "sampling/loops.h"
#include "sampling/steps.h"
#include "support/test_support.h"

namespace ltx {
namespace {

// f32 value rounded through bf16 (what .to(BF16) does), via a one-element tensor.
float bf16_round(float v) { return Tensor::full({}, v, DType::F32).to(DType::BF16).to_float_vector()[0]; }

std::vector<float> round_to(std::vector<float> v, DType dtype) {
  if (dtype == DType::BF16)
    for (float& e : v) e = bf16_round(e);
  return v;
}

// Bitwise equality (NaNs with the same payload and signed zeros included).
void expect_bits_equal(const Tensor& got, const std::vector<float>& want, const char* what) {
  const std::vector<float> g = got.to_float_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &g[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b && bad++ < 3) ADD_FAILURE() << what << " element " << i << ": " << g[i] << " vs " << want[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

Tensor rnd(const Shape& s, uint64_t seed, DType dtype = DType::F32) { return test::random_tensor(s, seed).to(dtype); }

const sampling::Sigmas kSigmas = {1.0f, 0.99375f, 0.9875f, 0.98125f, 0.975f, 0.909375f, 0.725f, 0.421875f, 0.0f};

TEST(OpsPath, EulerStepAndVelocityAreBitIdenticalToTheHostFormula) {
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor x = rnd({1, 37, 5}, 1, dt), d = rnd({1, 37, 5}, 2, dt);
    const std::vector<float> xv = x.to_float_vector(), dv = d.to_float_vector();
    for (int64_t i = 0; i + 1 < static_cast<int64_t>(kSigmas.size()); ++i) {
      const float s = kSigmas[static_cast<size_t>(i)], sn = kSigmas[static_cast<size_t>(i) + 1];
      std::vector<float> v(xv.size()), out(xv.size());
      for (size_t k = 0; k < xv.size(); ++k) v[k] = (xv[k] - dv[k]) / s;
      v = round_to(v, dt);
      for (size_t k = 0; k < xv.size(); ++k) out[k] = xv[k] + v[k] * (sn - s);
      expect_bits_equal(sampling::to_velocity(x, s, d), v, "to_velocity");
      expect_bits_equal(sampling::euler_step(x, d, kSigmas, i), round_to(out, dt), "euler_step");
      EXPECT_EQ(sampling::euler_step(x, d, kSigmas, i).dtype(), dt);
    }
    // to_denoised: x - v * sigma.
    std::vector<float> want(xv.size());
    for (size_t k = 0; k < xv.size(); ++k) want[k] = xv[k] - dv[k] * 0.3f;
    expect_bits_equal(sampling::to_denoised(x, d, 0.3f), round_to(want, dt), "to_denoised");
  }
}

TEST(OpsPath, AncestralAndCfgPpStepsAreBitIdenticalToTheHostFormula) {
  const Tensor x = test::non_contiguous_copy(rnd({1, 33, 3}, 3)), d = rnd({1, 33, 3}, 4, DType::BF16);
  const Tensor u = rnd({1, 33, 3}, 5), n = rnd({1, 33, 3}, 6);
  const std::vector<float> xv = x.to_float_vector(), dv = d.to_float_vector(), uv = u.to_float_vector(),
                           nv = n.to_float_vector();
  for (int64_t i = 0; i + 2 < static_cast<int64_t>(kSigmas.size()); ++i) {
    const float sigma = kSigmas[static_cast<size_t>(i)], sigma_next = kSigmas[static_cast<size_t>(i) + 1];
    for (double eta : {1.0, 0.5}) {
      // Ancestral (rectified flow).
      const float ratio = 1.0f + (sigma_next / sigma - 1.0f) * static_cast<float>(eta);
      const float sigma_down = sigma_next * ratio, down = sigma_down / sigma, keep = 1.0f - down;
      const float alpha_next = 1.0f - sigma_next, alpha_down = 1.0f - sigma_down;
      const float var = sigma_next * sigma_next -
                        ((sigma_down * sigma_down) * (alpha_next * alpha_next)) / (alpha_down * alpha_down);
      const float renoise = std::sqrt(std::max(var, 0.0f)), rescale = alpha_next / alpha_down;
      std::vector<float> want(xv.size());
      for (size_t k = 0; k < xv.size(); ++k) {
        const float o = down * xv[k] + keep * dv[k];
        want[k] = rescale * o + (nv[k] * 1.0f) * renoise;
      }
      expect_bits_equal(sampling::EulerAncestralStep{eta, 1.0}.step(x, d, kSigmas, i, n), want, "ancestral");

      // CFG++ (DDIM ancestral in the sigma / alpha space).
      const float eps = std::numeric_limits<float>::epsilon();
      const float alpha_s = std::max(1.0f - sigma, eps), alpha_t = std::max(1.0f - sigma_next, eps);
      const float from = sigma / alpha_s, to = sigma_next / alpha_t;
      const float variance = ((to * to) * std::max(from * from - to * to, 0.0f)) / (from * from);
      const float up = std::min(static_cast<float>(eta) * std::sqrt(variance), to);
      const float sd = alpha_t * std::sqrt(std::max(to * to - up * up, 0.0f));
      for (size_t k = 0; k < xv.size(); ++k) {
        const float ode = (xv[k] - alpha_s * uv[k]) / sigma;
        const float o = alpha_t * dv[k] + sd * ode;
        want[k] = o + ((alpha_t * nv[k]) * 1.0f) * up;
      }
      expect_bits_equal(sampling::EulerCfgPpStep{eta, 1.0}.step(x, d, kSigmas, i, u, n), want, "cfg_pp");
    }
  }
}

TEST(OpsPath, PostProcessAndTimestepsAreBitIdenticalToTheHostFormula) {
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor d = rnd({2, 7, 3}, 7, dt), clean = rnd({2, 7, 3}, 8, dt);
    std::vector<float> mv = test::random_tensor({2, 7, 1}, 9, 0.f, 1.f).to_float_vector();
    mv[0] = 0.f;
    mv[1] = 1.f;
    const Tensor mask = Tensor::from_vector(mv, Shape{2, 7, 1});
    const std::vector<float> dv = d.to_float_vector(), cv = clean.to_float_vector();
    std::vector<float> want(dv.size());
    for (size_t k = 0; k < dv.size(); ++k) {
      const float m = mv[k / 3];
      want[k] = dv[k] * m + cv[k] * (1.0f - m);
    }
    const Tensor got = sampling::post_process_latent(d, mask, clean);
    EXPECT_EQ(got.dtype(), dt);
    expect_bits_equal(got, round_to(want, dt), "post_process_latent");
  }
  const Tensor mask = test::random_tensor({1, 11, 1}, 10, 0.f, 1.f);
  std::vector<float> want = mask.to_float_vector();
  for (float& v : want) v = v * 0.725f;
  expect_bits_equal(sampling::timesteps_from_mask(mask, 0.725f), want, "timesteps_from_mask");
}

// torch's full-tensor unbiased std as the replaced host code computed it: f32 mean (double sum),
// double sum of squared deviations, rounded to f32.
float host_std(const std::vector<float>& x) {
  double sum = 0;
  for (float v : x) sum += v;
  const double mean = static_cast<float>(sum / static_cast<double>(x.size()));
  double ss = 0;
  for (float v : x) ss += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
  return static_cast<float>(std::sqrt(ss / static_cast<double>(x.size() - 1)));
}

TEST(OpsPath, GuiderCombinationIsBitIdenticalToTheHostFormula) {
  const Shape s{2, 29, 6};
  const Tensor c = rnd(s, 11, DType::BF16), u = rnd(s, 12, DType::BF16), p = rnd(s, 13, DType::BF16),
               m = rnd(s, 14, DType::BF16);
  const std::vector<float> cv = c.to_float_vector(), uv = u.to_float_vector(), pv = p.to_float_vector(),
                           mv = m.to_float_vector();
  for (double rescale : {0.0, 0.7}) {
    for (bool with_mod : {false, true}) {
      sampling::GuiderParams gp;
      gp.cfg_scale = 3.0;
      gp.stg_scale = 1.0;
      gp.modality_scale = 3.0;
      gp.rescale_scale = rescale;
      std::vector<float> pred(cv.size());
      for (size_t k = 0; k < cv.size(); ++k) {
        const float du = cv[k] - uv[k], dp = cv[k] - pv[k], dm = cv[k] - (with_mod ? mv[k] : 0.0f);
        pred[k] = ((cv[k] + 2.0f * du) + 1.0f * dp) + 2.0f * dm;
      }
      if (rescale != 0) {
        const float ratio = host_std(cv) / host_std(pred);
        const float factor = static_cast<float>(rescale) * ratio + static_cast<float>(1 - rescale);
        for (float& v : pred) v = v * factor;
      }
      const Tensor got = sampling::MultiModalGuider(gp).calculate(c, u, p, with_mod ? sampling::PassOutput(m)
                                                                                   : std::nullopt);
      EXPECT_EQ(got.dtype(), DType::BF16);
      expect_bits_equal(got, round_to(pred, DType::BF16), "MultiModalGuider::calculate");
    }
  }
}

TEST(OpsPath, LatentStateMovesEveryTensorAndKeepsUndefinedOnes) {
  sampling::LatentState s;
  s.latent = rnd({1, 4, 2}, 15, DType::BF16);
  s.clean_latent = rnd({1, 4, 2}, 16, DType::BF16);
  s.denoise_mask = Tensor::full({1, 4, 1}, 1.0);
  s.positions = rnd({1, 3, 4, 2}, 17);
  s.frozen = true;
  const sampling::LatentState t = s.to(Device::cpu());
  EXPECT_EQ(test::max_abs_diff(t.latent, s.latent), 0.0);
  EXPECT_EQ(t.latent.dtype(), DType::BF16);
  EXPECT_EQ(test::max_abs_diff(t.positions, s.positions), 0.0);
  EXPECT_FALSE(t.attention_mask.defined());
  EXPECT_FALSE(t.keyframes_mask.defined());
  EXPECT_TRUE(t.frozen);

  sampling::AVState av;
  av.audio = s;
  EXPECT_TRUE(sampling::state_device(av).is_cpu());
  const sampling::AVState moved = sampling::on_device(av, Device::cpu());
  EXPECT_FALSE(moved.video.has_value());
  ASSERT_TRUE(moved.audio.has_value());
  EXPECT_EQ(test::max_abs_diff(moved.audio->clean_latent, s.clean_latent), 0.0);
  EXPECT_THROW(sampling::state_device(sampling::AVState{}), Error);
}

}  // namespace
}  // namespace ltx
