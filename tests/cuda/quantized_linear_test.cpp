// CUDA FP8 quantisation and the FP8 linear (fp8-scaled-mm) against the CPU ops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "nn/linear.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/quantized_linear.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::same_bytes;

Tensor scalar_f32(float v, Device d = Device::cpu()) {
  return Tensor::full({}, static_cast<double>(v), DType::F32, d);
}

// Activations of a wide range with the special values the clamp and cast must handle.
Tensor activations(const Shape& shape, uint64_t seed, DType dt) {
  Tensor x = test::random_tensor(shape, seed, -60.f, 60.f);
  std::vector<float> v = x.to_float_vector();
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.f, -0.f, inf, -inf, std::nanf(""), 1e6f, -1e6f, 1e-7f, 448.f, 480.f};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0] && i * 7 < v.size(); ++i)
    v[i * 7] = specials[i];
  return Tensor::from_vector(v, shape).to(dt);
}

TEST(CudaQuantizeFp8, MatchesCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  // Sizes that are and are not multiples of the kernel's 8-element vectors.
  for (const Shape& shape : {Shape{1}, Shape{7}, Shape{3, 64}, Shape{5, 333}, Shape{2, 77, 512}}) {
    for (const DType dt : {DType::BF16, DType::F32}) {
      const Tensor x = activations(shape, seed++, dt);
      for (const float s : {0.13f, 1.0f, 1.0f / 1.0546875f, 3.7f}) {
        const Tensor want = ops::quantize_fp8(x, scalar_f32(s));
        const Tensor xg = x.to(kGpu), sg = scalar_f32(s, kGpu);
        EXPECT_TRUE(same_bytes(ops::quantize_fp8(xg, sg), want)) << x.describe() << " / " << s;
        // The scalar path (x not 16-byte aligned) and a strided view.
        EXPECT_TRUE(same_bytes(ops::quantize_fp8(test::misaligned_copy(xg), sg), want))
            << "misaligned " << x.describe();
        EXPECT_TRUE(same_bytes(ops::quantize_fp8(test::non_contiguous_copy(xg), sg), want))
            << "strided " << x.describe();
      }
    }
  }
}

TEST(CudaQuantizeFp8PerTensor, MatchesCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  for (const DType dt : {DType::BF16, DType::F32}) {
    const Tensor w = test::random_tensor({96, 80}, 7, -0.2f, 0.3f).to(dt);
    const ops::Fp8PerTensor want = ops::quantize_fp8_per_tensor(w);
    const ops::Fp8PerTensor got = ops::quantize_fp8_per_tensor(w.to(kGpu));
    EXPECT_EQ(got.weight.device(), kGpu);
    EXPECT_EQ(got.weight_scale.device(), kGpu);
    EXPECT_TRUE(same_bytes(got.weight, want.weight)) << dtype_name(dt);
    EXPECT_TRUE(same_bytes(got.weight_scale, want.weight_scale)) << dtype_name(dt);
  }
}

TEST(CudaFuseDeltaFp8PerTensor, MatchesCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(test::random_tensor({64, 48}, 50));
  const Tensor delta = test::random_tensor({64, 48}, 51, -0.1f, 0.1f).to(DType::BF16);
  const ops::Fp8PerTensor want = ops::fuse_delta_fp8_per_tensor(w.weight, w.weight_scale, delta);
  const ops::Fp8PerTensor got = ops::fuse_delta_fp8_per_tensor(
      w.weight.to(kGpu), w.weight_scale.to(kGpu), delta.to(kGpu));
  EXPECT_TRUE(same_bytes(got.weight, want.weight));
  EXPECT_TRUE(same_bytes(got.weight_scale, want.weight_scale));
}

// |q| @ |w|^T * scales: the magnitude the f32 (and fast) accumulation errors scale with.
Tensor abs_product(const Tensor& x, const ops::Fp8PerTensor& w, float input_scale) {
  const int64_t k = w.weight.size(1);
  const Tensor q = ops::abs(ops::quantize_fp8(x, scalar_f32(input_scale)).to(DType::F32));
  const Tensor a = ops::linear(q.reshape({q.numel() / k, k}), ops::abs(w.weight.to(DType::F32)));
  return ops::mul(a, static_cast<double>(input_scale) * w.weight_scale.item());
}

