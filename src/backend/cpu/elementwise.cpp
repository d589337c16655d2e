#include "backend/cpu/elementwise.h"

#include "backend/cpu/elementwise_loop.h"
#include "backend/common/scalar_math.h"

namespace ltx::cpu {

namespace {

using ops::BinaryOp;
using ops::UnaryOp;

// A new f32 result laid out like the first input with the full shape that is dense
// (empty_like_layout), else contiguous.
Tensor new_like(const Shape& shape, std::initializer_list<const Tensor*> inputs) {
  return empty_like_layout(shape, DType::F32, Device::cpu(), inputs);
}

Shape broadcast3(const Tensor& a, const Tensor& b, const Tensor& c, const char* op) {
  return broadcast_shapes(broadcast_shapes(a.shape(), b.shape(), op), c.shape(), op);
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = new_like(broadcast_shapes(a.shape(), b.shape(), ops::binary_op_name(op)), {&a, &b});
  scalar::with_binary_op(op, [&](auto o) {
    map_into<2>(out, {&a, &b},
                [](float x, float y) { return scalar::binary<decltype(o)::value>(x, y); });
  });
  return out;
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, double b) {
  const float s = static_cast<float>(b);
  Tensor out = new_like(a.shape(), {&a});
  scalar::with_binary_op(op, [&](auto o) {
    map_into<1>(out, {&a}, [s](float x) { return scalar::binary<decltype(o)::value>(x, s); });
  });
  return out;
}

Tensor binary_f64(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = empty_like_layout(broadcast_shapes(a.shape(), b.shape(), ops::binary_op_name(op)), DType::F64,
                                 Device::cpu(), {&a, &b});
  scalar::with_binary_op_f64(op, [&](auto o) {
    map_into<2, double>(out, {&a, &b}, [](double x, double y) { return scalar::binary<decltype(o)::value>(x, y); });
  });
  return out;
}

Tensor binary_scalar_f64(BinaryOp op, const Tensor& a, double b) {
  Tensor out = empty_like_layout(a.shape(), DType::F64, Device::cpu(), {&a});
  scalar::with_binary_op_f64(op, [&](auto o) {
    map_into<1, double>(out, {&a}, [b](double x) { return scalar::binary<decltype(o)::value>(x, b); });
  });
  return out;
}

void binary_inplace(BinaryOp op, const Tensor& dst, const Tensor& src) {
  scalar::with_binary_op(op, [&](auto o) {
    map_into<2>(dst, {&dst, &src},
                [](float x, float y) { return scalar::binary<decltype(o)::value>(x, y); });
  });
}

Tensor unary(UnaryOp op, const Tensor& x) {
  Tensor out = new_like(x.shape(), {&x});
  scalar::with_unary_op(op, [&](auto o) {
    map_into<1>(out, {&x}, [](float v) { return scalar::unary<decltype(o)::value>(v); });
  });
  return out;
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  const float l = static_cast<float>(lo), h = static_cast<float>(hi);
  Tensor out = new_like(x.shape(), {&x});
  map_into<1>(out, {&x}, [l, h](float v) { return scalar::clamp(v, l, h); });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Tensor c = cond.dtype() == DType::F32 ? cond : cond.to(DType::F32);
  Tensor out = new_like(broadcast3(c, a, b, "where"), {&a, &b});
  map_into<3>(out, {&c, &a, &b}, [](float m, float x, float y) { return m != 0.f ? x : y; });
  return out;
}

Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w) {
  Tensor out = new_like(broadcast3(a, b, w, "lerp"), {&a, &b, &w});
  map_into<3>(out, {&a, &b, &w},
              [](float x, float y, float v) { return scalar::lerp(x, y, v); });
  return out;
}

Tensor lerp_scalar(const Tensor& a, const Tensor& b, double w) {
  const float wf = static_cast<float>(w);
  Tensor out = new_like(broadcast_shapes(a.shape(), b.shape(), "lerp"), {&a, &b});
  map_into<2>(out, {&a, &b}, [wf](float x, float y) { return scalar::lerp(x, y, wf); });
  return out;
}

Tensor modulate(const Tensor& x, const Tensor& scale, const Tensor& shift) {
  Tensor out = new_like(broadcast3(x, scale, shift, "modulate"), {&x, &scale, &shift});
  map_into<3>(out, {&x, &scale, &shift},
              [](float v, float s, float t) { return scalar::modulate(v, s, t); });
  return out;
}

Tensor gated_add(const Tensor& x, const Tensor& y, const Tensor& gate) {
  Tensor out = new_like(broadcast3(x, y, gate, "gated_add"), {&x, &y, &gate});
  map_into<3>(out, {&x, &y, &gate},
              [](float a, float b, float g) { return scalar::gated_add(a, b, g); });
  return out;
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  Tensor out = new_like(broadcast_shapes(gate.shape(), up.shape(), "silu_mul"), {&gate, &up});
  map_into<2>(out, {&gate, &up}, [](float g, float u) {
    return scalar::mul_rn(scalar::unary<ops::UnaryOp::Silu>(g), u);
  });
  return out;
}

Tensor mul_2sigmoid(const Tensor& x, const Tensor& logits) {
  Tensor out = new_like(broadcast_shapes(x.shape(), logits.shape(), "mul_2sigmoid"), {&x, &logits});
  map_into<2>(out, {&x, &logits},
              [](float v, float l) { return scalar::mul_rn(v, scalar::two_sigmoid(l, false)); });
  return out;
}

}  // namespace ltx::cpu
