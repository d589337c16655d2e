#pragma once
// CPU (fp32) implementations of the elementwise ops. Callers (src/ops/elementwise.cpp) have
// already checked dtypes, devices and that the shapes broadcast.
#include "core/tensor.h"
#include "op_types/elementwise.h"

namespace ltx::cpu {

Tensor binary(ops::BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_scalar(ops::BinaryOp op, const Tensor& a, double b);
// The float64 forms (ops::binary with an f64 operand, which widens the other first): f64 operands
// and result.
Tensor binary_f64(ops::BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_scalar_f64(ops::BinaryOp op, const Tensor& a, double b);
void binary_inplace(ops::BinaryOp op, const Tensor& dst, const Tensor& src);
Tensor unary(ops::UnaryOp op, const Tensor& x);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w);
Tensor lerp_scalar(const Tensor& a, const Tensor& b, double w);
Tensor modulate(const Tensor& x, const Tensor& scale, const Tensor& shift);
Tensor gated_add(const Tensor& x, const Tensor& y, const Tensor& gate);
Tensor silu_mul(const Tensor& gate, const Tensor& up);
Tensor mul_2sigmoid(const Tensor& x, const Tensor& logits);

}  // namespace ltx::cpu
