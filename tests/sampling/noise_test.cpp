#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "sampling/noise.h"
#include "sampling/sampling_fixtures.h"

namespace ltx {
namespace {

using sampling::TorchCpuGenerator;

// Number of elements that are not bit-identical.
int64_t bit_mismatches(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const auto x = a.to_double_vector(), y = b.to_double_vector();
  int64_t n = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) n += x[i] != y[i];
  return n;
}

// The fixture generators: torch.Generator().manual_seed(s) then torch.randn(shape, generator=g)
// in order; tensors that the generator script modified afterwards are skipped (drawn, not checked).
struct Draw {
  const char* file;
  const char* name;  // nullptr: draw and discard
  Shape shape;
};

void expect_stream(int64_t seed, const std::vector<Draw>& draws) {
  TorchCpuGenerator g(seed);
  for (const Draw& d : draws) {
    const Tensor got = g.randn(d.shape);
    if (d.name == nullptr) continue;
    const Tensor want = test::golden_tensor(d.file, d.name);
    EXPECT_EQ(bit_mismatches(got, want), 0) << "seed " << seed << " " << d.name;
  }
}

TEST(TorchCpuGenerator, ReproducesTorchRandnFloat32BitForBit) {
  const Shape s{1, 48, 24}, b2{2, 48, 24}, apg{1, 4, 12, 24};
  expect_stream(11, {{"sampling_steps", "in.sample", s},
                     {"sampling_steps", "in.denoised", s},
                     {"sampling_steps", "in.uncond", s},
                     {"sampling_steps", "in.noise", s}});
  expect_stream(7, {{"sampling_guiders", nullptr, s},
                    {"sampling_guiders", "in.uncond", s},
                    {"sampling_guiders", "in.ptb", s},
                    {"sampling_guiders", "in.mod", s},
                    {"sampling_guiders", "in.cond_b2", b2},
                    {"sampling_guiders", "in.uncond_b2", b2},
                    {"sampling_guiders", "in.ptb_b2", b2},
                    {"sampling_guiders", "in.mod_b2", b2},
                    {"sampling_guiders", "in.apg_cond", apg},
                    {"sampling_guiders", "in.apg_uncond", apg},
                    {"sampling_guiders", "in.legacy_apg.cond0", apg},
                    {"sampling_guiders", "in.legacy_apg.uncond0", apg}});
  // audio (1, 9, 16): 144 elements, a multiple of 16; lerp(zeros, noise, 1) == noise.
  expect_stream(2024, {{"sampling_loops", "in.video.clean", s},
                       {"sampling_loops", nullptr, s},
                       {"sampling_loops", "in.audio.init", Shape{1, 9, 16}}});
}

TEST(TorchCpuGenerator, ReproducesTheAncestralLoopsNoiseStream) {
  // euler_ancestral_denoising_loop(noise_seed=10042): video then audio per non-terminal step.
  TorchCpuGenerator g(10042);
  for (int k = 0; k < 14; ++k) {
    const Tensor want = test::golden_tensor("sampling_loops", "ancestral.noise" + std::to_string(k));
    EXPECT_EQ(bit_mismatches(g.randn(want.shape()), want), 0) << "ancestral.noise" << k;
  }
}

TEST(TorchCpuGenerator, ReproducesTheRes2sNormalisedFloat64Noise) {
  // Step generator seed 42, substep generator 42 + 10000; per step: substep video, substep audio,
  // step video, step audio.
  TorchCpuGenerator step(42), substep(10042);
  for (int k = 0; k < 32; ++k) {
    const Tensor want = test::golden_tensor("sampling_loops", "res2s.noise" + std::to_string(k));
    TorchCpuGenerator& g = (k % 4) < 2 ? substep : step;
    const Tensor got = sampling::res2s_noise(want.shape(), DType::F64, g);
    ASSERT_EQ(got.dtype(), DType::F64);
    EXPECT_LE(test::max_abs_diff(got, want), 1e-12) << "res2s.noise" << k;
  }
}

TEST(TorchCpuGenerator, SmallTensorsUseTheCachedBoxMullerPair) {
  // Well-known torch values: manual_seed(0); randn(2, 3) and manual_seed(42); randn(2, 3).
  const std::vector<double> seed0 = {1.5410, -0.2934, -2.1788, 0.5684, -1.0845, -1.3986};
  const std::vector<double> seed42 = {0.3367, 0.1288, 0.2345, 0.2303, -1.1229, -0.1863};
  for (const auto& [seed, want] : {std::pair{0, seed0}, std::pair{42, seed42}}) {
    TorchCpuGenerator g(seed);
    const std::vector<double> got = g.randn({2, 3}).to_double_vector();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 6e-5) << "seed " << seed << " #" << i;
    // One element at a time continues the same cached stream.
    TorchCpuGenerator h(seed);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(h.randn({1}).item(), static_cast<float>(got[i]));
  }
}

