#include "ops/elementwise.h"

#include <string>

#include "backend/cpu/elementwise.h"
#include "backend/common/scalar_math.h"
#include "ops/dispatch.h"
#if LTX_WITH_CUDA
#include "backend/cuda/elementwise.h"
#endif

namespace ltx::ops {

namespace {

void check_f32(const char* op, const char* arg, const Tensor& t) { check_float(op, arg, t); }

bool is_f64(const Tensor& t) { return t.dtype() == DType::F64; }

// The float64 form's checks: pow has none, and the other operand (if any) is float storage.
void check_f64_binary(BinaryOp op, const char* name, const Tensor* other, const char* other_arg) {
  LTX_CHECK(scalar::binary_has_f64(op), name, ": float64 operands are supported by add, sub, mul, div, maximum and ",
            "minimum only; convert to f32 first");
  if (other != nullptr && !is_f64(*other)) check_f32(name, other_arg, *other);
}

}  // namespace

// ---------------------------------------------------------------- generic entry points

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_defined(name, {&a, &b});
  if (is_f64(a) || is_f64(b)) {
    check_f64_binary(op, name, is_f64(a) ? &b : &a, is_f64(a) ? "b" : "a");
    broadcast_shapes(a.shape(), b.shape(), name);
    const Device device = common_device(name, {&a, &b});
    const Tensor a64 = a.to(DType::F64), b64 = b.to(DType::F64);  // the other operand widened (exact)
    switch (device.type) {
      case DeviceType::CPU: return cpu::binary_f64(op, a64, b64);
      case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::binary_f64(op, a64, b64), name);
    }
    unreachable_device(name);
  }
  check_f32(name, "a", a);
  check_f32(name, "b", b);
  broadcast_shapes(a.shape(), b.shape(), name);  // throws when they do not broadcast
  switch (common_device(name, {&a, &b}).type) {
    case DeviceType::CPU: return cpu::binary(op, a, b);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::binary(op, a, b), name);
  }
  unreachable_device(name);
}

Tensor binary(BinaryOp op, const Tensor& a, double b) {
  const char* name = binary_op_name(op);
  check_defined(name, {&a});
  if (is_f64(a)) {
    // An f64 tensor keeps the scalar in double (torch: a Python float with a float64 tensor).
    check_f64_binary(op, name, nullptr, nullptr);
    switch (a.device().type) {
      case DeviceType::CPU: return cpu::binary_scalar_f64(op, a, b);
      case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::binary_scalar_f64(op, a, b), name);
    }
    unreachable_device(name);
  }
  check_f32(name, "a", a);
  // torch rewrites these exponents to cheaper exact forms; do the same so results match it.
  if (op == BinaryOp::Pow) {
    if (b == 2.0) return unary(UnaryOp::Square, a);
    if (b == 0.5) return unary(UnaryOp::Sqrt, a);
    if (b == -0.5) return unary(UnaryOp::Rsqrt, a);
    if (b == 1.0) return a.clone();  // clone() is always a fresh contiguous tensor
  }
  switch (a.device().type) {
    case DeviceType::CPU: return cpu::binary_scalar(op, a, b);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::binary_scalar(op, a, b), name);
  }
  unreachable_device(name);
}

namespace {
// The checks of an in-place op dst op= src: float dtypes, src broadcast onto dst's shape, and a
// dst whose elements each have their own memory (not an expanded view).
void check_inplace(const char* name, const Tensor& dst, const Tensor& src) {
  check_defined(name, {&dst, &src});
  check_f32(name, "dst", dst);
  check_f32(name, "src", src);
  LTX_CHECK(broadcast_shapes(dst.shape(), src.shape(), name) == dst.shape(), name, ": src ",
            src.describe(), " cannot be broadcast to the shape of dst ", dst.describe());
  for (int d = 0; d < dst.dim(); ++d) {
    LTX_CHECK(dst.size(d) <= 1 || dst.stride(d) != 0, name, ": dst ", dst.describe(),
              " is an expanded view (stride 0 in dim ", d,
              "), so several elements share memory; write into a contiguous tensor instead");
  }
}
}  // namespace

void binary_(BinaryOp op, const Tensor& dst, const Tensor& src) {
  const std::string name_s = std::string(binary_op_name(op)) + "_";
  const char* name = name_s.c_str();
  check_inplace(name, dst, src);
  switch (common_device(name, {&dst, &src}).type) {
    case DeviceType::CPU: return cpu::binary_inplace(op, dst, src);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::binary_inplace(op, dst, src), name);
  }
  unreachable_device(name);
}

Tensor unary(UnaryOp op, const Tensor& x) {
  const char* name = unary_op_name(op);
  check_defined(name, {&x});
  check_f32(name, "x", x);
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::unary(op, x);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::unary(op, x), name);
  }
  unreachable_device(name);
}

// ---------------------------------------------------------------- named wrappers

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Pow, a, b); }
Tensor add(const Tensor& a, double b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, double b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, double b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, double b) { return binary(BinaryOp::Div, a, b); }
Tensor maximum(const Tensor& a, double b) { return binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, double b) { return binary(BinaryOp::Minimum, a, b); }
Tensor pow(const Tensor& a, double b) { return binary(BinaryOp::Pow, a, b); }

void add_(const Tensor& dst, const Tensor& src) { binary_(BinaryOp::Add, dst, src); }
void mul_(const Tensor& dst, const Tensor& src) { binary_(BinaryOp::Mul, dst, src); }

