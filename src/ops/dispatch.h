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
// The argument checks (check_defined, common_device, check_float, ...) are declared with the op
// vocabulary in op_types/checks.h, which the backends share.
#include "core/tensor.h"
#include "core/op_observer.h"
#include "op_types/checks.h"

namespace ltx::ops {

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
