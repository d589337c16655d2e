#pragma once
// The elementwise ops' vocabulary, shared by the dispatch layer (ops/elementwise.h declares the
// ops) and both backends: which binary / unary function, and its name in errors and profiles.
#include <cstdint>

namespace ltx::ops {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Maximum, Minimum, Pow };

enum class UnaryOp : uint8_t {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Silu,
  Relu,
  Square,
  Softplus,  // log(1 + exp(x)), linear above x > 20 (torch's beta=1, threshold=20)
  Gelu,      // exact: 0.5 x (1 + erf(x / sqrt 2))
  GeluTanh,  // torch approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
};

const char* binary_op_name(BinaryOp op);
const char* unary_op_name(UnaryOp op);

}  // namespace ltx::ops
