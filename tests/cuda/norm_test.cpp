// CUDA RMSNorm / LayerNorm against the CPU ops on the same inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/norm.h"
#include "backend/cuda/pixel_norm.h"
#include "backend/cuda/residual_norm.h"
#include "cuda/cuda_test_util.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/summed.h"
#include "support/test_support.h"

namespace ltx::norm_test {
namespace {

using test::kGpu;
using test::misaligned_copy;
using test::near;
using test::same_bytes;

Tensor gpu(const Tensor& t) { return t.to(kGpu); }
Tensor gpu_or_none(const Tensor& t) { return t.defined() ? t.to(kGpu) : Tensor(); }

TEST(CudaNorm, RmsNormAndLayerNormMatchCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (int64_t d : {1, 7, 33, 129, 2048, 4100}) {
    for (int64_t rows : {1, 5, 64}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " d " + std::to_string(d));
      const Tensor x = test::random_tensor({rows, d}, seed++, -3.f, 5.f);
      const Tensor w = test::random_tensor({d}, seed++), b = test::random_tensor({d}, seed++);
      const Tensor xg = test::non_contiguous_copy(gpu(x));
      for (const Tensor& wt : {w, Tensor()}) {
        const Tensor got = ops::rms_norm(xg, gpu_or_none(wt), 1e-6);
        EXPECT_EQ(got.device(), kGpu);
        // f32 partial sums vs the CPU's double: the row's scale differs by ~1e-7 relative.
        EXPECT_TRUE(near(got, ops::rms_norm(x, wt, 1e-6), 1e-6, 2e-6));
        for (const Tensor& bt : {b, Tensor()})
          EXPECT_TRUE(near(ops::layer_norm(xg, gpu_or_none(wt), gpu_or_none(bt), 1e-5),
                           ops::layer_norm(x, wt, bt, 1e-5), 1e-5, 2e-6));
      }
    }
  }
}


// Row lengths of the vector path (multiples of 8, up to the 32 KiB staging limit: 8192 f32) and
// ones that must fall back (not a multiple of 8).
// Up to 1024 the vector path runs a warp per row (replaying the block's sums for 1, 2, 4 and 8
// thread-warps, threads with one or several elements), above it a block per row.
const int64_t kVecRows[] = {8, 24, 40, 64, 96, 136, 256, 1000, 1024, 2048, 4096, 8192};
const int64_t kOddRows[] = {7, 33, 4100};

TEST(CudaNorm, RmsNormVectorPathIsBitIdenticalToGeneralPath) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 100;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (const int64_t* ds : {std::begin(kVecRows), std::begin(kOddRows)}) {
      const bool vec = ds == std::begin(kVecRows);
      const int64_t n = vec ? std::size(kVecRows) : std::size(kOddRows);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t d = ds[k];
        for (int64_t rows : {1, 3, 37}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " rows " + std::to_string(rows) + " d " +
                       std::to_string(d));
          const Tensor x = test::random_tensor({rows, d}, seed++, -3.f, 5.f).to(kGpu, dt);
          const Tensor xm = misaligned_copy(x);
          for (DType wdt : {DType::F32, DType::BF16}) {
            const Tensor w = test::random_tensor({d}, seed++).to(kGpu, wdt);
            for (const Tensor& wt : {w, Tensor()}) {
              EXPECT_EQ(cuda::rms_norm_vectorised(x, wt), vec);
              EXPECT_FALSE(cuda::rms_norm_vectorised(xm, wt));
              const Tensor got = ops::rms_norm(x, wt, 1e-6);
              EXPECT_EQ(got.dtype(), dt);
              EXPECT_TRUE(same_bytes(got, ops::rms_norm(xm, wt, 1e-6)));
            }
            // A misaligned weight alone also takes the general path.
            EXPECT_FALSE(cuda::rms_norm_vectorised(x, misaligned_copy(w)));
            EXPECT_TRUE(same_bytes(ops::rms_norm(x, misaligned_copy(w), 1e-6),
                                   ops::rms_norm(x, w, 1e-6)));
          }
        }
      }
    }
  }
  // bf16 rows of 256 (their own kernel) with more rows than one grid pass, so every warp takes
  // several rows (the next one prefetched): norm, weighted norm and weighted modulate.
  const Tensor x256 = test::random_tensor({4, 10000, 256}, seed++, -3.f, 5.f).to(kGpu, DType::BF16);
  const Tensor w256 = test::random_tensor({256}, seed++).to(kGpu, DType::BF16);
  const Tensor x256m = misaligned_copy(x256);
  EXPECT_TRUE(same_bytes(ops::rms_norm(x256, w256, 1e-6), ops::rms_norm(x256m, w256, 1e-6)));
  EXPECT_TRUE(same_bytes(ops::rms_norm(x256, Tensor(), 1e-6), ops::rms_norm(x256m, Tensor(), 1e-6)));
  const Tensor sc256 = test::random_tensor({4, 1, 256}, seed++).to(kGpu, DType::BF16);
  const Tensor sh256 = test::random_tensor({4, 1, 256}, seed++).to(kGpu, DType::BF16);
  EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(x256, sc256, sh256, 1e-6, w256),
                         ops::rms_norm_modulate(x256m, sc256, sh256, 1e-6, w256)));
  // [B, T, D] of the transformer's width: the vector path for bf16 and f32.
  const Tensor x3 = test::random_tensor({2, 5, 4096}, seed++).to(kGpu, DType::BF16);
  EXPECT_TRUE(cuda::rms_norm_vectorised(x3, Tensor()));
  EXPECT_TRUE(same_bytes(ops::rms_norm(x3, Tensor(), 1e-6),
                         ops::rms_norm(misaligned_copy(x3), Tensor(), 1e-6)));
}