// The bound: the CUDA GEMM sums the same exact e4m3 products in another order, with Hopper's
// fast FP8 accumulation (partial sums kept to about 14 mantissa bits between promotions, as
// torch._scaled_mm(use_fast_accum=True) in the reference), so each output may differ by 2^-8 of
// the products' magnitude sum, plus two bf16 roundings of the result (the bias is added in the
// epilogue before the one rounding, where the CPU rounds, adds and rounds again). Over the whole
// output the error is a random walk: rel L2 below 2e-2.
void expect_close(const Tensor& got, const Tensor& want, const Tensor& abs_sum,
                  const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const std::vector<double> g = got.to_double_vector(), w = want.to_double_vector(),
                            a = abs_sum.to_double_vector();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double bound = std::ldexp(std::fabs(w[i]), -7) + std::ldexp(a[i], -8) + 1e-30;
    if (!(std::fabs(g[i] - w[i]) <= bound) && bad++ < 3)
      ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << w[i]
                    << " (bound " << bound << ")";
  }
  EXPECT_EQ(bad, 0) << what;
  EXPECT_LT(test::rel_l2(got, want), 2e-2) << what;
}

// A file's FP8 weight kept as stored (nn::LoadOptions::keep_fp8_linears): its per-tensor
// dequantisation on the GPU is the CPU's bit for bit, which is the bf16 fold's, and the layer's
// output follows.
TEST(CudaKeptFp8Linear, DequantisesAsTheCpuAndTheFoldAndMultipliesAsItsDenseTwin) {
  LTX_REQUIRE_CUDA();
  for (const Shape& shape : {Shape{300, 200}, Shape{256, 3840}}) {
    nn::Linear cpu;
    cpu.format = nn::LinearFormat::Fp8Cast;
    cpu.weight = test::random_tensor(shape, 31, -3.f, 3.f).to(DType::F8E4M3FN);
    cpu.weight_scale = scalar_f32(0.0123f);
    cpu.bias = test::random_tensor({shape[0]}, 32, -1.f, 1.f).to(DType::BF16);
    nn::Linear gpu = cpu;
    gpu.weight = cpu.weight.to(kGpu);
    gpu.weight_scale = cpu.weight_scale.to(kGpu);
    gpu.bias = cpu.bias.to(kGpu);
    const Tensor fold =
        ops::mul(cpu.weight.to(DType::F32), cpu.weight_scale).to(DType::BF16);  // the reference's
    EXPECT_TRUE(same_bytes(cpu.dense_weight(DType::BF16), fold)) << shape.str();
    EXPECT_TRUE(same_bytes(gpu.dense_weight(DType::BF16), fold)) << shape.str();
    EXPECT_TRUE(same_bytes(gpu.dense_weight(DType::F32),
                           ops::mul(cpu.weight.to(DType::F32), cpu.weight_scale)))
        << shape.str();
    const Tensor x = test::random_tensor({5, shape[1]}, 33, -1.f, 1.f).to(DType::BF16);
    const Tensor dense = ops::linear(x.to(kGpu), fold.to(kGpu), gpu.bias);
    EXPECT_TRUE(same_bytes(gpu(x.to(kGpu)), dense)) << shape.str();
  }
}

TEST(CudaLinearFp8Scaled, MatchesCpuOnTransformerShapes) {
  LTX_REQUIRE_CUDA();
  // The 22B transformer's linears scaled down (hidden 4096 -> 512, FF 16384 -> 2048, audio
  // 2048 -> 256, the cross-modal projections), with odd token counts.
  struct Case {
    Shape x;
    int64_t out;
  };
  const Case cases[] = {{{1, 77, 512}, 512},  {{2, 33, 512}, 2048}, {{301, 2048}, 512},
                        {{1, 256}, 512},      {{5, 256}, 256},      {{129, 512}, 256}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const int64_t k = c.x.back();
    const Tensor w32 = test::random_tensor({c.out, k}, seed++, -0.05f, 0.05f);
    const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(w32);
    const ops::Fp8PerTensor wg{w.weight.to(kGpu), w.weight_scale.to(kGpu)};
    for (const DType dt : {DType::BF16, DType::F32}) {
      // A calibration that clamps the largest activations (|x| up to 4, scale for 3).
      const Tensor x = test::random_tensor(c.x, seed++, -4.f, 4.f).to(dt);
      const float is = 3.f / 448.f;
      const Tensor abs_sum = abs_product(x, w, is);
      for (const bool with_bias : {false, true}) {
        const Tensor bias = with_bias ? test::random_tensor({c.out}, seed++).to(dt) : Tensor();
        const Tensor want = ops::linear_fp8_scaled(x, w.weight, w.weight_scale, scalar_f32(is), bias);
        const Tensor got = ops::linear_fp8_scaled(x.to(kGpu), wg.weight, wg.weight_scale,
                                                  scalar_f32(is, kGpu),
                                                  with_bias ? bias.to(kGpu) : Tensor());
        EXPECT_EQ(got.device(), kGpu);
        expect_close(got, want, abs_sum,
                     x.describe() + " -> " + std::to_string(c.out) + (with_bias ? " +bias" : ""));
      }
    }
  }
}

