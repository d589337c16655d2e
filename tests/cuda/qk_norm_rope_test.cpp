// ops::qk_norm_rope_3d on CUDA (the diffusion decoder's q / k norms + q scale + 3-D RoPE in one
// launch): bit-identical to the unfused CUDA ops (rms_norm -> mul -> apply_rope_3d) in f32 and
// bf16, including head dims whose rms_norm blocks have several or partly empty warps and threads
// summing several elements, and close to the CPU op; the decoder attention's fused projection on
// the GPU with its tables kept there.
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/rope.h"
#include "cuda/cuda_test_util.h"
#include "models/na_test_util.h"
#include "models/video_vae/transformer/attention.h"
#include "ops/rope.h"
#include "support/rope3d_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::same_bytes;

struct Case {
  std::array<int64_t, 3> split;
  Shape shape;  // [B, T, H, W, heads, D]
  int64_t w_start;
};

// rms_norm's block for D: 32 threads (8, 16), 64 (64: two full warps), 128 (96: the 4th warp
// empty), 256 (136: warps 5-7 empty; 520: threads sum 2-3 elements), and one head dim past the
// kernel's staging limit (the unfused fallback).
const Case kCases[] = {
    {{2, 4, 2}, {1, 1, 3, 33, 1, 8}, 17},     {{4, 6, 6}, {1, 3, 5, 7, 2, 16}, 0},
    {{16, 24, 24}, {2, 3, 2, 5, 3, 64}, -3},  {{32, 32, 32}, {1, 2, 2, 3, 2, 96}, 4},
    {{40, 48, 48}, {1, 1, 2, 3, 2, 136}, -1}, {{128, 196, 196}, {1, 1, 1, 3, 2, 520}, 2},
    {{2000, 3100, 3100}, {1, 1, 1, 2, 1, 8200}, 0},
    // Head dim 64 (bf16: the 8-lanes-per-row path): 21 rows per tensor, so one warp's 4 rows
    // straddle q and k and the last group is partial.
    {{16, 24, 24}, {1, 1, 3, 7, 1, 64}, 5},
    // Head dim 64 with axis starts off the 8-element lane groups: per-element table reads.
    {{20, 20, 24}, {1, 2, 3, 5, 2, 64}, 1},
};

TEST(CudaQkNormRope3d, TakesTheHeadDim64PathForAlignedBf16Rows) {
  LTX_REQUIRE_CUDA();
  const auto qkv = test::fused_qkv_heads({1, 2, 3, 4, 2, 64}, 7, DType::BF16, kGpu);
  EXPECT_TRUE(cuda::qk_norm_rope_d64_path(qkv[0], qkv[1]));
  const auto f32 = test::fused_qkv_heads({1, 2, 3, 4, 2, 64}, 7, DType::F32, kGpu);
  EXPECT_FALSE(cuda::qk_norm_rope_d64_path(f32[0], f32[1]));
  const auto d32 = test::fused_qkv_heads({1, 2, 3, 4, 2, 32}, 7, DType::BF16, kGpu);
  EXPECT_FALSE(cuda::qk_norm_rope_d64_path(d32[0], d32[1]));
  EXPECT_FALSE(cuda::qk_norm_rope_d64_path(test::non_contiguous_copy(qkv[0]), qkv[1]));
}

