// The fused CUDA attention kernel against the CPU's scaled_dot_product_attention on the same
// inputs: head dims 16-256 (and Dv != D), self and cross attention, bool and additive masks with
// fully masked rows, strided (transposed) q/k/v, bf16 storage, and the memory it needs; and the
// bf16 tensor-core kernel against the CPU on the bf16-rounded inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/device.h"
#include "cuda/cuda_test_util.h"
#include "models/transformer/attention.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "support/test_support.h"

namespace ltx::attention_test {
namespace {

using test::kGpu;
using test::rel_l2;
using test::near;

Tensor gpu(const Tensor& t) { return t.to(kGpu); }

// [B, T, H, D] values viewed as [B, H, T, D], on the CPU and (the same values) on the GPU.
struct Heads {
  Tensor cpu, gpu;
};
Heads heads(int64_t b, int64_t t, int64_t h, int64_t d, uint64_t seed, float scale = 1.f) {
  const Tensor stored = test::random_tensor({b, t, h, d}, seed, -scale, scale);
  return {stored.transpose(1, 2), gpu(stored).transpose(1, 2)};
}

TEST(CudaAttention, MatchesCpuAcrossHeadDimsAndLengths) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  const std::vector<std::pair<int64_t, int64_t>> dims = {{16, 16}, {24, 24}, {32, 32},  {64, 64},
                                                         {128, 128}, {64, 32}, {16, 128},
                                                         {256, 256}, {200, 96}};
  const std::vector<std::pair<int64_t, int64_t>> lens = {{1, 1}, {7, 33}, {129, 7}, {65, 200}};
  for (const auto& [d, dv] : dims) {
    for (const auto& [tq, tk] : lens) {
      SCOPED_TRACE("D " + std::to_string(d) + " Dv " + std::to_string(dv) + " Tq " +
                   std::to_string(tq) + " Tk " + std::to_string(tk));
      const Heads q = heads(2, tq, 3, d, seed++, 2.f), k = heads(2, tk, 3, d, seed++, 2.f);
      const Heads v = heads(2, tk, 3, dv, seed++);
      const Tensor want = ops::scaled_dot_product_attention(q.cpu, k.cpu, v.cpu);
      const Tensor got = ops::scaled_dot_product_attention(q.gpu, k.gpu, v.gpu);
      EXPECT_EQ(got.device(), kGpu);
      EXPECT_EQ(got.dtype(), DType::F32);
      // Logits reach +-25 here (q, k in [-2, 2]); their f32 rounding (~1e-5 absolute, summed in
      // another order than the CPU's GEMM) moves the probabilities by ~1e-5 relative.
      EXPECT_TRUE(near(got, want, 2e-5, 1e-5));
      // An explicit scale, and contiguous inputs.
      EXPECT_TRUE(near(ops::scaled_dot_product_attention(q.gpu.contiguous(), k.gpu.contiguous(),
                                                         v.gpu.contiguous(), Tensor(), 0.3),
                       ops::scaled_dot_product_attention(q.cpu, k.cpu, v.cpu, Tensor(), 0.3), 2e-5,
                       1e-5));
    }
  }
}

TEST(CudaAttention, BoolAndAdditiveMasksIncludingFullyMaskedRows) {
  LTX_REQUIRE_CUDA();
  const int64_t b = 2, h = 2, tq = 37, tk = 70, d = 64;
  const Heads q = heads(b, tq, h, d, 10, 2.f), k = heads(b, tk, h, d, 11, 2.f);
  const Heads v = heads(b, tk, h, d, 12);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kLowest = std::numeric_limits<float>::lowest();

  // Bool [Tq, Tk] with row 3 fully masked (all-zero output) and row 5 attending one key.
  std::vector<uint8_t> bm(static_cast<size_t>(tq * tk));
  const std::vector<float> r = test::random_tensor({tq, tk}, 13).to_float_vector();
  for (size_t i = 0; i < bm.size(); ++i) bm[i] = r[i] > -0.3f;
  for (int64_t j = 0; j < tk; ++j) {
    bm[3 * tk + j] = 0;
    bm[5 * tk + j] = j == 61;
  }
  const Tensor bool_mask = Tensor::from_vector(bm, {tq, tk}).view_as_dtype(DType::Bool);
  // Additive [B, 1, Tq, Tk]: random biases, -inf on some keys, a fully -inf row, and the
  // -FLT_MAX padding bias the context masks use.
  std::vector<float> am = test::random_tensor({b, 1, tq, tk}, 14, -3.f, 1.f).to_float_vector();
  for (int64_t j = 0; j < tk; ++j) {
    am[static_cast<size_t>(4 * tk + j)] = -kInf;
    if (j % 5 == 0) am[static_cast<size_t>(tq * tk + 9 * tk + j)] = -kInf;
    if (j >= 50) am[static_cast<size_t>(tq * tk + 10 * tk + j)] = kLowest;
  }
  const Tensor add_mask = Tensor::from_vector(am, {b, 1, tq, tk});
  // Key padding [B, 1, 1, Tk] as u8.
  std::vector<uint8_t> km(static_cast<size_t>(b * tk), 1);
  for (int64_t j = 40; j < tk; ++j) km[static_cast<size_t>(tk + j)] = 0;
  const Tensor key_mask = Tensor::from_vector(km, {b, 1, 1, tk});

  for (const Tensor* m : {&bool_mask, &add_mask, &key_mask}) {
    SCOPED_TRACE(m->describe());
    const Tensor want = ops::scaled_dot_product_attention(q.cpu, k.cpu, v.cpu, *m);
    const Tensor got = ops::scaled_dot_product_attention(q.gpu, k.gpu, v.gpu, gpu(*m));
    EXPECT_TRUE(near(got, want, 2e-6, 1e-5));
  }
  const std::vector<float> masked_row =
      ops::scaled_dot_product_attention(q.gpu, k.gpu, v.gpu, gpu(bool_mask))
          .select(2, 3)
          .to_float_vector();
  for (float x : masked_row) EXPECT_EQ(x, 0.f);
}

TEST(CudaAttention, Bf16StorageAndMixedDtypes) {
  LTX_REQUIRE_CUDA();
  const Heads q = heads(1, 50, 4, 128, 20, 2.f), k = heads(1, 77, 4, 128, 21, 2.f);
  const Heads v = heads(1, 77, 4, 128, 22);
  const auto bf = [](const Tensor& t) { return t.to(DType::BF16); };
  // The CUDA-core kernel (the tensor-core one has its own tests below).
  const Tensor got = cuda::scaled_dot_product_attention(bf(q.gpu), bf(k.gpu), bf(v.gpu), Tensor(),
                                                        1.f / std::sqrt(128.f),
                                                        cuda::AttentionKernel::Simple);
  EXPECT_EQ(got.dtype(), DType::BF16);
  const auto f32_of_bf = [](const Tensor& t) { return t.to(DType::BF16).to(DType::F32); };
  const Tensor want =
      ops::scaled_dot_product_attention(f32_of_bf(q.cpu), f32_of_bf(k.cpu), f32_of_bf(v.cpu));
  EXPECT_TRUE(near(got, want.to(DType::BF16), 1e-5, 1.0 / 128));
  // bf16 q with f32 k/v computes into f32.
  EXPECT_EQ(ops::scaled_dot_product_attention(bf(q.gpu), k.gpu, v.gpu).dtype(), DType::F32);
}

TEST(CudaAttention, NeverMaterialisesTheScoreMatrix) {
  LTX_REQUIRE_CUDA();
  const int64_t t = 4096, d = 64;  // a [T, T] f32 score matrix would be 64 MiB
  const Heads q = heads(1, t, 1, d, 30), k = heads(1, t, 1, d, 31), v = heads(1, t, 1, d, 32);
  cuda::synchronize(0);
  const size_t before = cuda::allocator_stats(0).allocated_bytes;
  cuda::reset_peak_stats(0);
  const Tensor out = ops::scaled_dot_product_attention(q.gpu, k.gpu, v.gpu);
  const size_t peak = cuda::allocator_stats(0).peak_allocated_bytes;
  EXPECT_LE(peak - before, out.nbytes() + (size_t{2} << 20));
  // Spot-check a few rows against the CPU.
  const Tensor want = ops::scaled_dot_product_attention(q.cpu.narrow(2, 1000, 3), k.cpu, v.cpu);
  EXPECT_TRUE(near(out.narrow(2, 1000, 3), want, 2e-6, 1e-5));
}

TEST(CudaAttention, RejectsHeadDimsAbove256) {
  LTX_REQUIRE_CUDA();
  const Tensor q = Tensor::zeros({1, 1, 4, 320}, DType::F32, kGpu);
  EXPECT_ERROR_HAS(ops::scaled_dot_product_attention(q, q, q), "head dims up to 256");
  EXPECT_ERROR_HAS(ops::scaled_dot_product_attention(q, q, q.to(Device::cpu())),
                   "different devices");
}


// ---- The tensor-core kernel (bf16 q/k/v) ----


double max_abs_diff(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = got.to_double_vector(), w = want.to_double_vector();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - w[i]));
  return worst;
}

