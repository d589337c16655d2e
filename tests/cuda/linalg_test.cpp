// cuBLASLt linear in bf16 against a double reference computed on the bf16-rounded inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/linalg.h"
#include "core/tensor.h"
#include "cuda/cuda_test_util.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;

// y[m, n] = sum_k x[m, k] w[n, k] + b[n] in double, on exactly the values the GPU sees; also the
// magnitude sum_k |x w| + |b| that bounds the fp32 accumulation error.
void reference(const Tensor& x2d, const Tensor& w, const Tensor& b, std::vector<double>* y,
               std::vector<double>* mag) {
  const int64_t m = x2d.size(0), k = x2d.size(1), n = w.size(0);
  const auto xv = x2d.to_double_vector(), wv = w.to_double_vector();
  const auto bv = b.defined() ? b.to_double_vector() : std::vector<double>();
  y->assign(static_cast<size_t>(m * n), 0.0);
  mag->assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, a = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double p = xv[static_cast<size_t>(i * k + q)] * wv[static_cast<size_t>(j * k + q)];
        s += p;
        a += std::fabs(p);
      }
      if (b.defined()) {
        s += bv[static_cast<size_t>(j)];
        a += std::fabs(bv[static_cast<size_t>(j)]);
      }
      (*y)[static_cast<size_t>(i * n + j)] = s;
      (*mag)[static_cast<size_t>(i * n + j)] = a;
    }
  }
}

// bf16 output: each element within 1e-2 relative of the reference (bf16 rounding is 2^-9), plus a
// small slack for the fp32 accumulation.
void expect_close(const Tensor& y, const Tensor& x2d, const Tensor& w, const Tensor& b) {
  ASSERT_EQ(y.dtype(), DType::BF16);
  std::vector<double> ref, mag;
  reference(x2d, w, b, &ref, &mag);
  const auto got = y.to_double_vector();
  ASSERT_EQ(got.size(), ref.size());
  int bad = 0;
  for (size_t i = 0; i < ref.size() && bad < 5; ++i) {
    const double tol = 1e-2 * std::fabs(ref[i]) + 1e-5 * mag[i];
    if (!(std::fabs(got[i] - ref[i]) <= tol)) {
      ++bad;
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << ref[i];
    }
  }
}

TEST(CudaLinear, MatchesDoubleReferenceOnOddSizes) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (int64_t m : {1, 7, 129}) {
    for (int64_t k : {64, 96}) {
      for (int64_t n : {8, 200}) {
        const Tensor x = test::random_tensor({m, k}, seed++).to(DType::BF16);
        const Tensor w = test::random_tensor({n, k}, seed++, -0.5f, 0.5f).to(DType::BF16);
        const Tensor b16 = test::random_tensor({n}, seed++).to(DType::BF16);
        const Tensor b32 = test::random_tensor({n}, seed++);
        const Tensor xd = x.to(kGpu), wd = w.to(kGpu);
        for (const Tensor* b : {static_cast<const Tensor*>(nullptr), &b16, &b32}) {
          SCOPED_TRACE("M=" + std::to_string(m) + " K=" + std::to_string(k) + " N=" +
                       std::to_string(n) + " bias=" +
                       (b ? dtype_name(b->dtype()) : std::string("none")));
          const Tensor bias = b ? *b : Tensor();
          const Tensor y = cuda::linear(xd, wd, b ? b->to(kGpu) : Tensor());
          EXPECT_EQ(y.shape(), Shape({m, n}));
          EXPECT_EQ(y.device(), kGpu);
          expect_close(y, x, w, bias);
        }
      }
    }
  }
}

