// The fused glue ops on CUDA: rms_norm_modulate (RMSNorm + AdaLN modulation), gated_add
// (x + y * gate) and silu_mul (the SwiGLU product), with the AdaLN operands given as ops::Summed
// (table row + per-token slice, summed inside the consumer).
// The transformer attention's q / k RMSNorm + RoPE (rms_norm_rope).
// The attention's per-head gate (mul_2sigmoid).
// Each must equal the unfused CUDA composition bit for bit (f32 and bf16 storage, per-sample and
// per-token scale/shift/gates, strided inputs) and the CPU op within the rms_norm kernel's f32-sum
// tolerance.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/norm.h"
#include "backend/cuda/residual_norm.h"
#include "backend/cuda/rope.h"
#include "cuda/cuda_test_util.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/summed.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::misaligned_copy;
using test::near;
using test::same_bytes;

std::string dims(const Shape& s) { return s.str(); }

TEST(CudaFusedGlue, RmsNormModulateEqualsTheUnfusedOpsAndMatchesCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 900;
  for (int64_t d : {1, 7, 129, 2048, 4100}) {
    for (int64_t t : {1, 33}) {
      for (bool per_token : {false, true}) {
        const Shape xs{2, t, d}, ss{2, per_token ? t : 1, d};
        SCOPED_TRACE("x " + dims(xs) + " scale/shift " + dims(ss));
        const Tensor x = test::random_tensor(xs, seed++, -3.f, 5.f);
        const Tensor scale = test::random_tensor(ss, seed++), shift = test::random_tensor(ss, seed++);
        for (DType dt : {DType::F32, DType::BF16}) {
          SCOPED_TRACE(dtype_name(dt));
          const Tensor xg = test::non_contiguous_copy(x.to(kGpu, dt));
          const Tensor sg = test::non_contiguous_copy(scale.to(kGpu, dt)), tg = shift.to(kGpu, dt);
          const Tensor got = ops::rms_norm_modulate(xg, sg, tg, 1e-6);
          EXPECT_EQ(got.dtype(), dt);
          EXPECT_TRUE(same_bytes(got, ops::modulate(ops::rms_norm(xg, Tensor(), 1e-6), sg, tg)));
          // Against the CPU (f32) on the same (possibly bf16-rounded) inputs.
          const Tensor want = ops::rms_norm_modulate(xg.to(Device::cpu(), DType::F32),
                                                     sg.to(Device::cpu(), DType::F32),
                                                     tg.to(Device::cpu(), DType::F32), 1e-6);
          const double tol = dt == DType::BF16 ? 1.6e-2 : 4e-6;
          EXPECT_TRUE(near(got, want, tol, tol));
        }
      }
    }
  }
}

// With a weight (the diffusion decoder's weighted norms), on the warp-per-row, block-per-row and
// general paths: the unfused pair's bits.
TEST(CudaFusedGlue, WeightedRmsNormModulateEqualsTheUnfusedOps) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1200;
  for (int64_t d : {7, 256, 2048}) {
    const Tensor x = test::random_tensor({2, 19, d}, seed++, -3.f, 5.f);
    const Tensor scale = test::random_tensor({2, 1, d}, seed++), shift = test::random_tensor({2, 1, d}, seed++);
    const Tensor w = test::random_tensor({d}, seed++, 0.5f, 1.5f);
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d));
      const Tensor sg = scale.to(kGpu, dt), tg = shift.to(kGpu, dt), wg = w.to(kGpu, dt);
      for (const Tensor& xg : {x.to(kGpu, dt), test::non_contiguous_copy(x.to(kGpu, dt))}) {
        const Tensor got = ops::rms_norm_modulate(xg, sg, tg, 1e-6, wg);
        EXPECT_TRUE(same_bytes(got, ops::modulate(ops::rms_norm(xg, wg, 1e-6), sg, tg)));
      }
    }
  }
}

