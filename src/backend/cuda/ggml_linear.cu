// GGML-block linear layers on CUDA (ggml_linear.h): a dequantising kernel into a scratch of the
// compute dtype, then cuBLASLt through linalg.h.
#include "backend/cuda/ggml_linear.h"

#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/linalg.h"
#include "backend/cuda/stream.h"
#include "core/dtype_bits.h"
#include "op_types/ggml_blocks.h"

namespace ltx::cuda {

namespace {

constexpr int kThreads = 256;
// Values one thread block dequantises: its blocks are expanded into shared memory (one thread a
// GGML block, with the per-block code the CPU runs), then written out by all threads in order,
// so the global writes are coalesced whatever the type's block length.
constexpr int kTileValues = 8192;

enum class Out { F32, BF16, F16 };

template <Out kOut>
struct OutTraits;
template <>
struct OutTraits<Out::F32> {
  using T = float;
  __device__ static float conv(float v) { return v; }
};
template <>
struct OutTraits<Out::BF16> {
  using T = uint16_t;
  __device__ static uint16_t conv(float v) { return dtype_bits::f32_to_bf16(v); }
};
template <>
struct OutTraits<Out::F16> {
  using T = uint16_t;
  __device__ static uint16_t conv(float v) { return dtype_bits::f32_to_f16(v); }
};

template <GgmlType kType, Out kOut>
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const uint8_t* __restrict__ src, typename OutTraits<kOut>::T* __restrict__ dst,
                      int64_t total_blocks) {
  constexpr int kElems = ops::ggml::block_elems(kType);
  constexpr int kBytes = ops::ggml::block_bytes(kType);
  // A padded row per GGML block: consecutive threads write their blocks' values at the same
  // index, which would otherwise fall in one shared-memory bank.
  constexpr int kStride = kElems == 1 ? 1 : kElems + 1;
  constexpr int kBlocks = kTileValues / kElems;
  __shared__ float vals[kBlocks * kStride];
  using T = typename OutTraits<kOut>::T;

  const int64_t first = static_cast<int64_t>(blockIdx.x) * kBlocks;
  const int64_t left = total_blocks - first;
  const int n = left < kBlocks ? static_cast<int>(left) : kBlocks;
  for (int b = threadIdx.x; b < n; b += kThreads)
    (void)ops::ggml::dequantize_block(kType, src + (first + b) * kBytes, vals + b * kStride);
  __syncthreads();

  const int nv = n * kElems;
  T* out = dst + first * kElems;
  const auto at = [&](int i) { return vals[(i / kElems) * kStride + i % kElems]; };
  // Four values a store (the tile starts 16-byte aligned in a 256-byte aligned output).
  const int nv4 = nv / 4 * 4;
  for (int i = threadIdx.x * 4; i < nv4; i += kThreads * 4) {
    if constexpr (kOut == Out::F32) {
      reinterpret_cast<float4*>(out)[i / 4] = make_float4(at(i), at(i + 1), at(i + 2), at(i + 3));
    } else {
      const uint32_t lo = OutTraits<kOut>::conv(at(i)) |
                          (static_cast<uint32_t>(OutTraits<kOut>::conv(at(i + 1))) << 16);
      const uint32_t hi = OutTraits<kOut>::conv(at(i + 2)) |
                          (static_cast<uint32_t>(OutTraits<kOut>::conv(at(i + 3))) << 16);
      reinterpret_cast<uint2*>(out)[i / 4] = make_uint2(lo, hi);
    }
  }
  for (int i = nv4 + threadIdx.x; i < nv; i += kThreads) out[i] = OutTraits<kOut>::conv(at(i));
}

template <GgmlType kType>
void launch_dequantize(const uint8_t* src, void* dst, int64_t total_blocks, DType dtype,
                       cudaStream_t stream) {
  constexpr int kBlocks = kTileValues / ops::ggml::block_elems(kType);
  const auto grid = static_cast<unsigned>((total_blocks + kBlocks - 1) / kBlocks);
  switch (dtype) {
    case DType::BF16:
      dequantize_kernel<kType, Out::BF16>
          <<<grid, kThreads, 0, stream>>>(src, static_cast<uint16_t*>(dst), total_blocks);
      break;
    case DType::F16:
      dequantize_kernel<kType, Out::F16>
          <<<grid, kThreads, 0, stream>>>(src, static_cast<uint16_t*>(dst), total_blocks);
      break;
    default:
      dequantize_kernel<kType, Out::F32>
          <<<grid, kThreads, 0, stream>>>(src, static_cast<float*>(dst), total_blocks);
      break;
  }
  LTX_CUDA_CHECK_LAUNCH();
}

// Dequantises `rows` whole rows starting at `src` into dst (contiguous, `dtype`).
void dequantize_rows_into(GgmlType type, const uint8_t* src, int64_t rows, int64_t in, void* dst,
                          DType dtype, cudaStream_t stream) {
  const int64_t total = rows * (in / ops::ggml::block_elems(type));
  if (total == 0) return;
  switch (type) {
#define LTX_GGML_CASE(T) \
  case GgmlType::T: launch_dequantize<GgmlType::T>(src, dst, total, dtype, stream); return;
    LTX_GGML_CASE(F32)
    LTX_GGML_CASE(F16)
    LTX_GGML_CASE(BF16)
    LTX_GGML_CASE(Q4_0)
    LTX_GGML_CASE(Q4_1)
    LTX_GGML_CASE(Q5_0)
    LTX_GGML_CASE(Q5_1)
    LTX_GGML_CASE(Q8_0)
    LTX_GGML_CASE(Q2_K)
    LTX_GGML_CASE(Q3_K)
    LTX_GGML_CASE(Q4_K)
    LTX_GGML_CASE(Q5_K)
    LTX_GGML_CASE(Q6_K)
#undef LTX_GGML_CASE
    default: fail("cuda::dequantize_ggml: no dequantiser for GGML type ", ggml_type_name(type));
  }
}

}  // namespace

