#include "backend/cpu/blockwise_fp8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/linalg.h"
#include "core/dtype_bits.h"
#include "core/parallel.h"

namespace ltx::cpu {

namespace {

using ops::fp8_blocks;
using ops::kE4m3Max;
using ops::kFp8Block;

inline float load_f32(const void* src, DType dt, int64_t i) {
  return dt == DType::BF16 ? dtype_bits::bf16_to_f32(static_cast<const uint16_t*>(src)[i])
                           : static_cast<const float*>(src)[i];
}

inline void store(void* dst, DType dt, int64_t i, float v) {
  if (dt == DType::BF16)
    static_cast<uint16_t*>(dst)[i] = dtype_bits::f32_to_bf16(v);
  else
    static_cast<float*>(dst)[i] = v;
}

// Saturating cast (Triton's float8e4nv conversion): +-inf and |v| > 448 become +-448, NaN stays.
inline uint8_t e4m3_saturated(float v) {
  const float c = v < -kE4m3Max ? -kE4m3Max : (v > kE4m3Max ? kE4m3Max : v);
  return dtype_bits::f32_to_f8e4m3fn(c);
}

int64_t rows_of(const Tensor& x) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

}  // namespace

Tensor tile_amax(const Tensor& w) {
  const int64_t n = w.size(0), k = w.size(1), nb = fp8_blocks(n), kb = fp8_blocks(k);
  Tensor out = Tensor::empty({nb, kb}, DType::F32);
  const float* src = w.data<float>();
  float* a = out.data<float>();
  parallel_for(0, nb * kb, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t r0 = (t / kb) * kFp8Block, c0 = (t % kb) * kFp8Block;
      const int64_t r1 = std::min(n, r0 + kFp8Block), c1 = std::min(k, c0 + kFp8Block);
      float m = 0.0f;
      bool finite = true;
      for (int64_t r = r0; r < r1 && finite; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const float v = std::fabs(src[r * k + c]);
          finite = finite && std::isfinite(v);
          m = std::fmax(m, v);
        }
      a[t] = finite ? m : NAN;
    }
  });
  return out;
}

ops::Fp8Blockwise quantize_e4m3_tiles(const Tensor& w, const Tensor& amax) {
  const int64_t n = w.size(0), k = w.size(1), kb = fp8_blocks(k);
  ops::Fp8Blockwise out{Tensor::empty({n, k}, DType::F8E4M3FN),
                        Tensor::empty(amax.shape(), DType::F32)};
  const float* a = amax.data<float>();
  float* scale = out.weight_scale.data<float>();
  std::vector<float> mult(static_cast<size_t>(amax.numel()));
  for (int64_t t = 0; t < amax.numel(); ++t) {
    mult[static_cast<size_t>(t)] = kE4m3Max / a[t];
    scale[t] = 1.0f / mult[static_cast<size_t>(t)];
  }
  const float* src = w.data<float>();
  auto* q = static_cast<uint8_t*>(out.weight.raw_data());
  parallel_for(0, n, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(k, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t r = lo; r < hi; ++r) {
                   const float* m = mult.data() + (r / kFp8Block) * kb;
                   for (int64_t c = 0; c < k; ++c)
                     q[r * k + c] = dtype_bits::f32_to_f8e4m3fn(src[r * k + c] * m[c / kFp8Block]);
                 }
               });
  return out;
}

Tensor dequantize_e4m3_tiles(const Tensor& weight, const Tensor& scale, DType dtype) {
  const int64_t n = weight.size(0), k = weight.size(1), kb = fp8_blocks(k);
  Tensor out = Tensor::empty({n, k}, dtype);
  const auto* q = static_cast<const uint8_t*>(weight.raw_data());
  const float* s = scale.data<float>();
  void* dst = out.raw_data();
  parallel_for(0, n, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(k, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t r = lo; r < hi; ++r)
                   for (int64_t c = 0; c < k; ++c)
                     store(dst, dtype, r * k + c,
                           dtype_bits::f8e4m3fn_to_f32(q[r * k + c]) *
                               s[(r / kFp8Block) * kb + c / kFp8Block]);
               });
  return out;
}

ops::Fp8PerGroup quantize_e4m3_groups(const Tensor& x_in) {
  const DType dt = x_in.dtype();
  const Tensor x = x_in.contiguous();
  const int64_t k = x.size(-1), rows = rows_of(x), kb = fp8_blocks(k);
  ops::Fp8PerGroup out{Tensor::empty(x.shape(), DType::F8E4M3FN),
                       Tensor::empty({rows, kb}, DType::F32)};
  auto* q = static_cast<uint8_t*>(out.q.raw_data());
  float* scale = out.group_scale.data<float>();
  const void* src = x.raw_data();
  parallel_for(0, rows * kb, std::max<int64_t>(1, (1 << 14) / kFp8Block), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t r = t / kb, c0 = (t % kb) * kFp8Block, c1 = std::min(k, c0 + kFp8Block);
      float amax = 0.0f;
      for (int64_t c = c0; c < c1; ++c) {
        const float v = std::fabs(load_f32(src, dt, r * k + c));
        if (std::isfinite(v)) amax = std::fmax(amax, v);
      }
      const float m = amax > 0.0f ? kE4m3Max / amax : 1.0f;
      scale[t] = 1.0f / m;
      for (int64_t c = c0; c < c1; ++c) q[r * k + c] = e4m3_saturated(load_f32(src, dt, r * k + c) * m);
    }
  });
  return out;
}

Tensor linear_fp8_blockwise(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias) {
  const DType dt = x.dtype();
  const int64_t n = weight.size(0), k = weight.size(1), rows = rows_of(x), kb = fp8_blocks(k);
  const ops::Fp8PerGroup qx = quantize_e4m3_groups(x);
  const Tensor xq = qx.q.to(DType::F32).reshape({rows, k});
  const Tensor wq = weight.to(DType::F32);
  const float* sx = qx.group_scale.data<float>();
  const float* sw = weight_scale.data<float>();
  std::vector<float> acc(static_cast<size_t>(rows * n), 0.0f);
  for (int64_t g = 0; g < kb; ++g) {
    const int64_t c0 = g * kFp8Block, len = std::min(kFp8Block, k - c0);
    // P_g: the group's e4m3 products (exact in f32) summed in f32.
    const Tensor part = linear(xq.narrow(1, c0, len).contiguous(),
                               wq.narrow(1, c0, len).contiguous(), Tensor());
    const float* p = part.data<float>();
    parallel_for(0, rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(n, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t r = lo; r < hi; ++r)
                     for (int64_t o = 0; o < n; ++o) {
                       const float s = sx[r * kb + g] * sw[(o / kFp8Block) * kb + g];
                       acc[static_cast<size_t>(r * n + o)] += s * p[r * n + o];
                     }
                 });
  }
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = n;
  Tensor out = Tensor::empty(out_shape, dt);
  const std::vector<float> b = bias.defined() ? bias.to_float_vector() : std::vector<float>();
  void* dst = out.raw_data();
  for (int64_t i = 0; i < rows * n; ++i) {
    float y = acc[static_cast<size_t>(i)];
    if (!b.empty()) y += b[static_cast<size_t>(i % n)];
    store(dst, dt, i, y);
  }
  return out;
}

}  // namespace ltx::cpu
