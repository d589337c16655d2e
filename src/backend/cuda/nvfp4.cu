// The NVFP4 quantiser and dequantiser kernels (nvfp4.h).
#include "backend/cuda/nvfp4.h"

#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/stream.h"
#include "core/dtype_bits.h"

namespace ltx::cuda {

namespace {

constexpr int kThreads = 256;

template <bool kBf16>
__device__ __forceinline__ float load_one(const void* x, int64_t i) {
  if constexpr (kBf16)
    return dtype_bits::bf16_to_f32(static_cast<const uint16_t*>(x)[i]);
  else
    return static_cast<const float*>(x)[i];
}

// amax over |x| (NaN skipped, inf as the largest float) into *amax, which starts at 0: the bits
// of non-negative floats order like their values, so an unsigned atomicMax is a float max.
template <bool kBf16>
__global__ void amax_kernel(const void* x, int64_t n, float* amax) {
  float m = 0.0f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    m = ops::nvfp4_amax_step(m, load_one<kBf16>(x, i));
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<unsigned*>(amax), __float_as_uint(m));
}

__global__ void tensor_scale_kernel(float* scale) {
  *scale = dtype_bits::mul_rn(*scale, ops::kNvfp4InvGlobalRange);
}

// One thread per 16-element block of a row.
template <bool kBf16>
__global__ void quantize_kernel(const void* x, const float* tensor_scale, uint8_t* packed,
                                uint8_t* scales, int64_t rows, int64_t blocks_per_row,
                                int64_t padded_cols) {
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (blk >= rows * blocks_per_row) return;
  const float ts = *tensor_scale;
  const int64_t row = blk / blocks_per_row, col = blk % blocks_per_row;
  float v[ops::kNvfp4BlockSize];
  float block_amax = 0.0f;
#pragma unroll
  for (int i = 0; i < ops::kNvfp4BlockSize; ++i) {
    v[i] = load_one<kBf16>(x, blk * ops::kNvfp4BlockSize + i);
    block_amax = ops::nvfp4_amax_step(block_amax, v[i]);
  }
  const uint8_t s = ops::nvfp4_block_scale(block_amax, ts);
  scales[ops::nvfp4_scale_offset(row, col, padded_cols)] = s;
  const float m = ops::nvfp4_block_multiplier(s, ts);
  uint32_t words[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < ops::kNvfp4BlockSize / 2; ++j) {
    const uint32_t hi = ops::f32_to_e2m1(dtype_bits::mul_rn(v[2 * j], m));
    const uint32_t lo = ops::f32_to_e2m1(dtype_bits::mul_rn(v[2 * j + 1], m));
    words[j / 4] |= ((hi << 4) | lo) << (8 * (j % 4));
  }
  reinterpret_cast<uint2*>(packed)[blk] = make_uint2(words[0], words[1]);
}

template <bool kBf16>
__global__ void dequantize_kernel(const uint8_t* packed, const uint8_t* scales,
                                  const float* tensor_scale, void* out, int64_t rows,
                                  int64_t blocks_per_row, int64_t padded_cols) {
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (blk >= rows * blocks_per_row) return;
  const float ts = *tensor_scale;
  const int64_t row = blk / blocks_per_row, col = blk % blocks_per_row;
  const uint8_t s = scales[ops::nvfp4_scale_offset(row, col, padded_cols)];
  const uint2 bytes = reinterpret_cast<const uint2*>(packed)[blk];
#pragma unroll
  for (int j = 0; j < ops::kNvfp4BlockSize / 2; ++j) {
    const uint8_t byte = static_cast<uint8_t>((j < 4 ? bytes.x : bytes.y) >> (8 * (j % 4)));
    const float first = ops::nvfp4_decode(static_cast<uint8_t>(byte >> 4), s, ts);
    const float second = ops::nvfp4_decode(static_cast<uint8_t>(byte & 15u), s, ts);
    const int64_t i = blk * ops::kNvfp4BlockSize + 2 * j;
    if constexpr (kBf16) {
      auto* o = static_cast<uint16_t*>(out);
      o[i] = dtype_bits::f32_to_bf16(first);
      o[i + 1] = dtype_bits::f32_to_bf16(second);
    } else {
      auto* o = static_cast<float*>(out);
      o[i] = first;
      o[i + 1] = second;
    }
  }
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

ops::Nvfp4Weight quantize_nvfp4(const Tensor& weight_in) {
  const Device dev = weight_in.device();
  DeviceGuard guard(dev.index);
  const Tensor x = weight_in.contiguous();
  const int64_t out = x.size(0), in = x.size(1);
  const int64_t blocks_per_row = in / ops::kNvfp4BlockSize;
  const Shape scales_shape = ops::nvfp4_block_scales_shape(out, in);
  ops::Nvfp4Weight q{Tensor::empty({out, in / 2}, DType::U8, dev),
                     Tensor::empty(scales_shape, DType::F8E4M3FN, dev),
                     Tensor::empty({}, DType::F32, dev)};
  const cudaStream_t stream = current_stream(dev.index).handle();
  auto* ts = static_cast<float*>(q.tensor_scale.raw_data());
  auto* scales = static_cast<uint8_t*>(q.block_scales.raw_data());
  LTX_CUDA_CHECK(cudaMemsetAsync(ts, 0, sizeof(float), stream));
  LTX_CUDA_CHECK(cudaMemsetAsync(scales, 0, static_cast<size_t>(q.block_scales.numel()), stream));
  if (x.numel() == 0) return q;
  const bool bf16 = x.dtype() == DType::BF16;
  const unsigned amax_grid = grid_for(x.numel(), kThreads, dev.index);
  if (bf16)
    amax_kernel<true><<<amax_grid, kThreads, 0, stream>>>(x.raw_data(), x.numel(), ts);
  else
    amax_kernel<false><<<amax_grid, kThreads, 0, stream>>>(x.raw_data(), x.numel(), ts);
  LTX_CUDA_CHECK_LAUNCH();
  tensor_scale_kernel<<<1, 1, 0, stream>>>(ts);
  LTX_CUDA_CHECK_LAUNCH();
  const int64_t n_blocks = out * blocks_per_row;
  auto* packed = static_cast<uint8_t*>(q.packed.raw_data());
  if (bf16)
    quantize_kernel<true><<<blocks_for(n_blocks), kThreads, 0, stream>>>(
        x.raw_data(), ts, packed, scales, out, blocks_per_row, scales_shape[1]);
  else
    quantize_kernel<false><<<blocks_for(n_blocks), kThreads, 0, stream>>>(
        x.raw_data(), ts, packed, scales, out, blocks_per_row, scales_shape[1]);
  LTX_CUDA_CHECK_LAUNCH();
  return q;
}

Tensor dequantize_nvfp4(const ops::Nvfp4Weight& w, DType dtype) {
  const Device dev = w.packed.device();
  DeviceGuard guard(dev.index);
  Tensor packed = w.packed.contiguous();
  // The kernel reads a block's 8 bytes at once; a view at an odd offset is copied first.
  if (reinterpret_cast<uintptr_t>(packed.raw_data()) % 8 != 0) {
    Tensor aligned = Tensor::empty(packed.shape(), DType::U8, dev);
    aligned.copy_from(packed);
    packed = aligned;
  }
  const Tensor scales = w.block_scales.contiguous();
  const int64_t out = packed.size(0), in = packed.size(1) * 2;
  const int64_t blocks_per_row = in / ops::kNvfp4BlockSize;
  Tensor dense = Tensor::empty({out, in}, dtype, dev);
  const int64_t n_blocks = out * blocks_per_row;
  if (n_blocks == 0) return dense;
  const cudaStream_t stream = current_stream(dev.index).handle();
  const auto* p = static_cast<const uint8_t*>(packed.raw_data());
  const auto* s = static_cast<const uint8_t*>(scales.raw_data());
  const auto* ts = static_cast<const float*>(w.tensor_scale.raw_data());
  if (dtype == DType::BF16)
    dequantize_kernel<true><<<blocks_for(n_blocks), kThreads, 0, stream>>>(
        p, s, ts, dense.raw_data(), out, blocks_per_row, scales.size(1));
  else
    dequantize_kernel<false><<<blocks_for(n_blocks), kThreads, 0, stream>>>(
        p, s, ts, dense.raw_data(), out, blocks_per_row, scales.size(1));
  LTX_CUDA_CHECK_LAUNCH();
  return dense;
}

}  // namespace ltx::cuda