TEST(TorchCpuGenerator, TailOfNonMultipleOf16IsRedrawn) {
  TorchCpuGenerator a(5), b(5);
  const std::vector<float> x16 = a.randn({16}).to_float_vector();
  const std::vector<float> x17 = b.randn({17}).to_float_vector();
  EXPECT_EQ(x16[0], x17[0]);   // block 0 is the same transform of the same uniforms
  EXPECT_NE(x16[1], x17[1]);   // elements 1..16 come from 16 fresh uniforms
}

TEST(TorchCpuGenerator, ReproducibleAcrossRunsAndThreadCounts) {
  const int threads = num_threads();
  set_num_threads(1);
  const Tensor one = TorchCpuGenerator(123).randn({3, 1000, 7});
  const Tensor one64 = TorchCpuGenerator(123).randn({3, 1000, 7}, DType::F64);
  set_num_threads(4);
  const Tensor four = TorchCpuGenerator(123).randn({3, 1000, 7});
  const Tensor four64 = TorchCpuGenerator(123).randn({3, 1000, 7}, DType::F64);
  set_num_threads(threads);
  EXPECT_EQ(bit_mismatches(one, four), 0);
  EXPECT_EQ(bit_mismatches(one64, four64), 0);
  EXPECT_GT(bit_mismatches(one, TorchCpuGenerator(124).randn({3, 1000, 7})), 20000);
  // Roughly standard normal.
  const auto v = one.to_double_vector();
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(v.size())), 1.0, 0.03);
}

TEST(TorchCpuGenerator, SeedIsTakenModulo2To64ThenLow32Bits) {
  // torch maps -1 to 2^64 - 1; its MT19937 keeps the low 32 bits.
  EXPECT_EQ(bit_mismatches(TorchCpuGenerator(-1).randn({40}), TorchCpuGenerator(0xffffffffLL).randn({40})), 0);
  EXPECT_EQ(bit_mismatches(TorchCpuGenerator(7 + (1LL << 32)).randn({40}), TorchCpuGenerator(7).randn({40})), 0);
  TorchCpuGenerator g(9);
  const Tensor first = g.randn({20});
  g.manual_seed(9);
  EXPECT_EQ(bit_mismatches(g.randn({20}), first), 0);
}

TEST(TorchCpuGenerator, Bf16IsTheRoundedF32DrawAndOtherDtypesThrow) {
  const Tensor b = TorchCpuGenerator(3).randn({64}, DType::BF16);
  EXPECT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(bit_mismatches(b, TorchCpuGenerator(3).randn({64}).to(DType::BF16)), 0);
  TorchCpuGenerator g(1);
  EXPECT_THROW(g.randn({4}, DType::I64), Error);
}

TEST(RecordedNoise, ReturnsTensorsInOrderAndChecksShapes) {
  const Tensor a = test::random_tensor({2, 3}, 1), b = test::random_tensor({4}, 2);
  sampling::RecordedNoise r({a, b});
  EXPECT_EQ(test::max_abs_diff(r.randn({2, 3}), a), 0.0);
  EXPECT_THROW(r.randn({5}), Error);  // the next one is [4]
  EXPECT_EQ(r.randn({4}, DType::F64).dtype(), DType::F64);
  EXPECT_EQ(r.consumed(), 2u);
  EXPECT_THROW(r.randn({4}), Error);  // exhausted
}

TEST(Res2sNoise, NormalisesWholeTensorThenPerBatch) {
  Tensor x = test::random_tensor({2, 5, 7}, 9, -3.f, 5.f);
  const std::vector<double> n = sampling::normalize_res2s_noise(x).to_double_vector();
  for (int b = 0; b < 2; ++b) {
    double mean = 0, sq = 0;
    for (int i = 0; i < 35; ++i) mean += n[b * 35 + i];
    mean /= 35;
    for (int i = 0; i < 35; ++i) sq += (n[b * 35 + i] - mean) * (n[b * 35 + i] - mean);
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(std::sqrt(sq / 34), 1.0, 1e-12);
  }
  EXPECT_THROW(sampling::normalize_res2s_noise(Tensor::zeros({3})), Error);
}

}  // namespace
}  // namespace ltx