TEST(CudaFusedGlue, RmsNormModulateMixedDtypesFollowTheUnfusedPromotion) {
  LTX_REQUIRE_CUDA();
  // bf16 x with f32 scale/shift: the normalised value is rounded to bf16 (as rms_norm stores it),
  // the result is f32 (as modulate's).
  const Tensor x = test::random_tensor({3, 5, 96}, 950).to(kGpu, DType::BF16);
  const Tensor scale = test::random_tensor({3, 1, 96}, 951).to(kGpu);
  const Tensor shift = test::random_tensor({96}, 952).to(kGpu);
  const Tensor got = ops::rms_norm_modulate(x, scale, shift, 1e-6);
  EXPECT_EQ(got.dtype(), DType::F32);
  EXPECT_TRUE(same_bytes(got, ops::modulate(ops::rms_norm(x, Tensor(), 1e-6), scale, shift)));
}

// The SwiGLU product on the halves of one merged gate/up projection (strided views), as the
// diffusion decoder runs it, and broadcast operands.
TEST(CudaFusedGlue, SiluMulEqualsTheUnfusedOpsAndMatchesCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1100;
  const Tensor merged = test::random_tensor({37, 2 * 136}, seed++, -6.f, 6.f);
  const Tensor bias_like = test::random_tensor({1, 136}, seed++);
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor m = merged.to(kGpu, dt);
    const Tensor gate = m.narrow(1, 0, 136), up = m.narrow(1, 136, 136);
    const Tensor got = ops::silu_mul(gate, up);
    EXPECT_EQ(got.dtype(), dt);
    EXPECT_TRUE(same_bytes(got, ops::mul(ops::silu(gate), up)));
    const Tensor b = bias_like.to(kGpu, dt);
    EXPECT_TRUE(same_bytes(ops::silu_mul(gate, b), ops::mul(ops::silu(gate), b)));
    // The device's expf and the host's differ in the last bit now and then.
    const Tensor want = ops::silu_mul(gate.to(Device::cpu(), DType::F32), up.to(Device::cpu(), DType::F32));
    EXPECT_TRUE(dt == DType::F32 ? near(got, want, 1e-6, 1e-6) : near(got, want, 4e-2, 1e-2));
  }
}

TEST(CudaFusedGlue, GatedAddEqualsTheUnfusedOpsAndMatchesCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1000;
  struct Case {
    Shape x, y, gate;
  };
  const std::vector<Case> cases = {{{2, 33, 129}, {2, 33, 129}, {2, 1, 129}},
                                   {{2, 33, 129}, {2, 33, 129}, {2, 33, 129}},
                                   {{1, 7, 4100}, {1, 7, 4100}, {1, 1, 1}},
                                   {{3, 1}, {3, 9}, {9}}};
  for (const Case& c : cases) {
    SCOPED_TRACE("x " + dims(c.x) + " y " + dims(c.y) + " gate " + dims(c.gate));
    const Tensor x = test::random_tensor(c.x, seed++, -4.f, 4.f);
    const Tensor y = test::random_tensor(c.y, seed++, -4.f, 4.f), g = test::random_tensor(c.gate, seed++);
    for (DType xd : {DType::F32, DType::BF16}) {
      for (DType yd : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(std::string("x ") + dtype_name(xd) + ", y/gate " + dtype_name(yd));
        const Tensor xg = test::non_contiguous_copy(x.to(kGpu, xd));
        const Tensor yg = test::non_contiguous_copy(y.to(kGpu, yd)), gg = g.to(kGpu, yd);
        const Tensor got = ops::gated_add(xg, yg, gg);
        EXPECT_TRUE(same_bytes(got, ops::add(xg, ops::mul(yg, gg))));
        const Tensor want = ops::gated_add(xg.to(Device::cpu(), DType::F32), yg.to(Device::cpu(), DType::F32),
                                           gg.to(Device::cpu(), DType::F32));
        const bool f32 = xd == DType::F32 && yd == DType::F32;
        if (f32) {
          EXPECT_TRUE(same_bytes(got.to(Device::cpu()), want));
        } else {
          EXPECT_TRUE(near(got, want, 4e-2, 1e-2));
        }
      }
    }
  }
}

