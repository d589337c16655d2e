#pragma once
// Linear layers on GGML blocks on CUDA (arguments checked by ops/ggml_linear.cpp).
//
// Why "dequantise into a scratch, then cuBLASLt" rather than one fused tile kernel: the blocks
// are read and expanded once per call, O(out x in) work, while the GEMM is O(rows x out x in);
// at the transformer's token counts (thousands of rows a call) the expansion is a few percent of
// the GEMM, and cuBLASLt's Hopper kernels (TMA, wgmma, fp32 accumulation, fused bias / GELU
// epilogues) run the product near the tensor cores' peak, which a hand-written dequantising tile
// kernel would have to match for every type. The per-block code is op_types/ggml_blocks.h's,
// so the scratch holds the CPU's values bit for bit.
#include <cstdint>

#include "core/tensor.h"
#include "op_types/ggml_linear.h"

namespace ltx::cuda {

// The most scratch one call dequantises into at a time; a larger weight goes in chunks of
// output rows (each chunk's GEMM writes its columns of the output).
inline constexpr int64_t kGgmlScratchBytes = int64_t{64} << 20;

// Rows [row0, row0 + rows) of the weight as a contiguous [rows, in] tensor of `dtype` (f32,
// bf16 or f16) on the weight's device: one kernel on the current stream.
Tensor dequantize_ggml(const ops::GgmlWeight& w, int64_t row0, int64_t rows, DType dtype);

// y [..., out] in x's dtype (bf16 or f32) = x [..., in] @ W^T + bias, then GELU (tanh) when
// `gelu` (bf16 x and no or a bf16 bias). `scratch_bytes` bounds the dequantised chunk
// (tests lower it to reach the chunked path at small sizes). A weight that fits one chunk is
// exactly cuda::linear (or linear_gelu_tanh) by the dequantised weight.
Tensor linear_ggml(const Tensor& x, const ops::GgmlWeight& w, const Tensor& bias, bool gelu,
                   int64_t scratch_bytes = kGgmlScratchBytes);

}  // namespace ltx::cuda
