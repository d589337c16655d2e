#include "ops/rope.h"

#include "backend/cpu/rope.h"
#include "ops/dispatch.h"
#if LTX_WITH_CUDA
#include "backend/cuda/rope.h"
#endif

namespace ltx::ops {

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeLayout layout) {
  const char* op = "apply_rope";
  check_defined(op, {&x, &cos, &sin});
  LTX_CHECK(x.dim() >= 1, op, ": x must have at least 1 dim, got ", x.describe());
  const int64_t d = x.size(-1);
  LTX_CHECK(d % 2 == 0, op, ": the last dim of x ", x.describe(), " must be even (rotated pairs)");
  LTX_CHECK(cos.shape() == sin.shape(), op, ": cos ", cos.describe(), " and sin ", sin.describe(),
            " must have the same shape");
  const bool split = layout == RopeLayout::Split;
  const int64_t width = split ? d / 2 : d;
  LTX_CHECK(cos.dim() >= 1 && cos.size(-1) == width, op, ": cos/sin ", cos.describe(),
            " must have last dim ", width, " for x ", x.describe(),
            split ? " (Split layout: half the head dim)" : " (Interleaved layout: the full dim)");
  Shape target = x.shape();
  target[target.size() - 1] = width;
  LTX_CHECK(cos.dim() <= x.dim() && broadcast_shapes(cos.shape(), target, op) == target, op,
            ": cos/sin ", cos.describe(), " do not broadcast to x's leading dims ", target.str(),
            " (x ", x.describe(), ")");
  switch (common_device(op, {&x, &cos, &sin}).type) {
    case DeviceType::CPU:
      check_dtype(op, "x", x, DType::F32);
      check_dtype(op, "cos", cos, DType::F32);
      check_dtype(op, "sin", sin, DType::F32);
      return cpu::apply_rope(x, cos.expand(target), sin.expand(target), layout);
    case DeviceType::CUDA:
      check_float(op, "x", x);
      check_float(op, "cos", cos);
      check_float(op, "sin", sin);
      LTX_CUDA_DISPATCH(return cuda::apply_rope(x, cos.expand(target), sin.expand(target), layout),
                        op);
  }
  unreachable_device(op);
}

}  // namespace ltx::ops
