#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/linalg.h"
#include "core/parallel.h"

namespace ltx::cpu {

namespace {

// Score tiles hold at most this many floats (4 MiB) per thread; the query block shrinks for
// very long key sequences, but stays between kMinBlock and kMaxBlock rows.
constexpr int64_t kTileFloats = int64_t{1} << 20;
constexpr int64_t kMaxBlock = 64;
constexpr int64_t kMinBlock = 8;

enum class MaskKind { None, Bool, Additive };

// Applies the mask row to the scaled logits, then an fp32 softmax that subtracts the row max.
// A row whose logits are all -inf becomes all zeros (torch's _safe_softmax), not NaN.
void masked_softmax_row(float* s, int64_t n, MaskKind kind, const void* mask_row,
                        int64_t mask_stride) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (kind == MaskKind::Bool) {
    const uint8_t* m = static_cast<const uint8_t*>(mask_row);
    for (int64_t j = 0; j < n; ++j)
      if (m[j * mask_stride] == 0) s[j] = kNegInf;
  } else if (kind == MaskKind::Additive) {
    const float* m = static_cast<const float*>(mask_row);
    for (int64_t j = 0; j < n; ++j) s[j] += m[j * mask_stride];
  }
  float mx = kNegInf;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);  // NaNs skipped here, kept below
  if (mx == kNegInf) {
    std::fill(s, s + n, 0.f);
    return;
  }
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - mx);
    sum += s[j];
  }
  const float inv = 1.f / sum;
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, float scale) {
  const int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), d = q.size(3);
  const int64_t tk = k.size(2), dv = v.size(3);
  Tensor out = Tensor::empty({batch, heads, tq, dv});
  if (out.numel() == 0) return out;
  if (tk == 0) {  // attention over no keys: an empty weighted sum
    out.fill(0.0);
    return out;
  }

  // Per-(b, h) matrices go to BLAS through their strides; only layouts BLAS cannot express
  // (neither of the last two dims unit-stride) are copied.
  Tensor qq = q, kk = k, vv = v;
  GemmOperand q_op, k_op;
  if (d > 0) {
    q_op = gemm_operand_or_copy(&qq);
    k_op = gemm_operand_or_copy(&kk);
  }
  const GemmOperand kt_op{!k_op.trans, k_op.ld};  // B = K^T
  const GemmOperand v_op = gemm_operand_or_copy(&vv);
  const float* qbase = qq.data<float>();
  const float* kbase = kk.data<float>();
  const float* vbase = vv.data<float>();
  float* obase = out.data<float>();

  MaskKind kind = MaskKind::None;
  const char* mbase = nullptr;
  size_t melem = 0;
  if (mask.defined()) {
    kind = mask.dtype() == DType::F32 ? MaskKind::Additive : MaskKind::Bool;
    mbase = static_cast<const char*>(mask.raw_data());
    melem = mask.element_size();
  }

  const int64_t block = std::min(tq, std::clamp(kTileFloats / tk, kMinBlock, kMaxBlock));
  const int64_t blocks_per_head = (tq + block - 1) / block;
  const int64_t tasks = batch * heads * blocks_per_head;

  auto run = [&](int64_t t0, int64_t t1) {
    std::vector<float> tile(static_cast<size_t>(block * tk));
    float* s = tile.data();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t qb = t % blocks_per_head, bh = t / blocks_per_head;
      const int64_t h = bh % heads, b = bh / heads;
      const int64_t i0 = qb * block, rows = std::min(block, tq - i0);
      if (d > 0) {
        const float* qp = qbase + b * qq.stride(0) + h * qq.stride(1) + i0 * qq.stride(2);
        const float* kp = kbase + b * kk.stride(0) + h * kk.stride(1);
        sgemm(rows, tk, d, scale, qp, q_op, kp, kt_op, 0.f, s, tk);
      } else {
        std::fill(s, s + rows * tk, 0.f);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const void* mrow = nullptr;
        if (kind != MaskKind::None) {
          const int64_t off = b * mask.stride(0) + h * mask.stride(1) + (i0 + r) * mask.stride(2);
          mrow = mbase + off * static_cast<int64_t>(melem);
        }
        masked_softmax_row(s + r * tk, tk, kind, mrow, kind == MaskKind::None ? 0 : mask.stride(3));
      }
      const float* vp = vbase + b * vv.stride(0) + h * vv.stride(1);
      float* op = obase + ((b * heads + h) * tq + i0) * dv;
      sgemm(rows, dv, tk, 1.f, s, GemmOperand{false, tk}, vp, v_op, 0.f, op, dv);
    }
  };

  if (tasks > 1 && num_threads() > 1) {
    // Each task's GEMMs are small (block x Tk x D); keep OpenBLAS to the calling pool thread.
    BlasSingleThreadScope single;
    parallel_for(0, tasks, 1, run);
  } else {
    run(0, tasks);
  }
  return out;
}

}  // namespace ltx::cpu