TEST(CudaNorm, RmsNormModulateVectorPathIsBitIdenticalToGeneralPath) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 200;
  const int64_t b = 2, t = 5;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (DType sdt : {dt, DType::F32}) {
      for (const int64_t* ds : {std::begin(kVecRows), std::begin(kOddRows)}) {
        const bool vec = ds == std::begin(kVecRows);
        const int64_t n = vec ? std::size(kVecRows) : std::size(kOddRows);
        for (int64_t k = 0; k < n; ++k) {
          const int64_t d = ds[k];
          const Tensor x = test::random_tensor({b, t, d}, seed++, -3.f, 5.f).to(kGpu, dt);
          const Tensor xm = misaligned_copy(x);
          // Per-sample [B, 1, D] (broadcast over tokens) and per-token [B, T, D] scale/shift.
          for (int64_t st : {int64_t{1}, t}) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " scale " + dtype_name(sdt) + " d " +
                         std::to_string(d) + (st == 1 ? " per-sample" : " per-token"));
            const Tensor sc = test::random_tensor({b, st, d}, seed++).to(kGpu, sdt);
            const Tensor sh = test::random_tensor({b, st, d}, seed++).to(kGpu, sdt);
            EXPECT_EQ(cuda::rms_norm_modulate_vectorised(x, sc, sh), vec);
            const Tensor got = ops::rms_norm_modulate(x, sc, sh, 1e-6);
            // General path three ways: misaligned x, strided scale, misaligned shift.
            EXPECT_FALSE(cuda::rms_norm_modulate_vectorised(xm, sc, sh));
            EXPECT_TRUE(same_bytes(got, ops::rms_norm_modulate(xm, sc, sh, 1e-6)));
            const Tensor sc_strided = test::non_contiguous_copy(sc);
            EXPECT_FALSE(cuda::rms_norm_modulate_vectorised(x, sc_strided, sh));
            EXPECT_TRUE(same_bytes(got, ops::rms_norm_modulate(x, sc_strided, sh, 1e-6)));
            const Tensor sh_misaligned = misaligned_copy(sh);
            EXPECT_FALSE(cuda::rms_norm_modulate_vectorised(x, sc, sh_misaligned));
            EXPECT_TRUE(same_bytes(got, ops::rms_norm_modulate(x, sc, sh_misaligned, 1e-6)));
            // And the two separate ops it fuses.
            EXPECT_TRUE(
                same_bytes(got, ops::modulate(ops::rms_norm(x, Tensor(), 1e-6), sc, sh)));
          }
        }
      }
    }
  }
}

// The transformer's video rows (bf16, 6144 x 4096: the block-per-row vector kernel) with per-token
// scale / shift summed with a table row (ops::Summed, as the AdaLN passes them), plain and
// weighted. Bit-identical to the general path.
TEST(CudaNorm, RmsNormModulateTransformerVideoRowsAreBitIdenticalToGeneralPath) {
  LTX_REQUIRE_CUDA();
  const int64_t rows = 6144, d = 4096;
  const Tensor x = test::random_tensor({1, rows, d}, 250, -3.f, 5.f).to(kGpu, DType::BF16);
  const Tensor emb = test::random_tensor({1, rows, 2, d}, 251).to(kGpu, DType::BF16);
  const Tensor table = test::random_tensor({2, d}, 252).to(kGpu, DType::BF16);
  const ops::Summed sc{table.select(0, 0), emb.select(2, 0)}, sh{table.select(0, 1), emb.select(2, 1)};
  ASSERT_TRUE(cuda::rms_norm_modulate_vectorised(x, sc, sh));
  const Tensor got = ops::rms_norm_modulate(x, sc, sh, 1e-6);
  EXPECT_TRUE(same_bytes(got, ops::rms_norm_modulate(misaligned_copy(x), sc, sh, 1e-6)));
  EXPECT_TRUE(same_bytes(ops::rms_norm(x, Tensor(), 1e-6),
                         ops::rms_norm(misaligned_copy(x), Tensor(), 1e-6)));
  const Tensor w = test::random_tensor({d}, 253, 0.5f, 1.5f).to(kGpu, DType::BF16);
  EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(x, sc, sh, 1e-6, w),
                         ops::rms_norm_modulate(misaligned_copy(x), sc, sh, 1e-6, w)));
  EXPECT_TRUE(same_bytes(ops::rms_norm(x, w, 1e-6), ops::rms_norm(misaligned_copy(x), w, 1e-6)));
}

