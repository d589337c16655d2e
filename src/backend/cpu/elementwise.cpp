#include "backend/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/cpu/elementwise_loop.h"

namespace ltx::cpu {

namespace {

using ops::BinaryOp;
using ops::UnaryOp;

// Propagates NaN from either side, like torch.maximum / torch.minimum.
inline float max_nan(float a, float b) { return (a > b || a != a) ? a : b; }
inline float min_nan(float a, float b) { return (a < b || a != a) ? a : b; }

template <BinaryOp Op>
inline float binary_fn(float a, float b) {
  if constexpr (Op == BinaryOp::Add) {
    return a + b;
  } else if constexpr (Op == BinaryOp::Sub) {
    return a - b;
  } else if constexpr (Op == BinaryOp::Mul) {
    return a * b;
  } else if constexpr (Op == BinaryOp::Div) {
    return a / b;
  } else if constexpr (Op == BinaryOp::Maximum) {
    return max_nan(a, b);
  } else if constexpr (Op == BinaryOp::Minimum) {
    return min_nan(a, b);
  } else {
    static_assert(Op == BinaryOp::Pow);
    return std::pow(a, b);
  }
}

// Turns a runtime BinaryOp into a compile-time one: g(std::integral_constant<BinaryOp, op>).
template <typename G>
void with_binary_op(BinaryOp op, G&& g) {
  switch (op) {
    case BinaryOp::Add: return g(std::integral_constant<BinaryOp, BinaryOp::Add>{});
    case BinaryOp::Sub: return g(std::integral_constant<BinaryOp, BinaryOp::Sub>{});
    case BinaryOp::Mul: return g(std::integral_constant<BinaryOp, BinaryOp::Mul>{});
    case BinaryOp::Div: return g(std::integral_constant<BinaryOp, BinaryOp::Div>{});
    case BinaryOp::Maximum: return g(std::integral_constant<BinaryOp, BinaryOp::Maximum>{});
    case BinaryOp::Minimum: return g(std::integral_constant<BinaryOp, BinaryOp::Minimum>{});
    case BinaryOp::Pow: return g(std::integral_constant<BinaryOp, BinaryOp::Pow>{});
  }
  fail("cpu::binary: unknown op ", static_cast<int>(op));
}

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluTanhCoef = 0.044715f;
constexpr float kSoftplusThreshold = 20.f;

template <UnaryOp Op>
inline float unary_fn(float x) {
  if constexpr (Op == UnaryOp::Neg) {
    return -x;
  } else if constexpr (Op == UnaryOp::Abs) {
    return std::fabs(x);
  } else if constexpr (Op == UnaryOp::Exp) {
    return std::exp(x);
  } else if constexpr (Op == UnaryOp::Log) {
    return std::log(x);
  } else if constexpr (Op == UnaryOp::Sqrt) {
    return std::sqrt(x);
  } else if constexpr (Op == UnaryOp::Rsqrt) {
    return 1.f / std::sqrt(x);
  } else if constexpr (Op == UnaryOp::Sin) {
    return std::sin(x);
  } else if constexpr (Op == UnaryOp::Cos) {
    return std::cos(x);
  } else if constexpr (Op == UnaryOp::Tanh) {
    return std::tanh(x);
  } else if constexpr (Op == UnaryOp::Sigmoid) {
    return 1.f / (1.f + std::exp(-x));
  } else if constexpr (Op == UnaryOp::Silu) {
    return x / (1.f + std::exp(-x));
  } else if constexpr (Op == UnaryOp::Relu) {
    return std::max(x, 0.f);  // std::max(NaN, 0) keeps the NaN, as torch.relu does
  } else if constexpr (Op == UnaryOp::Square) {
    return x * x;
  } else if constexpr (Op == UnaryOp::Softplus) {
    return x > kSoftplusThreshold ? x : std::log1p(std::exp(x));
  } else if constexpr (Op == UnaryOp::Gelu) {
    return 0.5f * x * (1.f + std::erf(x * kInvSqrt2));
  } else {
    static_assert(Op == UnaryOp::GeluTanh);
    const float inner = kSqrt2OverPi * (x + kGeluTanhCoef * x * x * x);
    return 0.5f * x * (1.f + std::tanh(inner));
  }
}

template <typename G>
void with_unary_op(UnaryOp op, G&& g) {
  switch (op) {
#define LTX_UNARY_CASE(name) \
  case UnaryOp::name: return g(std::integral_constant<UnaryOp, UnaryOp::name>{});
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
  fail("cpu::unary: unknown op ", static_cast<int>(op));
}

Shape broadcast3(const Tensor& a, const Tensor& b, const Tensor& c, const char* op) {
  return broadcast_shapes(broadcast_shapes(a.shape(), b.shape(), op), c.shape(), op);
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), ops::binary_op_name(op)));
  with_binary_op(op, [&](auto o) {
    map_into<2>(out, {&a, &b}, [](float x, float y) { return binary_fn<decltype(o)::value>(x, y); });
  });
  return out;
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, double b) {
  // torch rewrites these exponents to cheaper exact forms; do the same so results match it.
  if (op == BinaryOp::Pow) {
    if (b == 2.0) return cpu::unary(UnaryOp::Square, a);
    if (b == 0.5) return cpu::unary(UnaryOp::Sqrt, a);
    if (b == -0.5) return cpu::unary(UnaryOp::Rsqrt, a);
    if (b == 1.0) return a.clone();  // clone() is always a fresh contiguous tensor
  }
  const float s = static_cast<float>(b);
  Tensor out = Tensor::empty(a.shape());
  with_binary_op(op, [&](auto o) {
    map_into<1>(out, {&a}, [s](float x) { return binary_fn<decltype(o)::value>(x, s); });
  });
  return out;
}

