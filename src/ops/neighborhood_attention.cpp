#include "ops/neighborhood_attention.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/neighborhood_attention.h"
#include "ops/dispatch.h"
#if LTX_WITH_CUDA
#include "backend/cuda/neighborhood_attention.h"
#endif

namespace ltx::ops {

Tensor neighborhood_attention_3d(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::array<int64_t, 3>& kernel,
                                 std::optional<double> scale, const QueryColumns& cols) {
  const char* op = "neighborhood_attention_3d";
  check_defined(op, {&q, &k, &v});
  check_dim(op, "q [B, T, H, W, heads, D]", q, 6);
  check_dim(op, "k [B, T, H, W, heads, D]", k, 6);
  check_dim(op, "v [B, T, H, W, heads, Dv]", v, 6);
  for (int d = 0; d < 5; ++d)
    LTX_CHECK(k.size(d) == q.size(d) && v.size(d) == q.size(d), op,
              ": q, k and v need the same [B, T, H, W, heads] dims, got q ", q.describe(), ", k ",
              k.describe(), ", v ", v.describe());
  LTX_CHECK(k.size(5) == q.size(5), op, ": q ", q.describe(), " and k ", k.describe(),
            " need the same head dim D (last dim)");
  for (int a = 0; a < 3; ++a)
    LTX_CHECK(kernel[a] >= 1, op, ": kernel sizes must be >= 1, got (", kernel[0], ", ", kernel[1],
              ", ", kernel[2], ")");
  const QueryColumns qc{cols.begin, cols.count < 0 ? q.size(3) - cols.begin : cols.count};
  LTX_CHECK(qc.begin >= 0 && qc.count >= 0 && qc.begin + qc.count <= q.size(3), op,
            ": query columns [", cols.begin, ", ", cols.begin, " + ", cols.count,
            ") outside W = ", q.size(3), " of q ", q.describe());
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(5)));
  switch (common_device(op, {&q, &k, &v}).type) {
    case DeviceType::CPU:
      check_dtype(op, "q", q, DType::F32);
      check_dtype(op, "k", k, DType::F32);
      check_dtype(op, "v", v, DType::F32);
      return cpu::neighborhood_attention_3d(q, k, v, kernel, static_cast<float>(sc), qc);
    case DeviceType::CUDA:
      check_float(op, "q", q);
      check_float(op, "k", k);
      check_float(op, "v", v);
      LTX_CUDA_DISPATCH(
          return cuda::neighborhood_attention_3d(q, k, v, kernel, static_cast<float>(sc),
                                                 cuda::NeighborhoodKernel::Auto, qc),
          op);
  }
  unreachable_device(op);
}

}  // namespace ltx::ops
