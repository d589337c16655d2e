// Timings of the CUDA ops on the full-size LTX-2.3 shapes (768 x 512, 121 frames: 6144 video
// tokens of width 4096, 32 heads of 128; 126 audio tokens of width 2048, 32 heads of 64). Disabled:
// it prints numbers and asserts nothing; run it on the GPU machine with
//   test_cuda --gtest_also_run_disabled_tests --gtest_filter='CudaTiming.*'
// Baselines for the performance work, not results (bench/RESULTS.md holds those).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/device.h"
#include "cuda/cuda_test_util.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/neighborhood_attention.h"
#include "ops/attention.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/mlp.h"
#include "ops/norm.h"
#include "ops/resample.h"
#include "ops/rope.h"
#include "ops/shape.h"
#include "ops/summed.h"
#include "support/rope3d_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;

// Mean seconds per call over `reps` calls after one warm-up.
double seconds_per_call(const std::function<void()>& fn, int reps) {
  fn();
  cuda::synchronize(0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) fn();
  cuda::synchronize(0);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

Tensor rand_gpu(const Shape& s, uint64_t seed, DType dt) {
  return test::random_tensor(s, seed).to(kGpu, dt);
}

TEST(CudaTiming, DISABLED_PrintsKernelTimesOnFullSizeShapes) {
  LTX_REQUIRE_CUDA();
  for (DType dt : {DType::BF16, DType::F32}) {
    const char* dn = dtype_name(dt);
    // Attention: video self (6144 x 6144, D 128), text cross (6144 x 1024), audio self (126, D 64),
    // and the 1536 x 1024 step's video self / text cross (24576 tokens; bf16 only).
    struct Case {
      const char* name;
      int64_t h, tq, tk, d;
    };
    for (const Case& c :
         {Case{"video self", 32, 6144, 6144, 128}, Case{"video text", 32, 6144, 1024, 128},
          Case{"audio self", 32, 126, 126, 64}, Case{"audio-video", 32, 126, 6144, 64},
          Case{"video-audio", 32, 6144, 126, 64}, Case{"video self 1536", 32, 24576, 24576, 128},
          Case{"video text 1536", 32, 24576, 1024, 128}, Case{"audio-video 1536", 32, 126, 24576, 64},
          Case{"video-audio 1536", 32, 24576, 126, 64}}) {
      if (dt == DType::F32 && c.tq > 6144) continue;  // the f32 kernels take minutes there
      const Tensor q = rand_gpu({1, c.tq, c.h, c.d}, 1, dt).transpose(1, 2);
      const Tensor k = rand_gpu({1, c.tk, c.h, c.d}, 2, dt).transpose(1, 2);
      const Tensor v = rand_gpu({1, c.tk, c.h, c.d}, 3, dt).transpose(1, 2);
      const double flops = 4.0 * c.h * c.tq * c.tk * c.d;
      const float scale = 1.f / std::sqrt(static_cast<float>(c.d));
      // bf16: each fused kernel that applies (wgmma on Hopper with sm_90a code, mma), then Auto.
      std::vector<std::pair<const char*, cuda::AttentionKernel>> kernels;
      if (cuda::wgmma_attention_applies(q, k, v)) kernels.emplace_back("wgmma", cuda::AttentionKernel::Wgmma);
      if (cuda::tensor_core_attention_applies(q, k, v))
        kernels.emplace_back("mma", cuda::AttentionKernel::TensorCore);
      kernels.emplace_back("auto", cuda::AttentionKernel::Auto);
      if (c.tq <= 6144) kernels.emplace_back("simple", cuda::AttentionKernel::Simple);
      for (const auto& [kname, kernel] : kernels) {
        const double s = seconds_per_call(
            [&] { (void)cuda::scaled_dot_product_attention(q, k, v, Tensor(), scale, kernel); }, 3);
        std::printf("[timing %s] attention %-16s %-6s %.3f ms  %.1f TFLOP/s\n", dn, c.name, kname,
                    s * 1e3, flops / s / 1e12);
      }
      // The wgmma kernel with the keys unsplit and split in 2, 4, 8 ranges (Auto's choice noted).
      if (cuda::wgmma_attention_applies(q, k, v) && c.tq < 1024) {
        Tensor out = Tensor::empty({1, c.tq, c.h, c.d}, DType::BF16, kGpu).transpose(1, 2);
        for (int splits : {1, 2, 4, 8}) {
          const double s = seconds_per_call(
              [&] { cuda::wgmma_attention(q, k, v, Tensor(), Tensor(), scale, out, splits); }, 10);
          std::printf("[timing %s] attention %-16s wgmma split %d%s %.3f ms  %.1f TFLOP/s\n", dn,
                      c.name, splits, cuda::wgmma_attention_auto_splits(q, k) == splits ? " (auto)" : "",
                      s * 1e3, flops / s / 1e12);
        }
      }
      // Several query tiles per block over resident keys (Auto's choice noted).
      if (cuda::wgmma_attention_applies(q, k, v) && c.tq >= 1024 && c.tk <= 384) {
        Tensor out = Tensor::empty({1, c.tq, c.h, c.d}, DType::BF16, kGpu).transpose(1, 2);
        for (int per : {1, 2, 4, 8, 12, 16, 48}) {
          const double s = seconds_per_call(
              [&] { cuda::wgmma_attention(q, k, v, Tensor(), Tensor(), scale, out, 1, per); }, 10);
          std::printf("[timing %s] attention %-16s wgmma %d q tiles%s %.3f ms  %.1f TFLOP/s\n", dn,
                      c.name, per, cuda::wgmma_attention_auto_q_tiles(q, k) == per ? " (auto)" : "",
                      s * 1e3, flops / s / 1e12);
        }
      }
    }
    // Memory-bound ops on the video stream [1, 6144, 4096].
    const Tensor x = rand_gpu({1, 6144, 4096}, 4, dt), y = rand_gpu({1, 6144, 4096}, 5, dt);
    const Tensor row = rand_gpu({1, 1, 4096}, 6, dt);
    const double bytes = static_cast<double>(x.nbytes());
    const auto report = [&](const char* name, double s, double passes) {
      std::printf("[timing %s] %-22s %.3f ms  %.0f GB/s\n", dn, name, s * 1e3,
                  passes * bytes / s / 1e9);
    };
    report("add", seconds_per_call([&] { (void)ops::add(x, y); }, 10), 3);
    report("modulate (row)", seconds_per_call([&] { (void)ops::modulate(x, row, row); }, 10), 2);
    report("gelu_tanh", seconds_per_call([&] { (void)ops::gelu_tanh(x); }, 10), 2);
    report("rms_norm", seconds_per_call([&] { (void)ops::rms_norm(x, Tensor(), 1e-6); }, 10), 2);
    report("layer_norm",
           seconds_per_call([&] { (void)ops::layer_norm(x, Tensor(), Tensor(), 1e-6); }, 10), 2);
    // The AdaLN norm: per-sample [1, 1, D] scale/shift, and per-token [1, T, D] ones (two more
    // streams of x's size).
    report("rms_norm_modulate (row)",
           seconds_per_call([&] { (void)ops::rms_norm_modulate(x, row, row, 1e-6); }, 10), 2);
    report("rms_norm_modulate (tok)",
           seconds_per_call([&] { (void)ops::rms_norm_modulate(x, y, y, 1e-6); }, 10), 4);
    // RoPE on q and k ([1, T, H * D] viewed as [1, H, T, D]) with the transformer's
    // [1, H, T, D / 2] tables, in f32 and in the stream's dtype; bytes: x read, output written,
    // both tables read.
    const Tensor xh = x.view({1, 6144, 32, 128}).transpose(1, 2);
    const Tensor kh = y.view({1, 6144, 32, 128}).transpose(1, 2);
    for (DType tdt : {DType::F32, dt}) {
      const Tensor c = rand_gpu({1, 32, 6144, 64}, 7, tdt);
      const Tensor sn = rand_gpu({1, 32, 6144, 64}, 8, tdt);
      const double passes = 2.0 + 2.0 * static_cast<double>(c.nbytes()) / bytes;
      for (const auto& qk : {std::pair{"q", &xh}, std::pair{"k", &kh}}) {
        const Tensor& xr = *qk.second;
        const std::string label =
            std::string("rope split (") + qk.first + ", " + dtype_name(tdt) + " tab)";
        report(label.c_str(),
               seconds_per_call(
                   [&] { (void)ops::apply_rope(xr, c, sn, ops::RopeLayout::Split); }, 10),
               passes);
      }
      if (tdt == dt) break;  // f32 streams: the f32 tables once
    }
    // A GEMM of the FFN: [6144, 4096] @ [16384, 4096]^T.
    const Tensor w = rand_gpu({16384, 4096}, 9, dt);
    const double sg = seconds_per_call([&] { (void)ops::linear(x, w); }, 3);
    std::printf("[timing %s] linear 6144x4096x16384 %.3f ms  %.1f TFLOP/s\n", dn, sg * 1e3,
                2.0 * 6144 * 4096 * 16384 / sg / 1e12);
  }
}

// The transformer block's fused glue against the unfused ops it replaces, bf16 video stream
// [1, 6144, 4096]:
// - the AdaLN values as ops::Summed (table row + per-token slice of [1, T, 9, D]) in
//   rms_norm_modulate / gated_add;
// - the q RMSNorm + split RoPE (32 heads of 128);
// - the per-head gate (logits [1, T, 32, 1]).
TEST(CudaTiming, DISABLED_PrintsFusedGlueTimes) {
  LTX_REQUIRE_CUDA();
  const DType dt = DType::BF16;
  const int64_t t = 6144, d = 4096, heads = 32;
  const Tensor x = rand_gpu({1, t, d}, 20, dt), y = rand_gpu({1, t, d}, 21, dt);
  const Tensor table = rand_gpu({9, d}, 22, dt), ts = rand_gpu({1, t, 9 * d}, 23, dt);
  const auto value = [&](int64_t r) {
    return ops::Summed(table.select(0, r), ts.view({1, t, 9, d}).select(2, r));
  };
  const ops::Summed scale = value(1), shift = value(0), gate = value(2);
  const auto report = [](const char* name, double s) {
    std::printf("[timing bf16] %-34s %.3f ms\n", name, s * 1e3);
  };
  report("add x2 + rms_norm_modulate", seconds_per_call([&] {
           (void)ops::rms_norm_modulate(x, scale.value(), shift.value(), 1e-6);
         }, 10));
  report("rms_norm_modulate (summed)",
         seconds_per_call([&] { (void)ops::rms_norm_modulate(x, scale, shift, 1e-6); }, 10));
  report("add + gated_add",
         seconds_per_call([&] { (void)ops::gated_add(x, y, gate.value()); }, 10));
  report("gated_add (summed)", seconds_per_call([&] { (void)ops::gated_add(x, y, gate); }, 10));
  report("gated_add + rms_norm_modulate", seconds_per_call([&] {
           (void)ops::rms_norm_modulate(ops::gated_add(x, y, gate), scale, shift, 1e-6);
         }, 10));
  report("gated_add_rms_norm_modulate", seconds_per_call([&] {
           (void)ops::gated_add_rms_norm_modulate(x, y, gate, scale, shift, 1e-6);
         }, 10));
  // Per-sample timesteps (pipelines::TimestepForm): the AdaLN rows broadcast over the tokens.
  const Tensor ts1 = rand_gpu({1, 1, 9 * d}, 28, dt);
  const auto value1 = [&](int64_t r) {
    return ops::Summed(table.select(0, r), ts1.view({1, 1, 9, d}).select(2, r));
  };
  const ops::Summed scale1 = value1(1), shift1 = value1(0), gate1 = value1(2);
  report("rms_norm_modulate (per-sample ts)",
         seconds_per_call([&] { (void)ops::rms_norm_modulate(x, scale1, shift1, 1e-6); }, 20));
  report("gated_add (per-sample ts)", seconds_per_call([&] { (void)ops::gated_add(x, y, gate1); }, 20));
  report("gated_add_rms_norm_mod (per-sample)", seconds_per_call([&] {
           (void)ops::gated_add_rms_norm_modulate(x, y, gate1, scale1, shift1, 1e-6);
         }, 20));
  // The text attention's residual and the two cross-modal AdaLN inputs of it (rows 3 / 4 as the
  // second scale / shift here): as three ops and in one pass.
  const ops::Summed scale1b = value1(3), shift1b = value1(4);
  report("gated_add + 2 x rms_norm_modulate", seconds_per_call([&] {
           const Tensor xn = ops::gated_add(x, y, gate1);
           (void)ops::rms_norm_modulate(xn, scale1, shift1, 1e-6);
           (void)ops::rms_norm_modulate(xn, scale1b, shift1b, 1e-6);
         }, 20));
  report("gated_add_rms_norm_modulate2", seconds_per_call([&] {
           (void)ops::gated_add_rms_norm_modulate2(x, y, gate1, scale1, shift1, scale1b, shift1b, 1e-6);
         }, 20));
  report("rms_norm (no weight)", seconds_per_call([&] { (void)ops::rms_norm(x, Tensor(), 1e-6); }, 20));
  const Tensor w = rand_gpu({d}, 24, dt);
  const Tensor c = rand_gpu({1, heads, t, d / heads / 2}, 25, dt);
  const Tensor sn = rand_gpu({1, heads, t, d / heads / 2}, 26, dt);
  report("rms_norm + apply_rope (split)", seconds_per_call([&] {
           (void)ops::rms_norm_rope_unfused(x, w, 1e-6, c, sn, ops::RopeLayout::Split, heads);
         }, 10));
  report("rms_norm_rope (split)", seconds_per_call([&] {
           (void)ops::rms_norm_rope(x, w, 1e-6, c, sn, ops::RopeLayout::Split, heads);
         }, 20));
  const Tensor xk = rand_gpu({1, t, d}, 33, dt), wk = rand_gpu({d}, 34, dt);
  report("2 x rms_norm_rope (q, k)", seconds_per_call([&] {
           (void)ops::rms_norm_rope(x, w, 1e-6, c, sn, ops::RopeLayout::Split, heads);
           (void)ops::rms_norm_rope(xk, wk, 1e-6, c, sn, ops::RopeLayout::Split, heads);
         }, 20));
  report("qk_rms_norm_rope (q, k; one table read)", seconds_per_call([&] {
           (void)ops::qk_rms_norm_rope(x, xk, w, wk, 1e-6, c, sn, ops::RopeLayout::Split, heads);
         }, 20));
  const Tensor x2 = rand_gpu({1, t, d / 2}, 29, dt), w2 = rand_gpu({d / 2}, 30, dt);
  const Tensor c2 = rand_gpu({1, heads, t, d / heads / 4}, 31, dt), s2 = rand_gpu({1, heads, t, d / heads / 4}, 32, dt);
  report("rms_norm_rope (split, 2048 wide)", seconds_per_call([&] {
           (void)ops::rms_norm_rope(x2, w2, 1e-6, c2, s2, ops::RopeLayout::Split, heads);
         }, 20));
  const Tensor out = x.view({1, t, heads, d / heads});
  const Tensor logits = rand_gpu({1, t, heads, 1}, 27, dt);
  report("sigmoid + mul + mul (gate)", seconds_per_call([&] {
           (void)ops::mul(out, ops::mul(ops::sigmoid(logits), 2.0));
         }, 10));
  report("mul_2sigmoid (gate)",
         seconds_per_call([&] { (void)ops::mul_2sigmoid(out, logits); }, 10));
}

// The LTX-2.5 diffusion decoder's neighborhood attention at 1536 x 1024 x 121: stage 5 (one of the
// four W-chunks of the pipelines' default mode: 121 x 256 x (96 + 10) tokens, 4 heads of 64,
// 11^3 window) and stage 4 (69 x 128 x 192, 8 heads, 3 x 5 x 5). FLOPs count the window keys
// only (4 * tokens * heads * window * D).
TEST(CudaTiming, DISABLED_PrintsNeighborhoodAttentionTimes) {
  LTX_REQUIRE_CUDA();
  struct Case {
    const char* name;
    Shape grid;  // T, H, W, heads
    std::array<int64_t, 3> kernel;
  };
  for (const Case& c : {Case{"stage5 chunk", {121, 256, 106, 4}, {11, 11, 11}},
                        Case{"stage4", {69, 128, 192, 8}, {3, 5, 5}},
                        Case{"stage2", {18, 64, 96, 16}, {3, 7, 7}}}) {
    const Shape s{1, c.grid[0], c.grid[1], c.grid[2], c.grid[3], 64};
    const Tensor q = rand_gpu(s, 1, DType::BF16), k = rand_gpu(s, 2, DType::BF16),
                 v = rand_gpu(s, 3, DType::BF16);
    const double flops = 4.0 * static_cast<double>(q.numel()) * c.kernel[0] * c.kernel[1] *
                         c.kernel[2];
    const double tc = seconds_per_call(
        [&] {
          (void)cuda::neighborhood_attention_3d(q, k, v, c.kernel, 0.125f,
                                                cuda::NeighborhoodKernel::TensorCore);
        },
        3);
    std::printf("[timing bf16] neighborhood %-13s tensor-core %.3f ms  %.1f TFLOP/s (window)\n",
                c.name, tc * 1e3, flops / tc / 1e12);
    if (cuda::wgmma_neighborhood_attention_applies(q, k, v, c.kernel)) {
      const double wg = seconds_per_call(
          [&] {
            (void)cuda::neighborhood_attention_3d(q, k, v, c.kernel, 0.125f,
                                                  cuda::NeighborhoodKernel::Wgmma);
          },
          3);
      std::printf("[timing bf16] neighborhood %-13s wgmma %.3f ms  %.1f TFLOP/s (window)\n", c.name,
                  wg * 1e3, flops / wg / 1e12);
    }
    if (c.kernel[0] == 11) continue;  // the CUDA-core kernel takes minutes there
    const double sec = seconds_per_call(
        [&] {
          (void)cuda::neighborhood_attention_3d(q, k, v, c.kernel, 0.125f,
                                                cuda::NeighborhoodKernel::Simple);
        },
        1);
    std::printf("[timing bf16] neighborhood %-13s simple %.3f ms  %.1f TFLOP/s (window)\n", c.name,
                sec * 1e3, flops / sec / 1e12);
  }
}

// The decoder attention's q / k preparation on the same shapes (head dim 64, split 16/24/24): the
// q / k RMS norms, q's scale and the 3-D RoPE as ops::qk_norm_rope_3d (one launch for q and k)
// and as the unfused ops, q and k narrowed from one fused qkv projection (bf16). GB/s counts q and
// k read and written once.
TEST(CudaTiming, DISABLED_PrintsQkNormRopeTimes) {
  LTX_REQUIRE_CUDA();
  struct Case {
    const char* name;
    Shape grid;  // T, H, W, heads
  };
  for (const Case& c : {Case{"stage5 chunk", {121, 256, 106, 4}}, Case{"stage4", {69, 128, 192, 8}}}) {
    const Shape s{1, c.grid[0], c.grid[1], c.grid[2], c.grid[3], 64};
    const auto qkv = test::fused_qkv_heads(s, 1, DType::BF16, kGpu);
    const Tensor qw = rand_gpu({64}, 2, DType::BF16), kw = rand_gpu({64}, 3, DType::BF16);
    const ops::Rope3dTables rope = test::rope3d_tables({16, 24, 24}, s[1], s[2], s[3], -5, kGpu);
    const double bytes = 4.0 * static_cast<double>(qkv[0].numel()) * 2;
    const double fused = seconds_per_call(
        [&] { (void)ops::qk_norm_rope_3d(qkv[0], qkv[1], qw, kw, 1e-6, 0.125, rope); }, 5);
    const double unfused = seconds_per_call(
        [&] { (void)ops::qk_norm_rope_3d_unfused(qkv[0], qkv[1], qw, kw, 1e-6, 0.125, rope); }, 2);
    std::printf("[timing bf16] qk_norm_rope_3d %-13s fused %.3f ms (%.0f GB/s)  unfused %.3f ms\n",
                c.name, fused * 1e3, bytes / fused / 1e9, unfused * 1e3);
  }
}

// The diffusion decoder's stage-5 SwiGLU MLP on one chunk of 262144 rows (C 256, hidden 1024):
// residual += w_down(silu(gate) * up), fused (one kernel, no hidden activations in memory) and
// unfused (GEMM to [n, 2048] bf16, silu_mul, GEMM, add_). FLOPs: 6 n C H.
TEST(CudaTiming, DISABLED_PrintsSwigluMlpTimes) {
  LTX_REQUIRE_CUDA();
  const int64_t n = 262144, c = 256, h = 1024;
  const Tensor y = rand_gpu({n, c}, 1, DType::BF16), residual = rand_gpu({n, c}, 2, DType::BF16);
  const Tensor gate_up = test::random_tensor({2 * h, c}, 3, -0.1f, 0.1f).to(kGpu, DType::BF16);
  const Tensor down = test::random_tensor({c, h}, 4, -0.05f, 0.05f).to(kGpu, DType::BF16);
  const double flops = 6.0 * static_cast<double>(n) * c * h;
  const double unfused =
      seconds_per_call([&] { ops::swiglu_add_unfused(residual, y, gate_up, down); }, 5);
  std::printf("[timing bf16] swiglu mlp 262144x256x1024 unfused %.3f ms  %.1f TFLOP/s\n",
              unfused * 1e3, flops / unfused / 1e12);
  if (ops::swiglu_add_fuses(residual, y, gate_up, down)) {
    const double fused = seconds_per_call([&] { ops::swiglu_add_(residual, y, gate_up, down); }, 5);
    std::printf("[timing bf16] swiglu mlp 262144x256x1024 fused %.3f ms  %.1f TFLOP/s\n",
                fused * 1e3, flops / fused / 1e12);
  }
}

// One CausalConv3d of the conv video decoder's 512-channel stage on a tile's shape
// (1 x 512 x 31 x 128 x 192, 3x3x3, non-causal): the old replicate pad + conv on contiguous
// activations, the same on channels-last ones, and the folded conv3d_replicate_time (channels-last).
// FLOPs: 2 N O C 27 T H W.
TEST(CudaTiming, DISABLED_PrintsVaeConvTimes) {
  LTX_REQUIRE_CUDA();
  const int64_t c = 512, t = 31, h = 128, w = 192;
  const Tensor x = rand_gpu({1, c, t, h, w}, 1, DType::BF16);
  const Tensor xl = x.to_channels_last();
  const Tensor wt = test::random_tensor({c, c, 3, 3, 3}, 2, -0.02f, 0.02f).to(kGpu, DType::BF16);
  const Tensor wl = wt.to_channels_last();
  const Tensor b = rand_gpu({c}, 3, DType::BF16);
  const double flops = 2.0 * c * c * 27.0 * static_cast<double>(t * h * w);
  const auto composed = [&](const Tensor& in, const Tensor& weight) {
    return ops::conv3d(ops::pad(in, {0, 0, 0, 0, 1, 1}, ops::PadMode::Replicate), weight, b,
                       {1, 1, 1}, {0, 1, 1});
  };
  const double plain = seconds_per_call([&] { composed(x, wt); }, 3);
  const double last = seconds_per_call([&] { composed(xl, wl); }, 3);
  const double fold = seconds_per_call(
      [&] { ops::conv3d_replicate_time(xl, wl, b, {1, 1, 1}, {1, 1}, 1, 1); }, 3);
  for (const auto& [name, sec] : {std::pair<const char*, double>{"pad + conv, contiguous", plain},
                                  {"pad + conv, channels-last", last},
                                  {"conv3d_replicate_time, channels-last", fold}})
    std::printf("[timing bf16] vae conv 512x31x128x192 %s %.3f ms  %.1f TFLOP/s\n", name,
                sec * 1e3, flops / sec / 1e12);
}

// The conv video decoder's glue on its three largest tile activations (channels-last bf16, as the
// 1536 x 1024 x 121 decode runs them): PixelNorm + SiLU, the plain PixelNorm, SiLU alone, a copy
// of the same bytes (the bandwidth reference) and the depth-to-space of an upsample conv's output
// with the sub-positions inside / outside the channels. GB/s count one read and one write.
TEST(CudaTiming, DISABLED_PrintsVaeGlueTimes) {
  LTX_REQUIRE_CUDA();
  struct Case {
    int64_t c, t, h, w;
  };
  for (const Case& k : {Case{512, 37, 64, 96}, Case{256, 73, 64, 96}, Case{128, 73, 128, 192}}) {
    const Tensor x = rand_gpu({1, k.c, k.t, k.h, k.w}, 5, DType::BF16).to_channels_last();
    const auto report = [&](const char* name, const Tensor& t, double sec) {
      const double bytes = 2.0 * 2.0 * static_cast<double>(t.numel());
      std::printf("[timing bf16] vae glue %lldx%lldx%lldx%lld %-28s %.3f ms  %.0f GB/s\n",
                  static_cast<long long>(k.c), static_cast<long long>(k.t),
                  static_cast<long long>(k.h), static_cast<long long>(k.w), name, sec * 1e3,
                  bytes / sec / 1e9);
    };
    report("rms_norm_dim_silu", x,
           seconds_per_call([&] { ops::rms_norm_dim_silu(x, 1, 1e-8); }, 5));
    const Tensor bias = rand_gpu({k.c}, 7, DType::BF16);
    report("rms_norm_dim_silu + bias", x,
           seconds_per_call([&] { ops::rms_norm_dim_silu(x, 1, 1e-8, bias); }, 5));
    // The ResNet block's skip (bias + residual into conv2's output), then the next block's
    // PixelNorm + SiLU: as two ops, and in one pass (the GB/s column counts one read and one
    // write of x for both).
    const Tensor res = rand_gpu({1, k.c, k.t, k.h, k.w}, 8, DType::BF16).to_channels_last();
    const Tensor xs = x.clone().to_channels_last();  // updated in place: a copy of x
    report("add_then_add_ + norm + silu", x, seconds_per_call([&] {
             ops::add_then_add_(xs, bias.view({1, k.c, 1, 1, 1}), res);
             ops::rms_norm_dim_silu(xs, 1, 1e-8);
           }, 5));
    report("skip + norm + silu, one pass", x, seconds_per_call([&] {
             ops::add_then_add_rms_norm_dim_silu_(xs, bias, res, 1, 1e-8);
           }, 5));
    report("rms_norm_dim", x, seconds_per_call([&] { ops::rms_norm_dim(x, 1, 1e-8); }, 5));
    report("silu", x, seconds_per_call([&] { ops::silu(x); }, 5));
    const Tensor y = Tensor::empty_in_order(x.shape(), Tensor::channels_last_order(5), x.dtype(),
                                            x.device());
    report("copy", x, seconds_per_call([&] { y.copy_from(x); }, 5));
    // An upsample conv's output (8 sub-positions times c channels at half the size in each
    // axis): the result has x's volume at c channels.
    const Tensor d =
        rand_gpu({1, 8 * k.c, k.t / 2, k.h / 2, k.w / 2}, 6, DType::BF16).to_channels_last();
    for (const auto sub : {ops::Subpositions::Inner, ops::Subpositions::Outer})
      report(sub == ops::Subpositions::Inner ? "depth_to_space (c p1 p2 p3)"
                                             : "depth_to_space (p1 p2 p3 c)",
             d, seconds_per_call([&] { ops::depth_to_space(d, {2, 2, 2}, {0, 1, 2}, sub); }, 5));
  }
}

}  // namespace
}  // namespace ltx
