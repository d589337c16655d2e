// Measures what cuBLASLt's epilogue can take of the transformer block's gated residual
// x += gate * (y W^T + b), and what wider (concatenated) projections would gain, on the step's
// shapes (bf16 in / out, f32 accumulation, as ops::linear calls it). Standalone (no ltx code), for
// experiments on the GPU machine:
//   nvcc -O2 -arch=sm_90a tools/bench/cublaslt_gated_residual_probe.cu -lcublasLt -o probe && ./probe
// Per shape: (1) D = A B + bias (the plain linear), (2) D = A B + bias + D (beta 1, in place: a
// residual), (3) D = gate (.) (A B) + D + gate (.) bias (CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST,
// the gate per output feature), with the heuristics' candidate count, and (3) checked against
// the composition computed on the host from (1)'s result.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x)                                                                     \
  do {                                                                            \
    auto e_ = (x);                                                                \
    if ((int)e_) {                                                                \
      std::printf("error %d at %s:%d (%s)\n", (int)e_, __FILE__, __LINE__, #x);  \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

static float bf(uint16_t b) {
  uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static uint16_t to_bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

struct Gemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  int candidates = 0;
};

// y[M, N] = x[M, K] W[N, K]^T (+ bias) in cuBLASLt's column-major view (D [N, M] = op(W) x), as
// ops::linear sets it up; mode: the pointer mode (a vector alpha is indexed by D's rows: the
// output features).
static int make(cublasLtHandle_t lt, Gemm* g, int m, int n, int k, const void* bias, int mode, size_t ws) {
  CK(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (bias) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    CK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    CK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  int32_t pm = mode;
  CK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
  CK(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_16BF, k, n, k));
  CK(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_16BF, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&g->c, CUDA_R_16BF, n, m, n));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  std::vector<cublasLtMatmulHeuristicResult_t> res(16);
  CK(cublasLtMatmulAlgoGetHeuristic(lt, g->op, g->a, g->b, g->c, g->c, pref, 16, res.data(), &g->candidates));
  cublasLtMatmulPreferenceDestroy(pref);
  if (g->candidates == 0) return 2;
  g->algo = res[0].algo;
  return 0;
}

int main() {
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  const size_t ws_size = 64u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_size));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  struct S {
    int m, n, k;
  } shapes[] = {{6144, 4096, 4096},  {6144, 4096, 16384}, {6144, 4096, 2048},  {24576, 4096, 4096},
                {24576, 4096, 16384}, {6144, 2048, 4096},  {6144, 12288, 4096}, {6144, 4128, 4096},
                {24576, 2048, 4096}, {24576, 12288, 4096}};
  for (const S& s : shapes) {
    const size_t nx = size_t(s.m) * s.k, nw = size_t(s.n) * s.k, nd = size_t(s.m) * s.n;
    std::vector<uint16_t> hx(nx), hw(nw), hb(s.n), hg(s.n), hd0(nd);
    uint32_t seed = 12345;
    auto rnd = [&] {
      seed = seed * 1664525u + 1013904223u;
      return (int((seed >> 9) & 0xffff) - 32768) / 32768.f;
    };
    for (auto& v : hx) v = to_bf(rnd());
    for (auto& v : hw) v = to_bf(rnd() * 0.02f);
    for (auto& v : hb) v = to_bf(rnd() * 0.1f);
    for (auto& v : hg) v = to_bf(rnd());
    for (auto& v : hd0) v = to_bf(rnd());
    uint16_t *x, *w, *d, *bias, *gbias, *d0;
    float* gate;
    CK(cudaMalloc(&x, nx * 2));
    CK(cudaMalloc(&w, nw * 2));
    CK(cudaMalloc(&d, nd * 2));
    CK(cudaMalloc(&d0, nd * 2));
    CK(cudaMalloc(&bias, s.n * 2));
    CK(cudaMalloc(&gbias, s.n * 2));
    CK(cudaMalloc(&gate, s.n * 4));
    CK(cudaMemcpy(x, hx.data(), nx * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, hw.data(), nw * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(bias, hb.data(), s.n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d0, hd0.data(), nd * 2, cudaMemcpyHostToDevice));
    std::vector<float> hgf(s.n);
    std::vector<uint16_t> hgb(s.n);
    for (int i = 0; i < s.n; ++i) {
      hgf[i] = bf(hg[i]);
      hgb[i] = to_bf(hgf[i] * bf(hb[i]));
    }
    CK(cudaMemcpy(gate, hgf.data(), s.n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(gbias, hgb.data(), s.n * 2, cudaMemcpyHostToDevice));
    const double flop = 2.0 * s.m * s.n * s.k;
    double t[3] = {};
    int cands[3] = {};
    std::vector<uint16_t> plain(nd), fused(nd);
    for (int v = 0; v < 3; ++v) {
      Gemm g;
      const int mode = v == 2 ? CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST : CUBLASLT_POINTER_MODE_HOST;
      const int rc = make(lt, &g, s.m, s.n, s.k, v == 2 ? (const void*)gbias : (const void*)bias, mode, ws_size);
      cands[v] = g.candidates;
      if (rc) {
        std::printf("  %dx%d->%d variant %d: no algorithm (rc %d)\n", s.m, s.k, s.n, v, rc);
        continue;
      }
      float one = 1.f, zero = 0.f;
      const void* alpha = v == 2 ? (const void*)gate : (const void*)&one;
      const void* beta = v == 0 ? (const void*)&zero : (const void*)&one;
      auto run = [&] {
        return cublasLtMatmul(lt, g.op, alpha, w, g.a, x, g.b, beta, d, g.c, d, g.c, &g.algo, ws, ws_size, 0);
      };
      // Correctness run from d0 (the residual).
      CK(cudaMemcpy(d, d0, nd * 2, cudaMemcpyDeviceToDevice));
      CK(run());
      CK(cudaDeviceSynchronize());
      // (1) gives x W^T + b, the composition's first op; (3) the fused result.
      if (v != 1) CK(cudaMemcpy(v == 2 ? fused.data() : plain.data(), d, nd * 2, cudaMemcpyDeviceToHost));
      for (int r = 0; r < 5; ++r) run();
      const int reps = flop > 4e11 ? 20 : 50;
      cudaEventRecord(e0);
      for (int r = 0; r < reps; ++r) run();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      t[v] = ms / reps;
    }
    // rel L2 of (3) against the unfused composition d0 + gate * (x W^T + b), each op rounded to
    // bf16 as the separate ops store it, on a sample of rows.
    double num = 0, den = 0;
    for (size_t r = 0; r < size_t(s.m); r += 97)
      for (int c = 0; c < s.n; ++c) {
        const size_t i = r * s.n + c;
        const float prod = bf(to_bf(hgf[c] * bf(plain[i])));
        const float ref = bf(to_bf(bf(hd0[i]) + prod));
        const double diff = double(bf(fused[i])) - ref;
        num += diff * diff;
        den += double(ref) * ref;
      }
    std::printf("%dx%d->%d: plain %.4f ms (%.0f TFLOP/s, %d cand) | +residual beta1 %.4f ms (%d cand) | "
                "gate-vector alpha + residual %.4f ms (%d cand), rel L2 vs composition %.2e\n",
                s.m, s.k, s.n, t[0], flop / t[0] / 1e9, cands[0], t[1], cands[1], t[2], cands[2],
                den > 0 ? std::sqrt(num / den) : -1.0);
    cudaFree(x);
    cudaFree(w);
    cudaFree(d);
    cudaFree(d0);
    cudaFree(bias);
    cudaFree(gbias);
    cudaFree(gate);
  }
  return 0;
}