// Per-sample AdaLN values (pipelines::TimestepForm: [B, 1, D] rows broadcast over the tokens):
// the block-per-row kernels keep a run's scale / shift (and gate) in shared memory and take many
// rows per block, so a block's rows cross sample boundaries. Bit-identical to the general path
// and to the two ops, with summed and plain bf16 operands; f32 operands are not cached.
TEST(CudaNorm, PerSampleModulationCachedPerRunIsBitIdentical) {
  LTX_REQUIRE_CUDA();
  const int64_t b = 3, t = 1100, d = 4096;  // 3300 rows: more than the resident blocks
  const auto bf16 = [](const Shape& s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
    return test::random_tensor(s, seed, lo, hi).to(kGpu, DType::BF16);
  };
  const Tensor x = bf16({b, t, d}, 260, -3.f, 5.f), y = bf16({b, t, d}, 261, -2.f, 2.f);
  const Tensor table = bf16({3, d}, 262), emb = bf16({b, 1, 3, d}, 263);
  const ops::Summed gate{table.select(0, 0), emb.select(2, 0)};
  const ops::Summed scale{table.select(0, 1), emb.select(2, 1)}, shift = emb.select(2, 2);
  ASSERT_TRUE(cuda::rms_norm_modulate_vectorised(x, scale, shift));
  const Tensor got = ops::rms_norm_modulate(x, scale, shift, 1e-6);
  EXPECT_TRUE(same_bytes(got, ops::rms_norm_modulate(misaligned_copy(x), scale, shift, 1e-6)));
  EXPECT_TRUE(same_bytes(got, ops::modulate(ops::rms_norm(x, Tensor(), 1e-6), scale, shift)));
  // One row for every sample (B = 1 after broadcasting over all rows) and f32 values.
  const Tensor row = bf16({1, 1, d}, 264);
  EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(x, row, shift, 1e-6),
                         ops::rms_norm_modulate(misaligned_copy(x), row, shift, 1e-6)));
  const Tensor row_f32 = row.to(DType::F32);
  EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(x, row_f32, row_f32, 1e-6),
                         ops::rms_norm_modulate(misaligned_copy(x), row_f32, row_f32, 1e-6)));
  // The residual + norm kernel.
  ASSERT_TRUE(cuda::gated_add_rms_norm_modulate_fusable(x, y, gate, scale, shift));
  const ops::ResidualNorm r = ops::gated_add_rms_norm_modulate(x, y, gate, scale, shift, 1e-6);
  const Tensor want_x = ops::gated_add(x, y, gate);
  EXPECT_TRUE(same_bytes(r.x, want_x));
  EXPECT_TRUE(same_bytes(r.h, ops::rms_norm_modulate(want_x, scale, shift, 1e-6)));
  // A gate per token beside per-sample scale / shift: nothing cached, the same bits.
  const Tensor gate_tokens = bf16({b, t, d}, 265);
  const ops::ResidualNorm mixed = ops::gated_add_rms_norm_modulate(x, y, gate_tokens, scale, shift, 1e-6);
  const Tensor want_mixed = ops::gated_add(x, y, gate_tokens);
  EXPECT_TRUE(same_bytes(mixed.x, want_mixed));
  EXPECT_TRUE(same_bytes(mixed.h, ops::rms_norm_modulate(want_mixed, scale, shift, 1e-6)));
}

