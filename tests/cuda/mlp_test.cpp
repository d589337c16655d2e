// The fused SwiGLU MLP (ops::swiglu_add_, backend/cuda/mlp.h) against the unfused CUDA ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "backend/cuda/mlp.h"
#include "cuda/cuda_test_util.h"
#include "ops/mlp.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;

struct Problem {
  Tensor residual, y, gate_up, down;
};

// bf16 (or `dt`) operands on the GPU scaled like a trained layer: y in [-1, 1), the projections
// ~ 1 / sqrt(fan-in), so gate / up and the output are O(1). y's rows are `row_pad` elements
// apart (a narrow of a wider matrix) when row_pad > 0.
Problem make_problem(int64_t n, int64_t c, int64_t h, uint64_t seed, DType dt = DType::BF16,
                     int64_t row_pad = 0) {
  const float a = std::sqrt(3.f / static_cast<float>(c)), b = std::sqrt(3.f / static_cast<float>(h));
  Problem p;
  p.residual = test::random_tensor({n, c}, seed).to(kGpu, dt);
  const Tensor wide = test::random_tensor({n, c + row_pad}, seed + 1).to(kGpu, dt);
  p.y = wide.narrow(1, 0, c);
  p.gate_up = test::random_tensor({2 * h, c}, seed + 2, -a, a).to(kGpu, dt);
  p.down = test::random_tensor({c, h}, seed + 3, -b, b).to(kGpu, dt);
  return p;
}

// The fused kernel against the unfused ops on one problem. The two differ only in the f32
// summation order of the three products (tensor-core order vs cuBLAS's): a ~1e-6 relative
// difference that flips the bf16 rounding of a few G / U / O values by one ulp (2^-8 relative).
// A flipped P element moves O by ~2^-8 of one of H terms; a flipped O moves the sum by one ulp of
// O; the final rounding of residual + O adds at most one ulp of the result. Bounds:
//   per element  |got - want| <= 2^-6 max|O| + 2^-7 |want|
//   overall      ||got - want|| / ||want - residual|| <= 4e-3 (about one ulp of O in rms)
//   and at least 80% of the outputs bit-identical (the rounding points are the unfused ones; a
//   kernel that skipped a rounding would differ in most elements).
void expect_fused_matches_unfused(const Problem& p, const char* what) {
  ASSERT_TRUE(cuda::swiglu_wgmma_applies(p.residual, p.y, p.gate_up, p.down)) << what;
  EXPECT_TRUE(ops::swiglu_add_fuses(p.residual, p.y, p.gate_up, p.down)) << what;
  const Tensor want = p.residual.clone();
  ops::swiglu_add_unfused(want, p.y, p.gate_up, p.down);
  const Tensor got = p.residual.clone();
  cuda::swiglu_wgmma_add_(got, p.y, p.gate_up, p.down);
  // Through the op: the same kernel, so the same bits.
  const Tensor via_op = p.residual.clone();
  ops::swiglu_add_(via_op, p.y, p.gate_up, p.down);
  EXPECT_TRUE(test::same_bytes(via_op, got)) << what;

  const std::vector<double> g = got.to_double_vector(), w = want.to_double_vector(),
                            r = p.residual.to_double_vector();
  double max_o = 0, diff2 = 0, delta2 = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    max_o = std::max(max_o, std::fabs(w[i] - r[i]));
    diff2 += (g[i] - w[i]) * (g[i] - w[i]);
    delta2 += (w[i] - r[i]) * (w[i] - r[i]);
  }
  EXPECT_GT(max_o, 0.05) << what << ": the MLP added (almost) nothing";
  EXPECT_TRUE(test::near(got, want, std::ldexp(max_o, -6), std::ldexp(1.0, -7))) << what;
  EXPECT_LE(std::sqrt(diff2 / std::max(delta2, 1e-300)), 4e-3) << what;
  size_t same = 0;
  for (size_t i = 0; i < w.size(); ++i) same += g[i] == w[i];
  const double frac = static_cast<double>(same) / static_cast<double>(w.size());
  EXPECT_GE(frac, 0.8) << what << ": bit-identical fraction";
  std::printf("[swiglu] %s: rel l2 %.2e, %.1f%% bit-identical\n", what,
              std::sqrt(diff2 / std::max(delta2, 1e-300)), 100 * frac);
}

TEST(CudaSwiglu, WgmmaKernelMatchesTheUnfusedOps) {
  LTX_REQUIRE_WGMMA();
  uint64_t seed = 1;
  for (int64_t c : {256, 128, 64}) {
    for (int64_t h : {1024, 64}) {
      for (int64_t n : {1, 63, 64, 65, 1000, 4097}) {
        const std::string what = "n " + std::to_string(n) + " C " + std::to_string(c) + " H " +
                                 std::to_string(h);
        expect_fused_matches_unfused(make_problem(n, c, h, seed), what.c_str());
        seed += 4;
      }
    }
  }
}

TEST(CudaSwiglu, WgmmaKernelReadsStridedRowsOfY) {
  LTX_REQUIRE_WGMMA();
  // Rows 256 + 64 elements apart (still 16-byte aligned), and 1 row whose stride is irrelevant.
  expect_fused_matches_unfused(make_problem(1000, 256, 1024, 100, DType::BF16, 64), "strided y");
  expect_fused_matches_unfused(make_problem(1, 256, 128, 200, DType::BF16, 8), "one strided row");
}

TEST(CudaSwiglu, OtherShapesAndDtypesFallBackToTheUnfusedOps) {
  LTX_REQUIRE_CUDA();
  struct Case {
    int64_t n, c, h;
    DType dt;
    int64_t row_pad;
    const char* what;
  };
  for (const Case& k : {Case{65, 256, 1024, DType::F32, 0, "f32"},
                        Case{65, 96, 1024, DType::BF16, 0, "C 96"},
                        Case{65, 256, 48, DType::BF16, 0, "H 48"},
                        Case{65, 256, 1040, DType::BF16, 0, "H 1040"},
                        Case{65, 256, 128, DType::BF16, 3, "rows not 16-byte aligned"}}) {
    const Problem p = make_problem(k.n, k.c, k.h, 7, k.dt, k.row_pad);
    EXPECT_FALSE(cuda::swiglu_wgmma_applies(p.residual, p.y, p.gate_up, p.down)) << k.what;
    EXPECT_FALSE(ops::swiglu_add_fuses(p.residual, p.y, p.gate_up, p.down)) << k.what;
    const Tensor want = p.residual.clone();
    ops::swiglu_add_unfused(want, p.y, p.gate_up, p.down);
    const Tensor got = p.residual.clone();
    ops::swiglu_add_(got, p.y, p.gate_up, p.down);
    EXPECT_TRUE(test::same_bytes(got, want)) << k.what;
    // ... and the unfused CUDA ops compute the MLP (f32 against the CPU op).
    if (k.dt == DType::F32) {
      const Tensor cpu = p.residual.to(Device::cpu());
      ops::swiglu_add_(cpu, p.y.to(Device::cpu()), p.gate_up.to(Device::cpu()),
                       p.down.to(Device::cpu()));
      EXPECT_TRUE(test::near(got, cpu, 1e-4, 1e-4)) << k.what;
    }
  }
  // A mixed-dtype residual is not fused either.
  const Problem p = make_problem(65, 256, 1024, 9);
  EXPECT_FALSE(cuda::swiglu_wgmma_applies(p.residual.to(DType::F32), p.y, p.gate_up, p.down));
}

}  // namespace
}  // namespace ltx