TEST(CudaLinear, AcceptsBatchedStridedAndF32Inputs) {
  LTX_REQUIRE_CUDA();
  const int64_t k = 96, n = 40;
  const Tensor w = test::random_tensor({n, k}, 7, -0.5f, 0.5f).to(DType::BF16);
  const Tensor b = test::random_tensor({n}, 8).to(DType::BF16);
  const Tensor wd = w.to(kGpu), bd = b.to(kGpu);

  // [2, 3, K]: leading dims flatten to M = 6.
  const Tensor x3 = test::random_tensor({2, 3, k}, 9).to(DType::BF16);
  const Tensor y3 = cuda::linear(x3.to(kGpu), wd, bd);
  EXPECT_EQ(y3.shape(), Shape({2, 3, n}));
  expect_close(y3.reshape({6, n}), x3.reshape({6, k}), w, b);

  // Rows with padding (row stride 128 > K): read in place.
  const Tensor wide = test::random_tensor({5, 128}, 10).to(DType::BF16);
  const Tensor xs = wide.to(kGpu).narrow(1, 16, k);
  expect_close(cuda::linear(xs, wd, bd), wide.narrow(1, 16, k).contiguous(), w, b);

  // A transposed input needs a copy; the result is the same.
  const Tensor xt = test::random_tensor({k, 11}, 11).to(DType::BF16);
  expect_close(cuda::linear(xt.to(kGpu).transpose(0, 1), wd, bd),
               xt.transpose(0, 1).contiguous(), w, b);

  // f32 x is rounded to bf16 first: compare with the reference on the rounded values.
  const Tensor xf = test::random_tensor({13, k}, 12);
  expect_close(cuda::linear(xf.to(kGpu), wd, bd), xf.to(DType::BF16), w, b);

  // Non-contiguous weight (a transposed view) is copied.
  const Tensor wt = w.transpose(0, 1).contiguous().to(kGpu).transpose(0, 1);
  expect_close(cuda::linear(x3.to(kGpu).reshape({6, k}), wt, bd), x3.reshape({6, k}), w, b);
}

TEST(CudaLinear, SteadyStateCallsDoNotCudaMalloc) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({64, 256}, 1).to(kGpu, DType::BF16);
  const Tensor w = test::random_tensor({512, 256}, 2).to(kGpu, DType::BF16);
  const Tensor b = test::random_tensor({512}, 3).to(kGpu, DType::BF16);
  (void)cuda::linear(x, w, b);
  const uint64_t mallocs = cuda::allocator_stats(0).num_device_mallocs;
  for (int i = 0; i < 20; ++i) (void)cuda::linear(x, w, b);
  EXPECT_EQ(cuda::allocator_stats(0).num_device_mallocs, mallocs);
}

TEST(CudaLinear, RejectsBadDtypesShapesAndDevices) {
  LTX_REQUIRE_CUDA();
  const Tensor x = Tensor::zeros({3, 8}, DType::BF16, kGpu);
  const Tensor w = Tensor::zeros({4, 8}, DType::BF16, kGpu);
  const Tensor b = Tensor::zeros({4}, DType::BF16, kGpu);
  EXPECT_NO_THROW(cuda::linear(x, w, b));
  EXPECT_THROW(cuda::linear(x, Tensor::zeros({4, 8}, DType::F8E4M3FN, kGpu), b), Error);
  EXPECT_THROW(cuda::linear(x.to(DType::I32), w, b), Error);                   // int input
  EXPECT_THROW(cuda::linear(x, Tensor::zeros({4, 9}, DType::BF16, kGpu), b), Error);  // K
  EXPECT_THROW(cuda::linear(x, w, Tensor::zeros({5}, DType::BF16, kGpu)), Error);     // bias N
  EXPECT_THROW(cuda::linear(x, w, Tensor::zeros({4}, DType::F16, kGpu)), Error);      // bias f16
  EXPECT_THROW(cuda::linear(x, w.reshape({32}), b), Error);                    // 1-d weight
  EXPECT_THROW(cuda::linear(x, w.to(Device::cpu()), b), Error);                // mixed devices
  EXPECT_THROW(cuda::linear(x.to(Device::cpu()), w, b), Error);
  EXPECT_THROW(cuda::linear(Tensor(), w, b), Error);
  try {
    cuda::linear(x, Tensor::zeros({4, 9}, DType::BF16, kGpu), b);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("8 input features"), std::string::npos) << msg;
  }
}