// rms_norm_modulate_into on W-narrowed views of [B, T, H, W, C] (the diffusion decoder's slab
// columns): in place on both views (bf16 rows of 256: the row kernel; f32 and other widths: the
// warp / block vector kernels), the other layouts through a copy; all bit-identical to
// rms_norm_modulate of the contiguous columns, and the columns around the target untouched.
TEST(CudaNorm, RmsNormModulateIntoWritesColumnViewsInPlace) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 700;
  for (DType dt : {DType::BF16, DType::F32}) {
    for (const int64_t c : {int64_t{256}, int64_t{64}, int64_t{2048}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c));
      const Tensor x = test::random_tensor({2, 3, 4, 13, c}, seed++, -3.f, 5.f).to(kGpu, dt);
      const Tensor sc = test::random_tensor({2, 1, 1, 1, c}, seed++).to(kGpu, dt);
      const Tensor sh = test::random_tensor({2, 1, 1, 1, c}, seed++).to(kGpu, dt);
      const Tensor wt = test::random_tensor({c}, seed++).to(kGpu, dt);
      const Tensor src = x.narrow(3, 3, 6);
      const Tensor want = ops::rms_norm_modulate(src.contiguous(), sc, sh, 1e-6, wt);
      Tensor canvas = Tensor::full({2, 3, 4, 10, c}, 7.0, dt, kGpu);
      ops::rms_norm_modulate_into(canvas.narrow(3, 2, 6), src, sc, sh, 1e-6, wt);
      EXPECT_TRUE(same_bytes(canvas.narrow(3, 2, 6).contiguous(), want));
      EXPECT_TRUE(same_bytes(canvas.narrow(3, 0, 2).contiguous(),
                             Tensor::full({2, 3, 4, 2, c}, 7.0, dt, kGpu)));
      EXPECT_TRUE(same_bytes(canvas.narrow(3, 8, 2).contiguous(),
                             Tensor::full({2, 3, 4, 2, c}, 7.0, dt, kGpu)));
      // A contiguous source into a view, a view into a contiguous output, a transposed source.
      Tensor canvas2 = Tensor::zeros({2, 3, 4, 10, c}, dt, kGpu);
      ops::rms_norm_modulate_into(canvas2.narrow(3, 4, 6), src.contiguous(), sc, sh, 1e-6, wt);
      EXPECT_TRUE(same_bytes(canvas2.narrow(3, 4, 6).contiguous(), want));
      Tensor dense = Tensor::empty(src.shape(), dt, kGpu);
      ops::rms_norm_modulate_into(dense, src, sc, sh, 1e-6, wt);
      EXPECT_TRUE(same_bytes(dense, want));
      const Tensor xt = x.transpose(1, 2).contiguous().transpose(1, 2).narrow(3, 3, 6);
      Tensor canvas3 = Tensor::zeros({2, 3, 4, 10, c}, dt, kGpu);
      ops::rms_norm_modulate_into(canvas3.narrow(3, 2, 6), xt, sc, sh, 1e-6, wt);
      EXPECT_TRUE(same_bytes(canvas3.narrow(3, 2, 6).contiguous(), want));
    }
  }
}

TEST(CudaNorm, ThreeDimInputsAndLargeOffsets) {
  LTX_REQUIRE_CUDA();
  // The transformer's [B, T, D] streams. A mean of 1e4 with a spread of 1: a plain f32 sum for
  // the mean is off by ~1e-3 there (2e-3 in the output); the shifted sum keeps the mean exact to
  // f32 rounding, like the CPU's double sum.
  const Tensor x = test::random_tensor({2, 37, 96}, 10, 9999.f, 10001.f);
  EXPECT_TRUE(near(ops::layer_norm(gpu(x), Tensor(), Tensor(), 1e-6),
                   ops::layer_norm(x, Tensor(), Tensor(), 1e-6), 1e-4, 1e-5));
  EXPECT_TRUE(near(ops::rms_norm(gpu(x), Tensor(), 1e-6), ops::rms_norm(x, Tensor(), 1e-6), 1e-6,
                   2e-6));
}

TEST(CudaNorm, PixelNormAndGroupNormMatchCpu) {
  LTX_REQUIRE_CUDA();
  // [N, C, D, H, W] as in the video VAE; PixelNorm over channels (dim 1) and the last dim.
  const Tensor x = test::random_tensor({2, 6, 3, 5, 7}, 30, -2.f, 4.f);
  const Tensor xg = test::non_contiguous_copy(gpu(x));
  for (int64_t dim : {1, -1, 0}) {
    EXPECT_TRUE(near(ops::rms_norm_dim(xg, dim, 1e-8), ops::rms_norm_dim(x, dim, 1e-8), 1e-7,
                     1e-6))
        << dim;
  }
  const Tensor w = test::random_tensor({6}, 31), b = test::random_tensor({6}, 32);
  for (int64_t groups : {1, 2, 3, 6}) {
    for (const Tensor& wt : {w, Tensor()}) {
      for (const Tensor& bt : {b, Tensor()}) {
        EXPECT_TRUE(near(ops::group_norm(xg, groups, gpu_or_none(wt), gpu_or_none(bt), 1e-6),
                         ops::group_norm(x, groups, wt, bt, 1e-6), 1e-6, 1e-6))
            << groups;
      }
    }
  }
  // A large group (one block reduces 2 x 300k elements).
  const Tensor big = test::random_tensor({1, 4, 300000}, 33, 5.f, 7.f);
  EXPECT_TRUE(near(ops::group_norm(gpu(big), 2, Tensor(), Tensor(), 1e-6),
                   ops::group_norm(big, 2, Tensor(), Tensor(), 1e-6), 1e-5, 1e-5));
}

