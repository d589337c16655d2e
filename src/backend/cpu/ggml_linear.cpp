#include "backend/cpu/ggml_linear.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/linalg.h"
#include "core/error.h"
#include "core/parallel.h"
#include "op_types/ggml_blocks.h"

namespace ltx::cpu {

namespace {

// Rows [r0, r1) of the weight into out (row-major, in_features values a row).
void dequantize_row_range(const ops::GgmlWeight& w, int64_t r0, int64_t r1, float* out) {
  const int64_t elems = ops::ggml::block_elems(w.type), bytes = ops::ggml::block_bytes(w.type);
  const int64_t row_bytes = w.blocks.size(1);
  const auto* src = static_cast<const uint8_t*>(w.blocks.raw_data()) + r0 * row_bytes;
  const int64_t n_blocks = (r1 - r0) * (w.in_features / elems);
  for (int64_t b = 0; b < n_blocks; ++b)
    (void)ops::ggml::dequantize_block(w.type, src + b * bytes, out + b * elems);
}

}  // namespace

Tensor dequantize_ggml(const ops::GgmlWeight& w) {
  const int64_t out = w.out_features(), in = w.in_features;
  Tensor y = Tensor::empty({out, in});
  float* py = y.data<float>();
  const int64_t grain = std::max<int64_t>(1, kGgmlGroupValues / in);
  parallel_for(0, out, grain, [&](int64_t r0, int64_t r1) {
    dequantize_row_range(w, r0, r1, py + r0 * in);
  });
  return y;
}

Tensor linear_ggml(const Tensor& x, const ops::GgmlWeight& w, const Tensor& bias) {
  const int64_t in = w.in_features, out = w.out_features();
  Shape out_shape;
  for (int d = 0; d + 1 < x.dim(); ++d) out_shape.push_back(x.size(d));
  const int64_t rows = out_shape.numel();
  out_shape.push_back(out);
  Tensor y = Tensor::empty(out_shape);
  if (y.numel() == 0) return y;
  float* py = y.data<float>();
  if (bias.defined()) {
    // y starts as the bias and each GEMM accumulates onto it (beta = 1), as cpu::linear does.
    const Tensor bc = bias.contiguous();
    const float* pb = bc.data<float>();
    parallel_for(0, rows, std::max<int64_t>(1, 65536 / out), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        std::memcpy(py + r * out, pb, static_cast<size_t>(out) * sizeof(float));
    });
  }

  Tensor x2 = x.reshape({rows, in});
  const GemmOperand x_op = gemm_operand_or_copy(&x2);
  const float* px = x2.data<float>();
  // One GEMM per index of x's leading dim, as cpu::linear (a sample's bits must not depend on
  // the batch it shares a call with).
  const int64_t lead = x.dim() >= 3 ? x.size(0) : 1;
  const int64_t rows_per = rows / lead;
  const int64_t lead_step = x_op.trans ? rows_per : rows_per * x_op.ld;
  // The group size depends on the weight's shape only, so the result does not depend on the
  // thread count.
  const int64_t group = std::clamp<int64_t>(kGgmlGroupValues / in, 1, out);
  const int64_t n_groups = (out + group - 1) / group;
  const auto run = [&](int64_t g0, int64_t g1) {
    std::vector<float> buf(static_cast<size_t>(group * in));
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t o0 = g * group, n = std::min(group, out - o0);
      dequantize_row_range(w, o0, o0 + n, buf.data());
      // B = the group's rows transposed: a row-major [n, in] buffer read as [in, n].
      const GemmOperand wt_op{true, in};
      for (int64_t l = 0; l < lead; ++l)
        sgemm(rows_per, n, in, 1.f, px + l * lead_step, x_op, buf.data(), wt_op,
              bias.defined() ? 1.f : 0.f, py + l * rows_per * out + o0, out);
    }
  };
  if (n_groups == 1 || num_threads() == 1) {
    run(0, n_groups);  // OpenBLAS threads the GEMMs itself
  } else {
    // Groups side by side, each GEMM on its thread.
    BlasSingleThreadScope single;
    parallel_for(0, n_groups, 1, run);
  }
  return y;
}

}  // namespace ltx::cpu