Tensor bf16(const Tensor& t) { return t.to(DType::BF16); }
Tensor f32_of_bf16(const Tensor& t) { return t.to(DType::BF16).to(DType::F32); }

// The kernel Auto runs for bf16 operands: the first of Wgmma, TensorCore, Simple that applies.
cuda::AttentionKernel auto_choice(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (cuda::wgmma_attention_applies(q, k, v)) return cuda::AttentionKernel::Wgmma;
  if (cuda::tensor_core_attention_applies(q, k, v)) return cuda::AttentionKernel::TensorCore;
  return cuda::AttentionKernel::Simple;
}

// A mask as the CPU attention takes it: bool/u8 as is, a bf16 bias as f32.
Tensor cpu_mask(const Tensor& mask) {
  if (!mask.defined()) return Tensor();
  return dtype_is_floating(mask.dtype()) ? mask.to(Device::cpu(), DType::F32)
                                         : mask.to(Device::cpu());
}

// A fused bf16 kernel's result vs the f32 CPU attention of the same (bf16-rounded) inputs. P is
// rounded to bf16 before P.V and the output is bf16, so the expected error is a few 1e-3 relative.
void expect_fused_matches(const Heads& q, const Heads& k, const Heads& v, const Tensor& mask,
                          double scale, double max_rel_l2, cuda::AttentionKernel kernel) {
  const Tensor qb = bf16(q.gpu), kb = bf16(k.gpu), vb = bf16(v.gpu);
  if (kernel == cuda::AttentionKernel::Wgmma) {
    ASSERT_TRUE(cuda::wgmma_attention_applies(qb, kb, vb));
  } else {
    ASSERT_TRUE(cuda::tensor_core_attention_applies(qb, kb, vb));
  }
  const Tensor want = ops::scaled_dot_product_attention(f32_of_bf16(q.cpu), f32_of_bf16(k.cpu),
                                                        f32_of_bf16(v.cpu), cpu_mask(mask), scale);
  const Tensor m_gpu = mask.defined() ? gpu(mask) : Tensor();
  const Tensor got = cuda::scaled_dot_product_attention(
      qb, kb, vb,
      mask.defined() ? m_gpu.expand({q.gpu.size(0), q.gpu.size(1), q.gpu.size(2), k.gpu.size(2)})
                     : Tensor(),
      static_cast<float>(scale), kernel);
  ASSERT_EQ(got.dtype(), DType::BF16);
  ASSERT_EQ(got.shape(), want.shape());
  const double rel = rel_l2(got, want), worst = max_abs_diff(got, want);
  EXPECT_LE(rel, max_rel_l2) << "rel L2 " << rel << ", max |diff| " << worst;
  EXPECT_LE(worst, 3e-2) << "rel L2 " << rel << ", max |diff| " << worst;
  // Auto through the op runs the same kernel as the explicit choice, bit for bit.
  if (auto_choice(qb, kb, vb) == kernel) {
    EXPECT_TRUE(test::same_bytes(
        ops::scaled_dot_product_attention(qb, kb, vb, m_gpu, scale), got));
  }
}

void expect_tensor_core_matches(const Heads& q, const Heads& k, const Heads& v, const Tensor& mask,
                                double scale, double max_rel_l2 = 1e-2) {
  expect_fused_matches(q, k, v, mask, scale, max_rel_l2, cuda::AttentionKernel::TensorCore);
}

// f(q, k, v, d, seed) for every head dim x (Tq, Tk): batch 2 x 3 heads, [B, T, H, D] views, q and
// k in [-2, 2]; seeds count up from `seed` (f may take more).
template <typename F>
void across_cases(const std::vector<int64_t>& dims,
                  const std::vector<std::pair<int64_t, int64_t>>& lens, uint64_t seed, F f) {
  for (int64_t d : dims) {
    for (const auto& [tq, tk] : lens) {
      SCOPED_TRACE("D " + std::to_string(d) + " Tq " + std::to_string(tq) + " Tk " +
                   std::to_string(tk));
      const Heads q = heads(2, tq, 3, d, seed++, 2.f), k = heads(2, tk, 3, d, seed++, 2.f);
      const Heads v = heads(2, tk, 3, d, seed++);
      f(q, k, v, d, seed);
    }
  }
}

