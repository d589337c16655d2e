#include "backend/cpu/nvfp4.h"

#include <algorithm>
#include <cstdint>

#include "core/dtype_bits.h"
#include "core/parallel.h"

namespace ltx::cpu {

namespace {

// Rows per parallel chunk: about 64k elements each.
int64_t row_grain(int64_t in) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(in, 1)); }

}  // namespace

ops::Nvfp4Weight quantize_nvfp4(const Tensor& weight) {
  const int64_t out = weight.size(0), in = weight.size(1);
  const int64_t blocks = in / ops::kNvfp4BlockSize;
  const Shape scales_shape = ops::nvfp4_block_scales_shape(out, in);
  const int64_t padded_cols = scales_shape[1];
  const float* w = weight.data<float>();

  float amax = 0.0f;
  for (int64_t i = 0; i < weight.numel(); ++i) amax = ops::nvfp4_amax_step(amax, w[i]);
  const float tensor_scale = dtype_bits::mul_rn(amax, ops::kNvfp4InvGlobalRange);

  ops::Nvfp4Weight q{Tensor::empty({out, in / 2}, DType::U8),
                     Tensor::zeros(scales_shape, DType::F8E4M3FN),
                     Tensor::full({}, static_cast<double>(tensor_scale), DType::F32)};
  auto* packed = q.packed.data<uint8_t>();
  auto* scales = static_cast<uint8_t*>(q.block_scales.raw_data());
  // Rows are independent once the per-tensor scale is known.
  parallel_for(0, out, row_grain(in), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t b = 0; b < blocks; ++b) {
        const float* v = w + r * in + b * ops::kNvfp4BlockSize;
        float block_amax = 0.0f;
        for (int64_t i = 0; i < ops::kNvfp4BlockSize; ++i)
          block_amax = ops::nvfp4_amax_step(block_amax, v[i]);
        const uint8_t s = ops::nvfp4_block_scale(block_amax, tensor_scale);
        scales[ops::nvfp4_scale_offset(r, b, padded_cols)] = s;
        const float m = ops::nvfp4_block_multiplier(s, tensor_scale);
        uint8_t* dst = packed + r * (in / 2) + b * (ops::kNvfp4BlockSize / 2);
        for (int64_t j = 0; j < ops::kNvfp4BlockSize / 2; ++j) {
          const uint8_t hi = ops::f32_to_e2m1(dtype_bits::mul_rn(v[2 * j], m));
          const uint8_t lo = ops::f32_to_e2m1(dtype_bits::mul_rn(v[2 * j + 1], m));
          dst[j] = static_cast<uint8_t>((hi << 4) | lo);
        }
      }
    }
  });
  return q;
}

Tensor dequantize_nvfp4(const ops::Nvfp4Weight& w, DType dtype) {
  const Tensor packed = w.packed.contiguous();
  const Tensor scales = w.block_scales.contiguous();
  const int64_t out = packed.size(0), in = packed.size(1) * 2;
  const int64_t padded_cols = scales.size(1);
  const float tensor_scale = static_cast<float>(w.tensor_scale.item());
  const auto* p = packed.data<uint8_t>();
  const auto* s = static_cast<const uint8_t*>(scales.raw_data());
  Tensor dense = Tensor::empty({out, in}, DType::F32);
  float* d = dense.data<float>();
  parallel_for(0, out, row_grain(in), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < in; c += 2) {
        const uint8_t byte = p[r * (in / 2) + c / 2];
        const uint8_t sb = s[ops::nvfp4_scale_offset(r, c / ops::kNvfp4BlockSize, padded_cols)];
        d[r * in + c] = ops::nvfp4_decode(static_cast<uint8_t>(byte >> 4), sb, tensor_scale);
        d[r * in + c + 1] = ops::nvfp4_decode(static_cast<uint8_t>(byte & 15u), sb, tensor_scale);
      }
    }
  });
  return dtype == DType::F32 ? dense : dense.to(dtype);
}

}  // namespace ltx::cpu
