#include "backend/cuda/linalg.h"

#include <cublasLt.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device.h"
#include "backend/cuda/stream.h"
#include "core/error.h"

#define LTX_CUBLAS_CHECK(call)                                                              \
  do {                                                                                      \
    const cublasStatus_t ltx_st_ = (call);                                                  \
    if (ltx_st_ != CUBLAS_STATUS_SUCCESS)                                                   \
      ::ltx::fail("cuBLASLt error in ", #call, " at ", __FILE__, ":", __LINE__, ": ",       \
                  cublasLtGetStatusName(ltx_st_), ": ", cublasLtGetStatusString(ltx_st_)); \
  } while (0)

namespace ltx::cuda {

namespace {

constexpr size_t kMaxWorkspace = size_t{32} << 20;  // cuBLAS's own choice on Hopper

cublasLtHandle_t lt_handle(int device) {
  static std::mutex mu;
  static std::vector<cublasLtHandle_t>* handles = new std::vector<cublasLtHandle_t>();  // leaked
  std::lock_guard<std::mutex> lock(mu);
  if (handles->empty()) handles->assign(static_cast<size_t>(device_count()), nullptr);
  cublasLtHandle_t& h = (*handles)[static_cast<size_t>(device)];
  if (h == nullptr) LTX_CUBLAS_CHECK(cublasLtCreate(&h));
  return h;
}

uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

// RAII wrappers for the cuBLASLt descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d) (void)cublasLtMatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() {
    if (l) (void)cublasLtMatrixLayoutDestroy(l);
  }
};
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  ~Preference() {
    if (p) (void)cublasLtMatmulPreferenceDestroy(p);
  }
};

// Heuristic results depend on the problem and on the pointers' alignments only.
using AlgoKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, uint32_t,
                           uint32_t, uint32_t, int, int, int, bool, bool>;
struct AlgoChoice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
  bool found = true;  // false: cuBLASLt has none (kept, so the question is asked once)
};

std::mutex& algo_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::map<AlgoKey, AlgoChoice>& algo_cache() {
  static auto* c = new std::map<AlgoKey, AlgoChoice>();
  return *c;
}

// True when the rows of x (all dims but the last, flattened) are one stride `ld` apart and the
// last dim is dense: then cuBLASLt can read x in place.
bool rows_addressable(const Tensor& x, int64_t* ld) {
  const int nd = x.dim();
  const int64_t k = x.size(-1);
  if (x.size(-1) > 1 && x.stride(-1) != 1) return false;
  int64_t row_stride = -1, expect = -1;
  for (int d = nd - 2; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (row_stride < 0) {
      row_stride = x.stride(d);
      expect = row_stride * x.size(d);
      continue;
    }
    if (x.stride(d) != expect) return false;
    expect *= x.size(d);
  }
  *ld = row_stride < 0 ? k : row_stride;
  return *ld >= k;
}

cudaDataType_t cuda_type(DType t) {
  if (t == DType::F8E4M3FN) return CUDA_R_8F_E4M3;
  return t == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
}

// The scales of an FP8 GEMM (f32 on the device): per tensor, D = scale_w * scale_x * (W X);
// `blockwise`: w's per 128 x 128 tile ([N/128][K/128 padded to 4], K tiles fastest) and x's per
// token and 128 inputs ([K/128][M], tokens fastest), cuBLASLt's BLK128x128 and VEC128 modes.
struct Fp8Scales {
  const float* w;
  const float* x;
  bool blockwise = false;
};

