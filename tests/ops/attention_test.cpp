#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "ops/attention.h"
#include "ops/elementwise.h"
#include "support/test_support.h"

namespace ltx::attention_test {
namespace {

using test::non_contiguous_copy;
using test::random_tensor;

// Naive double-precision SDPA (torch semantics; fully masked rows -> 0 like _safe_softmax).
Tensor ref_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                std::optional<double> scale) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  const int64_t Tk = k.size(2), Dv = v.size(3);
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(D));
  const auto vq = q.to_double_vector(), vk = k.to_double_vector(), vv = v.to_double_vector();
  std::vector<double> vm;
  const bool is_bool = mask.defined() && mask.dtype() != DType::F32;
  if (mask.defined()) vm = mask.expand({B, H, Tq, Tk}).to_double_vector();
  std::vector<double> out(static_cast<size_t>(B * H * Tq * Dv), 0.0), logit(static_cast<size_t>(Tk));
  const double ninf = -std::numeric_limits<double>::infinity();
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < Tq; ++i) {
      double mx = ninf;
      for (int64_t j = 0; j < Tk; ++j) {
        double s = 0;
        for (int64_t p = 0; p < D; ++p)
          s += vq[static_cast<size_t>((bh * Tq + i) * D + p)] * vk[static_cast<size_t>((bh * Tk + j) * D + p)];
        s *= sc;
        if (mask.defined()) {
          const double m = vm[static_cast<size_t>((bh * Tq + i) * Tk + j)];
          s = is_bool ? (m != 0 ? s : ninf) : s + m;
        }
        logit[static_cast<size_t>(j)] = s;
        mx = std::max(mx, s);
      }
      if (mx == ninf) continue;  // fully masked row stays zero
      double sum = 0;
      for (double& s : logit) sum += (s = std::exp(s - mx));
      for (int64_t j = 0; j < Tk; ++j)
        for (int64_t c = 0; c < Dv; ++c)
          out[static_cast<size_t>((bh * Tq + i) * Dv + c)] +=
              logit[static_cast<size_t>(j)] / sum * vv[static_cast<size_t>((bh * Tk + j) * Dv + c)];
    }
  return Tensor::from_vector(out, {B, H, Tq, Dv});
}

Tensor random_mask(const Shape& shape, uint64_t seed, DType dtype) {
  // ~30% masked; column 0 always attended so no row is fully masked by accident.
  std::vector<double> r = random_tensor(shape, seed, 0.f, 1.f).to_double_vector();
  const int64_t tk = shape[shape.size() - 1];
  std::vector<uint8_t> bits(r.size());
  for (size_t i = 0; i < r.size(); ++i) bits[i] = (r[i] > 0.3 || i % static_cast<size_t>(tk) == 0) ? 1 : 0;
  Tensor u8 = Tensor::from_vector(bits, shape);
  return dtype == DType::U8 ? u8 : u8.view_as_dtype(DType::Bool);
}

constexpr double kTol = 2e-5;

TEST(Attention, MatchesDoubleReferenceOnOddSizesAndHeadDims) {
  struct Case {
    int64_t tq, tk, d, dv;
  };
  const Case cases[] = {{1, 1, 16, 16},   {7, 65, 24, 24}, {65, 7, 64, 64},   {130, 130, 128, 128},
                        {1, 130, 64, 16}, {130, 1, 16, 24}, {65, 130, 24, 128}, {7, 7, 128, 5}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    const Tensor q = random_tensor({2, 2, c.tq, c.d}, seed++), k = random_tensor({2, 2, c.tk, c.d}, seed++),
                 v = random_tensor({2, 2, c.tk, c.dv}, seed++);
    const Tensor y = ops::scaled_dot_product_attention(q, k, v);
    EXPECT_EQ(y.shape(), Shape({2, 2, c.tq, c.dv}));
    EXPECT_TRUE(y.is_contiguous());
    SCOPED_TRACE(str("Tq ", c.tq, " Tk ", c.tk, " D ", c.d, " Dv ", c.dv));
    EXPECT_ALLCLOSE(y, ref_sdpa(q, k, v, Tensor(), std::nullopt), kTol);
  }
}

