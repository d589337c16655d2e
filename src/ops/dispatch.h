#pragma once
// The one dispatch point pattern for ops (see docs/CONTRIBUTING.md "Adding an op"):
//   Tensor ops::foo(const Tensor& x, ...) {
//     check_defined("foo", {&x, ...}); ...dtype/shape checks...
//     switch (common_device("foo", {&x, ...}).type) {
//       case DeviceType::CPU: return cpu::foo(x, ...);
//       case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::foo(x, ...), "foo");
//     }
//     unreachable_device("foo");
//   }
#include <initializer_list>

#include "core/tensor.h"
#include "core/op_observer.h"

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
[[noreturn]] void unsupported_on(const char* op, Device d);
[[noreturn]] void unreachable_device(const char* op);

}  // namespace ltx::ops

#if LTX_WITH_CUDA
// The scope tells the process's op observer, if any (core/op_observer.h: the op profiler of
// LTX_PROFILE_OPS), about the op; `stmt` is usually a return, so the scope closes after the CUDA
// call was issued.
#define LTX_CUDA_DISPATCH(stmt, op)           \
  do {                                        \
    const ::ltx::OpScope ltx_op_scope(op);    \
    stmt;                                     \
  } while (0)
// As LTX_CUDA_DISPATCH; the observer counts the op under its name plus `detail_text` (a
// std::string expression, evaluated only while observed), e.g. a GEMM's sizes.
#define LTX_CUDA_DISPATCH_DETAIL(stmt, op, detail_text)                   \
  do {                                                                    \
    const ::ltx::OpScope ltx_op_scope(op);                                \
    if (ltx_op_scope.observed()) ltx_op_scope.detail(detail_text);        \
    stmt;                                                                 \
  } while (0)
#else
#define LTX_CUDA_DISPATCH(stmt, op) ::ltx::ops::unsupported_on(op, ::ltx::Device::cuda())
#define LTX_CUDA_DISPATCH_DETAIL(stmt, op, detail_text) LTX_CUDA_DISPATCH(stmt, op)
#endif