// D[M, N] (row-major, out's dtype, rows ldd apart: N when 0) = X[M, K] (rows ldx apart) @
// W[N, K]^T (+ bias[N]), then GELU (tanh approximation) when `gelu`; X and W have w's dtype
// (bf16, or f32 for the full-precision path: CUBLAS_COMPUTE_32F never uses TF32, or e4m3 with
// `fp8` scales). Returns false, without computing, when cuBLASLt has no algorithm and
// `may_fail` (else throws).
bool gemm(const Tensor& out, const void* x, int64_t ldx, const Tensor& w, const Tensor& bias,
          int64_t m, int64_t n, int64_t k, int device, bool gelu = false,
          const Fp8Scales* fp8 = nullptr, bool may_fail = false, int64_t ldd = 0) {
  if (ldd == 0) ldd = n;
  const Stream stream = current_stream(device);
  cublasLtHandle_t handle = lt_handle(device);
  const bool has_bias = bias.defined();

  MatmulDesc desc;
  LTX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  LTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                  sizeof trans_a));
  LTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                  sizeof trans_b));
  const void* bias_ptr = has_bias ? bias.raw_data() : nullptr;
  if (has_bias || gelu) {
    const cublasLtEpilogue_t epi = gelu ? (has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                        : CUBLASLT_EPILOGUE_BIAS;
    LTX_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  }
  if (has_bias) {
    LTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias_ptr, sizeof bias_ptr));
  }
  if (fp8 != nullptr) {
    // A is the weight, B the activations (the column-major view below).
    LTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                    &fp8->w, sizeof fp8->w));
    LTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                    &fp8->x, sizeof fp8->x));
    if (fp8->blockwise) {
      // Each 128-long partial sum is promoted to f32 and scaled there (DeepGEMM's rule, which
      // the reference runs); cuBLASLt offers no fast accumulation with these modes.
      const int32_t w_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      const int32_t x_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      LTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                      &w_mode, sizeof w_mode));
      LTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                      &x_mode, sizeof x_mode));
    } else {
      // torch._scaled_mm(use_fast_accum=True), as the reference calls it: partial sums stay in
      // the tensor cores' FP8 accumulator precision between promotions to f32.
      const int8_t fast_accum = 1;
      LTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                                                      &fast_accum, sizeof fast_accum));
    }
  }

  // Column-major view: A = W^T stored as [K x N] (ld K), B = X^T as [K x M] (ld ldx),
  // D = Y^T as [N x M] (ld N); op(A) = transpose.
  const cudaDataType_t out_type = cuda_type(out.dtype()), in_type = cuda_type(w.dtype());
  Layout a, b, d;
  LTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a.l, in_type, static_cast<uint64_t>(k),
                                              static_cast<uint64_t>(n), k));
  LTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b.l, in_type, static_cast<uint64_t>(k),
                                              static_cast<uint64_t>(m), ldx));
  LTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.l, out_type, static_cast<uint64_t>(n),
                                              static_cast<uint64_t>(m), ldd));

  const uint32_t al_a = alignment_of(w.raw_data()), al_b = alignment_of(x),
                 al_d = alignment_of(out.raw_data());
  const uint32_t al_bias = has_bias ? alignment_of(bias_ptr) : 256;
  const AlgoKey key{device, m, n, k, ldx, ldd, al_a, al_b, al_d, al_bias,
                    has_bias ? static_cast<int>(bias.dtype()) : -1, static_cast<int>(out_type),
                    static_cast<int>(in_type), gelu, fp8 != nullptr && fp8->blockwise};
  AlgoChoice choice{};
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(algo_mutex());
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      choice = it->second;
      cached = true;
    }
  }
  if (!cached) {
    Preference pref;
    LTX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
    const uint64_t ws = kMaxWorkspace;
    LTX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    // Split-K partial sums must stay fp32: no reduction in the (bf16) output type.
    const uint32_t reduction = static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_MASK) &
                               ~static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
    LTX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref.p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof reduction));
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_d}};
    for (const auto& [attr, value] : aligns)
      LTX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.p, attr, &value, sizeof value));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    LTX_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc.d, a.l, b.l, d.l, d.l, pref.p, 1,
                                                    &result, &found));
    if (found == 0 && may_fail) {
      std::lock_guard<std::mutex> lock(algo_mutex());
      algo_cache().emplace(key, AlgoChoice{{}, 0, false});
      return false;
    }
    LTX_CHECK(found > 0, "cuda::linear: cuBLASLt has no algorithm for x[", m, ", ", k,
              "] (row stride ", ldx, ", ", al_b, "-byte aligned) @ weight[", n, ", ", k,
              "]^T (", dtype_name(w.dtype()), ") with ", dtype_name(out.dtype()), " output",
              has_bias ? " and bias" : "", gelu ? " and GELU" : "",
              fp8 != nullptr && fp8->blockwise ? " and blockwise FP8 scales" : "", " on cuda:", device,
              "; try a contiguous, 16-byte aligned input");
    choice = AlgoChoice{result.algo, result.workspaceSize};
    std::lock_guard<std::mutex> lock(algo_mutex());
    algo_cache().emplace(key, choice);
  }

  if (!choice.found) {
    LTX_CHECK(may_fail, "cuda::linear: cuBLASLt has no algorithm for x[", m, ", ", k, "] @ weight[",
              n, ", ", k, "]^T with this epilogue and these scale modes on cuda:", device);
    return false;
  }
  std::shared_ptr<void> workspace;
  if (choice.workspace > 0) workspace = allocate(choice.workspace, stream);
  const float alpha = 1.0f, beta = 0.0f;
  LTX_CUBLAS_CHECK(cublasLtMatmul(handle, desc.d, &alpha, w.raw_data(), a.l, x, b.l, &beta,
                                  out.raw_data(), d.l, out.raw_data(), d.l, &choice.algo,
                                  workspace.get(), choice.workspace, stream.handle()));
  return true;
}

}  // namespace

