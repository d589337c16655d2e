#include "backend/cuda/elementwise.h"

#include <array>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "backend/cuda/elementwise_loop.cuh"
#include "backend/common/scalar_math.h"
#include "op_types/checks.h"

namespace ltx::cuda {

namespace {

using ops::BinaryOp;
using ops::UnaryOp;

// T: float (map_into) or double (map_into_f64).
template <BinaryOp Op, typename T = float>
struct BinaryFn {
  __device__ T operator()(const T* v) const { return scalar::binary<Op>(v[0], v[1]); }
};
template <BinaryOp Op, typename T = float>
struct BinaryScalarFn {
  T b;
  __device__ T operator()(const T* v) const { return scalar::binary<Op>(v[0], b); }
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
struct Mul2SigmoidFn {
  bool bf16_gate;  // sigmoid(logits) and mul(., 2.0) would be stored as bf16
  __device__ float operator()(const float* v) const {
    return scalar::binary<BinaryOp::Mul>(v[0], scalar::two_sigmoid(v[1], bf16_gate));
  }
};

// The map_into slots of an ops::Summed operand (a, then b when summed) and its value.
template <bool kSummed>
struct SummedSlots {
  static constexpr int kCount = kSummed ? 2 : 1;
  __device__ static float value(const float* v, bool bf16_sum) {
    if constexpr (kSummed) {
      return summed_value(v[0], v[1], bf16_sum);
    } else {
      return v[0];
    }
  }
};

// Calls f(std::bool_constant<s.summed()>).
template <typename F>
void with_summed(const ops::Summed& s, F&& f) {
  if (s.summed()) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

// The defined tensors among `ts`, in order: map_into's K inputs (a Summed's parts, say).
template <int K>
std::array<const Tensor*, K> defined_operands(std::initializer_list<const Tensor*> ts) {
  std::array<const Tensor*, K> out{};
  int k = 0;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    LTX_CHECK(k < K, "map_into: more operands than slots");
    out[k++] = t;
  }
  LTX_CHECK(k == K, "map_into: fewer operands than slots");
  return out;
}

// x + y * gate; gate takes the slots from 2 on (SummedSlots).
template <bool kGateSummed>
struct GatedAddFn {
  bool bf16_product;  // mul(y, gate) would be stored as bf16
  bool bf16_gate;     // add(gate.a, gate.b) would be stored as bf16
  __device__ float operator()(const float* v) const {
    return scalar::gated_add(v[0], v[1], SummedSlots<kGateSummed>::value(v + 2, bf16_gate),
                             bf16_product);
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
// x * (1 + scale) + shift; scale takes the slots from 1 on, shift the ones after (SummedSlots).
template <bool kScaleSummed, bool kShiftSummed>
struct ModulateFn {
  bool bf16_scale, bf16_shift;  // a summed scale / shift would be stored as bf16
  __device__ float operator()(const float* v) const {
    using S = SummedSlots<kScaleSummed>;
    return scalar::modulate(v[0], S::value(v + 1, bf16_scale),
                            SummedSlots<kShiftSummed>::value(v + 1 + S::kCount, bf16_shift));
  }
};

// Operands with runs (ops::Summed::run_ends): the op runs once per run, on the run's rows of the
// result and of the operands that have them (ops::run_rows), each Summed with runs as its run's
// row broadcast over the run (Summed::run). common_runs: the runs of the first operand that has
// them; a Summed with other runs than those is materialised per token.
std::vector<int64_t> common_runs(std::initializer_list<ops::Summed*> operands) {
  std::vector<int64_t> runs;
  for (ops::Summed* s : operands) {
    if (!s->has_runs()) continue;
    if (runs.empty()) {
      runs = s->run_ends;
    } else if (s->run_ends != runs) {
      *s = ops::Summed(materialize(*s));
    }
  }
  return runs;
}

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

Tensor binary_f64(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = empty_like_layout(broadcast_shapes(a.shape(), b.shape(), ops::binary_op_name(op)), DType::F64,
                                 a.device(), {&a, &b});
  scalar::with_binary_op_f64(op, [&](auto o) {
    map_into_f64<2>(out, {&a, &b}, BinaryFn<decltype(o)::value, double>{});
  });
  return out;
}

Tensor binary_scalar_f64(BinaryOp op, const Tensor& a, double b) {
  Tensor out = empty_like_layout(a.shape(), DType::F64, a.device(), {&a});
  scalar::with_binary_op_f64(op, [&](auto o) {
    map_into_f64<1>(out, {&a}, BinaryScalarFn<decltype(o)::value, double>{b});
  });
  return out;
}

void binary_inplace(BinaryOp op, const Tensor& dst, const Tensor& src) {
  scalar::with_binary_op(op, [&](auto o) {
    map_into<2>(dst, {&dst, &src}, BinaryFn<decltype(o)::value>{});
  });
}

// (x + a) + b with the first sum rounded as add_ would store it in x's dtype.
struct AddThenAddFn {
  bool bf16_first;
  __device__ float operator()(const float* v) const {
    float s = scalar::binary<BinaryOp::Add>(v[0], v[1]);
    if (bf16_first) s = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(s));
    return scalar::binary<BinaryOp::Add>(s, v[2]);
  }
};

void add_then_add_(const Tensor& dst, const Tensor& a, const Tensor& b) {
  map_into<3>(dst, {&dst, &a, &b}, AddThenAddFn{dst.dtype() == DType::BF16});
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

namespace {
void gated_add_into(const Tensor& out, const Tensor& x, const Tensor& y, const ops::Summed& gate,
                    bool bf16_product, bool bf16_gate) {
  with_summed(gate, [&](auto g) {
    constexpr bool kG = decltype(g)::value;
    constexpr int K = 2 + SummedSlots<kG>::kCount;
    map_into<K>(out, defined_operands<K>({&x, &y, &gate.a, &gate.b}),
                GatedAddFn<kG>{bf16_product, bf16_gate});
  });
}
}  // namespace

Tensor materialize(const ops::Summed& s) {
  return ops::materialize_with(
      s, [](const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); });
}

Tensor gated_add(const Tensor& x, const Tensor& y, const ops::Summed& gate) {
  const char* op = "gated_add";
  const Shape shape =
      broadcast_shapes(broadcast_shapes(x.shape(), y.shape(), op), gate.check(op, "gate"), op);
  // Result dtypes as the unfused add(gate.a, gate.b), mul(y, gate), add(x, product) store them.
  const bool bf16_gate = gate.dtype() == DType::BF16;
  const bool bf16_product = bf16_gate && y.dtype() == DType::BF16;
  const bool bf16 = bf16_product && x.dtype() == DType::BF16;
  Tensor out = empty_like_layout(shape, bf16 ? DType::BF16 : DType::F32, x.device(),
                                 {&x, &y, &gate.a, &gate.b});
  if (!gate.has_runs()) {
    gated_add_into(out, x, y, gate, bf16_product, bf16_gate);
    return out;
  }
  const std::vector<int64_t>& runs = gate.run_ends;
  for (size_t r = 0; r < runs.size(); ++r)
    gated_add_into(ops::run_rows(out, runs, r), ops::run_rows(x, runs, r),
                   ops::run_rows(y, runs, r), gate.run(r), bf16_product, bf16_gate);
  return out;
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  Tensor out = new_like(broadcast_shapes(gate.shape(), up.shape(), "silu_mul"), {&gate, &up},
                        gate.device());
  map_into<2>(out, {&gate, &up}, SiluMulFn{gate.dtype() == DType::BF16});
  return out;
}

Tensor mul_2sigmoid(const Tensor& x, const Tensor& logits) {
  Tensor out = new_like(broadcast_shapes(x.shape(), logits.shape(), "mul_2sigmoid"), {&x, &logits},
                        x.device());
  map_into<2>(out, {&x, &logits}, Mul2SigmoidFn{logits.dtype() == DType::BF16});
  return out;
}

namespace {
void modulate_into(const Tensor& out, const Tensor& x, const ops::Summed& scale,
                   const ops::Summed& shift, bool bf16_scale, bool bf16_shift) {
  with_summed(scale, [&](auto s) {
    with_summed(shift, [&](auto t) {
      constexpr bool kS = decltype(s)::value, kT = decltype(t)::value;
      constexpr int K = 1 + SummedSlots<kS>::kCount + SummedSlots<kT>::kCount;
      map_into<K>(out, defined_operands<K>({&x, &scale.a, &scale.b, &shift.a, &shift.b}),
                  ModulateFn<kS, kT>{bf16_scale, bf16_shift});
    });
  });
}
}  // namespace

Tensor modulate(const Tensor& x, const ops::Summed& scale_in, const ops::Summed& shift_in) {
  const char* op = "modulate";
  const Shape shape = broadcast_shapes(
      broadcast_shapes(x.shape(), scale_in.check(op, "scale"), op), shift_in.check(op, "shift"), op);
  const bool bf16_scale = scale_in.dtype() == DType::BF16;
  const bool bf16_shift = shift_in.dtype() == DType::BF16;
  const bool bf16 = x.dtype() == DType::BF16 && bf16_scale && bf16_shift;
  ops::Summed scale = scale_in, shift = shift_in;
  const std::vector<int64_t> runs = common_runs({&scale, &shift});
  Tensor out = empty_like_layout(shape, bf16 ? DType::BF16 : DType::F32, x.device(),
                                 {&x, &scale.a, &scale.b, &shift.a, &shift.b});
  if (runs.empty()) {
    modulate_into(out, x, scale, shift, bf16_scale, bf16_shift);
    return out;
  }
  const auto part = [&](const ops::Summed& v, size_t r) {
    if (v.has_runs()) return v.run(r);
    return ops::Summed(ops::run_rows(v.a, runs, r), ops::run_rows(v.b, runs, r));
  };
  for (size_t r = 0; r < runs.size(); ++r)
    modulate_into(ops::run_rows(out, runs, r), ops::run_rows(x, runs, r), part(scale, r),
                  part(shift, r), bf16_scale, bf16_shift);
  return out;
}

}  // namespace ltx::cuda