// `kernel` against the CPU for every head dim x (Tq, Tk), the default scale and 0.3.
void expect_matches_across(const std::vector<int64_t>& dims,
                           const std::vector<std::pair<int64_t, int64_t>>& lens, uint64_t seed,
                           cuda::AttentionKernel kernel) {
  across_cases(dims, lens, seed,
               [&](const Heads& q, const Heads& k, const Heads& v, int64_t d, uint64_t&) {
                 const double scale = 1.0 / std::sqrt(static_cast<double>(d));
                 expect_fused_matches(q, k, v, Tensor(), scale, 1e-2, kernel);
                 expect_fused_matches(q, k, v, Tensor(), 0.3, 1e-2, kernel);
               });
}

TEST(CudaTensorCoreAttention, MatchesCpuAcrossHeadDimsAndLengths) {
  LTX_REQUIRE_CUDA();
  expect_matches_across({32, 64, 128, 256},
                        {{1, 1}, {7, 33}, {129, 7}, {200, 130}, {300, 513}, {128, 64}}, 100,
                        cuda::AttentionKernel::TensorCore);
}

TEST(CudaTensorCoreAttention, SharpSoftmaxOverManyKeyTiles) {
  LTX_REQUIRE_CUDA();
  // Logits up to ~+-60 with the running max changing from tile to tile: exercises the rescaling.
  const Heads q = heads(1, 150, 2, 128, 120, 3.f), k = heads(1, 1000, 2, 128, 121, 3.f);
  const Heads v = heads(1, 1000, 2, 128, 122);
  expect_tensor_core_matches(q, k, v, Tensor(), 1.0 / std::sqrt(128.0), 2e-2);
}

// Masks over [Tq >= 11, Tk] with the hard cases of the fused kernels: bool [Tq, Tk] (random, row 3
// attending nothing -> zeros, row 5 only key `single_key`), additive f32 [B, 1, Tq, Tk] (random
// biases, a -inf row 4 -> zeros, an all -FLT_MAX row 6 of batch 1 -> uniform, -FLT_MAX padding
// from key 50 in row 10 of batch 1) and u8 key padding [B, 1, 1, Tk] (batch 1 from `pad_from`).
struct EdgeMasks {
  Tensor bool_mask, add_mask, key_mask;
};
EdgeMasks edge_masks(int64_t b, int64_t tq, int64_t tk, uint64_t seed, int64_t single_key,
                     int64_t pad_from) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  std::vector<uint8_t> bm(static_cast<size_t>(tq * tk));
  const std::vector<float> r = test::random_tensor({tq, tk}, seed).to_float_vector();
  for (size_t i = 0; i < bm.size(); ++i) bm[i] = r[i] > -0.3f;
  for (int64_t j = 0; j < tk; ++j) {
    bm[static_cast<size_t>(3 * tk + j)] = 0;
    bm[static_cast<size_t>(5 * tk + j)] = j == single_key;
  }
  std::vector<float> am =
      test::random_tensor({b, 1, tq, tk}, seed + 1, -3.f, 1.f).to_float_vector();
  for (int64_t j = 0; j < tk; ++j) {
    am[static_cast<size_t>(4 * tk + j)] = -kInf;
    am[static_cast<size_t>(tq * tk + 6 * tk + j)] = kLowest;
    if (j >= 50) am[static_cast<size_t>(tq * tk + 10 * tk + j)] = kLowest;
  }
  std::vector<uint8_t> km(static_cast<size_t>(b * tk), 1);
  for (int64_t j = pad_from; j < tk; ++j) km[static_cast<size_t>(tk + j)] = 0;
  return {Tensor::from_vector(bm, {tq, tk}).view_as_dtype(DType::Bool),
          Tensor::from_vector(am, {b, 1, tq, tk}), Tensor::from_vector(km, {b, 1, 1, tk})};
}

TEST(CudaTensorCoreAttention, MasksIncludingFullyMaskedAndPaddingRows) {
  LTX_REQUIRE_CUDA();
  const int64_t b = 2, h = 2, tq = 37, tk = 140, d = 64;
  const Heads q = heads(b, tq, h, d, 130, 2.f), k = heads(b, tk, h, d, 131, 2.f);
  const Heads v = heads(b, tk, h, d, 132);
  const EdgeMasks masks = edge_masks(b, tq, tk, 133, 131, 40);
  const Tensor &bool_mask = masks.bool_mask, &add_mask = masks.add_mask, &key_mask = masks.key_mask;
  const double scale = 1.0 / 8.0;
  for (const Tensor* m : {&bool_mask, &add_mask, &key_mask}) {
    SCOPED_TRACE(m->describe());
    const Shape full{b, h, tq, tk};
    expect_tensor_core_matches(q, k, v, m->expand(full), scale);
  }
  // An additive mask stored as bf16.
  expect_tensor_core_matches(q, k, v, bf16(add_mask).expand({b, h, tq, tk}), scale);
  // Head dim 256 (Gemma's) with the additive mask: Q fragments come from shared memory there.
  const Heads q256 = heads(b, tq, h, 256, 135, 2.f), k256 = heads(b, tk, h, 256, 136, 2.f);
  const Heads v256 = heads(b, tk, h, 256, 137);
  expect_tensor_core_matches(q256, k256, v256, add_mask.expand({b, h, tq, tk}), scale / 2);

  const Tensor got = ops::scaled_dot_product_attention(bf16(q.gpu), bf16(k.gpu), bf16(v.gpu),
                                                       gpu(bool_mask), scale);
  for (float x : got.select(2, 3).to_float_vector()) EXPECT_EQ(x, 0.f);
  const Tensor got_add = ops::scaled_dot_product_attention(bf16(q.gpu), bf16(k.gpu), bf16(v.gpu),
                                                           gpu(add_mask), scale);
  for (float x : got_add.select(0, 0).select(1, 4).to_float_vector()) EXPECT_EQ(x, 0.f);
}

