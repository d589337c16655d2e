#include "backend/cpu/linalg.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/parallel.h"

namespace ltx::cpu {

namespace {

std::mutex g_blas_scope_mutex;
int g_blas_scope_depth = 0;
int g_blas_saved_threads = 1;

int blas_int(int64_t v, const char* what) {
  LTX_CHECK(v >= 0 && v <= INT_MAX, "sgemm: ", what, " = ", v,
            " does not fit OpenBLAS's 32-bit index type; split the product into smaller ones");
  return static_cast<int>(v);
}

// Offsets (in elements) of each broadcast batch matrix of `t`, whose leading dims are expanded
// to `batch`.
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
  const int nb_dims = batch.size();
  const int lead = nb_dims - (t.dim() - 2);
  Strides st;  // stride per batch dim, 0 where t is broadcast
  for (int d = 0; d < nb_dims; ++d) {
    const int src = d - lead;
    st.push_back(src < 0 || t.size(src) == 1 ? 0 : t.stride(src));
  }
  const int64_t nb = batch.numel();
  std::vector<int64_t> offs(static_cast<size_t>(nb), 0);
  std::vector<int64_t> idx(static_cast<size_t>(nb_dims), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < nb; ++i) {
    offs[static_cast<size_t>(i)] = off;
    for (int d = nb_dims - 1; d >= 0; --d) {  // odometer increment
      if (++idx[static_cast<size_t>(d)] < batch[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (batch[d] - 1);
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return offs;
}

}  // namespace

bool as_gemm_operand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                     GemmOperand* out) {
  // Row-major as is: unit column stride (irrelevant for one column), rows at least cols apart.
  if (cols <= 1 || col_stride == 1) {
    const int64_t ld = rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride;
    if (ld >= std::max<int64_t>(cols, 1)) {
      *out = {false, ld};
      return true;
    }
  }
  // Transposed: the memory holds a row-major cols x rows matrix.
  if (rows <= 1 || row_stride == 1) {
    const int64_t ld = cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<int64_t>(rows, 1)) {
      *out = {true, ld};
      return true;
    }
  }
  return false;
}

GemmOperand gemm_operand_or_copy(Tensor* t) {
  const int64_t rows = t->size(-2), cols = t->size(-1);
  GemmOperand op;
  if (as_gemm_operand(rows, cols, t->stride(-2), t->stride(-1), &op)) return op;
  *t = t->contiguous();
  const bool ok = as_gemm_operand(rows, cols, t->stride(-2), t->stride(-1), &op);
  LTX_CHECK(ok, "gemm_operand_or_copy: contiguous ", t->describe(), " has no BLAS layout (",
            "zero-sized matrix?)");
  return op;
}

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, GemmOperand a_op,
           const float* b, GemmOperand b_op, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta * C; BLAS implementations differ on k == 0, so do it here
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      if (beta == 0.f) {
        std::fill(row, row + n, 0.f);
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] *= beta;
      }
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, a_op.trans ? CblasTrans : CblasNoTrans,
              b_op.trans ? CblasTrans : CblasNoTrans, blas_int(m, "m"), blas_int(n, "n"),
              blas_int(k, "k"), alpha, a, blas_int(a_op.ld, "lda"), b, blas_int(b_op.ld, "ldb"),
              beta, c, blas_int(ldc, "ldc"));
}

BlasSingleThreadScope::BlasSingleThreadScope() {
  std::lock_guard<std::mutex> lk(g_blas_scope_mutex);
  if (g_blas_scope_depth++ == 0) {
    g_blas_saved_threads = openblas_get_num_threads();
    if (g_blas_saved_threads > 1) openblas_set_num_threads(1);
  }
}

