#include "ops/attention.h"

#include <cmath>
#include <string>

#include "backend/cpu/attention.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#if LTX_WITH_CUDA
#include "backend/cuda/attention.h"
#endif

namespace ltx::ops {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, std::optional<double> scale) {
  return scaled_dot_product_attention(q, k, v, AttentionOptions{.mask = mask, .scale = scale});
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  const char* op = "scaled_dot_product_attention";
  const Tensor& mask = options.mask;
  const Tensor& gate = options.head_gate_logits;
  check_defined(op, {&q, &k, &v});
  check_dim(op, "q [B, H, Tq, D]", q, 4);
  check_dim(op, "k [B, H, Tk, D]", k, 4);
  check_dim(op, "v [B, H, Tk, Dv]", v, 4);
  LTX_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) &&
                v.size(1) == q.size(1),
            op, ": q, k and v need the same batch and head dims [B, H, ...], got q ",
            q.describe(), ", k ", k.describe(), ", v ", v.describe());
  LTX_CHECK(k.size(3) == q.size(3), op, ": q ", q.describe(), " and k ", k.describe(),
            " need the same head dim D (last dim)");
  LTX_CHECK(v.size(2) == k.size(2), op, ": k ", k.describe(), " and v ", v.describe(),
            " need the same number of keys Tk (dim 2)");
  const Shape scores{q.size(0), q.size(1), q.size(2), k.size(2)};
  Tensor m;
  if (mask.defined()) {
    LTX_CHECK(mask.dtype() == DType::Bool || mask.dtype() == DType::U8 ||
                  mask.dtype() == DType::F32 ||
                  (mask.dtype() == DType::BF16 && mask.device().is_cuda()),
              op, ": mask ", mask.describe(),
              " must be bool/u8 (nonzero = attend) or f32 (added to the logits)");
    LTX_CHECK(broadcasts_to(mask.shape(), scores), op, ": mask ", mask.describe(),
              " does not broadcast to the score shape [B, H, Tq, Tk] = ", scores.str());
    m = mask.expand(scores);
  }
  Tensor g;
  if (gate.defined()) {
    check_float(op, "head_gate_logits", gate);
    const Shape gates{q.size(0), q.size(2), q.size(1)};
    LTX_CHECK(broadcasts_to(gate.shape(), gates), op, ": head_gate_logits ", gate.describe(),
              " does not broadcast to [B, Tq, H] = ", gates.str(), " (q [B, H, Tq, D] is ",
              q.describe(), ")");
    g = gate.expand(gates);
  }
  const double sc =
      options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  switch (common_device(op, {&q, &k, &v, &mask, &gate}).type) {
    case DeviceType::CPU: {
      check_dtype(op, "q", q, DType::F32);
      check_dtype(op, "k", k, DType::F32);
      check_dtype(op, "v", v, DType::F32);
      const Tensor out = cpu::scaled_dot_product_attention(q, k, v, m, static_cast<float>(sc));
      // The unfused reference: the gate of row (b, t, h) broadcast over Dv.
      return g.defined() ? mul_2sigmoid(out, g.transpose(1, 2).unsqueeze(-1)) : out;
    }
    case DeviceType::CUDA:
      check_float(op, "q", q);
      check_float(op, "k", k);
      check_float(op, "v", v);
      LTX_CUDA_DISPATCH_DETAIL(
          return cuda::scaled_dot_product_attention(q, k, v, m, static_cast<float>(sc),
                                                    cuda::AttentionKernel::Auto, g),
          op,
          "H" + std::to_string(q.size(1)) + " " + std::to_string(q.size(2)) + "x" +
              std::to_string(k.size(2)) + " D" + std::to_string(q.size(3)) +
              (mask.defined() ? " masked" : "") + (gate.defined() ? " gated" : ""));
  }
  unreachable_device(op);
}

}  // namespace ltx::ops
