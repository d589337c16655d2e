#include "backend/cuda/matmul.h"

#include "backend/cuda/device.h"
#include "backend/cuda/linalg.h"
#include "op_types/checks.h"

namespace ltx::cuda {

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  DeviceGuard guard(a_in.device().index);
  const DType ct = ops::float_result_dtype({&a_in, &b_in});
  const Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
  const Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(1) : b_in;
  const int64_t M = a.size(-2), N = b.size(-1);
  Shape out_shape;
  Tensor out;
  if (b.dim() == 2) {
    // One GEMM over every row of a: [..., M, K] @ [K, N] = linear(a, b^T).
    out = linear(a.to(ct), b.to(ct).transpose(0, 1), Tensor());
    out_shape = out.shape();
  } else {
    Shape ab, bb;
    for (int d = 0; d + 2 < a.dim(); ++d) ab.push_back(a.size(d));
    for (int d = 0; d + 2 < b.dim(); ++d) bb.push_back(b.size(d));
    const Shape batch = broadcast_shapes(ab, bb, "matmul (batch dims)");
    const int64_t nb = batch.numel();
    Shape ae = batch, be = batch;
    ae.push_back(M);
    ae.push_back(a.size(-1));
    be.push_back(b.size(-2));
    be.push_back(N);
    const Tensor af = a.to(ct).expand(ae).reshape({nb, M, a.size(-1)});
    const Tensor bf = b.to(ct).expand(be).reshape({nb, b.size(-2), N});
    out_shape = batch;
    out_shape.push_back(M);
    out_shape.push_back(N);
    out = Tensor::empty({nb, M, N}, ct, a.device());
    for (int64_t i = 0; i < nb; ++i)
      out.select(0, i).copy_from(linear(af.select(0, i), bf.select(0, i).transpose(0, 1), {}));
    out = out.view(out_shape);
  }
  // Drop the promoted dims of 1-D operands, as torch does.
  if (b_in.dim() == 1) out = out.squeeze(-1);
  if (a_in.dim() == 1) out = out.squeeze(out.dim() - (b_in.dim() == 1 ? 1 : 2));
  return out;
}

}  // namespace ltx::cuda