TEST(CudaTensorCoreAttention, AppliesOnlyWhereItCanAndFallsBack) {
  LTX_REQUIRE_CUDA();
  const Heads q = heads(1, 20, 2, 64, 140), k = heads(1, 30, 2, 64, 141), v = heads(1, 30, 2, 64, 142);
  EXPECT_TRUE(cuda::tensor_core_attention_applies(bf16(q.gpu), bf16(k.gpu), bf16(v.gpu)));
  // f32 operands, a mixed dtype, an unsupported head dim, D != Dv, a strided head dim.
  EXPECT_FALSE(cuda::tensor_core_attention_applies(q.gpu, k.gpu, v.gpu));
  EXPECT_FALSE(cuda::tensor_core_attention_applies(bf16(q.gpu), k.gpu, bf16(v.gpu)));
  const Heads q16 = heads(1, 20, 2, 16, 143), k16 = heads(1, 30, 2, 16, 144);
  EXPECT_FALSE(cuda::tensor_core_attention_applies(bf16(q16.gpu), bf16(k16.gpu), bf16(k16.gpu)));
  const Heads v32 = heads(1, 30, 2, 32, 145);
  EXPECT_FALSE(cuda::tensor_core_attention_applies(bf16(q.gpu), bf16(k.gpu), bf16(v32.gpu)));
  const Tensor wide = bf16(test::random_tensor({1, 2, 20, 128}, 146).to(kGpu));
  const Tensor every_other = wide.narrow(3, 0, 64);  // unit stride but rows 256 B apart: applies
  EXPECT_TRUE(cuda::tensor_core_attention_applies(every_other, bf16(k.gpu), bf16(v.gpu)));
  const Tensor offset = wide.narrow(3, 1, 64);  // rows start 2 bytes past 16-byte alignment
  EXPECT_FALSE(cuda::tensor_core_attention_applies(offset, bf16(k.gpu), bf16(v.gpu)));
  // Forcing it where it does not apply is an error that says why; Auto falls back.
  EXPECT_ERROR_HAS(cuda::scaled_dot_product_attention(q.gpu, k.gpu, v.gpu, Tensor(), 0.125f,
                                                      cuda::AttentionKernel::TensorCore),
                   "tensor-core kernel needs bf16");
  const Tensor fallback = ops::scaled_dot_product_attention(offset, bf16(k.gpu), bf16(v.gpu));
  const Tensor want = ops::scaled_dot_product_attention(
      offset.to(Device::cpu(), DType::F32), f32_of_bf16(k.cpu), f32_of_bf16(v.cpu));
  EXPECT_LE(rel_l2(fallback, want), 5e-3);
}


// ---- The Hopper wgmma kernel (bf16 q/k/v, head dims 64 and 128) ----

void expect_wgmma_matches(const Heads& q, const Heads& k, const Heads& v, const Tensor& mask,
                          double scale, double max_rel_l2 = 1e-2) {
  expect_fused_matches(q, k, v, mask, scale, max_rel_l2, cuda::AttentionKernel::Wgmma);
}

TEST(CudaWgmmaAttention, MatchesCpuAcrossHeadDimsAndLengths) {
  LTX_REQUIRE_WGMMA();
  // Query blocks are 128 rows, key tiles 128 keys: partial, exact and multi-tile cases of both.
  expect_matches_across(
      {64, 128}, {{1, 1}, {7, 33}, {77, 1000}, {129, 7}, {200, 130}, {300, 513}, {128, 256}, {256, 384}},
      200, cuda::AttentionKernel::Wgmma);
}

TEST(CudaWgmmaAttention, SharpSoftmaxOverManyKeyTiles) {
  LTX_REQUIRE_WGMMA();
  // Logits up to ~+-60, the running max moving between the 16 key tiles (3 stages reused 5 times).
  const Heads q = heads(1, 300, 2, 128, 220, 3.f), k = heads(1, 2000, 2, 128, 221, 3.f);
  const Heads v = heads(1, 2000, 2, 128, 222);
  expect_wgmma_matches(q, k, v, Tensor(), 1.0 / std::sqrt(128.0), 2e-2);
  const Heads q64 = heads(1, 300, 2, 64, 223, 3.f), k64 = heads(1, 2000, 2, 64, 224, 3.f);
  const Heads v64 = heads(1, 2000, 2, 64, 225);
  expect_wgmma_matches(q64, k64, v64, Tensor(), 0.125, 2e-2);
}

TEST(CudaWgmmaAttention, MasksIncludingFullyMaskedAndPaddingRows) {
  LTX_REQUIRE_WGMMA();
  const int64_t b = 2, h = 2, tq = 37, tk = 300;  // 3 key tiles, the last partial
  const EdgeMasks masks = edge_masks(b, tq, tk, 233, 290, 140);
  const Tensor &bool_mask = masks.bool_mask, &add_mask = masks.add_mask, &key_mask = masks.key_mask;
  for (int64_t d : {64, 128}) {
    const Heads q = heads(b, tq, h, d, 230 + d, 2.f), k = heads(b, tk, h, d, 231 + d, 2.f);
    const Heads v = heads(b, tk, h, d, 232 + d);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const Shape full{b, h, tq, tk};
    for (const Tensor* m : {&bool_mask, &add_mask, &key_mask}) {
      SCOPED_TRACE("D " + std::to_string(d) + " " + m->describe());
      expect_wgmma_matches(q, k, v, m->expand(full), scale);
    }
    expect_wgmma_matches(q, k, v, bf16(add_mask).expand(full), scale);
    const Tensor got = cuda::scaled_dot_product_attention(
        bf16(q.gpu), bf16(k.gpu), bf16(v.gpu), gpu(bool_mask).expand(full),
        static_cast<float>(scale), cuda::AttentionKernel::Wgmma);
    for (float x : got.select(2, 3).to_float_vector()) EXPECT_EQ(x, 0.f);
    const Tensor got_add = cuda::scaled_dot_product_attention(
        bf16(q.gpu), bf16(k.gpu), bf16(v.gpu), gpu(add_mask).expand(full),
        static_cast<float>(scale), cuda::AttentionKernel::Wgmma);
    for (float x : got_add.select(0, 0).select(1, 4).to_float_vector()) EXPECT_EQ(x, 0.f);
  }
}

TEST(CudaWgmmaAttention, StridedViewsAndAgreementWithTheMmaKernel) {
  LTX_REQUIRE_WGMMA();
  // Rows 256 bytes apart (every other half of a D 128 tensor) and the [B, T, H, D] views.
  const Tensor wide_k = bf16(test::random_tensor({1, 700, 2, 128}, 240, -2.f, 2.f).to(kGpu));
  const Tensor wide_v = bf16(test::random_tensor({1, 700, 2, 128}, 241).to(kGpu));
  const Tensor q = bf16(test::random_tensor({1, 333, 2, 64}, 242, -2.f, 2.f).to(kGpu)).transpose(1, 2);
  const Tensor k = wide_k.narrow(3, 64, 64).transpose(1, 2), v = wide_v.narrow(3, 0, 64).transpose(1, 2);
  ASSERT_TRUE(cuda::wgmma_attention_applies(q, k, v));
  const Tensor want = ops::scaled_dot_product_attention(
      q.to(Device::cpu(), DType::F32), k.to(Device::cpu(), DType::F32),
      v.to(Device::cpu(), DType::F32), Tensor(), 0.125);
  const Tensor got = cuda::scaled_dot_product_attention(q, k, v, Tensor(), 0.125f,
                                                        cuda::AttentionKernel::Wgmma);
  EXPECT_LE(rel_l2(got, want), 1e-2);
  // The video self-attention layout at a size the CPU need not check: against the mma kernel.
  const Heads qb = heads(1, 1500, 4, 128, 243, 2.f), kb = heads(1, 1700, 4, 128, 244, 2.f);
  const Heads vb = heads(1, 1700, 4, 128, 245);
  const Tensor w = cuda::scaled_dot_product_attention(bf16(qb.gpu), bf16(kb.gpu), bf16(vb.gpu),
                                                      Tensor(), 0.088f, cuda::AttentionKernel::Wgmma);
  const Tensor m = cuda::scaled_dot_product_attention(
      bf16(qb.gpu), bf16(kb.gpu), bf16(vb.gpu), Tensor(), 0.088f, cuda::AttentionKernel::TensorCore);
  const double rel = rel_l2(w, m);
  EXPECT_LE(rel, 5e-3) << "wgmma vs mma rel L2 " << rel;
  std::printf("[wgmma] rel L2 vs CPU (strided D 64) %.2e, vs mma (1500 x 1700, D 128) %.2e\n",
              rel_l2(got, want), rel);
}