TEST(Attention, AppliesBroadcastBoolAndAdditiveMasks) {
  const int64_t B = 2, H = 3, Tq = 65, Tk = 130, D = 24, Dv = 16;
  const Tensor q = random_tensor({B, H, Tq, D}, 10), k = random_tensor({B, H, Tk, D}, 11),
               v = random_tensor({B, H, Tk, Dv}, 12);
  const Tensor unmasked = ops::scaled_dot_product_attention(q, k, v);
  const std::vector<Tensor> masks = {
      random_mask({Tq, Tk}, 20, DType::Bool),
      random_mask({B, 1, Tq, Tk}, 21, DType::Bool),
      random_mask({1, H, 1, Tk}, 22, DType::U8),
      random_mask({B, H, Tq, Tk}, 23, DType::U8),
      random_tensor({Tq, Tk}, 24, -3.f, 3.f),
      random_tensor({B, 1, Tq, Tk}, 25, -3.f, 3.f),
      random_tensor({Tk}, 26, -3.f, 3.f),
      non_contiguous_copy(random_tensor({B, H, Tq, Tk}, 27, -3.f, 3.f)),
  };
  for (const Tensor& m : masks) {
    const Tensor y = ops::scaled_dot_product_attention(q, k, v, m);
    SCOPED_TRACE(m.describe());
    EXPECT_ALLCLOSE(y, ref_sdpa(q, k, v, m, std::nullopt), kTol);
    EXPECT_GT(test::max_abs_diff(y, unmasked), 1e-3) << "mask had no effect: " << m.describe();
  }
}

TEST(Attention, AcceptsNonContiguousQkv) {
  const int64_t B = 2, H = 3, Tq = 33, Tk = 70, D = 64, Dv = 24;
  const Tensor q = random_tensor({B, H, Tq, D}, 30), k = random_tensor({B, H, Tk, D}, 31),
               v = random_tensor({B, H, Tk, Dv}, 32);
  const Tensor want = ref_sdpa(q, k, v, Tensor(), std::nullopt);
  // The transformer's [B, T, H, D] -> [B, H, T, D] views (unit stride, row stride H*D).
  auto bthd = [](const Tensor& t) { return t.transpose(1, 2).contiguous().transpose(1, 2); };
  ASSERT_FALSE(bthd(q).is_contiguous());
  EXPECT_ALLCLOSE(ops::scaled_dot_product_attention(bthd(q), bthd(k), bthd(v)), want, kTol);
  // Last two dims transposed in memory (BLAS transpose flags).
  auto tr = [](const Tensor& t) { return t.transpose(2, 3).contiguous().transpose(2, 3); };
  EXPECT_ALLCLOSE(ops::scaled_dot_product_attention(tr(q), tr(k), tr(v)), want, kTol);
  // No unit stride at all (copied).
  EXPECT_ALLCLOSE(ops::scaled_dot_product_attention(non_contiguous_copy(q), non_contiguous_copy(k),
                                                    non_contiguous_copy(v)),
                  want, kTol);
  // Broadcast batch (stride 0) on k/v.
  const Tensor k1 = k.narrow(0, 0, 1), v1 = v.narrow(0, 0, 1);
  EXPECT_ALLCLOSE(ops::scaled_dot_product_attention(q, k1.expand({B, H, Tk, D}), v1.expand({B, H, Tk, Dv})),
                  ref_sdpa(q, k1.expand({B, H, Tk, D}).contiguous(), v1.expand({B, H, Tk, Dv}).contiguous(),
                           Tensor(), std::nullopt),
                  kTol);
}

TEST(Attention, StaysStableForLargeLogits) {
  // Integer-valued q/k: the logits (up to +-1024) are exact in fp32, so any error comes from the
  // softmax; exp without max subtraction would overflow to inf/NaN.
  const int64_t B = 1, H = 2, Tq = 7, Tk = 65, D = 16;
  auto ints = [](const Shape& s, uint64_t seed) {
    std::vector<float> v = random_tensor(s, seed, -8.f, 8.f).to_float_vector();
    for (float& x : v) x = std::round(x);
    return Tensor::from_vector(v, s);
  };
  const Tensor q = ints({B, H, Tq, D}, 40), k = ints({B, H, Tk, D}, 41), v = random_tensor({B, H, Tk, 8}, 42);
  const Tensor y = ops::scaled_dot_product_attention(q, k, v, Tensor(), 1.0);
  EXPECT_ALLCLOSE(y, ref_sdpa(q, k, v, Tensor(), 1.0), 1e-5);
  // Additive masks of large magnitude (finite) behave like torch: still a softmax over the row.
  const Tensor m = random_tensor({Tq, Tk}, 43, -1e4f, 1e4f);
  EXPECT_ALLCLOSE(ops::scaled_dot_product_attention(q, k, v, m, 1.0), ref_sdpa(q, k, v, m, 1.0), 1e-5);
}

TEST(Attention, UsesTheGivenScale) {
  const Tensor q = random_tensor({1, 2, 7, 24}, 50), k = random_tensor({1, 2, 9, 24}, 51),
               v = random_tensor({1, 2, 9, 24}, 52);
  const Tensor y = ops::scaled_dot_product_attention(q, k, v, Tensor(), 0.7);
  EXPECT_ALLCLOSE(y, ref_sdpa(q, k, v, Tensor(), 0.7), kTol);
  EXPECT_GT(test::max_abs_diff(y, ref_sdpa(q, k, v, Tensor(), std::nullopt)), 1e-3);
}

