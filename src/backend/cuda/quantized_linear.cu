// The activation quantisation kernel and the FP8 linear (quantized_linear.h).
#include "backend/cuda/quantized_linear.h"

#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/linalg.h"
#include "backend/cuda/stream.h"
#include "core/dtype_bits.h"

namespace ltx::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;  // elements per vector step: 16 bytes of bf16 in, 8 bytes of e4m3 out

__device__ __forceinline__ float round_to_bf16(float v) {
  return dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(v));
}

// The CPU's rule, element by element: product rounded to x's dtype, NaN-keeping clamp, RNE cast.
template <bool kBf16>
__device__ __forceinline__ uint8_t quantize_one(float v, float m) {
  float p = dtype_bits::mul_rn(v, m);
  if constexpr (kBf16) p = round_to_bf16(p);
  p = p < -ops::kE4m3Max ? -ops::kE4m3Max : (p > ops::kE4m3Max ? ops::kE4m3Max : p);
  return dtype_bits::f32_to_f8e4m3fn(p);
}

template <bool kBf16>
__device__ __forceinline__ float load_one(const void* x, int64_t i) {
  if constexpr (kBf16)
    return dtype_bits::bf16_to_f32(static_cast<const uint16_t*>(x)[i]);
  else
    return static_cast<const float*>(x)[i];
}

// Grid-stride over groups of kVec elements with 16-byte loads and one 8-byte store per group
// (when `vec`: x 16-byte aligned), then the tail element by element. The multiplier is read
// from the device, so the launch needs no host copy of the scale.
template <bool kBf16>
__global__ void __launch_bounds__(kThreads)
    quantize_e4m3_kernel(const void* __restrict__ x, uint8_t* __restrict__ q, int64_t n,
                         const float* __restrict__ scale, bool divide, bool vec) {
  const float s = *scale;
  float m = divide ? __fdiv_rn(1.0f, s) : s;
  if constexpr (kBf16) m = round_to_bf16(m);
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = vec ? n / kVec : 0;
  for (int64_t g = tid; g < groups; g += step) {
    float v[kVec];
    if constexpr (kBf16) {
      const uint4 raw = reinterpret_cast<const uint4*>(x)[g];
      const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[2 * j] = dtype_bits::bf16_to_f32(static_cast<uint16_t>(w[j] & 0xFFFFu));
        v[2 * j + 1] = dtype_bits::bf16_to_f32(static_cast<uint16_t>(w[j] >> 16));
      }
    } else {
      const float4 a = reinterpret_cast<const float4*>(x)[2 * g];
      const float4 b = reinterpret_cast<const float4*>(x)[2 * g + 1];
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
      v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      lo |= static_cast<uint32_t>(quantize_one<kBf16>(v[j], m)) << (8 * j);
      hi |= static_cast<uint32_t>(quantize_one<kBf16>(v[4 + j], m)) << (8 * j);
    }
    reinterpret_cast<uint2*>(q)[g] = make_uint2(lo, hi);
  }
  for (int64_t i = groups * kVec + tid; i < n; i += step) q[i] = quantize_one<kBf16>(load_one<kBf16>(x, i), m);
}

}  // namespace

Tensor quantize_e4m3(const Tensor& x_in, const Tensor& scale, ops::Fp8ScaleUse use) {
  const Device dev = x_in.device();
  DeviceGuard guard(dev.index);
  const Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::F8E4M3FN, dev);
  const int64_t n = x.numel();
  if (n == 0) return out;
  const bool bf16 = x.dtype() == DType::BF16;
  // The output is a fresh allocation (aligned); x may be a view at any offset.
  const bool vec = reinterpret_cast<uintptr_t>(x.raw_data()) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(out.raw_data()) % 8 == 0;
  const int64_t work = vec ? n / kVec + n % kVec : n;
  const unsigned grid = grid_for(work, kThreads, dev.index);
  const cudaStream_t stream = current_stream(dev.index).handle();
  const auto* s = static_cast<const float*>(scale.raw_data());
  auto* q = static_cast<uint8_t*>(out.raw_data());
  const bool divide = use == ops::Fp8ScaleUse::Divide;
  if (bf16)
    quantize_e4m3_kernel<true><<<grid, kThreads, 0, stream>>>(x.raw_data(), q, n, s, divide, vec);
  else
    quantize_e4m3_kernel<false><<<grid, kThreads, 0, stream>>>(x.raw_data(), q, n, s, divide, vec);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

Tensor linear_fp8_scaled(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                         const Tensor& input_scale, const Tensor& bias) {
  const int64_t n = weight.size(0), k = weight.size(1);
  LTX_CHECK(k % 16 == 0 && n % 16 == 0, "linear_fp8_scaled: cuBLASLt's FP8 GEMM needs in and out "
            "features that are multiples of 16, got weight ", weight.describe(),
            "; keep this layer in bf16 (--quantization fp8-cast)");
  DeviceGuard guard(x.device().index);
  const Tensor q = quantize_e4m3(x, input_scale, ops::Fp8ScaleUse::Divide);
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = n;
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  const DType dt = x.dtype();
  // A bf16 output takes a bf16 bias in the epilogue (added to the scaled f32 result, one
  // rounding); an f32 output takes the bias afterwards, an f32 add like the reference's.
  const Tensor epilogue_bias = dt == DType::BF16 && bias.defined() ? bias.to(DType::BF16) : Tensor();
  Tensor out = linear_fp8(q.view({rows, k}), weight.contiguous(), input_scale, weight_scale,
                          epilogue_bias, dt);
  if (dt == DType::F32 && bias.defined())
    binary_inplace(ops::BinaryOp::Add, out, bias.to(DType::F32).expand({rows, n}));
  return out.view(out_shape);
}

}  // namespace ltx::cuda
