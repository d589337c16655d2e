// ops::Summed operands (a + b formed by the consumer): modulate, gated_add and rms_norm_modulate
// with the transformer's AdaLN shapes (a table row [D] + a strided per-token slice of [B, T, K, D])
// equal add-then-op bit for bit, and a naive double reference.
#include "ops/summed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/norm.h"
#include "support/test_support.h"

namespace ltx {
namespace {

// Values exactly representable in bf16 (as the GPU model's activations are).
Tensor bf16_values(const Shape& shape, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  return test::random_tensor(shape, seed, lo, hi).to(DType::BF16).to(DType::F32);
}

// The AdaLN operands: row `row` of a table [K, D] and the matching slice of per-token values
// [B, T, K * D] viewed as [B, T, K, D] (a strided [B, T, D] view), as the transformer takes them.
struct Ada {
  Tensor table, ts;
  ops::Summed value(int64_t row) const {
    const int64_t k = table.size(0);
    return {table.select(0, row), ts.view({ts.size(0), ts.size(1), k, -1}).select(2, row)};
  }
};

Ada make_ada(int64_t b, int64_t t, int64_t k, int64_t d, uint64_t seed) {
  return {bf16_values({k, d}, seed), bf16_values({b, t, k * d}, seed + 1, -0.5f, 0.5f)};
}

double at(const Tensor& t, const std::vector<int64_t>& idx) {
  // Element of a (possibly broadcast) tensor at the trailing dims of idx.
  Tensor v = t;
  const int off = static_cast<int>(idx.size()) - t.dim();
  for (int d = t.dim() - 1; d >= 0; --d) v = v.select(d, t.size(d) == 1 ? 0 : idx[off + d]);
  return v.item();
}

TEST(SummedOperand, ModulateAndGatedAddEqualAddThenOpBitForBit) {
  uint64_t seed = 100;
  for (int64_t t : {1, 7}) {
    for (int64_t d : {33, 128}) {
      SCOPED_TRACE("T " + std::to_string(t) + " D " + std::to_string(d));
      const Ada ada = make_ada(2, t, 9, d, seed);
      seed += 2;
      const Tensor x = bf16_values({2, t, d}, seed++, -3.f, 3.f), y = bf16_values({2, t, d}, seed++);
      const ops::Summed scale = ada.value(1), shift = ada.value(0), gate = ada.value(2);
      const Tensor got = ops::modulate(test::non_contiguous_copy(x), scale, shift);
      EXPECT_EQ(test::max_abs_diff(got, ops::modulate(x, ops::materialize(scale), ops::materialize(shift))), 0.0);
      // A plain shift next to a summed scale, and the other way round.
      EXPECT_EQ(test::max_abs_diff(ops::modulate(x, scale, shift.a),
                                   ops::modulate(x, ops::materialize(scale), shift.a)),
                0.0);
      EXPECT_EQ(test::max_abs_diff(ops::modulate(x, scale.b, shift),
                                   ops::modulate(x, scale.b, ops::materialize(shift))),
                0.0);
      const Tensor want = test::make_ref(x.shape(), [&](const std::vector<int64_t>& i) {
        const double s = at(scale.a, i) + at(scale.b, i), h = at(shift.a, i) + at(shift.b, i);
        return at(x, i) * (1.0 + s) + h;
      });
      EXPECT_LE(test::max_abs_diff(got, want), 1e-5);

      const Tensor gated = ops::gated_add(x, test::non_contiguous_copy(y), gate);
      EXPECT_EQ(test::max_abs_diff(gated, ops::gated_add(x, y, ops::materialize(gate))), 0.0);
      EXPECT_EQ(test::max_abs_diff(gated, ops::add(x, ops::mul(y, ops::add(gate.a, gate.b)))), 0.0);
      // Both summands count.
      EXPECT_GT(test::max_abs_diff(gated, ops::gated_add(x, y, gate.a)), 1e-3);
      EXPECT_GT(test::max_abs_diff(gated, ops::gated_add(x, y, gate.b)), 1e-3);
    }
  }
}

TEST(SummedOperand, RmsNormModulateEqualsAddThenOpBitForBit) {
  uint64_t seed = 200;
  for (int64_t t : {1, 7}) {
    for (int64_t d : {33, 128}) {
      SCOPED_TRACE("T " + std::to_string(t) + " D " + std::to_string(d));
      const Ada ada = make_ada(2, t, 6, d, seed);
      seed += 2;
      const Tensor x = bf16_values({2, t, d}, seed++, -3.f, 5.f);
      const ops::Summed scale = ada.value(4), shift = ada.value(3);
      const Tensor got = ops::rms_norm_modulate(test::non_contiguous_copy(x), scale, shift, 1e-6);
      EXPECT_EQ(test::max_abs_diff(got, ops::rms_norm_modulate(x, ops::materialize(scale), ops::materialize(shift), 1e-6)), 0.0);
      EXPECT_EQ(test::max_abs_diff(got, ops::modulate(ops::rms_norm(x, Tensor(), 1e-6), ops::materialize(scale),
                                                      ops::materialize(shift))),
                0.0);
      EXPECT_GT(test::max_abs_diff(got, ops::rms_norm_modulate(x, scale.a, shift.a, 1e-6)), 1e-3);
      // With a weight (the decoder's form) and a plain shift.
      const Tensor w = bf16_values({d}, seed++, 0.5f, 1.5f);
      EXPECT_EQ(test::max_abs_diff(ops::rms_norm_modulate(x, scale, shift.b, 1e-6, w),
                                   ops::modulate(ops::rms_norm(x, w, 1e-6), ops::materialize(scale), shift.b)),
                0.0);
    }
  }
}

TEST(SummedOperand, RejectsBadSummands) {
  const Tensor x = test::random_tensor({2, 3, 4}, 300), row = test::random_tensor({4}, 301);
  const Tensor ok = test::random_tensor({2, 3, 4}, 302);
  const auto message = [](auto&& fn) { return test::error_of(fn); };
  // Summands that do not broadcast together, or whose sum does not broadcast with x.
  EXPECT_NE(message([&] { ops::modulate(x, ops::Summed(row, test::random_tensor({5}, 303)), ok); })
                .find("modulate"),
            std::string::npos);
  EXPECT_NE(message([&] { ops::gated_add(x, ok, ops::Summed(row, test::random_tensor({3, 3, 4}, 304))); })
                .find("gated_add"),
            std::string::npos);
  EXPECT_NE(message([&] {
              ops::rms_norm_modulate(x, ops::Summed(row, test::random_tensor({5, 2, 3, 4}, 305)), ok, 1e-6);
            }).find("x's shape"),
            std::string::npos);
  // Dtypes and undefined parts.
  EXPECT_NE(message([&] { ops::modulate(x, ops::Summed(row, ok.to(DType::F64)), ok); }).find("second summand"),
            std::string::npos);
  EXPECT_NE(message([&] { ops::gated_add(x, ok, ops::Summed(Tensor(), row)); }).find("gated_add"),
            std::string::npos);
  // The summands' value is ops::add's.
  EXPECT_EQ(test::max_abs_diff(ops::materialize(ops::Summed(row, ok)), ops::add(row, ok)), 0.0);
  EXPECT_EQ(ops::materialize(ops::Summed(row)).storage(), row.storage());
}

// Runs (Summed::run_ends): b holds one row per run of the sum's rows along dim -2. The sum is
// the same as with b's rows repeated over their runs, and the ops equal the ops on those repeated
// rows bit for bit; run(r) is the operand of run r's rows.
TEST(SummedOperand, RunsStandForTheirRowsRepeated) {
  const int64_t d = 5;
  const std::vector<int64_t> ends{1, 4, 6};
  const Tensor table = bf16_values({3, d}, 400);
  const Tensor emb = bf16_values({2, 3, 3 * d}, 401, -0.5f, 0.5f).view({2, 3, 3, d});
  const auto per_run = [&](int64_t row) { return ops::Summed(table.select(0, row), emb.select(2, row), ends); };
  const auto per_token = [&](int64_t row) {
    return ops::Summed(table.select(0, row), ops::expand_runs(emb.select(2, row), ends));
  };
  const ops::Summed scale = per_run(1), shift = per_run(0), gate = per_run(2);
  EXPECT_EQ(scale.check("test", "scale"), (Shape{2, 6, d}));
  // Row t of the repeated rows is the row of t's run.
  const Tensor rep = ops::expand_runs(emb.select(2, 1), ends);
  ASSERT_EQ(rep.shape(), (Shape{2, 6, d}));
  const int64_t run_of[6] = {0, 1, 1, 1, 2, 2};
  for (int64_t t = 0; t < 6; ++t)
    EXPECT_EQ(test::max_abs_diff(rep.narrow(1, t, 1), emb.select(2, 1).narrow(1, run_of[t], 1)), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::materialize(scale), ops::add(scale.a, rep)), 0.0);
  const ops::Summed middle = scale.run(1);
  EXPECT_EQ(test::max_abs_diff(ops::add(middle.a, middle.b).expand({2, 3, d}).contiguous(),
                               ops::materialize(scale).narrow(1, 1, 3)),
            0.0);

