#include "op_types/checks.h"

namespace ltx::ops {

Device common_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (first == nullptr) {
      first = t;
    } else {
      LTX_CHECK(t->device() == first->device(), op, ": tensors on different devices (",
                first->describe(), " and ", t->describe(), "); move them with .to(device)");
    }
  }
  LTX_CHECK(first != nullptr, op, ": no input tensor");
  return first->device();
}

void check_defined(const char* op, std::initializer_list<const Tensor*> tensors) {
  int i = 0;
  for (const Tensor* t : tensors) {
    LTX_CHECK(t == nullptr || t->defined(), op, ": argument ", i, " is an undefined tensor");
    ++i;
  }
}

void check_dtype(const char* op, const char* arg, const Tensor& t, DType dt) {
  LTX_CHECK(t.dtype() == dt, op, ": ", arg, " must be ", dtype_name(dt), ", got ", t.describe());
}

void check_float(const char* op, const char* arg, const Tensor& t) {
  if (!t.device().is_cuda()) return check_dtype(op, arg, t, DType::F32);
  LTX_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, op, ": ", arg,
            " must be f32 or bf16 on CUDA, got ", t.describe());
}

DType float_result_dtype(std::initializer_list<const Tensor*> tensors) {
  bool any = false;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (t->dtype() != DType::BF16) return DType::F32;
    any = true;
  }
  return any ? DType::BF16 : DType::F32;
}

void check_dim(const char* op, const char* arg, const Tensor& t, int n) {
  LTX_CHECK(t.dim() == n, op, ": ", arg, " must have ", n, " dims, got ", t.describe());
}

}  // namespace ltx::ops
