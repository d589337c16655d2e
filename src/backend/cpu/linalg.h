#pragma once
// CPU matrix products on OpenBLAS (fp32), plus the small BLAS helpers other CPU ops share
// (attention, convolutions): describing a strided matrix view as a GEMM operand without copying,
// and keeping OpenBLAS single-threaded while GEMMs are issued from ltx::parallel_for tasks.
#include <cstdint>

#include "core/tensor.h"

namespace ltx::cpu {

// torch.matmul for f32 CPU tensors with >= 1 dims (shapes already validated by ops::matmul).
Tensor matmul(const Tensor& a, const Tensor& b);
// ops::matmul_in_order: a [M, K] @ b [K, N], f32, each output summed over k in increasing order
// with the products rounded before each addition.
Tensor matmul_in_order(const Tensor& a, const Tensor& b);
// y = x @ weight^T + bias; weight [out, in]; bias [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// A rows x cols matrix whose element (i, j) lives at data[i * row_stride + j * col_stride], as
// row-major BLAS sees it: either as-is (trans = false, leading dimension ld) or as the transpose
// of a row-major cols x rows matrix (trans = true). Returns false when neither layout fits
// (e.g. both strides > 1, or a broadcast stride 0); the caller then makes the view contiguous.
struct GemmOperand {
  bool trans = false;
  int64_t ld = 1;
};
bool as_gemm_operand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                     GemmOperand* out);
// The operand for `t`'s trailing two dims (rows = size(-2), cols = size(-1), both > 0), replacing
// *t by a contiguous copy first when its layout does not fit BLAS.
GemmOperand gemm_operand_or_copy(Tensor* t);

// C[m, n] (row-major, leading dimension ldc) = alpha * op(A)[m, k] * op(B)[k, n] + beta * C.
// Sizes may be zero (then C is only scaled by beta, or left alone when m or n is zero).
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, GemmOperand a_op,
           const float* b, GemmOperand b_op, float beta, float* c, int64_t ldc);

// GEMMs at or below this m*n*k are run single-threaded by OpenBLAS 0.3.x anyway
// (SMP_THRESHOLD_MIN 65536 x GEMM_MULTITHREAD_THRESHOLD 4); many of them in a batch are better
// spread over ltx::parallel_for.
inline constexpr double kSmallGemmMnk = 65536.0 * 4.0;

// While alive, OpenBLAS runs every GEMM on the calling thread only, so that GEMMs issued from
// parallel_for tasks do not each wake the whole OpenBLAS pool (oversubscription; OpenBLAS also
// serialises its threaded level-3 calls behind one lock). Scopes nest and may overlap across
// threads; the previous thread count returns when the last one ends. OpenBLAS's count is
// process-wide, so a GEMM issued meanwhile by an unrelated thread also runs single-threaded.
class BlasSingleThreadScope {
 public:
  BlasSingleThreadScope();
  ~BlasSingleThreadScope();
  BlasSingleThreadScope(const BlasSingleThreadScope&) = delete;
  BlasSingleThreadScope& operator=(const BlasSingleThreadScope&) = delete;
};

}  // namespace ltx::cpu