// x (a GPU [N, C, T, H, W] tensor) stored channels-last one element into a larger buffer: dense
// with C innermost, but not 16-byte aligned, so PixelNorm takes its scalar row kernel.
Tensor misaligned_channels_last(const Tensor& x) {
  const Shape& s = x.shape();
  const Tensor buf = Tensor::empty({x.numel() + 1}, x.dtype(), kGpu);
  const Tensor view =
      buf.narrow(0, 1, x.numel()).view({s[0], s[2], s[3], s[4], s[1]}).permute({0, 4, 1, 2, 3});
  view.copy_from(x);
  return view;
}

// Channel counts that reach every PixelNorm kernel path: odd (the scalar row kernel), multiples
// of 8 up to 256 (a warp per 32 / g rows), up to 1024 (held in registers), longer (read twice).
constexpr int64_t kPixelNormChannels[] = {3, 8, 40, 128, 256, 512, 1024, 1056, 2048};

// PixelNorm's kernels sum in one order (pixel_norm.cu), so every layout gives the same bits: the
// column kernel (contiguous [N, C, T, H, W]), the vector row kernel (channels-last, C % 8 == 0: C <= 256
// one warp per 32 / g rows of g lanes, C <= 1024 held in registers, longer rows read twice), the
// scalar row kernel (C % 8 != 0, or a misaligned x), and the last dim of a contiguous tensor.
// 2 x 3 x 5 x 7 = 210 positions: not a multiple of the rows a warp takes.
TEST(CudaNorm, PixelNormKernelsAgreeBitForBitAndMatchCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 900;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t c : kPixelNormChannels) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c));
      const Tensor x = test::random_tensor({2, c, 3, 5, 7}, seed++, -3.f, 5.f).to(kGpu, dt);
      const Tensor xl = x.to_channels_last(), xm = misaligned_channels_last(x);
      ASSERT_TRUE(cuda::rms_norm_dim_rows_layout(xl, 1));
      ASSERT_TRUE(cuda::rms_norm_dim_rows_layout(xm, 1));
      const Tensor col = ops::rms_norm_dim(x, 1, 1e-8);
      const Tensor rows = ops::rms_norm_dim(xl, 1, 1e-8);
      EXPECT_EQ(rows.dtype(), dt);
      EXPECT_TRUE(rows.strides() == xl.strides()) << rows.strides().str();
      EXPECT_TRUE(same_bytes(rows, col));
      EXPECT_TRUE(same_bytes(ops::rms_norm_dim(xm, 1, 1e-8), col));
      const Tensor last = xl.permute({0, 2, 3, 4, 1});  // contiguous [N, T, H, W, C]
      ASSERT_TRUE(last.is_contiguous());
      EXPECT_TRUE(same_bytes(ops::rms_norm_dim(last, 4, 1e-8), col.permute({0, 2, 3, 4, 1})));
      // The CPU op on the same values sums in double in another order: the same f32 RMS but for
      // rare last-bit ties; bf16 results are within their rounding of the CPU's f32 ones.
      const Tensor want = ops::rms_norm_dim(x.to(Device::cpu(), DType::F32), 1, 1e-8);
      const double rtol = dt == DType::F32 ? 1e-6 : 1.0 / 256;
      EXPECT_TRUE(near(col, want, 1e-7, rtol));
      EXPECT_TRUE(near(rows, want, 1e-7, rtol));
    }
  }
}

