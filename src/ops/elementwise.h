#pragma once
// Elementwise ops on f32 tensors: binary ops with NumPy broadcasting, scalar variants, in-place
// accumulation for residual streams, unary activations, where/lerp and the AdaLN modulation.
// Inputs may be non-contiguous or expanded (stride 0); results are new contiguous f32 tensors.
// On CUDA every float operand may also be bf16 (math in f32; the result is bf16 when all float
// operands are, see ops::float_result_dtype); the per-element math is shared by both backends
// (backend/common/scalar_math.h), so the arithmetic ops agree bit for bit. The binary ops also
// take f64 operands (see binary()). The op enums are declared in op_types/elementwise.h.
#include "core/tensor.h"
#include "op_types/elementwise.h"
#include "ops/summed.h"

namespace ltx::ops {

// ---- generic entry points (the named ops below are thin wrappers) ----
// Float64: when either operand of a binary op (all but pow) is f64, the other is widened (f32,
// or bf16 on CUDA), the math and the result are f64 and every operation is correctly rounded, so
// both backends agree bit for bit (torch's type promotion; the res_2s sampler's float64 maths).
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// Scalar on the right, converted to f32 as torch does for a Python float (kept in double for an
// f64 tensor).
Tensor binary(BinaryOp op, const Tensor& a, double b);
// dst = dst (op) src in place; src is broadcast to dst's shape; dst may be a strided view but
// must not have expanded (stride-0) dims.
void binary_(BinaryOp op, const Tensor& dst, const Tensor& src);
Tensor unary(UnaryOp op, const Tensor& x);

// ---- binary ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);  // NaN-propagating, like torch.maximum
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);
Tensor pow(const Tensor& a, double b);

// ---- in place ----
void add_(const Tensor& dst, const Tensor& src);
void mul_(const Tensor& dst, const Tensor& src);
// dst = (dst + a) + b, a and b broadcast to dst: bit-identical to add_(dst, a); add_(dst, b) (the
// first sum rounded to dst's dtype), in one pass on CUDA (a conv's bias and the residual it feeds).
void add_then_add_(const Tensor& dst, const Tensor& a, const Tensor& b);

// ---- unary ----
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor square(const Tensor& x);
Tensor softplus(const Tensor& x);
Tensor gelu(const Tensor& x);
Tensor gelu_tanh(const Tensor& x);
// min(max(x, lo), hi) like torch.clamp (NaN stays NaN; lo > hi gives hi). Use +-inf for one side.
Tensor clamp(const Tensor& x, double lo, double hi);

// ---- ternary (all operands broadcast together) ----
// cond: Bool, U8 or F32 (nonzero = true); a, b: F32.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// a + w * (b - a), evaluated as torch.lerp does (exact at w = 0 and w = 1).
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w);
Tensor lerp(const Tensor& a, const Tensor& b, double w);
// AdaLN modulation x * (1 + scale) + shift (one fused kernel on CUDA; plain math on CPU). scale
// and shift may each be a Summed{a, b} (e.g. a table row + a per-token slice): bit-identical to
// modulate(x, add(a, b), ...), one kernel on CUDA (the CPU materialises the sum).
Tensor modulate(const Tensor& x, const Summed& scale, const Summed& shift);
// Gated residual x + y * gate (all three broadcast together; one kernel on CUDA). Bit-identical to
// add(x, mul(y, gate)): the product is rounded to mul's result dtype before the add. gate may be a
// Summed{a, b}: bit-identical to gated_add(x, y, add(a, b)).
Tensor gated_add(const Tensor& x, const Tensor& y, const Summed& gate);
// The SwiGLU product silu(gate) * up (gate and up broadcast together; one kernel on CUDA).
// Bit-identical to mul(silu(gate), up): silu's value is rounded to gate's dtype before the product.
Tensor silu_mul(const Tensor& gate, const Tensor& up);
// The gated attention's per-head gate x * (2 * sigmoid(logits)), logits broadcast against x (e.g.
// [B, T, H, 1] against [B, T, H, Dh]; one kernel on CUDA). Bit-identical to
// mul(x, mul(sigmoid(logits), 2.0)): sigmoid's value and the doubled gate are rounded to logits'
// dtype as those ops store them.
Tensor mul_2sigmoid(const Tensor& x, const Tensor& logits);

}  // namespace ltx::ops
