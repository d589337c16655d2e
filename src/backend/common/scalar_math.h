#pragma once
// The per-element math of the elementwise ops, shared by the CPU loops (backend/cpu/) and the
// CUDA kernels (backend/cuda/): one definition, so both backends compute the same function.
//
// Rounding: every add/subtract/multiply rounds on its own (add_rn/mul_rn keep nvcc from fusing
// them into FMAs, as the host compiler in ISO mode does not either), so the arithmetic ops are
// bit-identical on both backends. Transcendentals call the C float functions (expf, tanhf, erff,
// ...): glibc on the host, CUDA's libdevice on the GPU; those differ by a few ulp at most.
#include <math.h>

#include <type_traits>

#include "core/dtype_bits.h"
#include "core/error.h"
#include "op_types/elementwise.h"

namespace ltx::scalar {

using dtype_bits::add_rn;
using dtype_bits::mul_rn;

// NaN-propagating max / min (a NaN in either argument wins), like torch.maximum / minimum.
template <typename T>
LTX_HOST_DEVICE inline T max_nan(T a, T b) {
  return (a > b || a != a) ? a : b;
}
template <typename T>
LTX_HOST_DEVICE inline T min_nan(T a, T b) {
  return (a < b || a != a) ? a : b;
}

// Whether the float64 binary ops compute `op` (all but pow, whose libm results differ between the
// host and the device).
constexpr bool binary_has_f64(ops::BinaryOp op) { return op != ops::BinaryOp::Pow; }

// One binary op on floats, or on doubles (the float64 ops; no pow, see binary_has_f64).
template <ops::BinaryOp Op, typename T>
LTX_HOST_DEVICE inline T binary(T a, T b) {
  if constexpr (Op == ops::BinaryOp::Add) {
    return add_rn(a, b);
  } else if constexpr (Op == ops::BinaryOp::Sub) {
    return add_rn(a, -b);
  } else if constexpr (Op == ops::BinaryOp::Mul) {
    return mul_rn(a, b);
  } else if constexpr (Op == ops::BinaryOp::Div) {
    return dtype_bits::div_rn(a, b);
  } else if constexpr (Op == ops::BinaryOp::Maximum) {
    return max_nan(a, b);
  } else if constexpr (Op == ops::BinaryOp::Minimum) {
    return min_nan(a, b);
  } else {
    static_assert(Op == ops::BinaryOp::Pow && sizeof(T) == 4, "pow has no float64 form (binary_has_f64)");
    return powf(a, b);
  }
}

inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kSqrt2OverPi = 0.79788456080286536f;
inline constexpr float kGeluTanhCoef = 0.044715f;
inline constexpr float kSoftplusThreshold = 20.f;

template <ops::UnaryOp Op>
LTX_HOST_DEVICE inline float unary(float x) {
  using U = ops::UnaryOp;
  if constexpr (Op == U::Neg) {
    return -x;
  } else if constexpr (Op == U::Abs) {
    return fabsf(x);
  } else if constexpr (Op == U::Exp) {
    return expf(x);
  } else if constexpr (Op == U::Log) {
    return logf(x);
  } else if constexpr (Op == U::Sqrt) {
    return sqrtf(x);
  } else if constexpr (Op == U::Rsqrt) {
    return 1.f / sqrtf(x);
  } else if constexpr (Op == U::Sin) {
    return sinf(x);
  } else if constexpr (Op == U::Cos) {
    return cosf(x);
  } else if constexpr (Op == U::Tanh) {
    return tanhf(x);
  } else if constexpr (Op == U::Sigmoid) {
    return 1.f / (1.f + expf(-x));
  } else if constexpr (Op == U::Silu) {
    return x / (1.f + expf(-x));
  } else if constexpr (Op == U::Relu) {
    return x < 0.f ? 0.f : x;  // a NaN stays NaN, as torch.relu keeps it
  } else if constexpr (Op == U::Square) {
    return mul_rn(x, x);
  } else if constexpr (Op == U::Softplus) {
    return x > kSoftplusThreshold ? x : log1pf(expf(x));
  } else if constexpr (Op == U::Gelu) {
    return mul_rn(mul_rn(0.5f, x), 1.f + erff(mul_rn(x, kInvSqrt2)));
  } else {
    static_assert(Op == U::GeluTanh);
    const float cube = mul_rn(mul_rn(mul_rn(kGeluTanhCoef, x), x), x);
    const float inner = mul_rn(kSqrt2OverPi, add_rn(x, cube));
    return mul_rn(mul_rn(0.5f, x), 1.f + tanhf(inner));
  }
}

// min(max(v, lo), hi) as torch.clamp: a NaN input stays NaN.
LTX_HOST_DEVICE inline float clamp(float v, float lo, float hi) {
  const float m = v < lo ? lo : v;
  return hi < m ? hi : m;
}

// torch.lerp's form: exact at both ends (w = 0 gives a, w = 1 gives b).
LTX_HOST_DEVICE inline float lerp(float a, float b, float w) {
  const float diff = add_rn(b, -a);
  return fabsf(w) < 0.5f ? add_rn(a, mul_rn(w, diff)) : add_rn(b, -mul_rn(diff, 1.f - w));
}

// AdaLN modulation x * (1 + scale) + shift.
LTX_HOST_DEVICE inline float modulate(float x, float scale, float shift) {
  return add_rn(mul_rn(x, 1.f + scale), shift);
}

// Gated residual x + y * gate, the product rounded on its own (no FMA).
LTX_HOST_DEVICE inline float gated_add(float x, float y, float gate) {
  return add_rn(x, mul_rn(y, gate));
}
// The same as ops::gated_add computes it on CUDA: with bf16_product (mul(y, gate) would be stored
// as bf16) the product is rounded to bf16 before the sum. The one definition for the gated_add
// kernel; the fused residual + norm kernel's eight-value form (residual_norm.cu,
// gated_add_bf16_vec) rounds the same products.
LTX_HOST_DEVICE inline float gated_add(float x, float y, float gate, bool bf16_product) {
  float p = mul_rn(y, gate);
  if (bf16_product) p = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(p));
  return add_rn(x, p);
}