// The transformer's AdaLN operands as ops::Summed: row r of a table [K, D] + the strided slice r
// of per-token values [B, T, K * D]. Each consumer equals ops::add then the op, bit for bit, on
// every kernel path: D 33 (general / strided), 256 (bf16 row256 kernel), 1024 (warp per row),
// 4096 (block per row, the real width), per-sample (T 1) and per-token values, bf16, f32 and
// mixed summands (bf16 table + f32 values: an f32 sum, an f32 result).
TEST(CudaFusedGlue, SummedAdaValuesEqualAddThenOpBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1300;
  const int64_t k = 9;
  for (int64_t d : {33, 256, 1024, 4096}) {
    for (int64_t t : {1, 19}) {
      const Tensor table = test::random_tensor({k, d}, seed++);
      const Tensor ts = test::random_tensor({2, t, k * d}, seed++, -0.5f, 0.5f);
      const Tensor x = test::random_tensor({2, 19, d}, seed++, -3.f, 5.f);
      const Tensor y = test::random_tensor({2, 19, d}, seed++, -3.f, 3.f);
      for (DType table_dt : {DType::BF16, DType::F32}) {
        for (DType dt : {DType::BF16, DType::F32}) {
          SCOPED_TRACE("D " + std::to_string(d) + " T " + std::to_string(t) + " table " +
                       dtype_name(table_dt) + " values " + dtype_name(dt));
          const Tensor tg = table.to(kGpu, table_dt);
          const Tensor sg = ts.to(kGpu, dt).view({2, t, k, d});
          const auto value = [&](int64_t row) { return ops::Summed(tg.select(0, row), sg.select(2, row)); };
          const Tensor xg = x.to(kGpu, dt), yg = y.to(kGpu, dt);
          const ops::Summed scale = value(1), shift = value(0), gate = value(2);
          const Tensor scale_v = ops::materialize(scale), shift_v = ops::materialize(shift), gate_v = ops::materialize(gate);

          const Tensor norm = ops::rms_norm_modulate(xg, scale, shift, 1e-6);
          EXPECT_TRUE(same_bytes(norm, ops::rms_norm_modulate(xg, scale_v, shift_v, 1e-6)));
          EXPECT_TRUE(same_bytes(norm, ops::modulate(ops::rms_norm(xg, Tensor(), 1e-6), scale_v, shift_v)));
          EXPECT_EQ(cuda::rms_norm_modulate_vectorised(xg, scale, shift), d % 8 == 0);
          EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(xg, scale, shift_v, 1e-6),
                                 ops::rms_norm_modulate(xg, scale_v, shift_v, 1e-6)));
          EXPECT_TRUE(same_bytes(ops::modulate(xg, scale, shift), ops::modulate(xg, scale_v, shift_v)));
          EXPECT_TRUE(same_bytes(ops::modulate(xg, scale_v, shift), ops::modulate(xg, scale_v, shift_v)));
          EXPECT_TRUE(same_bytes(ops::gated_add(xg, yg, gate), ops::add(xg, ops::mul(yg, gate_v))));
          // Non-contiguous x / y take the strided loops.
          const Tensor xs = test::non_contiguous_copy(xg), ys = test::non_contiguous_copy(yg);
          EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(xs, scale, shift, 1e-6),
                                 ops::rms_norm_modulate(xs, scale_v, shift_v, 1e-6)));
          EXPECT_TRUE(same_bytes(ops::gated_add(xs, ys, gate), ops::gated_add(xs, ys, gate_v)));
        }
      }
    }
  }
}

