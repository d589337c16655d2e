#include "backend/cuda/elementwise.h"

#include "backend/cuda/elementwise_loop.cuh"
#include "backend/scalar_math.h"
#include "ops/dispatch.h"

namespace ltx::cuda {

namespace {

using ops::BinaryOp;
using ops::UnaryOp;

template <BinaryOp Op>
struct BinaryFn {
  __device__ float operator()(const float* v) const { return scalar::binary<Op>(v[0], v[1]); }
};
template <BinaryOp Op>
struct BinaryScalarFn {
  float b;
  __device__ float operator()(const float* v) const { return scalar::binary<Op>(v[0], b); }
};
template <UnaryOp Op>
struct UnaryFn {
  __device__ float operator()(const float* v) const { return scalar::unary<Op>(v[0]); }
};
struct ClampFn {
  float lo, hi;
  __device__ float operator()(const float* v) const { return scalar::clamp(v[0], lo, hi); }
};
struct WhereFn {
  __device__ float operator()(const float* v) const { return v[0] != 0.f ? v[1] : v[2]; }
};
struct LerpFn {
  __device__ float operator()(const float* v) const { return scalar::lerp(v[0], v[1], v[2]); }
};
struct LerpScalarFn {
  float w;
  __device__ float operator()(const float* v) const { return scalar::lerp(v[0], v[1], w); }
};
struct GatedAddFn {
  bool bf16_product;  // mul(y, gate) would be stored as bf16
  __device__ float operator()(const float* v) const {
    float p = dtype_bits::mul_rn(v[1], v[2]);
    if (bf16_product) p = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(p));
    return dtype_bits::add_rn(v[0], p);
  }
};
struct SiluMulFn {
  bool bf16_silu;  // silu(gate) would be stored as bf16
  __device__ float operator()(const float* v) const {
    float s = scalar::unary<UnaryOp::Silu>(v[0]);
    if (bf16_silu) s = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(s));
    return dtype_bits::mul_rn(s, v[1]);
  }
};
struct ModulateFn {
  __device__ float operator()(const float* v) const { return scalar::modulate(v[0], v[1], v[2]); }
};

// The result: the float inputs' result dtype, laid out like the first of them that has the full
// shape and is dense (empty_like_layout: channels-last stays channels-last), else contiguous.
Tensor new_like(const Shape& shape, std::initializer_list<const Tensor*> float_inputs,
                Device device) {
  return empty_like_layout(shape, ops::float_result_dtype(float_inputs), device, float_inputs);
}

Shape broadcast3(const Tensor& a, const Tensor& b, const Tensor& c, const char* op) {
  return broadcast_shapes(broadcast_shapes(a.shape(), b.shape(), op), c.shape(), op);
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = new_like(broadcast_shapes(a.shape(), b.shape(), ops::binary_op_name(op)), {&a, &b},
                        a.device());
  scalar::with_binary_op(op, [&](auto o) {
    map_into<2>(out, {&a, &b}, BinaryFn<decltype(o)::value>{});
  });
  return out;
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, double b) {
  Tensor out = new_like(a.shape(), {&a}, a.device());
  const float s = static_cast<float>(b);
  scalar::with_binary_op(op, [&](auto o) {
    map_into<1>(out, {&a}, BinaryScalarFn<decltype(o)::value>{s});
  });
  return out;
}

void binary_inplace(BinaryOp op, const Tensor& dst, const Tensor& src) {
  scalar::with_binary_op(op, [&](auto o) {
    map_into<2>(dst, {&dst, &src}, BinaryFn<decltype(o)::value>{});
  });
}

void binary_into(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  scalar::with_binary_op(op, [&](auto o) {
    map_into<2>(out, {&a, &b}, BinaryFn<decltype(o)::value>{});
  });
}

Tensor unary(UnaryOp op, const Tensor& x) {
  Tensor out = new_like(x.shape(), {&x}, x.device());
  scalar::with_unary_op(op, [&](auto o) { map_into<1>(out, {&x}, UnaryFn<decltype(o)::value>{}); });
  return out;
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  Tensor out = new_like(x.shape(), {&x}, x.device());
  map_into<1>(out, {&x}, ClampFn{static_cast<float>(lo), static_cast<float>(hi)});
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = new_like(broadcast3(cond, a, b, "where"), {&a, &b}, a.device());
  map_into<3>(out, {&cond, &a, &b}, WhereFn{});
  return out;
}

Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w) {
  Tensor out = new_like(broadcast3(a, b, w, "lerp"), {&a, &b, &w}, a.device());
  map_into<3>(out, {&a, &b, &w}, LerpFn{});
  return out;
}

Tensor lerp_scalar(const Tensor& a, const Tensor& b, double w) {
  Tensor out = new_like(broadcast_shapes(a.shape(), b.shape(), "lerp"), {&a, &b}, a.device());
  map_into<2>(out, {&a, &b}, LerpScalarFn{static_cast<float>(w)});
  return out;
}

Tensor gated_add(const Tensor& x, const Tensor& y, const Tensor& gate) {
  Tensor out = new_like(broadcast3(x, y, gate, "gated_add"), {&x, &y, &gate}, x.device());
  map_into<3>(out, {&x, &y, &gate},
              GatedAddFn{ops::float_result_dtype({&y, &gate}) == DType::BF16});
  return out;
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  Tensor out = new_like(broadcast_shapes(gate.shape(), up.shape(), "silu_mul"), {&gate, &up},
                        gate.device());
  map_into<2>(out, {&gate, &up}, SiluMulFn{gate.dtype() == DType::BF16});
  return out;
}

Tensor modulate(const Tensor& x, const Tensor& scale, const Tensor& shift) {
  Tensor out = new_like(broadcast3(x, scale, shift, "modulate"), {&x, &scale, &shift}, x.device());
  map_into<3>(out, {&x, &scale, &shift}, ModulateFn{});
  return out;
}

}  // namespace ltx::cuda