// The vector row kernels divide by the RMS through its reciprocal and one correction
// (pixel_norm.cu, div_by_rms), falling back to the division outside the range where that is exact: rows whose
// values span 2^-140 .. 2^100 (zeros of both signs, denormals, quotients that underflow), in
// bf16 and f32, with and without the SiLU, give the column kernel's (plain division) bits. Enough
// rows (4 x 11 x 13 positions) for the row groups, 3 of 4 of them partial.
TEST(CudaNorm, PixelNormRowKernelsDivideLikeTheColumnKernelOnExtremeValues) {
  LTX_REQUIRE_CUDA();
  for (DType dt : {DType::BF16, DType::F32}) {
    for (int64_t c : {64, 128, 256, 512, 1024}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c));
      const Shape shape = {1, c, 4, 11, 13};
      const Tensor e = test::random_tensor(shape, 1200 + static_cast<uint64_t>(c), -140.f, 100.f);
      const Tensor m = test::random_tensor(shape, 1300 + static_cast<uint64_t>(c), -2.f, 2.f);
      std::vector<float> v = m.to_float_vector();
      const std::vector<float> ev = e.to_float_vector();
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = std::ldexp(v[i], static_cast<int>(ev[i]));
        if (i % 97 == 0) v[i] = 0.f;
        if (i % 89 == 0) v[i] = -0.f;
      }
      const Tensor x = Tensor::from_vector(v, shape).to(kGpu, dt);
      const Tensor xl = x.to_channels_last();
      EXPECT_TRUE(same_bytes(ops::rms_norm_dim(xl, 1, 1e-8), ops::rms_norm_dim(x, 1, 1e-8)));
      EXPECT_TRUE(
          same_bytes(ops::rms_norm_dim_silu(xl, 1, 1e-8), ops::rms_norm_dim_silu(x, 1, 1e-8)));
    }
  }
}

// rms_norm_dim_silu's bf16 table store (channels-last rows) takes a branch-free path for chunks of
// 8 channels whose values are all zeros or of magnitudes in [2^-31, 2^5] x the row's RMS (for an
// RMS in [2^-60, 2^60]) and the per-value path otherwise. Rows of ordinary values; with zeros of
// both signs in some chunks, values under the range (tiny, denormal) in others; scaled past the
// RMS range; scaled under it (eps then sets the RMS and every value is under the range); one
// dominant channel (|x| / rms close to sqrt(C), at the upper bound for C = 1024): every row has
// the bits of rms_norm_dim then silu, on both the channels-last and the contiguous (column
// kernel) x. With a bias added in the pass (bf16 pairs through one FMA each), whose channels hold
// zeros, tiny and denormal values too and which cancels some of x's values exactly (+0 sums).
TEST(CudaNorm, PixelNormSiluTableStoreMatchesOnMixedChunks) {
  LTX_REQUIRE_CUDA();
  for (int64_t c : {64, 128, 256, 512, 1024}) {
    SCOPED_TRACE("C " + std::to_string(c));
    const int64_t t = 4, h = 11, w = 13, positions = t * h * w;
    const Shape shape = {1, c, t, h, w};
    const float zeros[] = {0.f, -0.f};
    const float unders[] = {0x1p-40f, -1e-39f, 0x1p-126f, -0x1p-60f};
    std::vector<float> b =
        test::random_tensor({c}, 1700 + static_cast<uint64_t>(c), -1.f, 1.f).to_float_vector();
    for (int64_t ch = 0; ch < c; ch += 5)
      b[static_cast<size_t>(ch)] = ch % 2 == 0 ? zeros[ch % 4 / 2] : unders[ch % 4];
    std::vector<float> v =
        test::random_tensor(shape, 1600 + static_cast<uint64_t>(c), -3.f, 3.f).to_float_vector();
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < positions; ++p) {
        float& x = v[static_cast<size_t>(ch * positions + p)];
        switch (p % 6) {
          case 0:  // cancels the bias in a few channels
            if (ch % 13 == static_cast<int64_t>(p % 13)) x = -b[static_cast<size_t>(ch)];
            break;
          case 1:  // zeros in some chunks, values under the range in others
            if (ch % 11 == static_cast<int64_t>(p % 7))
              x = ch % 16 < 8 ? zeros[(ch + p) % 2] : unders[(ch + p) % 4];
            break;
          case 2: x = std::ldexp(x, 70); break;   // RMS above 2^60
          case 3: x = std::ldexp(x, -50); break;  // RMS from eps: every value under the range
          case 4: x = ch == p % c ? 1e4f : x * 1e-3f; break;  // one dominant channel
          default: break;
        }
      }
    }
    const Tensor x = Tensor::from_vector(v, shape).to(kGpu, DType::BF16);
    const Tensor xl = x.to_channels_last();
    const Tensor got = ops::rms_norm_dim_silu(xl, 1, 1e-8);
    EXPECT_TRUE(same_bytes(got, ops::silu(ops::rms_norm_dim(xl, 1, 1e-8))));
    EXPECT_TRUE(same_bytes(got, ops::silu(ops::rms_norm_dim(x, 1, 1e-8))));
    const Tensor bias = Tensor::from_vector(b, {c}).to(kGpu, DType::BF16);
    const Tensor summed = ops::add(xl, bias.view({1, c, 1, 1, 1}));
    EXPECT_TRUE(same_bytes(ops::rms_norm_dim_silu(xl, 1, 1e-8, bias),
                           ops::silu(ops::rms_norm_dim(summed, 1, 1e-8))));
  }
}