void binary_inplace(BinaryOp op, const Tensor& dst, const Tensor& src) {
  with_binary_op(op, [&](auto o) {
    map_into<2>(dst, {&dst, &src},
                [](float x, float y) { return binary_fn<decltype(o)::value>(x, y); });
  });
}

Tensor unary(UnaryOp op, const Tensor& x) {
  Tensor out = Tensor::empty(x.shape());
  with_unary_op(op, [&](auto o) {
    map_into<1>(out, {&x}, [](float v) { return unary_fn<decltype(o)::value>(v); });
  });
  return out;
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  const float l = static_cast<float>(lo), h = static_cast<float>(hi);
  Tensor out = Tensor::empty(x.shape());
  // std::max/min return their first argument when comparisons fail, so NaN inputs stay NaN.
  map_into<1>(out, {&x}, [l, h](float v) { return std::min(std::max(v, l), h); });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Tensor c = cond.dtype() == DType::F32 ? cond : cond.to(DType::F32);
  Tensor out = Tensor::empty(broadcast3(c, a, b, "where"));
  map_into<3>(out, {&c, &a, &b}, [](float m, float x, float y) { return m != 0.f ? x : y; });
  return out;
}

namespace {
// torch.lerp's form: exact at both ends (w = 0 gives a, w = 1 gives b).
inline float lerp_fn(float a, float b, float w) {
  return std::fabs(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.f - w);
}
}  // namespace

Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w) {
  Tensor out = Tensor::empty(broadcast3(a, b, w, "lerp"));
  map_into<3>(out, {&a, &b, &w}, lerp_fn);
  return out;
}

Tensor lerp_scalar(const Tensor& a, const Tensor& b, double w) {
  const float wf = static_cast<float>(w);
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), "lerp"));
  map_into<2>(out, {&a, &b}, [wf](float x, float y) { return lerp_fn(x, y, wf); });
  return out;
}

Tensor modulate(const Tensor& x, const Tensor& scale, const Tensor& shift) {
  Tensor out = Tensor::empty(broadcast3(x, scale, shift, "modulate"));
  map_into<3>(out, {&x, &scale, &shift},
              [](float v, float s, float t) { return v * (1.f + s) + t; });
  return out;
}

}  // namespace ltx::cpu