  const Tensor x = bf16_values({2, 6, d}, 402, -3.f, 3.f), y = bf16_values({2, 6, d}, 403);
  EXPECT_EQ(test::max_abs_diff(ops::modulate(x, scale, shift), ops::modulate(x, per_token(1), per_token(0))), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::gated_add(x, y, gate), ops::gated_add(x, y, per_token(2))), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::rms_norm_modulate(x, scale, shift, 1e-6),
                               ops::rms_norm_modulate(x, per_token(1), per_token(0), 1e-6)),
            0.0);
  const ops::ResidualNorm2 got = ops::gated_add_rms_norm_modulate2(x, y, gate, scale, shift, shift, scale, 1e-6);
  const ops::ResidualNorm2 want = ops::gated_add_rms_norm_modulate2(
      x, y, per_token(2), per_token(1), per_token(0), per_token(0), per_token(1), 1e-6);
  EXPECT_EQ(test::max_abs_diff(got.x, want.x), 0.0);
  EXPECT_EQ(test::max_abs_diff(got.h, want.h), 0.0);
  EXPECT_EQ(test::max_abs_diff(got.h2, want.h2), 0.0);
  // The runs count (not just the rows): a sum over other runs differs.
  EXPECT_GT(test::max_abs_diff(ops::materialize(ops::Summed(scale.a, scale.b, {2, 4, 6})), ops::materialize(scale)), 1e-3);

  // Runs that do not describe b's rows.
  EXPECT_ERROR_HAS(ops::modulate(x, ops::Summed(table.select(0, 1), emb.select(2, 1), {1, 6}), shift),
                        "one row per run");
  EXPECT_ERROR_HAS(ops::modulate(x, ops::Summed(table.select(0, 1), emb.select(2, 1), {1, 1, 6}), shift),
                        "in order");
  EXPECT_ERROR_HAS(ops::gated_add(x, y, ops::Summed(table.select(0, 2), Tensor(), {6})),
                        "no second summand");
  EXPECT_ERROR_HAS(ops::expand_runs(emb.select(2, 1), {3, 6}), "one row per run");
}

}  // namespace
}  // namespace ltx