TEST(Attention, FullyMaskedRowsGiveZerosNotNaN) {
  const int64_t Tq = 7, Tk = 9;
  const Tensor q = random_tensor({1, 2, Tq, 16}, 60), k = random_tensor({1, 2, Tk, 16}, 61),
               v = random_tensor({1, 2, Tk, 8}, 62);
  Tensor bmask = random_mask({Tq, Tk}, 63, DType::U8);
  bmask.select(0, 3).fill(0.0);  // row 3 attends to nothing
  const Tensor boolmask = bmask.view_as_dtype(DType::Bool);
  const Tensor y = ops::scaled_dot_product_attention(q, k, v, boolmask);
  EXPECT_ALLCLOSE(y, ref_sdpa(q, k, v, boolmask, std::nullopt), kTol);
  const std::vector<float> row3 = y.select(2, 3).to_float_vector();
  for (float x : row3) EXPECT_EQ(x, 0.f);
  // The same with an additive -inf mask.
  Tensor add = Tensor::zeros({Tq, Tk});
  add.select(0, 5).fill(-std::numeric_limits<double>::infinity());
  add.select(0, 2).narrow(0, 1, 4).fill(-std::numeric_limits<double>::infinity());
  const Tensor y2 = ops::scaled_dot_product_attention(q, k, v, add);
  EXPECT_ALLCLOSE(y2, ref_sdpa(q, k, v, add, std::nullopt), kTol);
  for (float x : y2.select(2, 5).to_float_vector()) EXPECT_EQ(x, 0.f);
}

TEST(Attention, LongKeySequencesUseSmallerQueryBlocks) {
  // Tk = 20000 shrinks the query block below 64 rows (tile budget); results must not change.
  const int64_t Tq = 60, Tk = 20000;
  const Tensor q = random_tensor({1, 1, Tq, 16}, 70), k = random_tensor({1, 1, Tk, 16}, 71),
               v = random_tensor({1, 1, Tk, 8}, 72);
  EXPECT_ALLCLOSE(ops::scaled_dot_product_attention(q, k, v), ref_sdpa(q, k, v, Tensor(), std::nullopt),
                  kTol);
}

TEST(Attention, HandlesEmptySequences) {
  const Tensor q = random_tensor({1, 2, 3, 8}, 80);
  const Tensor y = ops::scaled_dot_product_attention(q, Tensor::zeros({1, 2, 0, 8}), Tensor::zeros({1, 2, 0, 5}));
  EXPECT_ALLCLOSE(y, Tensor::zeros({1, 2, 3, 5}), 0.0);
  EXPECT_EQ(ops::scaled_dot_product_attention(Tensor::zeros({1, 2, 0, 8}), random_tensor({1, 2, 4, 8}, 1),
                                              random_tensor({1, 2, 4, 5}, 2))
                .shape(),
            Shape({1, 2, 0, 5}));
}

// The optional per-head gate: out[b, h, t, :] * 2 * sigmoid(g[b, t, h]), on the CPU exactly the
// composition with mul_2sigmoid; logits of any broadcastable shape and strides.
TEST(Attention, HeadGateIsTheMul2SigmoidComposition) {
  const int64_t B = 2, H = 3, Tq = 37, Tk = 70, D = 24, Dv = 16;
  const Tensor q = random_tensor({B, H, Tq, D}, 90), k = random_tensor({B, H, Tk, D}, 91),
               v = random_tensor({B, H, Tk, Dv}, 92);
  const Tensor mask = random_mask({B, 1, Tq, Tk}, 93, DType::Bool);
  const Tensor plain = ref_sdpa(q, k, v, mask, 0.3);
  // A view of a wider [B, Tq, 2H] tensor (the logits of every other head), [1, Tq, H] and [Tq, H]
  // (batch broadcast), [B, 1, H] (one gate per batch and head), and a dense one.
  const Tensor wide = random_tensor({B, Tq, 2 * H}, 94, -6.f, 6.f);
  const std::vector<Tensor> gates = {
      wide.narrow(2, 1, H), random_tensor({1, Tq, H}, 95, -6.f, 6.f),
      random_tensor({Tq, H}, 96, -6.f, 6.f), random_tensor({B, 1, H}, 97, -6.f, 6.f),
      non_contiguous_copy(random_tensor({B, Tq, H}, 98, -6.f, 6.f))};
  for (const Tensor& g : gates) {
    SCOPED_TRACE(g.describe());
    const Tensor got = ops::scaled_dot_product_attention(
        q, k, v, {.mask = mask, .scale = 0.3, .head_gate_logits = g});
    const Tensor gb = g.expand({B, Tq, H});
    const Tensor unfused = ops::mul_2sigmoid(ops::scaled_dot_product_attention(q, k, v, mask, 0.3),
                                             gb.transpose(1, 2).unsqueeze(-1));
    EXPECT_EQ(got.dtype(), DType::F32);
    ASSERT_EQ(got.shape(), Shape({B, H, Tq, Dv}));
    EXPECT_EQ(got.to_float_vector(), unfused.to_float_vector());
    const std::vector<double> gv = gb.to_double_vector(), pv = plain.to_double_vector();
    const Tensor want = test::make_ref({B, H, Tq, Dv}, [&](const std::vector<int64_t>& i) {
      const double logit = gv[static_cast<size_t>((i[0] * Tq + i[2]) * H + i[1])];
      return pv[static_cast<size_t>(test::ravel(i, {B, H, Tq, Dv}))] * 2 / (1 + std::exp(-logit));
    });
    EXPECT_ALLCLOSE(got, want, 2 * kTol);
  }
  // The AttentionOptions overload without a gate is the plain call.
  EXPECT_EQ(ops::scaled_dot_product_attention(q, k, v, {.mask = mask}).to_float_vector(),
            ops::scaled_dot_product_attention(q, k, v, mask).to_float_vector());
}