TEST(CudaQkNormRope3d, FusedIsBitIdenticalToTheUnfusedCudaOps) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 500;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.shape.str());
      const int64_t d = c.shape[5];
      const auto qkv = test::fused_qkv_heads(c.shape, seed++, dt, kGpu);
      const Tensor qw = test::random_tensor({d}, seed++, 0.5f, 1.5f).to(kGpu, dt);
      const Tensor kw = test::random_tensor({d}, seed++, 0.5f, 1.5f).to(kGpu, dt);
      const ops::Rope3dTables rope =
          test::rope3d_tables(c.split, c.shape[1], c.shape[2], c.shape[3], c.w_start, kGpu);
      const double scale = 1.0 / std::sqrt(static_cast<double>(d));
      const ops::QkRope got = ops::qk_norm_rope_3d(qkv[0], qkv[1], qw, kw, 1e-6, scale, rope);
      const ops::QkRope want =
          ops::qk_norm_rope_3d_unfused(qkv[0], qkv[1], qw, kw, 1e-6, scale, rope);
      EXPECT_EQ(got.q.device(), kGpu);
      EXPECT_EQ(got.q.dtype(), dt);
      EXPECT_TRUE(same_bytes(got.q, want.q));
      EXPECT_TRUE(same_bytes(got.k, want.k));
      // Strided everywhere (non-unit last-dim strides of q, k and the tables), no weights, f32
      // weights on bf16 data.
      ops::Rope3dTables strided;
      for (int a = 0; a < 3; ++a) {
        strided.cos[a] = test::non_contiguous_copy(rope.cos[a]);
        strided.sin[a] = test::non_contiguous_copy(rope.sin[a]);
      }
      const Tensor qs = test::non_contiguous_copy(qkv[0]), ks = test::non_contiguous_copy(qkv[1]);
      const ops::QkRope g2 = ops::qk_norm_rope_3d(qs, ks, Tensor(), kw.to(DType::F32), 1e-6, 0.3,
                                                  strided);
      const ops::QkRope w2 = ops::qk_norm_rope_3d_unfused(qkv[0], qkv[1], Tensor(),
                                                          kw.to(DType::F32), 1e-6, 0.3, rope);
      EXPECT_TRUE(same_bytes(g2.q, w2.q));
      EXPECT_TRUE(same_bytes(g2.k, w2.k));
      // Dense q / k with the strided tables (head dim 64 bf16: that path's per-element table reads).
      const ops::QkRope g3 = ops::qk_norm_rope_3d(qkv[0], qkv[1], Tensor(), kw.to(DType::F32),
                                                  1e-6, 0.3, strided);
      EXPECT_TRUE(same_bytes(g3.q, w2.q));
      EXPECT_TRUE(same_bytes(g3.k, w2.k));
      // q and k stepping differently (a dense q beside the fused k): the kernel that takes q and
      // k rows one at a time, not the q / k pair kernel.
      const ops::QkRope g4 =
          ops::qk_norm_rope_3d(qkv[0].contiguous(), qkv[1], qw, kw, 1e-6, scale, rope);
      EXPECT_TRUE(same_bytes(g4.q, want.q));
      EXPECT_TRUE(same_bytes(g4.k, want.k));
    }
  }
}

// In place on the q / k parts of a fused projection (the decoder's way): the out-of-place bits,
// on the head-dim-64 path and the general one, and v untouched.
TEST(CudaQkNormRope3d, InPlaceOnTheFusedProjectionGivesTheSameBits) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 700;
  for (DType dt : {DType::BF16, DType::F32}) {
    for (const Case& c : kCases) {
      if (c.shape[5] > 1024) continue;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.shape.str());
      const int64_t d = c.shape[5];
      const auto qkv = test::fused_qkv_heads(c.shape, seed++, dt, kGpu);
      const Tensor qw = test::random_tensor({d}, seed++, 0.5f, 1.5f).to(kGpu, dt);
      const ops::Rope3dTables rope =
          test::rope3d_tables(c.split, c.shape[1], c.shape[2], c.shape[3], c.w_start, kGpu);
      const ops::QkRope want = ops::qk_norm_rope_3d(qkv[0], qkv[1], qw, Tensor(), 1e-6, 0.125, rope);
      const Tensor v_before = qkv[2].contiguous();
      ops::qk_norm_rope_3d_(qkv[0], qkv[1], qw, Tensor(), 1e-6, 0.125, rope);
      EXPECT_TRUE(same_bytes(qkv[0].contiguous(), want.q));
      EXPECT_TRUE(same_bytes(qkv[1].contiguous(), want.k));
      EXPECT_TRUE(same_bytes(qkv[2].contiguous(), v_before));
    }
  }
}

