#pragma once
// CUDA elementwise ops (the CPU's backend/cpu/elementwise.h on the GPU), through the
// dtype-generic loop of elementwise_loop.cuh and the per-element math shared with the CPU
// (backend/common/scalar_math.h). Operands are f32 or bf16 (where's cond also bool/u8), any
// strides, broadcast; the math is f32; results are new tensors of ops::float_result_dtype of the
// float operands (bf16 only when all are bf16), laid out like the first dense input of the full
// shape (core's empty_like_layout: channels-last in, channels-last out), else contiguous.
// Arguments are checked by src/ops/elementwise.cpp.
#include "core/tensor.h"
#include "op_types/elementwise.h"
#include "op_types/summed.h"

namespace ltx::cuda {

Tensor binary(ops::BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_scalar(ops::BinaryOp op, const Tensor& a, double b);
// The float64 forms (ops::binary with an f64 operand, which widens the other first): f64 operands
// and result, each operation correctly rounded (bit-identical to the CPU).
Tensor binary_f64(ops::BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_scalar_f64(ops::BinaryOp op, const Tensor& a, double b);
// dst (f32 or bf16, any non-expanded strides) = dst op src, computed in f32.
void binary_inplace(ops::BinaryOp op, const Tensor& dst, const Tensor& src);
// ops::add_then_add_: dst = (dst + a) + b in one pass, the first sum rounded to dst's dtype.
void add_then_add_(const Tensor& dst, const Tensor& a, const Tensor& b);
// out = a op b (broadcast to out's shape) into an existing f32/bf16 tensor of any non-expanded
// strides: lets a backend choose the result's layout (cuDNN's channels-last conv result plus the
// bias, written as NCDHW in one pass).
void binary_into(ops::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
Tensor unary(ops::UnaryOp op, const Tensor& x);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w);
Tensor lerp_scalar(const Tensor& a, const Tensor& b, double w);
// scale / shift: tensors or ops::Summed pairs, whose sum is formed per element and rounded to
// add's result dtype before use (bit-identical to materialising it with ops::add).
Tensor modulate(const Tensor& x, const ops::Summed& scale, const ops::Summed& shift);
// x + y * gate with y * gate rounded to float_result_dtype(y, gate) first (bf16 when both are),
// so that it matches add(x, mul(y, gate)) bit for bit; gate may be an ops::Summed as above.
Tensor gated_add(const Tensor& x, const Tensor& y, const ops::Summed& gate);
// The Summed operand materialised with this backend's add (binary(Add)): ops::materialize's
// values on CUDA, for the fused kernels' fallbacks.
Tensor materialize(const ops::Summed& s);
// silu(gate) rounded to gate's dtype, times up: matches mul(silu(gate), up) bit for bit.
Tensor silu_mul(const Tensor& gate, const Tensor& up);
// x * (2 * sigmoid(logits)) with sigmoid's value and the doubled gate rounded to logits' dtype:
// matches mul(x, mul(sigmoid(logits), 2.0)) bit for bit.
Tensor mul_2sigmoid(const Tensor& x, const Tensor& logits);

}  // namespace ltx::cuda
