// The activation quantisation kernel and the FP8 linear (quantized_linear.h).
#include "backend/cuda/quantized_linear.h"

#include <algorithm>
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

constexpr int kRowThreads = 256;

// One block per row (grid-strided over the rows): the finite amax by a block reduction, then the
// row quantised with m = 448 / amax in f32, as cpu::quantize_e4m3_per_row.
template <bool kBf16>
__global__ void __launch_bounds__(kRowThreads)
    quantize_rows_kernel(const void* __restrict__ x, uint8_t* __restrict__ q,
                         float* __restrict__ row_scale, int64_t rows, int64_t k) {
  __shared__ float warp_max[kRowThreads / 32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * k;
    float amax = 0.0f;
    for (int64_t j = threadIdx.x; j < k; j += kRowThreads) {
      const float v = fabsf(load_one<kBf16>(x, base + j));
      if (isfinite(v)) amax = fmaxf(amax, v);
    }
    for (int s = 16; s >= 1; s >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, s));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    __syncthreads();
    amax = warp_max[0];
#pragma unroll
    for (int w = 1; w < kRowThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
    __syncthreads();  // warp_max is rewritten for the next row
    const float m = amax > 0.0f ? __fdiv_rn(ops::kE4m3Max, amax) : 1.0f;
    if (threadIdx.x == 0) row_scale[r] = amax > 0.0f ? __fdiv_rn(amax, ops::kE4m3Max) : 1.0f;
    for (int64_t j = threadIdx.x; j < k; j += kRowThreads)
      q[base + j] = quantize_one<false>(load_one<kBf16>(x, base + j), m);
  }
}

// y (x's dtype, [rows, n] contiguous, in place) = y * row_scale[row] + bias[col], in f32, rounded
// once more to y's dtype.
template <bool kBf16>
__global__ void scale_rows_kernel(void* __restrict__ y, const float* __restrict__ row_scale,
                                  const void* __restrict__ bias, bool bias_bf16, int64_t total,
                                  int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    float v = __fmul_rn(load_one<kBf16>(y, i), row_scale[i / n]);
    if (bias != nullptr)
      v = __fadd_rn(v, bias_bf16 ? load_one<true>(bias, i % n) : load_one<false>(bias, i % n));
    if constexpr (kBf16)
      static_cast<uint16_t*>(y)[i] = dtype_bits::f32_to_bf16(v);
    else
      static_cast<float*>(y)[i] = v;
  }
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

ops::Fp8PerToken quantize_e4m3_per_row(const Tensor& x_in) {
  const Device dev = x_in.device();
  DeviceGuard guard(dev.index);
  const Tensor x = x_in.contiguous();
  const int64_t k = x.size(-1);
  Shape lead;
  for (int d = 0; d + 1 < x.dim(); ++d) lead.push_back(x.size(d));
  const int64_t rows = lead.numel();
  ops::Fp8PerToken out{Tensor::empty(x.shape(), DType::F8E4M3FN, dev),
                       Tensor::empty(lead, DType::F32, dev)};
  if (rows == 0) return out;
  const unsigned grid = static_cast<unsigned>(
      std::min<int64_t>(rows, static_cast<int64_t>(multiprocessor_count(dev.index)) * 8));
  const cudaStream_t stream = current_stream(dev.index).handle();
  auto* q = static_cast<uint8_t*>(out.q.raw_data());
  auto* s = static_cast<float*>(out.row_scale.raw_data());
  if (x.dtype() == DType::BF16)
    quantize_rows_kernel<true><<<grid, kRowThreads, 0, stream>>>(x.raw_data(), q, s, rows, k);
  else
    quantize_rows_kernel<false><<<grid, kRowThreads, 0, stream>>>(x.raw_data(), q, s, rows, k);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

Tensor linear_fp8_per_token(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias) {
  const int64_t n = weight.size(0), k = weight.size(1);
  LTX_CHECK(k % 16 == 0 && n % 16 == 0, "linear_fp8_per_token: cuBLASLt's FP8 GEMM needs in and "
            "out features that are multiples of 16, got weight ", weight.describe(),
            "; keep this layer in bf16");
  const Device dev = x.device();
  DeviceGuard guard(dev.index);
  const ops::Fp8PerToken qx = quantize_e4m3_per_row(x);
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = n;
  const int64_t rows = qx.row_scale.numel();
  const DType dt = x.dtype();
  Tensor out = linear_fp8(qx.q.view({rows, k}), weight.contiguous(), Tensor(), weight_scale,
                          Tensor(), dt);
  const int64_t total = rows * n;
  if (total > 0) {
    const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
    constexpr int kThreadsScale = 256;
    const unsigned grid = grid_for(total, kThreadsScale, dev.index);
    const cudaStream_t stream = current_stream(dev.index).handle();
    const void* bp = b.defined() ? b.raw_data() : nullptr;
    const bool bias_bf16 = b.defined() && b.dtype() == DType::BF16;
    const auto* s = static_cast<const float*>(qx.row_scale.raw_data());
    if (dt == DType::BF16)
      scale_rows_kernel<true><<<grid, kThreadsScale, 0, stream>>>(out.raw_data(), s, bp, bias_bf16, total, n);
    else
      scale_rows_kernel<false><<<grid, kThreadsScale, 0, stream>>>(out.raw_data(), s, bp, bias_bf16, total, n);
    LTX_CUDA_CHECK_LAUNCH();
  }
  return out.view(out_shape);
}

}  // namespace ltx::cuda