// q / k RMSNorm + RoPE of the transformer attention: the fused kernel equals rms_norm then
// apply_rope on the GPU bit for bit, for the real widths (video 4096 = 32 x 128, audio 2048 =
// 32 x 64), a wide one (8192: a 32 KiB f32 row), a narrow one (128: rms_norm's warp-per-row path),
// both RoPE layouts, per-batch and shared tables, bf16 / f32 storage and tables; shapes off the
// kernel's path (a strided x, rows of 20) fall back to the unfused ops with the same bits.
// q and k of self-attention in one launch (qk_rms_norm_rope) equal rms_norm_rope of each tensor
// bit for bit; pairs off the one-launch kernel (rows of 20, two staged f32 rows of 8192 over
// 40 KiB, a strided k) take the two calls.
TEST(CudaFusedGlue, RmsNormRopeEqualsTheUnfusedOps) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1400;
  struct Case {
    int64_t b, t, d, heads;
    bool fused;
  };
  const Case cases[] = {{1, 37, 4096, 32, true}, {2, 5, 2048, 32, true}, {1, 3, 8192, 32, true},
                        {2, 9, 128, 2, true},    {1, 6, 20, 2, false}};
  for (const Case& c : cases) {
    for (const ops::RopeLayout layout : {ops::RopeLayout::Split, ops::RopeLayout::Interleaved}) {
      const bool split = layout == ops::RopeLayout::Split;
      const int64_t dh = c.d / c.heads;
      for (const int64_t tb : {c.b, int64_t{1}}) {  // tables per batch or shared
        const Shape ts = split ? Shape{tb, c.heads, c.t, dh / 2} : Shape{tb, c.t, c.d};
        const Tensor x = test::random_tensor({c.b, c.t, c.d}, seed++, -3.f, 5.f);
        const Tensor w = test::random_tensor({c.d}, seed++, 0.5f, 1.5f);
        const Tensor k = test::random_tensor({c.b, c.t, c.d}, seed++, -4.f, 2.f);
        const Tensor kw = test::random_tensor({c.d}, seed++, 0.5f, 1.5f);
        const Tensor cs = test::random_tensor(ts, seed++), sn = test::random_tensor(ts, seed++);
        for (DType dt : {DType::BF16, DType::F32}) {
          for (DType table_dt : {DType::BF16, DType::F32}) {
            SCOPED_TRACE("x " + dims(x.shape()) + " heads " + std::to_string(c.heads) +
                         (split ? " split" : " interleaved") + " tables " + dims(ts) + " " +
                         dtype_name(table_dt) + ", x " + dtype_name(dt));
            const Tensor xg = x.to(kGpu, dt), wg = w.to(kGpu, dt);
            const Tensor cg = cs.to(kGpu, table_dt), sg = sn.to(kGpu, table_dt);
            const Shape target = split ? Shape{c.b, c.heads, c.t, dh / 2} : x.shape();
            EXPECT_EQ(cuda::rms_norm_rope_fusable(xg, wg, cg.expand(target), sg.expand(target), layout,
                                                  c.heads),
                      c.fused);
            const Tensor got = ops::rms_norm_rope(xg, wg, 1e-6, cg, sg, layout, c.heads);
            EXPECT_EQ(got.dtype(), dt);
            EXPECT_TRUE(same_bytes(got, ops::rms_norm_rope_unfused(xg, wg, 1e-6, cg, sg, layout, c.heads)));
            EXPECT_TRUE(same_bytes(ops::rms_norm_rope(xg, Tensor(), 1e-6, cg, sg, layout, c.heads),
                                   ops::rms_norm_rope_unfused(xg, Tensor(), 1e-6, cg, sg, layout, c.heads)));
            const Tensor xs = test::non_contiguous_copy(xg);
            EXPECT_TRUE(same_bytes(ops::rms_norm_rope(xs, wg, 1e-6, cg, sg, layout, c.heads), got));

            const Tensor kg = k.to(kGpu, dt), kwg = kw.to(kGpu, dt);
            const bool pair_fused = c.fused && 2 * c.d * static_cast<int64_t>(dtype_size(dt)) <= 40 * 1024;
            EXPECT_EQ(cuda::qk_rms_norm_rope_fusable(xg, kg, wg, kwg, cg.expand(target), sg.expand(target),
                                                     layout, c.heads),
                      pair_fused);
            const Tensor got_k = ops::rms_norm_rope(kg, kwg, 1e-6, cg, sg, layout, c.heads);
            const ops::QkRope r = ops::qk_rms_norm_rope(xg, kg, wg, kwg, 1e-6, cg, sg, layout, c.heads);
            EXPECT_TRUE(same_bytes(r.q, got));
            EXPECT_TRUE(same_bytes(r.k, got_k));
            const ops::QkRope u = ops::qk_rms_norm_rope(xg, kg, Tensor(), kwg, 1e-6, cg, sg, layout, c.heads);
            EXPECT_TRUE(same_bytes(u.q, ops::rms_norm_rope(xg, Tensor(), 1e-6, cg, sg, layout, c.heads)));
            EXPECT_TRUE(same_bytes(u.k, got_k));
            const ops::QkRope st =
                ops::qk_rms_norm_rope(xg, test::non_contiguous_copy(kg), wg, kwg, 1e-6, cg, sg, layout, c.heads);
            EXPECT_TRUE(same_bytes(st.q, got));
            EXPECT_TRUE(same_bytes(st.k, got_k));
          }
        }
      }
    }
  }
}