namespace {

// linear's (and linear_gelu_tanh's) argument checks and GEMM; `gelu`: the GELU epilogue (the
// caller checked linear_gelu_epilogue_applies).
Tensor linear_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, bool gelu) {
  LTX_CHECK(x.defined() && weight.defined(), "cuda::linear: x and weight must be defined");
  const Device dev = x.device();
  LTX_CHECK(dev.is_cuda(), "cuda::linear: x is on ", dev.str(), ", expected a CUDA device");
  LTX_CHECK(weight.device() == dev && (!bias.defined() || bias.device() == dev),
            "cuda::linear: all tensors must be on ", dev.str(), "; got x ", x.describe(),
            ", weight ", weight.describe(), ", bias ", bias.describe());
  LTX_CHECK(weight.dim() == 2, "cuda::linear: weight must be [out, in], got ",
            weight.describe());
  const DType wt = weight.dtype();
  LTX_CHECK(wt == DType::BF16 || wt == DType::F32, "cuda::linear: weight must be bf16 or f32, got ",
            weight.describe(), " (convert it with .to(DType::BF16) when loading)");
  LTX_CHECK(x.dim() >= 1, "cuda::linear: x must have at least one dim, got ", x.describe());
  LTX_CHECK(x.dtype() == DType::BF16 || x.dtype() == DType::F32,
            "cuda::linear: x must be bf16 or f32, got ", x.describe());
  const int64_t n = weight.size(0), k = weight.size(1);
  LTX_CHECK(x.size(-1) == k, "cuda::linear: x ", x.describe(), " has ", x.size(-1),
            " input features but weight ", weight.describe(), " expects ", k);
  if (bias.defined()) {
    LTX_CHECK(bias.dim() == 1 && bias.size(0) == n, "cuda::linear: bias must be [", n,
              "] for weight ", weight.describe(), ", got ", bias.describe());
    LTX_CHECK(bias.dtype() == DType::BF16 || bias.dtype() == DType::F32,
              "cuda::linear: bias must be bf16 or f32, got ", bias.describe());
  }

  Shape out_shape;
  for (int d = 0; d + 1 < x.dim(); ++d) out_shape.push_back(x.size(d));
  out_shape.push_back(n);
  const int64_t m = out_shape.numel() / std::max<int64_t>(n, 1);
  DeviceGuard guard(dev.index);
  // The weight's dtype is the compute precision: bf16 weights give a bf16 GEMM and output, f32
  // weights the full f32 GEMM and output.
  Tensor out = Tensor::empty(out_shape, wt, dev);
  if (m == 0 || n == 0) return out;
  if (k == 0) {  // empty sum: y = bias (or 0)
    if (bias.defined())
      out.copy_from(bias.expand(out_shape));
    else
      out.fill(0.0);
    return out;
  }

  Tensor xb = x.to(wt);
  int64_t ldx = k;
  if (!rows_addressable(xb, &ldx)) {
    xb = xb.contiguous();
    ldx = k;
  }
  const Tensor w = weight.contiguous();
  Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  if (wt == DType::F32 && b.defined()) b = b.to(DType::F32);

  if (wt == DType::BF16 && b.defined() && b.dtype() == DType::F32) {
    // cuBLASLt wants the bias in the output's type: f32 epilogue, then one rounding to bf16.
    const Tensor acc = Tensor::empty(out_shape, DType::F32, dev);
    gemm(acc, xb.raw_data(), ldx, w, b, m, n, k, dev.index);
    convert_on_device(out, acc, current_stream(dev.index));
  } else {
    gemm(out, xb.raw_data(), ldx, w, b, m, n, k, dev.index, gelu);
  }
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_impl(x, weight, bias, false);
}