Tensor dequantize_ggml(const ops::GgmlWeight& w, int64_t row0, int64_t rows, DType dtype) {
  const Device dev = w.blocks.device();
  LTX_CHECK(row0 >= 0 && rows >= 0 && row0 + rows <= w.out_features(),
            "cuda::dequantize_ggml: rows [", row0, ", ", row0 + rows, ") outside the weight's ",
            w.out_features());
  DeviceGuard guard(dev.index);
  Tensor out = Tensor::empty({rows, w.in_features}, dtype, dev);
  const auto* src = static_cast<const uint8_t*>(w.blocks.raw_data()) + row0 * w.blocks.size(1);
  dequantize_rows_into(w.type, src, rows, w.in_features, out.raw_data(), dtype,
                       current_stream(dev.index).handle());
  return out;
}

Tensor linear_ggml(const Tensor& x, const ops::GgmlWeight& w, const Tensor& bias, bool gelu,
                   int64_t scratch_bytes) {
  const Device dev = x.device();
  const DType dt = x.dtype();
  const int64_t n = w.out_features(), k = w.in_features;
  const int64_t elem = static_cast<int64_t>(dtype_size(dt));
  // Chunks of whole 128-row groups, so each chunk's output columns start 256-byte aligned.
  int64_t chunk = std::max<int64_t>(1, scratch_bytes / (k * elem));
  if (chunk < n) chunk = std::max<int64_t>(128, chunk / 128 * 128);
  if (chunk >= n) {
    const Tensor wd = dequantize_ggml(w, 0, n, dt);
    if (gelu) return linear_gelu_tanh(x, wd, bias);
    return linear(x, wd, bias);
  }

  DeviceGuard guard(dev.index);
  Shape out_shape;
  for (int d = 0; d + 1 < x.dim(); ++d) out_shape.push_back(x.size(d));
  const int64_t m = out_shape.numel();
  out_shape.push_back(n);
  Tensor out = Tensor::empty(out_shape, dt, dev);
  if (m == 0) return out;
  const Tensor x2 = x.contiguous().view({m, k});
  const Tensor out2 = out.view({m, n});
  // The epilogue wants the bias in the output's dtype; an f32 bias with a bf16 output is rounded
  // to bf16 first (one rounding more than cuda::linear's f32 epilogue).
  const Tensor b = bias.defined() ? bias.to(dt).contiguous() : Tensor();
  for (int64_t o0 = 0; o0 < n; o0 += chunk) {
    const int64_t rows = std::min(chunk, n - o0);
    const Tensor wd = dequantize_ggml(w, o0, rows, dt);
    linear_into_columns(out2, o0, x2, k, wd, b.defined() ? b.narrow(0, o0, rows) : Tensor(), gelu);
  }
  return out;
}

}  // namespace ltx::cuda