TEST(CudaLinear, F32WeightsGiveAFullPrecisionF32Gemm) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 40;
  for (int64_t m : {1, 33}) {
    for (int64_t k : {7, 200}) {
      const int64_t n = 65;
      const Tensor x = test::random_tensor({m, k}, seed++);
      const Tensor w = test::random_tensor({n, k}, seed++, -0.5f, 0.5f);
      const Tensor b = test::random_tensor({n}, seed++);
      const Tensor y = ops::linear(x.to(kGpu), w.to(kGpu), b.to(kGpu));
      EXPECT_EQ(y.dtype(), DType::F32);
      // No TF32: agrees with the CPU's f32 GEMM to f32 accumulation error, not to 1e-3.
      EXPECT_TRUE(test::near(y, ops::linear(x, w, b), 1e-5, 1e-5)) << m << " " << k;
      // bf16 x with f32 weights computes in f32 too; a bf16 bias is widened.
      const Tensor xb = x.to(DType::BF16);
      EXPECT_TRUE(test::near(ops::linear(xb.to(kGpu), w.to(kGpu), b.to(kGpu, DType::BF16)),
                             ops::linear(xb.to(DType::F32), w, b.to(DType::BF16).to(DType::F32)),
                             1e-5, 1e-5));
    }
  }
}

// The GELU epilogue (bf16 weights, no or a bf16 bias) against the two ops it replaces. The two
// ops round the linear output z to bf16 before the GELU (|dz| <= 2^-9 |z|, and |gelu'| < 1.13) and
// round the result (2^-9 |y|); the epilogue rounds once. Bound per element: 2^-7 (|z| + |y|).
// f32 weights or an f32 bias take the two ops (same bytes).
TEST(CudaLinear, GeluEpilogueMatchesLinearThenGelu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 900;
  for (const int64_t m : {1, 33, 257}) {
    for (const int64_t k : {64, 200}) {
      for (const int64_t n : {8, 136, 1024}) {
        SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
        const Tensor x = test::random_tensor({m, k}, seed++, -2.f, 2.f).to(kGpu, DType::BF16);
        const Tensor w = test::random_tensor({n, k}, seed++, -0.3f, 0.3f).to(kGpu, DType::BF16);
        const Tensor b = test::random_tensor({n}, seed++).to(kGpu, DType::BF16);
        for (const Tensor& bias : {b, Tensor()}) {
          ASSERT_TRUE(cuda::linear_gelu_epilogue_applies(w, bias));
          const Tensor got = ops::linear_gelu_tanh(x, w, bias);
          ASSERT_EQ(got.dtype(), DType::BF16);
          const Tensor z = ops::linear(x, w, bias);
          const Tensor want = ops::gelu_tanh(z);
          const auto g = got.to_double_vector(), y = want.to_double_vector(),
                     zv = z.to_double_vector();
          int bad = 0;
          for (size_t i = 0; i < y.size() && bad < 5; ++i) {
            const double tol = std::ldexp(std::fabs(zv[i]) + std::fabs(y[i]), -7) + 1e-6;
            if (!(std::fabs(g[i] - y[i]) <= tol)) {
              ++bad;
              ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << y[i] << " (z "
                            << zv[i] << ")";
            }
          }
        }
        const Tensor bf = b.to(DType::F32);
        EXPECT_FALSE(cuda::linear_gelu_epilogue_applies(w, bf));
        EXPECT_TRUE(test::same_bytes(ops::linear_gelu_tanh(x, w, bf),
                                     ops::gelu_tanh(ops::linear(x, w, bf))));
        const Tensor wf = w.to(DType::F32);
        EXPECT_FALSE(cuda::linear_gelu_epilogue_applies(wf, Tensor()));
        EXPECT_TRUE(test::same_bytes(ops::linear_gelu_tanh(x, wf), ops::gelu_tanh(ops::linear(x, wf))));
      }
    }
  }
}

TEST(CudaLinear, EmptyProblems) {
  LTX_REQUIRE_CUDA();
  const Tensor w = test::random_tensor({4, 8}, 3).to(kGpu, DType::BF16);
  EXPECT_EQ(cuda::linear(Tensor::zeros({0, 8}, DType::BF16, kGpu), w, Tensor()).shape(),
            Shape({0, 4}));
  // K = 0: the empty sum, so y = bias.
  const Tensor b = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}).to(kGpu, DType::BF16);
  const Tensor y = cuda::linear(Tensor::zeros({2, 0}, DType::BF16, kGpu),
                                Tensor::zeros({3, 0}, DType::BF16, kGpu), b);
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

}  // namespace
}  // namespace ltx