Tensor linear_fp8(const Tensor& xq, const Tensor& weight, const Tensor& x_scale,
                  const Tensor& w_scale, const Tensor& bias, DType out_dtype) {
  const Device dev = xq.device();
  LTX_CHECK(xq.dtype() == DType::F8E4M3FN && weight.dtype() == DType::F8E4M3FN && xq.dim() == 2 &&
                weight.dim() == 2 && xq.size(1) == weight.size(1) && xq.is_contiguous() &&
                weight.is_contiguous(),
            "cuda::linear_fp8: wants contiguous float8_e4m3fn xq [M, K] and weight [N, K], got ",
            xq.describe(), " and ", weight.describe());
  LTX_CHECK(out_dtype == DType::BF16 || out_dtype == DType::F32,
            "cuda::linear_fp8: the output must be bf16 or f32, got ", dtype_name(out_dtype));
  LTX_CHECK(!bias.defined() || (out_dtype == DType::BF16 && bias.dtype() == DType::BF16 &&
                                bias.dim() == 1 && bias.size(0) == weight.size(0)),
            "cuda::linear_fp8: the epilogue takes a bf16 bias [", weight.size(0),
            "] with a bf16 output only, got ", bias.describe());
  for (const Tensor* t : {&weight, &x_scale, &w_scale, &bias})
    LTX_CHECK(!t->defined() || t->device() == dev, "cuda::linear_fp8: all tensors must be on ",
              dev.str(), ", got ", t->describe());
  const int64_t m = xq.size(0), n = weight.size(0), k = weight.size(1);
  DeviceGuard guard(dev.index);
  Tensor out = Tensor::empty({m, n}, out_dtype, dev);
  if (m == 0 || n == 0) return out;
  if (k == 0) {  // empty sum: y = bias (or 0)
    if (bias.defined())
      out.copy_from(bias.expand({m, n}));
    else
      out.fill(0.0);
    return out;
  }
  // An undefined x_scale leaves cuBLASLt's default (no scale pointer: 1).
  const Fp8Scales scales{static_cast<const float*>(w_scale.raw_data()),
                         x_scale.defined() ? static_cast<const float*>(x_scale.raw_data()) : nullptr};
  gemm(out, xq.raw_data(), k, weight, bias.defined() ? bias.contiguous() : Tensor(), m, n, k,
       dev.index, false, &scales);
  return out;
}