// The transformer's video q / k rows at full size (bf16, 6144 x 4096 = 32 heads x 128, split
// tables per head and token): more rows than resident blocks, so each block takes several and
// stages the next while it works (kPrefetch); q and k in one launch too, and the interleaved
// layout.
TEST(CudaFusedGlue, RmsNormRopeTransformerVideoRowsEqualTheUnfusedOps) {
  LTX_REQUIRE_CUDA();
  const int64_t t = 6144, d = 4096, heads = 32;
  const Tensor x = test::random_tensor({1, t, d}, 1450, -3.f, 5.f).to(kGpu, DType::BF16);
  const Tensor w = test::random_tensor({d}, 1451, 0.5f, 1.5f).to(kGpu, DType::BF16);
  const Tensor cs = test::random_tensor({1, heads, t, d / heads / 2}, 1452).to(kGpu, DType::BF16);
  const Tensor sn = test::random_tensor({1, heads, t, d / heads / 2}, 1453).to(kGpu, DType::BF16);
  const Tensor want = ops::rms_norm_rope_unfused(x, w, 1e-6, cs, sn, ops::RopeLayout::Split, heads);
  EXPECT_TRUE(same_bytes(ops::rms_norm_rope(x, w, 1e-6, cs, sn, ops::RopeLayout::Split, heads), want));
  const Tensor k = test::random_tensor({1, t, d}, 1454, -4.f, 2.f).to(kGpu, DType::BF16);
  const Tensor kw = test::random_tensor({d}, 1455, 0.5f, 1.5f).to(kGpu, DType::BF16);
  const ops::QkRope qk = ops::qk_rms_norm_rope(x, k, w, kw, 1e-6, cs, sn, ops::RopeLayout::Split, heads);
  EXPECT_TRUE(same_bytes(qk.q, want));
  EXPECT_TRUE(same_bytes(qk.k, ops::rms_norm_rope_unfused(k, kw, 1e-6, cs, sn, ops::RopeLayout::Split, heads)));
  const Tensor ci = test::random_tensor({1, t, d}, 1456).to(kGpu, DType::BF16);
  const Tensor si = test::random_tensor({1, t, d}, 1457).to(kGpu, DType::BF16);
  EXPECT_TRUE(same_bytes(ops::rms_norm_rope(x, w, 1e-6, ci, si, ops::RopeLayout::Interleaved, heads),
                         ops::rms_norm_rope_unfused(x, w, 1e-6, ci, si, ops::RopeLayout::Interleaved, heads)));
}

// [B, T, D] rows of the residual + norm kernels' tests: the real widths (video 4096, audio 2048),
// narrow rows and 8.
struct ResidualNormCase {
  int64_t b, t, d;
};
// {2, 700, 4096}: more rows than the resident blocks, so that each block takes several and
// prefetches the next one's x and y (the cached path's kPrefetch).
constexpr ResidualNormCase kResidualNormCases[] = {
    {2, 37, 4096}, {2, 700, 4096}, {1, 5, 2048}, {3, 9, 256}, {2, 3, 8}};

