#include "op_types/elementwise.h"

namespace ltx::ops {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::Pow: return "pow";
  }
  return "binary";
}

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Sin: return "sin";
    case UnaryOp::Cos: return "cos";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Silu: return "silu";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Square: return "square";
    case UnaryOp::Softplus: return "softplus";
    case UnaryOp::Gelu: return "gelu";
    case UnaryOp::GeluTanh: return "gelu_tanh";
  }
  return "unary";
}

}  // namespace ltx::ops