TEST(CudaWgmmaAttention, AppliesOnlyWhereItCan) {
  LTX_REQUIRE_CUDA();
  const Heads q = heads(1, 20, 2, 64, 250), k = heads(1, 30, 2, 64, 251), v = heads(1, 30, 2, 64, 252);
  const bool hopper = cuda::wgmma_attention_available(0);
  EXPECT_EQ(cuda::wgmma_attention_applies(bf16(q.gpu), bf16(k.gpu), bf16(v.gpu)), hopper);
  // f32 operands, head dims 32 and 256 (the mma kernel's), a misaligned row start.
  EXPECT_FALSE(cuda::wgmma_attention_applies(q.gpu, k.gpu, v.gpu));
  const Heads q32 = heads(1, 20, 2, 32, 253), k32 = heads(1, 30, 2, 32, 254);
  EXPECT_FALSE(cuda::wgmma_attention_applies(bf16(q32.gpu), bf16(k32.gpu), bf16(k32.gpu)));
  const Heads q256 = heads(1, 20, 2, 256, 255), k256 = heads(1, 30, 2, 256, 256);
  EXPECT_FALSE(cuda::wgmma_attention_applies(bf16(q256.gpu), bf16(k256.gpu), bf16(k256.gpu)));
  const Tensor wide = bf16(test::random_tensor({1, 2, 20, 128}, 257).to(kGpu));
  EXPECT_FALSE(cuda::wgmma_attention_applies(wide.narrow(3, 1, 64), bf16(k.gpu), bf16(v.gpu)));
  // Forcing it where it does not apply is an error that says why.
  EXPECT_ERROR_HAS(cuda::scaled_dot_product_attention(bf16(q32.gpu), bf16(k32.gpu), bf16(k32.gpu),
                                                      Tensor(), 0.125f, cuda::AttentionKernel::Wgmma),
                   "wgmma kernel needs");
  // Head dim 32 with Auto: the mma kernel.
  EXPECT_EQ(auto_choice(bf16(q32.gpu), bf16(k32.gpu), bf16(k32.gpu)),
            cuda::AttentionKernel::TensorCore);
}

Tensor gate_logits(int64_t b, int64_t tq, int64_t h, uint64_t seed, DType dt);  // below

// The wgmma kernel with its keys split across blocks (few query rows over many keys: the audio
// stream's 126 queries over the video tokens) against the CPU and against the unsplit kernel:
// ranges of unequal length (more ranges asked for than tiles too), masks that leave whole ranges
// without an attended key (rows 3 / 4 zeros, row 5 one key in the last range, an all -FLT_MAX row
// uniform), the gate in the merge's epilogue, and what Auto picks.
TEST(CudaWgmmaAttention, SplitKeysMatchTheCpuAndTheUnsplitKernel) {
  LTX_REQUIRE_WGMMA();
  struct Case {
    int64_t b, h, tq, tk, d;
  };
  uint64_t seed = 600;
  // Batch 2: edge_masks writes rows of both samples.
  for (const Case& c : {Case{2, 4, 126, 3000, 64}, Case{2, 2, 50, 2000, 128}, Case{2, 1, 11, 1100, 64}}) {
    SCOPED_TRACE("B " + std::to_string(c.b) + " H " + std::to_string(c.h) + " Tq " + std::to_string(c.tq) +
                 " Tk " + std::to_string(c.tk) + " D " + std::to_string(c.d));
    const Heads q = heads(c.b, c.tq, c.h, c.d, seed++, 2.f), k = heads(c.b, c.tk, c.h, c.d, seed++, 2.f);
    const Heads v = heads(c.b, c.tk, c.h, c.d, seed++);
    const Tensor qb = bf16(q.gpu), kb = bf16(k.gpu), vb = bf16(v.gpu);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    const EdgeMasks masks = edge_masks(c.b, c.tq, c.tk, seed++, c.tk - 3, c.tk / 3);
    const Shape full{c.b, c.h, c.tq, c.tk};
    const Tensor no_mask;
    for (const Tensor* m : {&no_mask, &masks.bool_mask, &masks.add_mask, &masks.key_mask}) {
      SCOPED_TRACE(m->defined() ? m->describe() : std::string("no mask"));
      const Tensor mg = m->defined() ? gpu(*m).expand(full) : Tensor();
      const Tensor want = ops::scaled_dot_product_attention(f32_of_bf16(q.cpu), f32_of_bf16(k.cpu),
                                                            f32_of_bf16(v.cpu), cpu_mask(*m), scale);
      const auto run = [&](int splits, const Tensor& gate) {
        Tensor out = Tensor::empty({c.b, c.tq, c.h, c.d}, gate.defined() && gate.dtype() == DType::F32
                                                              ? DType::F32 : DType::BF16, kGpu)
                         .transpose(1, 2);
        cuda::wgmma_attention(qb, kb, vb, mg, gate, static_cast<float>(scale), out, splits);
        return out;
      };
      const Tensor unsplit = run(1, Tensor());
      for (int splits : {2, 3, 7, 64}) {
        SCOPED_TRACE("splits " + std::to_string(splits));
        const Tensor got = run(splits, Tensor());
        const double rel = rel_l2(got, want), vs_unsplit = rel_l2(got, unsplit);
        EXPECT_LE(rel, 1e-2) << "vs the CPU: rel L2 " << rel << ", max |diff| " << max_abs_diff(got, want);
        EXPECT_LE(max_abs_diff(got, want), 3e-2);
        EXPECT_LE(vs_unsplit, 5e-3) << "vs unsplit: rel L2 " << vs_unsplit;
        // Rows that attend nothing are zeros, as unsplit.
        if (m == &masks.bool_mask) {
          for (float x : got.select(2, 3).to_float_vector()) ASSERT_EQ(x, 0.f);
        }
        if (m == &masks.add_mask) {
          for (float x : got.select(0, 0).select(1, 4).to_float_vector()) ASSERT_EQ(x, 0.f);
        }
        // The gate in the merge: bit for bit the split kernel's output times the gate, as mul_2sigmoid.
        for (DType dt : {DType::BF16, DType::F32}) {
          const Tensor logits = gate_logits(c.b, c.tq, c.h, seed, dt);
          EXPECT_TRUE(test::same_bytes(run(splits, logits),
                                       ops::mul_2sigmoid(got, logits.transpose(1, 2).unsqueeze(-1))));
        }
      }
    }
  }
  // Auto: the step's audio queries over 6144 video keys (32 blocks) split to fill the SMs once;
  // the video self-attention (1536 blocks) and short key sequences are not split.
  const int sms = cuda::multiprocessor_count(0);
  const Tensor qa = Tensor::empty({1, 126, 32, 64}, DType::BF16, kGpu).transpose(1, 2);
  const Tensor kv = Tensor::empty({1, 6144, 32, 64}, DType::BF16, kGpu).transpose(1, 2);
  EXPECT_EQ(cuda::wgmma_attention_auto_splits(qa, kv), sms >= 64 ? std::min(sms / 32, 12) : 1);
  EXPECT_EQ(cuda::wgmma_attention_auto_splits(kv, kv), 1);
  EXPECT_EQ(cuda::wgmma_attention_auto_splits(qa, qa), 1);
}