TEST(Attention, RejectsBadHeadGates) {
  const Tensor q = random_tensor({2, 3, 4, 8}, 1), k = random_tensor({2, 3, 5, 8}, 2),
               v = random_tensor({2, 3, 5, 6}, 3);
  const auto gated = [&](const Tensor& g) {
    return ops::scaled_dot_product_attention(q, k, v, {.head_gate_logits = g});
  };
  EXPECT_NO_THROW(gated(random_tensor({2, 4, 3}, 4)));
  // [B, Tq, H] = [2, 4, 3]: a wrong batch, query length or head count, the [B, H, Tq] order, 4-D.
  for (const Shape& bad : {Shape{3, 4, 3}, Shape{2, 5, 3}, Shape{2, 4, 2}, Shape{2, 3, 4},
                           Shape{2, 4, 3, 1}}) {
    SCOPED_TRACE(bad.str());
    EXPECT_ERROR_HAS(gated(random_tensor(bad, 5)), "head_gate_logits");
    EXPECT_ERROR_HAS(gated(random_tensor(bad, 5)), "[B, Tq, H] = [2, 4, 3]");
  }
  EXPECT_ERROR_HAS(gated(random_tensor({2, 4, 3}, 6).to(DType::BF16)), "head_gate_logits");
  EXPECT_ERROR_HAS(gated(Tensor::zeros({2, 4, 3}, DType::I32)), "head_gate_logits");
}

TEST(Attention, RejectsBadArguments) {
  const Tensor q = random_tensor({1, 2, 3, 8}, 1), k = random_tensor({1, 2, 5, 8}, 2),
               v = random_tensor({1, 2, 5, 4}, 3);
  auto sdpa = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m = Tensor()) {
    return ops::scaled_dot_product_attention(a, b, c, m);
  };
  EXPECT_THROW(sdpa(q.select(0, 0), k, v), Error);                          // 3-D q
  EXPECT_THROW(sdpa(q, random_tensor({1, 2, 5, 7}, 4), v), Error);          // D mismatch
  EXPECT_THROW(sdpa(q, k, random_tensor({1, 2, 6, 4}, 4)), Error);          // Tk mismatch
  EXPECT_THROW(sdpa(q, random_tensor({1, 3, 5, 8}, 4), v), Error);          // H mismatch
  EXPECT_THROW(sdpa(q, random_tensor({2, 2, 5, 8}, 4), v), Error);          // B mismatch
  EXPECT_THROW(sdpa(q, k, v, random_tensor({3, 4}, 5)), Error);             // mask Tk
  EXPECT_THROW(sdpa(q, k, v, random_tensor({2, 2, 3, 5}, 5)), Error);       // mask would grow B
  EXPECT_THROW(sdpa(q, k, v, random_tensor({1, 1, 1, 3, 5}, 5)), Error);    // 5-D mask
  EXPECT_THROW(sdpa(q, k, v, Tensor::zeros({3, 5}, DType::I32)), Error);    // mask dtype
  EXPECT_THROW(sdpa(q.to(DType::BF16), k, v), Error);
  EXPECT_THROW(sdpa(q, k, Tensor()), Error);
}

}  // namespace
}  // namespace ltx::attention_test
