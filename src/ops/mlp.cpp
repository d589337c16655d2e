#include "ops/mlp.h"

#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#if LTX_WITH_CUDA
#include "backend/cuda/mlp.h"
#endif

namespace ltx::ops {

namespace {

// Validates swiglu_add_'s arguments; returns their device.
Device check_swiglu_add(const char* op, const Tensor& residual, const Tensor& y,
                        const Tensor& w_gate_up, const Tensor& w_down) {
  check_defined(op, {&residual, &y, &w_gate_up, &w_down});
  check_dim(op, "residual", residual, 2);
  check_dim(op, "y", y, 2);
  check_dim(op, "w_gate_up", w_gate_up, 2);
  check_dim(op, "w_down", w_down, 2);
  const int64_t n = residual.size(0), c = residual.size(1), h = w_down.size(1);
  LTX_CHECK(residual.is_contiguous(), op, ": residual ", residual.describe(),
            " must be contiguous (it is updated in place)");
  LTX_CHECK(y.size(0) == n && y.size(1) == c, op, ": y ", y.describe(),
            " must have the residual's shape [", n, ", ", c, "]");
  LTX_CHECK(c == 0 || y.stride(1) == 1, op, ": y ", y.describe(),
            " needs a dense last dim (unit stride); pass y.contiguous()");
  LTX_CHECK(w_down.size(0) == c && h > 0, op, ": w_down ", w_down.describe(), " must be [", c,
            ", hidden] (hidden > 0) for residual ", residual.describe());
  LTX_CHECK(w_gate_up.size(0) == 2 * h && w_gate_up.size(1) == c, op, ": w_gate_up ",
            w_gate_up.describe(), " must be [", 2 * h, ", ", c,
            "] (gate rows then up rows) to match w_down ", w_down.describe());
  const Device dev = common_device(op, {&residual, &y, &w_gate_up, &w_down});
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"residual", &residual},
                                {"y", &y},
                                {"w_gate_up", &w_gate_up},
                                {"w_down", &w_down}}) {
    if (dev.type == DeviceType::CPU) {
      check_dtype(op, name, *t, DType::F32);
    } else {
      check_float(op, name, *t);
    }
  }
  return dev;
}

}  // namespace

void swiglu_add_unfused(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                        const Tensor& w_down) {
  check_swiglu_add("swiglu_add_unfused", residual, y, w_gate_up, w_down);
  if (residual.size(0) == 0 || residual.size(1) == 0) return;
  const int64_t h = w_down.size(1);
  const Tensor gate_up = linear(y, w_gate_up);  // [n, 2 H]
  add_(residual, linear(silu_mul(gate_up.narrow(1, 0, h), gate_up.narrow(1, h, h)), w_down));
}

bool swiglu_add_fuses(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                      const Tensor& w_down) {
  if (residual.device().type != DeviceType::CUDA) return false;
#if LTX_WITH_CUDA
  return cuda::swiglu_wgmma_applies(residual, y.defined() ? y : residual, w_gate_up, w_down);
#else
  (void)y;
  (void)w_gate_up;
  (void)w_down;
  return false;
#endif
}

void swiglu_add_(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                 const Tensor& w_down) {
  const char* op = "swiglu_add_";
  const Device dev = check_swiglu_add(op, residual, y, w_gate_up, w_down);
  if (residual.size(0) == 0 || residual.size(1) == 0) return;
  switch (dev.type) {
    case DeviceType::CPU:
      return swiglu_add_unfused(residual, y, w_gate_up, w_down);
    case DeviceType::CUDA: {
      bool done = false;
      LTX_CUDA_DISPATCH(
          if (cuda::swiglu_wgmma_applies(residual, y, w_gate_up, w_down)) {
            cuda::swiglu_wgmma_add_(residual, y, w_gate_up, w_down);
            done = true;
          },
          op);
      if (!done) swiglu_add_unfused(residual, y, w_gate_up, w_down);
      return;
    }
  }
  unreachable_device(op);
}

}  // namespace ltx::ops