BlasSingleThreadScope::~BlasSingleThreadScope() {
  std::lock_guard<std::mutex> lk(g_blas_scope_mutex);
  if (--g_blas_scope_depth == 0 && g_blas_saved_threads > 1)
    openblas_set_num_threads(g_blas_saved_threads);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  // torch.matmul: a 1-D left operand is a row vector, a 1-D right operand a column vector; the
  // added dim is dropped from the result.
  Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
  Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(1) : b_in;
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);

  Shape a_batch, b_batch;
  for (int d = 0; d + 2 < a.dim(); ++d) a_batch.push_back(a.size(d));
  for (int d = 0; d + 2 < b.dim(); ++d) b_batch.push_back(b.size(d));
  const Shape batch = broadcast_shapes(a_batch, b_batch, "matmul");
  Shape out_shape = batch, final_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  if (a_in.dim() > 1) final_shape.push_back(m);
  if (b_in.dim() > 1) final_shape.push_back(n);

  Tensor out = Tensor::empty(out_shape);
  if (out.numel() == 0) return out.view(final_shape);
  if (k == 0) {
    out.fill(0.0);
    return out.view(final_shape);
  }

  const GemmOperand a_op = gemm_operand_or_copy(&a);
  const GemmOperand b_op = gemm_operand_or_copy(&b);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = out.data<float>();
  const int64_t nb = batch.numel();
  const std::vector<int64_t> a_offs = batch_offsets(a, batch);
  const std::vector<int64_t> b_offs = batch_offsets(b, batch);

  // One shared right operand and a left operand whose batch rows are evenly spaced: the matrices
  // under one index of the leading batch dim form a single GEMM (the common [B, T, K] @ [K, N]
  // case). Never across the leading dim: OpenBLAS picks kernels and thread splits by the row
  // count, so a sample's bits would depend on how many samples share the call (batch invariance:
  // a job batched with others must equal its run alone).
  const int64_t lead = batch.size() > 0 ? batch[0] : 1;
  const int64_t inner = nb / std::max<int64_t>(lead, 1);
  if (inner > 1 && !a_op.trans && std::all_of(b_offs.begin(), b_offs.end(), [](int64_t o) { return o == 0; })) {
    bool foldable = true;
    for (int64_t i = 0; i < nb && foldable; ++i)
      foldable = a_offs[static_cast<size_t>(i)] - a_offs[static_cast<size_t>(i / inner * inner)] ==
                 (i % inner) * m * a_op.ld;
    if (foldable) {
      for (int64_t l = 0; l < lead; ++l)
        sgemm(inner * m, n, k, 1.f, pa + a_offs[static_cast<size_t>(l * inner)], a_op, pb, b_op, 0.f,
              pc + l * inner * m * n, n);
      return out.view(final_shape);
    }
  }

  auto run = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      sgemm(m, n, k, 1.f, pa + a_offs[static_cast<size_t>(i)], a_op,
            pb + b_offs[static_cast<size_t>(i)], b_op, 0.f, pc + i * m * n, n);
  };
  const double mnk = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (nb > 1 && mnk <= kSmallGemmMnk && num_threads() > 1) {
    // Many small GEMMs: spread batches over the pool, each GEMM on one thread.
    BlasSingleThreadScope single;
    const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(65536.0 / mnk));
    parallel_for(0, nb, grain, run);
  } else {
    run(0, nb);  // large GEMMs: from this thread, OpenBLAS threads each one
  }
  return out.view(final_shape);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const int64_t in = x.size(-1), out_features = weight.size(0);
  Shape out_shape;
  for (int d = 0; d + 1 < x.dim(); ++d) out_shape.push_back(x.size(d));
  const int64_t rows = out_shape.numel();
  out_shape.push_back(out_features);

  Tensor y = Tensor::empty(out_shape);
  if (y.numel() == 0) return y;
  float* pc = y.data<float>();
  if (bias.defined()) {
    // C starts as the bias and the GEMM accumulates onto it (beta = 1), like torch's addmm.
    const Tensor bc = bias.contiguous();
    const float* pbias = bc.data<float>();
    parallel_for(0, rows, std::max<int64_t>(1, 65536 / out_features), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        std::memcpy(pc + r * out_features, pbias, static_cast<size_t>(out_features) * sizeof(float));
    });
  }
  if (in == 0) {
    if (!bias.defined()) y.fill(0.0);
    return y;
  }

  Tensor x2 = x.reshape({rows, in});
  const GemmOperand x_op = gemm_operand_or_copy(&x2);
  Tensor w = weight;
  const GemmOperand w_op = gemm_operand_or_copy(&w);
  // B = weight^T: flip the weight's own layout flag.
  const GemmOperand wt_op{!w_op.trans, w_op.ld};
  // One GEMM per index of x's leading dim (the sample of a batch): OpenBLAS picks kernels and
  // splits threads by the row count, so one GEMM over every sample's rows would make a sample's
  // bits depend on its batch (a job batched with others must equal its run alone).
  const int64_t lead = x.dim() >= 3 ? x.size(0) : 1;
  const int64_t rows_per = rows / lead;
  const int64_t lead_step = x_op.trans ? rows_per : rows_per * x_op.ld;
  for (int64_t l = 0; l < lead; ++l)
    sgemm(rows_per, out_features, in, 1.f, x2.data<float>() + l * lead_step, x_op, w.data<float>(), wt_op,
          bias.defined() ? 1.f : 0.f, pc + l * rows_per * out_features, out_features);
  return y;
}

Tensor matmul_in_order(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor out = Tensor::zeros({m, n});
  if (m == 0 || n == 0) return out;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  // Rows in parallel; within a row, k outermost so that every element sees its terms in order
  // while the n loop vectorises. ISO C++ mode (-std=c++20) keeps GCC from contracting the
  // product and the sum into a fused multiply-add; clang is told so here.
  parallel_for(0, m, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(n * k, 1)),
               [&](int64_t lo, int64_t hi) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
                 for (int64_t r = lo; r < hi; ++r) {
                   float* row = po + r * n;
                   for (int64_t j = 0; j < k; ++j) {
                     const float x = pa[r * k + j];
                     const float* brow = pb + j * n;
                     for (int64_t c = 0; c < n; ++c) {
                       const float prod = x * brow[c];
                       row[c] = row[c] + prod;
                     }
                   }
                 }
               });
  return out;
}

}  // namespace ltx::cpu