// The gated attention's gate 2 * sigmoid(logit) as mul(sigmoid(logit), 2.0) computes it: with bf16
// logits both ops store bf16, so both results are rounded to bf16 here. The one definition for
// mul_2sigmoid (both backends) and the CUDA attention kernels' gated epilogue, so the fused gate
// equals the unfused one bit for bit.
LTX_HOST_DEVICE inline float two_sigmoid(float logit, bool bf16) {
  float g = unary<ops::UnaryOp::Sigmoid>(logit);
  if (bf16) g = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(g));
  g = mul_rn(g, 2.f);
  if (bf16) g = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(g));
  return g;
}

// Turns a runtime op into a compile-time one: g(std::integral_constant<BinaryOp, op>{}).
template <typename G>
void with_binary_op(ops::BinaryOp op, G&& g) {
  using B = ops::BinaryOp;
  switch (op) {
    case B::Add: return g(std::integral_constant<B, B::Add>{});
    case B::Sub: return g(std::integral_constant<B, B::Sub>{});
    case B::Mul: return g(std::integral_constant<B, B::Mul>{});
    case B::Div: return g(std::integral_constant<B, B::Div>{});
    case B::Maximum: return g(std::integral_constant<B, B::Maximum>{});
    case B::Minimum: return g(std::integral_constant<B, B::Minimum>{});
    case B::Pow: return g(std::integral_constant<B, B::Pow>{});
  }
  fail("binary: unknown op ", static_cast<int>(op));
}

// with_binary_op for the float64 ops: every op but pow (binary_has_f64).
template <typename G>
void with_binary_op_f64(ops::BinaryOp op, G&& g) {
  LTX_CHECK(binary_has_f64(op), "binary: op ", static_cast<int>(op), " has no float64 form");
  with_binary_op(op, [&](auto o) {
    if constexpr (decltype(o)::value != ops::BinaryOp::Pow) g(o);
  });
}

template <typename G>
void with_unary_op(ops::UnaryOp op, G&& g) {
  using U = ops::UnaryOp;
  switch (op) {
#define LTX_UNARY_CASE(name) \
  case U::name: return g(std::integral_constant<U, U::name>{});
    LTX_UNARY_CASE(Neg)
    LTX_UNARY_CASE(Abs)
    LTX_UNARY_CASE(Exp)
    LTX_UNARY_CASE(Log)
    LTX_UNARY_CASE(Sqrt)
    LTX_UNARY_CASE(Rsqrt)
    LTX_UNARY_CASE(Sin)
    LTX_UNARY_CASE(Cos)
    LTX_UNARY_CASE(Tanh)
    LTX_UNARY_CASE(Sigmoid)
    LTX_UNARY_CASE(Silu)
    LTX_UNARY_CASE(Relu)
    LTX_UNARY_CASE(Square)
    LTX_UNARY_CASE(Softplus)
    LTX_UNARY_CASE(Gelu)
    LTX_UNARY_CASE(GeluTanh)
#undef LTX_UNARY_CASE
  }
  fail("unary: unknown op ", static_cast<int>(op));
}

}  // namespace ltx::scalar