// Runs the wgmma kernel with several query tiles per block on shape (h, tq, tk, d), batch 2,
// against one tile per block: bit for bit, unmasked and masked, gated, the last block's tiles
// partial or past the end (per 2, 3, 5, 100).
struct QTilesCase {
  int64_t h, tq, tk, d;
};
void expect_query_tiles_per_block_bit_identical(const QTilesCase& c, uint64_t& seed) {
  SCOPED_TRACE("H " + std::to_string(c.h) + " Tq " + std::to_string(c.tq) + " Tk " + std::to_string(c.tk) +
               " D " + std::to_string(c.d));
  const int64_t b = 2;  // edge_masks writes rows of both samples
  const Heads q = heads(b, c.tq, c.h, c.d, seed++, 2.f), k = heads(b, c.tk, c.h, c.d, seed++, 2.f);
  const Heads v = heads(b, c.tk, c.h, c.d, seed++);
  const Tensor qb = bf16(q.gpu), kb = bf16(k.gpu), vb = bf16(v.gpu);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  const EdgeMasks masks = edge_masks(b, c.tq, c.tk, seed++, c.tk - 3, c.tk / 3);
  const Shape full{b, c.h, c.tq, c.tk};
  const Tensor no_mask;
  for (const Tensor* m : {&no_mask, &masks.bool_mask, &masks.add_mask, &masks.key_mask}) {
    SCOPED_TRACE(m->defined() ? m->describe() : std::string("no mask"));
    const Tensor mg = m->defined() ? gpu(*m).expand(full) : Tensor();
    const auto run = [&](int per, const Tensor& gate) {
      Tensor out = Tensor::empty({b, c.tq, c.h, c.d}, gate.defined() && gate.dtype() == DType::F32
                                                          ? DType::F32 : DType::BF16, kGpu)
                       .transpose(1, 2);
      cuda::wgmma_attention(qb, kb, vb, mg, gate, static_cast<float>(scale), out, 1, per);
      return out;
    };
    const Tensor one = run(1, Tensor());
    const Tensor want = ops::scaled_dot_product_attention(f32_of_bf16(q.cpu), f32_of_bf16(k.cpu),
                                                          f32_of_bf16(v.cpu), cpu_mask(*m), scale);
    EXPECT_LE(rel_l2(one, want), 1e-2);
    const Tensor logits = gate_logits(b, c.tq, c.h, seed, DType::BF16);
    const Tensor gated_one = run(1, logits);
    for (int per : {2, 3, 5, 100}) {
      SCOPED_TRACE("query tiles per block " + std::to_string(per));
      EXPECT_TRUE(test::same_bytes(run(per, Tensor()), one));
      EXPECT_TRUE(test::same_bytes(run(per, logits), gated_one));
    }
  }
}

// Over resident keys (many queries over at most 3 key tiles: the video tokens over the 126 audio
// keys), and Auto's choice.
TEST(CudaWgmmaAttention, ResidentKeysEqualOneQueryTilePerBlockBitForBit) {
  LTX_REQUIRE_WGMMA();
  uint64_t seed = 700;
  for (const QTilesCase& c : {QTilesCase{2, 1000, 126, 64}, QTilesCase{3, 700, 384, 128}, QTilesCase{1, 530, 300, 64}})
    expect_query_tiles_per_block_bit_identical(c, seed);
  const int sms = cuda::multiprocessor_count(0);
  const Tensor qv = Tensor::empty({1, 6144, 32, 64}, DType::BF16, kGpu).transpose(1, 2);
  const Tensor ka = Tensor::empty({1, 126, 32, 64}, DType::BF16, kGpu).transpose(1, 2);
  const int64_t blocks = 48 * 32;
  const int64_t per_head = std::max(1, sms / 32);
  EXPECT_EQ(cuda::wgmma_attention_auto_q_tiles(qv, ka), blocks >= 2 * sms ? (48 + per_head - 1) / per_head : 1);
  EXPECT_EQ(cuda::wgmma_attention_auto_q_tiles(ka, ka), 1);  // one wave of blocks
}

// Several query tiles a block need resident keys: longer keys are an error naming the limit,
// and Auto keeps one tile a block there.
TEST(CudaWgmmaAttention, QueryTilesPerBlockNeedResidentKeys) {
  LTX_REQUIRE_WGMMA();
  const Tensor qv = Tensor::empty({1, 6144, 32, 128}, DType::BF16, kGpu).transpose(1, 2);
  const Tensor kt = Tensor::empty({1, 1024, 32, 128}, DType::BF16, kGpu).transpose(1, 2);
  EXPECT_EQ(cuda::wgmma_attention_auto_q_tiles(qv, qv), 1);
  EXPECT_EQ(cuda::wgmma_attention_auto_q_tiles(qv, kt), 1);
  Tensor out = Tensor::empty({1, 6144, 32, 128}, DType::BF16, kGpu).transpose(1, 2);
  EXPECT_ERROR_HAS(cuda::wgmma_attention(qv, kt, kt, Tensor(), Tensor(), 0.125f, out, 1, 4),
                   "needs keys resident");
}