// Enough channels-last rows (20435 positions) that every warp of the vector row kernels takes
// several in turn, the next one loaded while the current one is worked on.
TEST(CudaNorm, PixelNormRowKernelsTakeManyRowsPerWarp) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 950;
  for (DType dt : {DType::BF16, DType::F32}) {
    for (int64_t c : {128, 256, 1024}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c));
      const Tensor x = test::random_tensor({1, c, 5, 61, 67}, seed++, -3.f, 5.f).to(kGpu, dt);
      EXPECT_TRUE(same_bytes(ops::rms_norm_dim(x.to_channels_last(), 1, 1e-6),
                             ops::rms_norm_dim(x, 1, 1e-6)));
    }
  }
}

// rms_norm_dim_silu applies the SiLU at each PixelNorm kernel's store, to the normalised value
// rounded to x's dtype: the bits and layout of rms_norm_dim then silu for the column kernel
// (contiguous), the vector row kernel (channels-last, C % 8 == 0: one warp per 32 / g rows,
// registers for C <= 1024, longer rows read twice), the scalar row kernel (odd C, a misaligned x),
// a gappy channels-last view and the last dim of a contiguous tensor; close to the CPU's f32
// composition.
TEST(CudaNorm, PixelNormSiluEqualsPixelNormThenSiluBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 970;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t c : kPixelNormChannels) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c));
      const Tensor x = test::random_tensor({2, c, 3, 5, 7}, seed++, -3.f, 5.f).to(kGpu, dt);
      const Tensor xl = x.to_channels_last();
      const Tensor last = xl.permute({0, 2, 3, 4, 1});  // contiguous [N, T, H, W, C]
      struct Case {
        Tensor x;
        int dim;
      };
      for (const Case& k : {Case{x, 1}, Case{xl, 1}, Case{misaligned_channels_last(x), 1},
                            Case{xl.narrow(2, 1, 2), 1}, Case{last, 4}}) {
        SCOPED_TRACE(k.x.describe());
        const Tensor got = ops::rms_norm_dim_silu(k.x, k.dim, 1e-8);
        const Tensor want = ops::silu(ops::rms_norm_dim(k.x, k.dim, 1e-8));
        EXPECT_EQ(got.dtype(), dt);
        EXPECT_TRUE(got.strides() == want.strides()) << got.strides().str();
        EXPECT_TRUE(same_bytes(got, want));
      }
      // silu's expf differs from glibc's by a few ulp; bf16 rounds the norm and the result.
      const Tensor cpu = ops::silu(ops::rms_norm_dim(x.to(Device::cpu(), DType::F32), 1, 1e-8));
      const bool f32 = dt == DType::F32;
      EXPECT_TRUE(near(ops::rms_norm_dim_silu(x, 1, 1e-8), cpu, f32 ? 1e-6 : 2e-2,
                       f32 ? 1e-5 : 1.0 / 128));
    }
  }
}

// Many rows per warp (20435 channels-last positions), the VAE's widths.
TEST(CudaNorm, PixelNormSiluRowKernelsTakeManyRowsPerWarp) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 990;
  for (DType dt : {DType::BF16, DType::F32}) {
    for (int64_t c : {128, 256, 512, 1024}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c));
      const Tensor x = test::random_tensor({1, c, 5, 61, 67}, seed++, -3.f, 5.f).to(kGpu, dt);
      const Tensor xl = x.to_channels_last();
      EXPECT_TRUE(same_bytes(ops::rms_norm_dim_silu(xl, 1, 1e-6),
                             ops::silu(ops::rms_norm_dim(xl, 1, 1e-6))));
      EXPECT_TRUE(same_bytes(ops::rms_norm_dim_silu(x, 1, 1e-6),
                             ops::silu(ops::rms_norm_dim(x, 1, 1e-6))));
    }
  }
}

// rms_norm_dim_silu with a bias (conv1's, folded into norm2's pass) gives the bits of the bias
// added first (ops::add) and then the norm: fused in the channels-last vector kernel (every row
// length: 32 / g rows per warp, held in registers, read twice), the add first elsewhere (a
// contiguous x, a misaligned one, odd channel counts).
TEST(CudaNorm, PixelNormSiluWithABiasEqualsTheBiasAddedFirst) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1400;
  for (DType dt : {DType::BF16, DType::F32}) {
    for (int64_t c : kPixelNormChannels) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c));
      const Tensor x = test::random_tensor({2, c, 3, 5, 7}, seed++, -3.f, 5.f).to(kGpu, dt);
      const Tensor bias = test::random_tensor({c}, seed++, -1.f, 1.f).to(kGpu, dt);
      for (const Tensor& v : {x.to_channels_last(), x, misaligned_channels_last(x)}) {
        SCOPED_TRACE(v.describe());
        const Tensor want =
            ops::rms_norm_dim_silu(ops::add(v, bias.view({1, c, 1, 1, 1})), 1, 1e-8);
        const Tensor got = ops::rms_norm_dim_silu(v, 1, 1e-8, bias);
        EXPECT_TRUE(got.strides() == want.strides()) << got.strides().str();
        EXPECT_TRUE(same_bytes(got, want));
      }
    }
  }
}