// The gated residual and the next AdaLN input in one pass (gated_add_rms_norm_modulate): both
// results bit-identical to gated_add then rms_norm_modulate, for the real widths (video 4096,
// audio 2048), narrow rows and 8, per-token and per-sample AdaLN values given as ops::Summed
// (table row + timestep slice) or plain; arguments off the fused kernel (f32, a misaligned x, a
// broadcast y) take the two ops, with the same bits.
TEST(CudaFusedGlue, GatedAddRmsNormModulateEqualsTheTwoOps) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1460;
  for (const ResidualNormCase c : kResidualNormCases) {
    for (const int64_t st : {c.t, int64_t{1}}) {  // per-token or per-sample AdaLN values
      SCOPED_TRACE("[" + std::to_string(c.b) + ", " + std::to_string(c.t) + ", " +
                   std::to_string(c.d) + "], AdaLN rows " + std::to_string(st));
      const auto gpu = [&](const Shape& s, float lo = -1.f, float hi = 1.f) {
        return test::random_tensor(s, seed++, lo, hi).to(kGpu, DType::BF16);
      };
      const Tensor x = gpu({c.b, c.t, c.d}, -3.f, 5.f), y = gpu({c.b, c.t, c.d}, -2.f, 2.f);
      const Tensor table = gpu({3, c.d}), emb = gpu({c.b, st, 3, c.d});
      const ops::Summed gate{table.select(0, 0), emb.select(2, 0)};
      const ops::Summed scale{table.select(0, 1), emb.select(2, 1)}, shift = emb.select(2, 2);
      EXPECT_TRUE(cuda::gated_add_rms_norm_modulate_fusable(x, y, gate, scale, shift));
      const ops::ResidualNorm got = ops::gated_add_rms_norm_modulate(x, y, gate, scale, shift, 1e-6);
      const Tensor want_x = ops::gated_add(x, y, gate);
      const Tensor want_h = ops::rms_norm_modulate(want_x, scale, shift, 1e-6);
      EXPECT_EQ(got.x.dtype(), DType::BF16);
      EXPECT_TRUE(same_bytes(got.x, want_x));
      EXPECT_TRUE(same_bytes(got.h, want_h));
      // Plain (not summed) operands.
      const ops::ResidualNorm plain =
          ops::gated_add_rms_norm_modulate(x, y, ops::materialize(gate), ops::materialize(scale), shift, 1e-6);
      EXPECT_TRUE(same_bytes(plain.x, want_x));
      EXPECT_TRUE(same_bytes(plain.h, want_h));
      // Off the kernel: the two ops, the same bits.
      const Tensor xm = misaligned_copy(x);
      EXPECT_FALSE(cuda::gated_add_rms_norm_modulate_fusable(xm, y, gate, scale, shift));
      const ops::ResidualNorm off = ops::gated_add_rms_norm_modulate(xm, y, gate, scale, shift, 1e-6);
      EXPECT_TRUE(same_bytes(off.x, want_x));
      EXPECT_TRUE(same_bytes(off.h, want_h));
      const Tensor xf = x.to(DType::F32), yf = y.to(DType::F32);
      EXPECT_FALSE(cuda::gated_add_rms_norm_modulate_fusable(xf, yf, gate, scale, shift));
      const ops::ResidualNorm f32 = ops::gated_add_rms_norm_modulate(xf, yf, gate, scale, shift, 1e-6);
      EXPECT_TRUE(same_bytes(f32.x, ops::gated_add(xf, yf, gate)));
      EXPECT_TRUE(same_bytes(f32.h, ops::rms_norm_modulate(f32.x, scale, shift, 1e-6)));
      const Tensor y_row = y.narrow(1, 0, 1);  // broadcast over the tokens
      EXPECT_FALSE(cuda::gated_add_rms_norm_modulate_fusable(x, y_row, gate, scale, shift));
      EXPECT_TRUE(same_bytes(ops::gated_add_rms_norm_modulate(x, y_row, gate, scale, shift, 1e-6).x,
                             ops::gated_add(x, y_row, gate)));
    }
  }
}

