#pragma once
// ops::Summed: an operand given as the sum of two tensors, a + b, which the consuming op forms per
// element instead of reading a tensor that a separate ops::add materialised. The transformer's
// AdaLN values are such sums (a table row [D] plus the per-token timestep slice [B, T, D]); at
// 6144 x 4096 each materialised sum is 50 MB written and read back.
//
// Exactness: a consumer computes add(a, b) with ops::add's arithmetic and rounds it to add's result
// dtype (bf16 when both parts are bf16 on CUDA, else f32) before using it, so that op(..., Summed{a,
// b}, ...) equals op(..., add(a, b), ...) bit for bit. A Tensor converts implicitly (b undefined:
// the operand is a itself), so the ops that take a Summed keep their Tensor call sites.
#include "core/tensor.h"

namespace ltx::ops {

struct Summed {
  Tensor a, b;  // b undefined: the operand is a

  Summed() = default;
  Summed(const Tensor& t) : a(t) {}  // NOLINT(google-explicit-constructor): a plain operand
  Summed(const Tensor& first, const Tensor& second) : a(first), b(second) {}

  bool summed() const { return b.defined(); }
  // Checks the parts for `op`'s argument `arg` (a defined, both float storage, shapes that
  // broadcast) and returns the sum's shape. The caller checks the devices (common_device over a
  // and b with its other operands).
  Shape check(const char* op, const char* arg) const;
  // The dtype ops::add(a, b) would return (a's dtype when not summed).
  DType dtype() const;
  // The materialised operand: ops::add(a, b), or a. The unfused reference, and the CPU path.
  Tensor value() const;
};

}  // namespace ltx::ops