// The ResNet block's skip and the next PixelNorm + SiLU in one pass (channels-last bf16 rows of
// at most 1024 channels, a residual in x's layout): the bits of add_then_add_ then
// rms_norm_dim_silu for both the updated x and the activation, with x's layout; enough positions
// (5 x 61 x 67) that every warp takes several rows in turn, the last row group partial. The other
// cases (f32, contiguous, misaligned, longer rows, a residual in another layout) run the ops in
// turn, with the same bits.
TEST(CudaNorm, SkipThenPixelNormSiluEqualsTheOpsInTurnBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1500;
  for (DType dt : {DType::BF16, DType::F32}) {
    for (int64_t c : kPixelNormChannels) {
      const Shape shape = c <= 1024 && dt == DType::BF16 ? Shape{1, c, 5, 61, 67} : Shape{2, c, 3, 5, 7};
      const Tensor x = test::random_tensor(shape, seed++, -3.f, 5.f).to(kGpu, dt);
      const Tensor bias = test::random_tensor({c}, seed++, -1.f, 1.f).to(kGpu, dt);
      const Tensor res = test::random_tensor(shape, seed++, -2.f, 2.f).to(kGpu, dt);
      // Each layout makes a fresh copy (x is updated in place).
      using Layout = Tensor (*)(const Tensor&);
      const Layout cl = [](const Tensor& t) { return t.to_channels_last(); };
      const Layout plain = [](const Tensor& t) { return t.clone(); };
      const Layout misaligned = [](const Tensor& t) { return misaligned_channels_last(t); };
      struct Case {
        Layout x, residual;
        bool fused;
      };
      const bool rows = dt == DType::BF16 && c % 8 == 0 && c <= 1024;
      for (const Case& k : {Case{cl, cl, rows}, Case{cl, plain, false}, Case{plain, plain, false},
                            Case{misaligned, misaligned, false}}) {
        const Tensor residual = k.residual(res), want_x = k.x(x), got_x = k.x(x);
        SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c) + " " +
                     got_x.describe() + " residual " + residual.describe());
        EXPECT_EQ(cuda::rms_norm_dim_residual_fuses(got_x, 1, bias, residual), k.fused);
        ops::add_then_add_(want_x, bias.view({1, c, 1, 1, 1}), residual);
        const Tensor want_h = ops::rms_norm_dim_silu(want_x, 1, 1e-8);
        const Tensor got_h = ops::add_then_add_rms_norm_dim_silu_(got_x, bias, residual, 1, 1e-8);
        EXPECT_TRUE(same_bytes(got_x, want_x));
        EXPECT_TRUE(same_bytes(got_h, want_h));
        EXPECT_TRUE(got_h.strides() == want_h.strides()) << got_h.strides().str();
      }
    }
  }
}

TEST(CudaNorm, Bf16StorageKeepsItsDtype) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({9, 300}, 20).to(DType::BF16);
  const Tensor w = test::random_tensor({300}, 21).to(DType::BF16);
  const Tensor got = ops::rms_norm(gpu(x), gpu(w), 1e-6);
  EXPECT_EQ(got.dtype(), DType::BF16);
  EXPECT_TRUE(near(got, ops::rms_norm(x.to(DType::F32), w.to(DType::F32), 1e-6).to(DType::BF16),
                   1e-6, 1.0 / 128));
  // f32 x with a bf16 weight stays f32.
  const Tensor xf = test::random_tensor({9, 300}, 22);
  EXPECT_EQ(ops::rms_norm(gpu(xf), gpu(w), 1e-6).dtype(), DType::F32);
}

TEST(CudaNorm, RejectsBadArguments) {
  LTX_REQUIRE_CUDA();
  const Tensor x = Tensor::zeros({2, 8}, DType::F32, kGpu);
  EXPECT_ERROR_HAS(ops::rms_norm(x, Tensor::zeros({7}, DType::F32, kGpu), 1e-6), "shape [8]");
  EXPECT_ERROR_HAS(ops::rms_norm(x, Tensor::zeros({8}), 1e-6), "different devices");
  EXPECT_ERROR_HAS(ops::layer_norm(x.to(DType::F16), Tensor(), Tensor(), 1e-6), "f32 or bf16");
}

}  // namespace
}  // namespace ltx::norm_test
