#include <cmath>
#include <vector>

#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/mlp.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::random_tensor;

// residual + (silu(y Wg^T) * (y Wu^T)) Wd^T in double, w_gate_up = [Wg; Wu].
Tensor ref_swiglu_add(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                      const Tensor& w_down) {
  const int64_t n = y.size(0), c = y.size(1), h = w_down.size(1);
  const std::vector<double> vy = y.to_double_vector(), vgu = w_gate_up.to_double_vector(),
                            vd = w_down.to_double_vector();
  std::vector<double> out = residual.to_double_vector();
  std::vector<double> act(static_cast<size_t>(h));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < h; ++j) {
      double gate = 0, up = 0;
      for (int64_t k = 0; k < c; ++k) {
        gate += vy[r * c + k] * vgu[j * c + k];
        up += vy[r * c + k] * vgu[(h + j) * c + k];
      }
      act[j] = gate / (1 + std::exp(-gate)) * up;
    }
    for (int64_t o = 0; o < c; ++o) {
      double acc = 0;
      for (int64_t j = 0; j < h; ++j) acc += act[j] * vd[o * h + j];
      out[r * c + o] += acc;
    }
  }
  return Tensor::from_vector(out, {n, c});
}

struct Weights {
  Tensor gate_up, down;
};
Weights random_weights(int64_t c, int64_t h, uint64_t seed) {
  return {random_tensor({2 * h, c}, seed, -0.4f, 0.4f), random_tensor({c, h}, seed + 1, -0.3f, 0.3f)};
}

TEST(SwigluAdd, MatchesDoubleReferenceOnRows) {
  for (int64_t n : {1, 3, 33, 129}) {
    for (const auto& [c, h] : {std::pair<int64_t, int64_t>{8, 32}, {16, 24}, {7, 5}}) {
      const Weights w = random_weights(c, h, 10 + n);
      const Tensor y = random_tensor({n, c}, 20 + n);
      const Tensor residual = random_tensor({n, c}, 30 + n);
      const Tensor want = ref_swiglu_add(residual, y, w.gate_up, w.down);
      const Tensor got = residual.clone();
      ops::swiglu_add_(got, y, w.gate_up, w.down);
      EXPECT_LE(test::max_abs_diff(got, want), 2e-5) << "n " << n << " C " << c << " H " << h;
      EXPECT_GT(test::max_abs_diff(got, residual), 1e-3);  // the MLP did add something
    }
  }
}

TEST(SwigluAdd, ReadsStridedRowsOfY) {
  // y's rows 40 elements apart (a narrow of a wider matrix): the last dim stays dense.
  const int64_t n = 33, c = 16, h = 48;
  const Weights w = random_weights(c, h, 1);
  const Tensor wide = random_tensor({n, 40}, 2);
  const Tensor y = wide.narrow(1, 5, c);
  ASSERT_FALSE(y.is_contiguous());
  const Tensor residual = random_tensor({n, c}, 3);
  const Tensor got = residual.clone();
  ops::swiglu_add_(got, y, w.gate_up, w.down);
  EXPECT_LE(test::max_abs_diff(got, ref_swiglu_add(residual, y.contiguous(), w.gate_up, w.down)),
            2e-5);
}

TEST(SwigluAdd, CpuIsTheUnfusedCompositionBitForBit) {
  // The rounding points of the decoder's path: gate | up from one linear, silu_mul, linear, add_.
  const int64_t n = 65, c = 16, h = 64;
  const Weights w = random_weights(c, h, 4);
  const Tensor y = random_tensor({n, c}, 5), residual = random_tensor({n, c}, 6);
  const Tensor gate_up = ops::linear(y, w.gate_up);
  const Tensor want = residual.clone();
  ops::add_(want, ops::linear(ops::silu_mul(gate_up.narrow(1, 0, h), gate_up.narrow(1, h, h)),
                              w.down));
  const Tensor got = residual.clone();
  ops::swiglu_add_(got, y, w.gate_up, w.down);
  EXPECT_TRUE(test::max_abs_diff(got, want) == 0.0);
  EXPECT_FALSE(ops::swiglu_add_fuses(got, y, w.gate_up, w.down));
}

TEST(SwigluAdd, EmptyRowsAreANoOp) {
  const Weights w = random_weights(8, 16, 7);
  const Tensor residual = Tensor::zeros({0, 8});
  EXPECT_NO_THROW(ops::swiglu_add_(residual, Tensor::zeros({0, 8}), w.gate_up, w.down));
}

TEST(SwigluAdd, RejectsBadArguments) {
  const int64_t n = 5, c = 8, h = 16;
  const Weights w = random_weights(c, h, 8);
  const Tensor y = random_tensor({n, c}, 9), residual = random_tensor({n, c}, 10);
  // Residual not contiguous, y of another shape or with a strided last dim.
  EXPECT_THROW(ops::swiglu_add_(test::non_contiguous_copy(residual), y, w.gate_up, w.down), Error);
  EXPECT_THROW(ops::swiglu_add_(residual, random_tensor({n + 1, c}, 1), w.gate_up, w.down), Error);
  EXPECT_THROW(ops::swiglu_add_(residual, test::non_contiguous_copy(y), w.gate_up, w.down), Error);
  EXPECT_THROW(ops::swiglu_add_(residual, y.reshape({1, n, c}), w.gate_up, w.down), Error);
  // Weights of mismatched shapes: gate_up not [2 H, C], down not [C, H].
  EXPECT_THROW(ops::swiglu_add_(residual, y, random_tensor({2 * h + 1, c}, 1), w.down), Error);
  EXPECT_THROW(ops::swiglu_add_(residual, y, random_tensor({2 * h, c + 1}, 1), w.down), Error);
  EXPECT_THROW(ops::swiglu_add_(residual, y, w.gate_up, random_tensor({c + 1, h}, 1)), Error);
  EXPECT_THROW(ops::swiglu_add_(residual, y, w.gate_up, w.down.transpose(0, 1)), Error);
  // The CPU computes f32 only; undefined tensors are rejected.
  EXPECT_THROW(ops::swiglu_add_(residual, y.to(DType::BF16), w.gate_up, w.down), Error);
  EXPECT_THROW(ops::swiglu_add_(residual, Tensor(), w.gate_up, w.down), Error);
  const std::string msg =
      test::error_of([&] { ops::swiglu_add_(residual, y, w.gate_up, random_tensor({c, h + 1}, 1)); });
  EXPECT_NE(msg.find("swiglu_add_"), std::string::npos) << msg;
  EXPECT_NE(msg.find("w_gate_up"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ltx