TEST(CudaLinearFp8Scaled, TakesStridedInputsAndF32BiasWithoutHostCopies) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({3, 21, 128}, 9, -2.f, 2.f).to(DType::BF16);
  const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(test::random_tensor({64, 128}, 10));
  const Tensor bias = test::random_tensor({64}, 11);  // f32 bias on a bf16 layer: rounded first
  const float is = 2.f / 448.f;
  const Tensor want = ops::linear_fp8_scaled(x, w.weight, w.weight_scale, scalar_f32(is), bias);
  const Tensor wg = w.weight.to(kGpu), wsg = w.weight_scale.to(kGpu), isg = scalar_f32(is, kGpu);
  const Tensor xg = test::non_contiguous_copy(x.to(kGpu)), bg = bias.to(kGpu);
  const int64_t copies = device_to_host_copies();
  const Tensor got = ops::linear_fp8_scaled(xg, wg, wsg, isg, bg);
  EXPECT_EQ(device_to_host_copies(), copies) << "the FP8 linear must not read its scales back";
  expect_close(got, want, abs_product(x, w, is), "strided");
  expect_close(ops::linear_fp8_scaled(test::misaligned_copy(x.to(kGpu)), wg, wsg, isg, bg), want,
               abs_product(x, w, is), "misaligned");
}

TEST(CudaQuantizeFp8PerToken, MatchesCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 300;
  // Rows shorter and longer than a block's 256 threads, some all zero or with inf / NaN.
  for (const Shape& shape : {Shape{1, 16}, Shape{7, 100}, Shape{3, 5, 512}, Shape{33, 2048}}) {
    for (const DType dt : {DType::BF16, DType::F32}) {
      Tensor x = activations(shape, seed++, dt);
      if (shape[0] > 1) x.select(0, 1).fill(0.0);
      const ops::Fp8PerToken want = ops::quantize_fp8_per_token(x);
      const ops::Fp8PerToken got = ops::quantize_fp8_per_token(test::non_contiguous_copy(x.to(kGpu)));
      EXPECT_TRUE(same_bytes(got.q, want.q)) << x.describe();
      EXPECT_TRUE(same_bytes(got.row_scale, want.row_scale)) << x.describe();
    }
  }
}

TEST(CudaLinearFp8PerToken, MatchesCpuOnTransformerShapes) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 400;
  const std::pair<Shape, int64_t> cases[] = {{{1, 77, 512}, 512}, {{301, 2048}, 512}, {{5, 256}, 256}};
  for (const auto& [xs, out] : cases) {
    const int64_t k = xs.back();
    const ops::Fp8PerTensor w =
        ops::quantize_fp8_per_tensor(test::random_tensor({out, k}, seed++, -0.05f, 0.05f));
    const Tensor wg = w.weight.to(kGpu), wsg = w.weight_scale.to(kGpu);
    for (const DType dt : {DType::BF16, DType::F32}) {
      const Tensor x = test::random_tensor(xs, seed++, -4.f, 4.f).to(dt);
      const Tensor bias = test::random_tensor({out}, seed++).to(dt);
      // The magnitude sum per output with each row's own scale.
      const ops::Fp8PerToken q = ops::quantize_fp8_per_token(x);
      const Tensor qa = ops::abs(q.q.to(DType::F32)).reshape({q.row_scale.numel(), k});
      Shape rows_shape = q.row_scale.shape();
      rows_shape.push_back(1);
      const Tensor abs_sum = ops::mul(
          ops::mul(ops::linear(qa, ops::abs(w.weight.to(DType::F32))).reshape(
                       [&] { Shape s = xs; s[s.size() - 1] = out; return s; }()),
                   q.row_scale.reshape(rows_shape)),
          w.weight_scale.item());
      for (const bool with_bias : {false, true}) {
        const Tensor want = ops::linear_fp8_per_token(x, w.weight, w.weight_scale,
                                                      with_bias ? bias : Tensor());
        const Tensor got = ops::linear_fp8_per_token(x.to(kGpu), wg, wsg,
                                                     with_bias ? bias.to(kGpu) : Tensor());
        expect_close(got, want, abs_sum,
                     "per-token " + x.describe() + " -> " + std::to_string(out) +
                         (with_bias ? " +bias" : ""));
      }
    }
  }
}

TEST(CudaLinearFp8Scaled, RejectsSizesCublasLtCannotTake) {
  LTX_REQUIRE_CUDA();
  const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(test::random_tensor({16, 40}, 12).to(kGpu));
  const Tensor x = test::random_tensor({4, 40}, 13).to(DType::BF16).to(kGpu);
  const std::string e = test::error_of(
      [&] { (void)ops::linear_fp8_scaled(x, w.weight, w.weight_scale, scalar_f32(1.f, kGpu)); });
  EXPECT_NE(e.find("multiples of 16"), std::string::npos) << e;
  // Tensors on two devices.
  EXPECT_THROW((void)ops::linear_fp8_scaled(x, w.weight, w.weight_scale, scalar_f32(1.f)), Error);
}

}  // namespace
}  // namespace ltx