// ---- The per-head output gate (AttentionOptions::head_gate_logits) ----

// [B, Tq, H] gate logits in [-6, 6] (gates from 0.005 to 1.995), on the GPU as `dt`.
Tensor gate_logits(int64_t b, int64_t tq, int64_t h, uint64_t seed, DType dt) {
  return test::random_tensor({b, tq, h}, seed, -6.f, 6.f).to(kGpu, dt);
}

// What the transformer ran before the gate moved into the kernels: `kernel`'s ungated output,
// then mul_2sigmoid with the [B, Tq, H] logits as [B, H, Tq, 1].
Tensor unfused_gate(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                    double scale, cuda::AttentionKernel kernel, const Tensor& logits) {
  const Tensor plain =
      cuda::scaled_dot_product_attention(q, k, v, mask, static_cast<float>(scale), kernel);
  return ops::mul_2sigmoid(plain, logits.transpose(1, 2).unsqueeze(-1));
}

// `kernel` with the gate on bf16 q/k/v, with bf16 and f32 logits: bit for bit the unfused
// composition (its dtype too: f32 for f32 logits), Auto through the op the same bits when it
// picks `kernel`, and the CPU's gated attention of the bf16-rounded inputs within bf16 accuracy.
// `mask`: undefined or on the GPU, broadcastable to [B, H, Tq, Tk].
void expect_gate_fused(const Heads& q, const Heads& k, const Heads& v, const Tensor& mask,
                       double scale, cuda::AttentionKernel kernel, uint64_t seed) {
  const Tensor qb = bf16(q.gpu), kb = bf16(k.gpu), vb = bf16(v.gpu);
  if (kernel == cuda::AttentionKernel::Wgmma) {
    ASSERT_TRUE(cuda::wgmma_attention_applies(qb, kb, vb));
  } else if (kernel == cuda::AttentionKernel::TensorCore) {
    ASSERT_TRUE(cuda::tensor_core_attention_applies(qb, kb, vb));
  }
  const int64_t b = qb.size(0), h = qb.size(1), tq = qb.size(2), tk = kb.size(2);
  const Tensor m = mask.defined() ? mask.expand({b, h, tq, tk}) : Tensor();
  for (DType dt : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(std::string("logits ") + dtype_name(dt));
    const Tensor logits = gate_logits(b, tq, h, seed, dt);
    const Tensor got = cuda::scaled_dot_product_attention(qb, kb, vb, m, static_cast<float>(scale),
                                                          kernel, logits);
    const Tensor want = unfused_gate(qb, kb, vb, m, scale, kernel, logits);
    EXPECT_EQ(got.dtype(), dt);  // mul_2sigmoid's result dtype for a bf16 attention output
    EXPECT_TRUE(test::same_bytes(got, want));
    if (auto_choice(qb, kb, vb) == kernel) {
      EXPECT_TRUE(test::same_bytes(
          ops::scaled_dot_product_attention(
              qb, kb, vb, {.mask = mask, .scale = scale, .head_gate_logits = logits}),
          want));
    }
    const Tensor cpu = ops::scaled_dot_product_attention(
        f32_of_bf16(q.cpu), f32_of_bf16(k.cpu), f32_of_bf16(v.cpu),
        {.mask = cpu_mask(mask), .scale = scale,
         .head_gate_logits = logits.to(Device::cpu(), DType::F32)});
    const double rel = rel_l2(got, cpu);
    EXPECT_LE(rel, 1e-2) << "vs the CPU: rel L2 " << rel << ", max |diff| "
                         << max_abs_diff(got, cpu);
  }
}

// expect_gate_fused on unmasked attention through `kernel` for every head dim and (Tq, Tk).
void expect_gate_fused_over(const std::vector<int64_t>& dims,
                            const std::vector<std::pair<int64_t, int64_t>>& lens, uint64_t seed,
                            cuda::AttentionKernel kernel) {
  across_cases(dims, lens, seed,
               [&](const Heads& q, const Heads& k, const Heads& v, int64_t d, uint64_t& s) {
                 expect_gate_fused(q, k, v, Tensor(), 1.0 / std::sqrt(static_cast<double>(d)),
                                   kernel, s++);
               });
}

TEST(CudaGatedAttention, WgmmaEpilogueEqualsTheUnfusedGateBitForBit) {
  LTX_REQUIRE_WGMMA();
  // The video self-attention (a few hundred of the 6144 tokens: exact and partial 128-row query
  // blocks and key tiles), text cross-attention (Tq != Tk, one partial key tile) and the reverse.
  expect_gate_fused_over({64, 128}, {{384, 384}, {300, 300}, {300, 77}, {77, 1000}, {1, 7}}, 300,
                         cuda::AttentionKernel::Wgmma);
}

TEST(CudaGatedAttention, TensorCoreEpilogueEqualsTheUnfusedGateBitForBit) {
  LTX_REQUIRE_CUDA();
  expect_gate_fused_over({32, 64, 128, 256}, {{300, 300}, {200, 77}, {77, 513}, {1, 7}}, 400,
                         cuda::AttentionKernel::TensorCore);
}

// The masked kernels (with fully masked rows: zeros, gated zeros) and the Simple kernel (the
// composition itself), bf16 and f32 q/k/v.
TEST(CudaGatedAttention, MasksAndTheSimpleKernel) {
  LTX_REQUIRE_CUDA();
  const int64_t b = 2, h = 2, tq = 37, tk = 300;
  const EdgeMasks masks = edge_masks(b, tq, tk, 500, 290, 140);
  for (int64_t d : {64, 128}) {
    const Heads q = heads(b, tq, h, d, 510 + d, 2.f), k = heads(b, tk, h, d, 511 + d, 2.f);
    const Heads v = heads(b, tk, h, d, 512 + d);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (const Tensor* m : {&masks.bool_mask, &masks.add_mask, &masks.key_mask}) {
      SCOPED_TRACE("D " + std::to_string(d) + " " + m->describe());
      if (cuda::wgmma_attention_available(0))
        expect_gate_fused(q, k, v, gpu(*m), scale, cuda::AttentionKernel::Wgmma, 520);
      expect_gate_fused(q, k, v, gpu(*m), scale, cuda::AttentionKernel::TensorCore, 521);
      expect_gate_fused(q, k, v, gpu(*m), scale, cuda::AttentionKernel::Simple, 522);
    }
    // f32 q/k/v: only the Simple kernel; f32 result.
    const Tensor logits = gate_logits(b, tq, h, 523, DType::BF16);
    const Tensor m = gpu(masks.add_mask).expand({b, h, tq, tk});
    const Tensor got = cuda::scaled_dot_product_attention(
        q.gpu, k.gpu, v.gpu, m, static_cast<float>(scale), cuda::AttentionKernel::Auto, logits);
    EXPECT_EQ(got.dtype(), DType::F32);
    EXPECT_TRUE(test::same_bytes(
        got, unfused_gate(q.gpu, k.gpu, v.gpu, m, scale, cuda::AttentionKernel::Auto, logits)));
  }
}