TEST(CudaQkNormRope3d, MatchesTheCpuOp) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 600;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (const Case& c : kCases) {
      if (c.shape[5] > 1024) continue;  // the fallback is covered above
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.shape.str());
      const int64_t d = c.shape[5];
      const auto qkv = test::fused_qkv_heads(c.shape, seed++, dt, kGpu);
      const Tensor qw = test::random_tensor({d}, seed++, 0.5f, 1.5f).to(kGpu, dt);
      const Tensor kw = test::random_tensor({d}, seed++, 0.5f, 1.5f).to(kGpu, dt);
      const ops::Rope3dTables rope =
          test::rope3d_tables(c.split, c.shape[1], c.shape[2], c.shape[3], c.w_start);
      ops::Rope3dTables rope_gpu;
      for (int a = 0; a < 3; ++a) {
        rope_gpu.cos[a] = rope.cos[a].to(kGpu);
        rope_gpu.sin[a] = rope.sin[a].to(kGpu);
      }
      const ops::QkRope got = ops::qk_norm_rope_3d(qkv[0], qkv[1], qw, kw, 1e-6, 0.125, rope_gpu);
      // The CPU computes in f32 on the same (bf16-valued) inputs.
      auto host = [](const Tensor& t) { return t.to(Device::cpu(), DType::F32); };
      const ops::QkRope want = ops::qk_norm_rope_3d(host(qkv[0]), host(qkv[1]), host(qw), host(kw),
                                                    1e-6, 0.125, rope);
      // f32: the row sums differ in order (f32 tree vs double); bf16: up to three roundings.
      const double tol = dt == DType::F32 ? 1e-5 : 2e-2;
      EXPECT_TRUE(test::near(got.q, want.q, tol, tol));
      EXPECT_TRUE(test::near(got.k, want.k, tol, tol));
      EXPECT_LE(test::rel_l2(got.k, want.k), dt == DType::F32 ? 1e-6 : 1e-2);
    }
  }
}

TEST(CudaQkNormRope3d, RejectsTablesOnAnotherDevice) {
  LTX_REQUIRE_CUDA();
  const Shape s{1, 2, 3, 4, 2, 8};
  const auto qkv = test::fused_qkv_heads(s, 1, DType::F32, kGpu);
  const ops::Rope3dTables host = test::rope3d_tables({2, 4, 2}, 2, 3, 4, 0);
  EXPECT_ERROR_HAS(ops::qk_norm_rope_3d(qkv[0], qkv[1], Tensor(), Tensor(), 1e-6, 1.0, host),
                   "different devices");
  const ops::Rope3dTables gpu = test::rope3d_tables({2, 4, 2}, 2, 3, 4, 0, kGpu);
  EXPECT_ERROR_HAS(ops::qk_norm_rope_3d(qkv[0], qkv[1].to(DType::BF16), Tensor(), Tensor(), 1e-6,
                                        1.0, gpu),
                   "one shape and dtype");
}

// The decoder's attention on the GPU: tables built there once, the fused projection equal to the
// unfused one bit for bit, and close to the CPU's.
TEST(CudaQkNormRope3d, DecoderAttentionProjectionOnTheGpu) {
  LTX_REQUIRE_CUDA();
  using namespace models::video_vae;
  uint64_t seed = 700;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t head_dim : {16, 64}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " head_dim " + std::to_string(head_dim));
      const int64_t dim = 2 * head_dim;
      const NeighborhoodAttention3D gpu_attn =
          test::random_na3d(dim, head_dim, {3, 3, 5}, {dt, kGpu}, seed);
      const NeighborhoodAttention3D cpu_attn =
          test::random_na3d(dim, head_dim, {3, 3, 5}, {DType::F32, Device::cpu()}, seed++);
      const Tensor y = test::random_tensor({1, 3, 4, 9, dim}, seed++);
      const AbsRope3d rope = gpu_attn.rope_tables(3, 4, positions(9, -3), kGpu);
      EXPECT_EQ(rope.cos[2].device(), kGpu);
      const Tensor yg = y.to(kGpu, dt);
      const NeighborhoodAttention3D::Qkv got = gpu_attn.project(yg, rope);
      const NeighborhoodAttention3D::Qkv want = gpu_attn.project_unfused(yg, rope);
      EXPECT_TRUE(same_bytes(got.q, want.q));
      EXPECT_TRUE(same_bytes(got.k, want.k));
      const NeighborhoodAttention3D::Qkv host =
          cpu_attn.project(y, cpu_attn.rope_tables(3, 4, positions(9, -3), Device::cpu()));
      const double tol = dt == DType::F32 ? 1e-4 : 5e-2;  // bf16: the projection rounds too
      EXPECT_LE(test::rel_l2(got.q, host.q), tol);
      EXPECT_LE(test::rel_l2(got.k, host.k), tol);
    }
  }
}

}  // namespace
}  // namespace ltx
