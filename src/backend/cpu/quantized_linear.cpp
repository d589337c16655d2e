#include "backend/cpu/quantized_linear.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/linalg.h"
#include "core/dtype_bits.h"
#include "core/parallel.h"

namespace ltx::cpu {

namespace {

constexpr int64_t kGrain = 1 << 14;

// Rounds an f32 value to `dt` (bf16 or f32) and back.
inline float round_to(float v, DType dt) {
  return dt == DType::BF16 ? dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(v)) : v;
}

// Clamp that keeps NaN (torch.clamp propagates it; std::clamp and fmin/fmax would not).
inline float clamp_e4m3(float v) {
  return v < -ops::kE4m3Max ? -ops::kE4m3Max : (v > ops::kE4m3Max ? ops::kE4m3Max : v);
}

inline float load_as_f32(const void* src, DType dt, int64_t i) {
  return dt == DType::BF16 ? dtype_bits::bf16_to_f32(static_cast<const uint16_t*>(src)[i])
                           : static_cast<const float*>(src)[i];
}

// The number of rows of x: all dims but the last, flattened.
int64_t flat_rows(const Tensor& x) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

Shape leading_shape(const Tensor& x) {
  Shape s;
  for (int d = 0; d + 1 < x.dim(); ++d) s.push_back(x.size(d));
  return s;
}

}  // namespace

Tensor quantize_e4m3(const Tensor& x_in, const Tensor& scale, ops::Fp8ScaleUse use) {
  const DType dt = x_in.dtype();
  // The element reads below want f32 or bf16 densely packed.
  const Tensor x = x_in.contiguous();
  const float s = static_cast<float>(scale.item());
  const float m = round_to(use == ops::Fp8ScaleUse::Divide ? 1.0f / s : s, dt);
  Tensor out = Tensor::empty(x.shape(), DType::F8E4M3FN);
  auto* q = static_cast<uint8_t*>(out.raw_data());
  const void* src = x.raw_data();
  parallel_for(0, x.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = dt == DType::BF16
                          ? dtype_bits::bf16_to_f32(static_cast<const uint16_t*>(src)[i])
                          : static_cast<const float*>(src)[i];
      q[i] = dtype_bits::f32_to_f8e4m3fn(clamp_e4m3(round_to(v * m, dt)));
    }
  });
  return out;
}

Tensor linear_fp8_scaled(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                         const Tensor& input_scale, const Tensor& bias) {
  const DType dt = x.dtype();
  const int64_t n = weight.size(0), k = weight.size(1);
  // e4m3 values are exact in f32, so an f32 GEMM of the upcast operands sums the exact products.
  const Tensor q = quantize_e4m3(x, input_scale, ops::Fp8ScaleUse::Divide).to(DType::F32);
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = n;
  const int64_t rows = flat_rows(x);
  const Tensor acc = k > 0 ? linear(q.reshape({rows, k}), weight.to(DType::F32), Tensor())
                           : Tensor::zeros({rows, n});
  const float s = static_cast<float>(input_scale.item()) * static_cast<float>(weight_scale.item());
  Tensor out = Tensor::empty(out_shape, dt);
  const std::vector<float> b =
      bias.defined() ? bias.to_float_vector() : std::vector<float>();
  const float* a = acc.data<float>();
  void* dst = out.raw_data();
  parallel_for(0, acc.numel(), kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      float y = round_to(a[i] * s, dt);
      if (!b.empty()) y = round_to(y + round_to(b[static_cast<size_t>(i % n)], dt), dt);
      if (dt == DType::BF16)
        static_cast<uint16_t*>(dst)[i] = dtype_bits::f32_to_bf16(y);
      else
        static_cast<float*>(dst)[i] = y;
    }
  });
  return out;
}

ops::Fp8PerToken quantize_e4m3_per_row(const Tensor& x_in) {
  const DType dt = x_in.dtype();
  const Tensor x = x_in.contiguous();
  const int64_t k = x.size(-1), rows = flat_rows(x);
  ops::Fp8PerToken out{Tensor::empty(x.shape(), DType::F8E4M3FN),
                       Tensor::empty(leading_shape(x), DType::F32)};
  auto* q = static_cast<uint8_t*>(out.q.raw_data());
  float* scale = out.row_scale.data<float>();
  const void* src = x.raw_data();
  parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(k, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float amax = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const float v = std::fabs(load_as_f32(src, dt, r * k + j));
        if (std::isfinite(v)) amax = std::fmax(amax, v);
      }
      const float m = amax > 0.0f ? ops::kE4m3Max / amax : 1.0f;
      scale[r] = amax > 0.0f ? amax / ops::kE4m3Max : 1.0f;
      for (int64_t j = 0; j < k; ++j)
        q[r * k + j] = dtype_bits::f32_to_f8e4m3fn(clamp_e4m3(load_as_f32(src, dt, r * k + j) * m));
    }
  });
  return out;
}

Tensor linear_fp8_per_token(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias) {
  const DType dt = x.dtype();
  const int64_t n = weight.size(0), k = weight.size(1), rows = flat_rows(x);
  const ops::Fp8PerToken qx = quantize_e4m3_per_row(x);
  const Tensor acc = k > 0 ? linear(qx.q.to(DType::F32).reshape({rows, k}), weight.to(DType::F32), Tensor())
                           : Tensor::zeros({rows, n});
  const float ws = static_cast<float>(weight_scale.item());
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = n;
  Tensor out = Tensor::empty(out_shape, dt);
  const std::vector<float> b = bias.defined() ? bias.to_float_vector() : std::vector<float>();
  const float* a = acc.data<float>();
  const float* s = qx.row_scale.data<float>();
  void* dst = out.raw_data();
  parallel_for(0, acc.numel(), kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      // The GEMM's output (rounded once), then the row's scale and the bias in f32.
      float y = round_to(a[i] * ws, dt) * s[i / n];
      if (!b.empty()) y += b[static_cast<size_t>(i % n)];
      if (dt == DType::BF16)
        static_cast<uint16_t*>(dst)[i] = dtype_bits::f32_to_bf16(y);
      else
        static_cast<float*>(dst)[i] = y;
    }
  });
  return out;
}

}  // namespace ltx::cpu