// Logits of any strides and broadcast shapes, through the op (which expands them): every other
// head of a wider tensor (2-byte aligned: read per element), stored [B, H, Tq] and viewed, one
// per (batch, head), one row for the whole batch.
TEST(CudaGatedAttention, StridedAndBroadcastLogits) {
  LTX_REQUIRE_CUDA();
  const int64_t b = 2, h = 4, tq = 200, tk = 150, d = 128;
  const Heads q = heads(b, tq, h, d, 600, 2.f), k = heads(b, tk, h, d, 601, 2.f);
  const Heads v = heads(b, tk, h, d, 602);
  const Tensor qb = bf16(q.gpu), kb = bf16(k.gpu), vb = bf16(v.gpu);
  for (DType dt : {DType::BF16, DType::F32}) {
    const Tensor wide = gate_logits(b, tq, 2 * h, 603, dt);
    const std::vector<Tensor> gates = {
        wide.narrow(2, 1, h), gate_logits(b, h, tq, 604, dt).transpose(1, 2),
        gate_logits(b, 1, h, 605, dt), gate_logits(1, tq, h, 606, dt).select(0, 0)};
    for (const Tensor& g : gates) {
      SCOPED_TRACE(g.describe());
      const Tensor got = ops::scaled_dot_product_attention(qb, kb, vb, {.head_gate_logits = g});
      const Tensor plain = ops::scaled_dot_product_attention(qb, kb, vb);
      const Tensor want =
          ops::mul_2sigmoid(plain, g.expand({b, tq, h}).transpose(1, 2).unsqueeze(-1));
      EXPECT_TRUE(test::same_bytes(got, want));
      const Tensor cpu = ops::scaled_dot_product_attention(
          f32_of_bf16(q.cpu), f32_of_bf16(k.cpu), f32_of_bf16(v.cpu),
          {.head_gate_logits = g.to(Device::cpu(), DType::F32)});
      EXPECT_LE(rel_l2(got, cpu), 1e-2);
    }
  }
}

TEST(CudaGatedAttention, RejectsGatesOfTheWrongShapeOrDevice) {
  LTX_REQUIRE_CUDA();
  const Heads q = heads(2, 40, 3, 64, 700), k = heads(2, 50, 3, 64, 701);
  const Heads v = heads(2, 50, 3, 64, 702);
  const auto gated = [&](const Tensor& g) {
    return ops::scaled_dot_product_attention(bf16(q.gpu), bf16(k.gpu), bf16(v.gpu),
                                             {.head_gate_logits = g});
  };
  EXPECT_NO_THROW(gated(gate_logits(2, 40, 3, 703, DType::BF16)));
  // [B, Tq, H] = [2, 40, 3]: wrong batch, query length (the key length), heads, [B, H, Tq] order.
  for (const Shape& bad : {Shape{3, 40, 3}, Shape{2, 50, 3}, Shape{2, 40, 4}, Shape{2, 3, 40}}) {
    SCOPED_TRACE(bad.str());
    EXPECT_ERROR_HAS(gated(Tensor::zeros(bad, DType::BF16, kGpu)),
                     "head_gate_logits bf16" + bad.str());
    EXPECT_ERROR_HAS(gated(Tensor::zeros(bad, DType::BF16, kGpu)), "[B, Tq, H] = [2, 40, 3]");
  }
  EXPECT_ERROR_HAS(gated(Tensor::zeros({2, 40, 3}, DType::F16, kGpu)), "head_gate_logits");
  EXPECT_ERROR_HAS(gated(Tensor::zeros({2, 40, 3})), "different devices");
}

// The transformer's attention module with gate logits: the gate goes into the kernels (no
// perturbation) and the output is what the unfused gate gives; the STG blend path (all-keep
// perturbation mask, the unfused gate) agrees. to_out is the identity, so the module returns the
// gated attention output itself.
TEST(CudaGatedAttention, TransformerAttentionModule) {
  LTX_REQUIRE_CUDA();
  const int64_t b = 2, t = 300, heads_n = 4, dh = 64, inner = heads_n * dh;
  uint64_t seed = 800;
  const auto weight = [&](int64_t out, int64_t in, float r) {
    return test::random_tensor({out, in}, seed++, -r, r).to(kGpu, DType::BF16);
  };
  const auto bias = [&](int64_t n) {
    return test::random_tensor({n}, seed++, -0.1f, 0.1f).to(kGpu, DType::BF16);
  };
  models::transformer::Attention attn;
  attn.heads = heads_n;
  attn.dim_head = dh;
  attn.to_q = {weight(inner, inner, 0.1f), bias(inner)};
  attn.to_k = {weight(inner, inner, 0.1f), bias(inner)};
  attn.to_v = {weight(inner, inner, 0.1f), bias(inner)};
  attn.q_norm = test::random_tensor({inner}, seed++, 0.5f, 1.5f).to(kGpu, DType::BF16);
  attn.k_norm = test::random_tensor({inner}, seed++, 0.5f, 1.5f).to(kGpu, DType::BF16);
  std::vector<float> eye(static_cast<size_t>(inner * inner), 0.f);
  for (int64_t i = 0; i < inner; ++i) eye[static_cast<size_t>(i * inner + i)] = 1.f;
  attn.to_out = {Tensor::from_vector(eye, {inner, inner}).to(kGpu, DType::BF16),
                 Tensor::zeros({inner}, DType::BF16, kGpu)};
  const nn::Linear gate{weight(heads_n, inner, 0.2f), bias(heads_n)};
  attn.to_gate_logits = gate;
  models::transformer::Attention ungated = attn;
  ungated.to_gate_logits.reset();

  const Tensor x = test::random_tensor({b, t, inner}, seed++).to(kGpu, DType::BF16);
  const Tensor got = attn(x);
  const Tensor want =
      ops::mul_2sigmoid(ungated(x).view({b, t, heads_n, dh}), gate(x).unsqueeze(-1))
          .view({b, t, inner});
  // Values, not bits: the identity projection may turn a -0 into +0.
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.to_float_vector(), want.to_float_vector());
  const Tensor keep = Tensor::full({b, 1, 1}, 1.0, DType::BF16, kGpu);
  EXPECT_EQ(attn(x, {.perturbation_mask = keep}).to_float_vector(),
            want.to_float_vector());
}

}  // namespace
}  // namespace ltx::attention_test
