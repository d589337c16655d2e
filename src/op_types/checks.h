#pragma once
// The argument checks every op runs before it dispatches, and the result-dtype rule of the float
// ops: shared by the dispatch layer (ops/) and the backends (a kernel allocates its result with
// float_result_dtype), so they sit below both.
#include <initializer_list>

#include "core/tensor.h"

namespace ltx::ops {

// All given (non-null, defined) tensors must share one device; returns it. Throws naming `op`.
Device common_device(const char* op, std::initializer_list<const Tensor*> tensors);
// Every non-null tensor must be defined.
void check_defined(const char* op, std::initializer_list<const Tensor*> tensors);
// Throws "op: expected f32 ..." unless t has dtype `dt`.
void check_dtype(const char* op, const char* arg, const Tensor& t, DType dt);
// Floating storage an op computes on: f32 on the CPU (which computes in f32 only); f32 or bf16
// on CUDA (kernels load either, compute in f32 and store the result's dtype).
void check_float(const char* op, const char* arg, const Tensor& t);
// The result dtype of a CUDA op over these float inputs: bf16 when every defined one is bf16,
// else f32 (torch's promotion for f32/bf16 mixes).
DType float_result_dtype(std::initializer_list<const Tensor*> tensors);
// Throws unless t.dim() == n.
void check_dim(const char* op, const char* arg, const Tensor& t, int n);

}  // namespace ltx::ops