void add_then_add_(const Tensor& dst, const Tensor& a, const Tensor& b) {
  const char* name = "add_then_add_";
  check_defined(name, {&dst, &a, &b});
  const Device device = common_device(name, {&dst, &a, &b});
  // The CPU, and dtypes the fused kernel does not round to, run the two adds.
  if (device.type == DeviceType::CPU || (dst.dtype() != DType::F32 && dst.dtype() != DType::BF16)) {
    binary_(BinaryOp::Add, dst, a);
    binary_(BinaryOp::Add, dst, b);
    return;
  }
  check_inplace(name, dst, a);
  check_inplace(name, dst, b);
  LTX_CUDA_DISPATCH(return cuda::add_then_add_(dst, a, b), name);
}

Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, x); }
Tensor abs(const Tensor& x) { return unary(UnaryOp::Abs, x); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::Log, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(UnaryOp::Rsqrt, x); }
Tensor sin(const Tensor& x) { return unary(UnaryOp::Sin, x); }
Tensor cos(const Tensor& x) { return unary(UnaryOp::Cos, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::Sigmoid, x); }
Tensor silu(const Tensor& x) { return unary(UnaryOp::Silu, x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, x); }
Tensor square(const Tensor& x) { return unary(UnaryOp::Square, x); }
Tensor softplus(const Tensor& x) { return unary(UnaryOp::Softplus, x); }
Tensor gelu(const Tensor& x) { return unary(UnaryOp::Gelu, x); }
Tensor gelu_tanh(const Tensor& x) { return unary(UnaryOp::GeluTanh, x); }

Tensor clamp(const Tensor& x, double lo, double hi) {
  check_defined("clamp", {&x});
  check_f32("clamp", "x", x);
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::clamp(x, lo, hi);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::clamp(x, lo, hi), "clamp");
  }
  unreachable_device("clamp");
}

// ---------------------------------------------------------------- ternary

namespace {

// Checks that b and c (each a tensor or the parts of a Summed) are float storage (the caller
// checks a's dtype) and that all three broadcast together; returns their common device.
Device check_ternary(const char* op, const Tensor& a, const char* nb, const Summed& b,
                     const char* nc, const Summed& c) {
  check_defined(op, {&a});
  const Shape bs = b.check(op, nb), cs = c.check(op, nc);
  broadcast_shapes(broadcast_shapes(a.shape(), bs, op), cs, op);
  return common_device(op, {&a, &b.a, &b.b, &c.a, &c.b});
}

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", {&cond});
  const DType cd = cond.dtype();
  LTX_CHECK(cd == DType::Bool || cd == DType::U8 || cd == DType::F32 ||
                (cd == DType::BF16 && cond.device().is_cuda()),
            "where: cond must be bool, u8 or f32 (nonzero = true), got ", cond.describe());
  switch (check_ternary("where", cond, "a", a, "b", b).type) {
    case DeviceType::CPU: return cpu::where(cond, a, b);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::where(cond, a, b), "where");
  }
  unreachable_device("where");
}

Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w) {
  check_defined("lerp", {&a});
  check_f32("lerp", "a", a);
  switch (check_ternary("lerp", a, "b", b, "w", w).type) {
    case DeviceType::CPU: return cpu::lerp(a, b, w);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::lerp(a, b, w), "lerp");
  }
  unreachable_device("lerp");
}

Tensor lerp(const Tensor& a, const Tensor& b, double w) {
  check_defined("lerp", {&a, &b});
  check_f32("lerp", "a", a);
  check_f32("lerp", "b", b);
  broadcast_shapes(a.shape(), b.shape(), "lerp");
  switch (common_device("lerp", {&a, &b}).type) {
    case DeviceType::CPU: return cpu::lerp_scalar(a, b, w);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::lerp_scalar(a, b, w), "lerp");
  }
  unreachable_device("lerp");
}

Tensor gated_add(const Tensor& x, const Tensor& y, const Summed& gate) {
  check_defined("gated_add", {&x});
  check_f32("gated_add", "x", x);
  switch (check_ternary("gated_add", x, "y", y, "gate", gate).type) {
    case DeviceType::CPU: return cpu::gated_add(x, y, materialize(gate));
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::gated_add(x, y, gate), "gated_add");
  }
  unreachable_device("gated_add");
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  check_defined("silu_mul", {&gate, &up});
  check_f32("silu_mul", "gate", gate);
  check_f32("silu_mul", "up", up);
  broadcast_shapes(gate.shape(), up.shape(), "silu_mul");  // throws when they do not broadcast
  switch (common_device("silu_mul", {&gate, &up}).type) {
    case DeviceType::CPU: return cpu::silu_mul(gate, up);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::silu_mul(gate, up), "silu_mul");
  }
  unreachable_device("silu_mul");
}

Tensor mul_2sigmoid(const Tensor& x, const Tensor& logits) {
  check_defined("mul_2sigmoid", {&x, &logits});
  check_f32("mul_2sigmoid", "x", x);
  check_f32("mul_2sigmoid", "logits", logits);
  broadcast_shapes(x.shape(), logits.shape(), "mul_2sigmoid");  // throws when they do not broadcast
  switch (common_device("mul_2sigmoid", {&x, &logits}).type) {
    case DeviceType::CPU: return cpu::mul_2sigmoid(x, logits);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::mul_2sigmoid(x, logits), "mul_2sigmoid");
  }
  unreachable_device("mul_2sigmoid");
}

Tensor modulate(const Tensor& x, const Summed& scale, const Summed& shift) {
  check_defined("modulate", {&x});
  check_f32("modulate", "x", x);
  switch (check_ternary("modulate", x, "scale", scale, "shift", shift).type) {
    case DeviceType::CPU: return cpu::modulate(x, materialize(scale), materialize(shift));
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::modulate(x, scale, shift), "modulate");
  }
  unreachable_device("modulate");
}

}  // namespace ltx::ops