bool linear_fp8_block_scaled(const Tensor& out, const Tensor& xq, const Tensor& x_scales,
                             const Tensor& weight, const Tensor& w_scales, const Tensor& bias) {
  const Device dev = xq.device();
  const int64_t m = xq.size(0), n = weight.size(0), k = weight.size(1);
  const int64_t kb = (k + 127) / 128, nb = (n + 127) / 128;
  LTX_CHECK(xq.dtype() == DType::F8E4M3FN && weight.dtype() == DType::F8E4M3FN && xq.dim() == 2 &&
                weight.dim() == 2 && xq.size(1) == k && xq.is_contiguous() &&
                weight.is_contiguous() && m % 4 == 0,
            "cuda::linear_fp8_block_scaled: wants contiguous float8_e4m3fn xq [M, K] (M a multiple "
            "of 4) and weight [N, K], got ", xq.describe(), " and ", weight.describe());
  LTX_CHECK(x_scales.dtype() == DType::F32 && x_scales.is_contiguous() && x_scales.numel() == kb * m &&
                w_scales.dtype() == DType::F32 && w_scales.is_contiguous() &&
                w_scales.numel() == nb * ((kb + 3) / 4 * 4),
            "cuda::linear_fp8_block_scaled: scales of the wrong size for x [", m, ", ", k,
            "] and weight [", n, ", ", k, "]: x_scales ", x_scales.describe(), ", w_scales ",
            w_scales.describe());
  LTX_CHECK(out.dim() == 2 && out.size(0) == m && out.size(1) == n && out.is_contiguous() &&
                (out.dtype() == DType::BF16 || out.dtype() == DType::F32),
            "cuda::linear_fp8_block_scaled: out must be contiguous bf16 / f32 [", m, ", ", n,
            "], got ", out.describe());
  LTX_CHECK(!bias.defined() || (bias.dtype() == out.dtype() && bias.dim() == 1 &&
                                bias.size(0) == n && bias.is_contiguous()),
            "cuda::linear_fp8_block_scaled: the epilogue takes a contiguous bias [", n, "] of the "
            "output's dtype, got ", bias.describe());
  for (const Tensor* t : {&x_scales, &weight, &w_scales, &bias, &out})
    LTX_CHECK(!t->defined() || t->device() == dev,
              "cuda::linear_fp8_block_scaled: all tensors must be on ", dev.str(), ", got ",
              t->describe());
  DeviceGuard guard(dev.index);
  if (m == 0 || n == 0) return true;
  const Fp8Scales scales{static_cast<const float*>(w_scales.raw_data()),
                         static_cast<const float*>(x_scales.raw_data()), true};
  return gemm(out, xq.raw_data(), k, weight, bias, m, n, k, dev.index, false, &scales,
              /*may_fail=*/bias.defined());
}

void linear_into_columns(const Tensor& out, int64_t col0, const Tensor& x, int64_t ldx,
                         const Tensor& weight, const Tensor& bias, bool gelu) {
  const int64_t m = out.size(0), n = weight.size(0), k = weight.size(1);
  LTX_CHECK(out.dim() == 2 && out.is_contiguous() && out.dtype() == weight.dtype() &&
                (weight.dtype() == DType::BF16 || weight.dtype() == DType::F32) &&
                weight.is_contiguous() && col0 >= 0 && col0 + n <= out.size(1) &&
                x.dtype() == weight.dtype() && x.dim() == 2 && x.size(0) == m &&
                x.size(1) == k && ldx >= k && (x.size(0) <= 1 || x.stride(0) == ldx) &&
                x.stride(1) == 1,
            "cuda::linear_into_columns: wants out [M, N] contiguous, x [M, K] with rows ldx apart "
            "and a contiguous weight [n, K], all of one dtype (bf16 or f32), and columns inside "
            "out; got out ", out.describe(), ", x ", x.describe(), ", weight ", weight.describe(),
            ", col0 ", col0);
  LTX_CHECK(!bias.defined() || (bias.dtype() == out.dtype() && bias.dim() == 1 &&
                                bias.size(0) == n && bias.is_contiguous()),
            "cuda::linear_into_columns: the bias must be a contiguous [", n, "] of the output's "
            "dtype, got ", bias.describe());
  LTX_CHECK(!gelu || out.dtype() == DType::BF16,
            "cuda::linear_into_columns: the GELU epilogue takes a bf16 output");
  const Device dev = out.device();
  DeviceGuard guard(dev.index);
  if (m == 0 || n == 0) return;
  LTX_CHECK(k > 0, "cuda::linear_into_columns: K must be > 0");
  gemm(out.narrow(1, col0, n), x.raw_data(), ldx, weight, bias, m, n, k, dev.index, gelu,
       nullptr, false, out.size(1));
}