// The gated residual and two AdaLN inputs of it in one pass (gated_add_rms_norm_modulate2, the
// cross-modal attentions' inputs): each result bit-identical to gated_add then rms_norm_modulate
// with each modulation, for the real widths (4096: every cached value of a row takes 48 KiB of
// shared memory with the staged row), narrow rows, per-token and per-sample values, a mix of the
// two (not cached); a misaligned x takes the ops in turn, with the same bits.
TEST(CudaFusedGlue, GatedAddRmsNormModulate2EqualsTheOpsInTurn) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1480;
  for (const ResidualNormCase c : kResidualNormCases) {
    for (const int64_t st : {c.t, int64_t{1}}) {  // per-token or per-sample AdaLN values
      for (const int64_t st2 : {st, c.t}) {          // the second modulation's rows
        SCOPED_TRACE("[" + std::to_string(c.b) + ", " + std::to_string(c.t) + ", " +
                     std::to_string(c.d) + "], AdaLN rows " + std::to_string(st) + " and " +
                     std::to_string(st2));
        const auto gpu = [&](const Shape& s, float lo = -1.f, float hi = 1.f) {
          return test::random_tensor(s, seed++, lo, hi).to(kGpu, DType::BF16);
        };
        const Tensor x = gpu({c.b, c.t, c.d}, -3.f, 5.f), y = gpu({c.b, c.t, c.d}, -2.f, 2.f);
        const Tensor table = gpu({5, c.d}), emb = gpu({c.b, st, 3, c.d}), emb2 = gpu({c.b, st2, 2, c.d});
        const ops::Summed gate{table.select(0, 0), emb.select(2, 0)};
        const ops::Summed scale{table.select(0, 1), emb.select(2, 1)}, shift = emb.select(2, 2);
        const ops::Summed scale2{table.select(0, 3), emb2.select(2, 0)};
        const ops::Summed shift2{table.select(0, 4), emb2.select(2, 1)};
        EXPECT_TRUE(cuda::gated_add_rms_norm_modulate2_fusable(x, y, gate, scale, shift, scale2, shift2));
        const ops::ResidualNorm2 got =
            ops::gated_add_rms_norm_modulate2(x, y, gate, scale, shift, scale2, shift2, 1e-6);
        const Tensor want_x = ops::gated_add(x, y, gate);
        const Tensor want_h = ops::rms_norm_modulate(want_x, scale, shift, 1e-6);
        const Tensor want_h2 = ops::rms_norm_modulate(want_x, scale2, shift2, 1e-6);
        EXPECT_TRUE(same_bytes(got.x, want_x));
        EXPECT_TRUE(same_bytes(got.h, want_h));
        EXPECT_TRUE(same_bytes(got.h2, want_h2));
        const Tensor xm = misaligned_copy(x);
        EXPECT_FALSE(cuda::gated_add_rms_norm_modulate2_fusable(xm, y, gate, scale, shift, scale2, shift2));
        const ops::ResidualNorm2 off =
            ops::gated_add_rms_norm_modulate2(xm, y, gate, scale, shift, scale2, shift2, 1e-6);
        EXPECT_TRUE(same_bytes(off.x, want_x));
        EXPECT_TRUE(same_bytes(off.h, want_h));
        EXPECT_TRUE(same_bytes(off.h2, want_h2));
      }
    }
  }
}

// The per-head gate out * (2 * sigmoid(logits)): logits [B, T, H, 1] against [B, T, H, Dh] (the
// inner-vector loop with a per-row gate) and a strided out, bf16 / f32 / mixed.
TEST(CudaFusedGlue, Mul2SigmoidEqualsTheUnfusedOps) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({2, 37, 32, 128}, 1500, -4.f, 4.f);
  const Tensor l = test::random_tensor({2, 37, 32, 1}, 1501, -9.f, 9.f);
  for (DType xd : {DType::BF16, DType::F32}) {
    for (DType ld : {DType::BF16, DType::F32}) {
      SCOPED_TRACE(std::string("x ") + dtype_name(xd) + ", logits " + dtype_name(ld));
      const Tensor xg = x.to(kGpu, xd), lg = l.to(kGpu, ld);
      const Tensor want = ops::mul(xg, ops::mul(ops::sigmoid(lg), 2.0));
      const Tensor got = ops::mul_2sigmoid(xg, lg);
      EXPECT_EQ(got.dtype(), want.dtype());
      EXPECT_TRUE(same_bytes(got, want));
      EXPECT_TRUE(same_bytes(ops::mul_2sigmoid(test::non_contiguous_copy(xg), lg), want));
    }
  }
}

}  // namespace
}  // namespace ltx