bool linear_gelu_epilogue_applies(const Tensor& weight, const Tensor& bias) {
  return weight.defined() && weight.dtype() == DType::BF16 && weight.dim() == 2 &&
         weight.size(1) > 0 && (!bias.defined() || bias.dtype() == DType::BF16);
}

Tensor linear_gelu_tanh(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  LTX_CHECK(linear_gelu_epilogue_applies(weight, bias),
            "cuda::linear_gelu_tanh: the GELU epilogue takes a bf16 [out, in > 0] weight and no or a bf16 bias, "
            "got weight ", weight.describe(), ", bias ", bias.describe());
  return linear_impl(x, weight, bias, true);
}

namespace {

// matmul_in_order: 64 x 64 outputs per block of 256 threads (4 x 4 each), K in steps of 16
// through shared memory; each thread walks k from 0 up for every output it owns.
constexpr int kOrderTile = 64, kOrderStep = 16;

__global__ void matmul_in_order_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ out, int64_t m, int64_t n, int64_t k) {
  __shared__ float as[kOrderStep][kOrderTile];
  __shared__ float bs[kOrderStep][kOrderTile];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kOrderTile;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kOrderTile;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kOrderStep) {
    for (int i = threadIdx.x; i < kOrderStep * kOrderTile; i += blockDim.x) {
      const int kk = i / kOrderTile, rr = i % kOrderTile;
      const int64_t ga = row0 + rr, gk = k0 + kk;
      as[kk][rr] = ga < m && gk < k ? a[ga * k + gk] : 0.0f;
      const int64_t gb = col0 + rr;
      bs[kk][rr] = gk < k && gb < n ? b[gk * n + gb] : 0.0f;
    }
    __syncthreads();
    const int steps = static_cast<int>(k - k0 < kOrderStep ? k - k0 : kOrderStep);
    for (int kk = 0; kk < steps; ++kk)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(as[kk][ty * 4 + i], bs[kk][tx * 4 + j]));
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
      if (r < m && c < n) out[r * n + c] = acc[i][j];
    }
}

}  // namespace

Tensor matmul_in_order(const Tensor& a_in, const Tensor& b_in) {
  const int dev = a_in.device().index;
  DeviceGuard guard(dev);
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor out = Tensor::empty({m, n}, DType::F32, a.device());
  if (m == 0 || n == 0) return out;
  if (k == 0) {
    out.fill(0.0);
    return out;
  }
  LTX_CHECK((m + kOrderTile - 1) / kOrderTile <= 65535, "matmul_in_order (CUDA): ", m,
            " rows exceed the grid's limit of ", int64_t{65535} * kOrderTile);
  const dim3 grid(static_cast<unsigned>((n + kOrderTile - 1) / kOrderTile),
                  static_cast<unsigned>((m + kOrderTile - 1) / kOrderTile));
  matmul_in_order_kernel<<<grid, 256, 0, current_stream(dev).handle()>>>(
      a.data<float>(), b.data<float>(), out.data<float>(), m, n, k);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace ltx::cuda
