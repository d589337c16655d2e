// Times every cuBLASLt heuristic candidate (up to 64) on the transformer step's skinny / narrow
// GEMM shapes, y[M, N] = x[M, K] W[N, K]^T + bias in bf16 with f32 accumulation, as ops::linear
// calls it. Standalone (no ltx code), for experiments on the GPU machine:
//   nvcc -O2 -arch=sm_90a tools/bench/cublaslt_candidates_probe.cu -lcublasLt -o probe && ./probe
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
#define CK(x) do { auto e = (x); if ((int)e) { printf("err %d at %s:%d\n", (int)e, __FILE__, __LINE__); return 1; } } while (0)
int main() {
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  struct S { int m, n, k; } shapes[] = {{126,2048,2048},{126,32,2048},{6144,32,4096},{126,8192,2048},{126,2048,8192},{6144,4096,4096},{1120,4096,4096}};
  size_t ws_size = 64u << 20; void* ws; CK(cudaMalloc(&ws, ws_size));
  for (auto s : shapes) {
    __nv_bfloat16 *x, *w, *d, *bias;
    CK(cudaMalloc(&x, (size_t)s.m * s.k * 2)); CK(cudaMalloc(&w, (size_t)s.n * s.k * 2));
    CK(cudaMalloc(&d, (size_t)s.m * s.n * 2)); CK(cudaMalloc(&bias, (size_t)s.n * 2));
    cudaMemset(x, 0x3c, (size_t)s.m * s.k * 2); cudaMemset(w, 0x3c, (size_t)s.n * s.k * 2); cudaMemset(bias, 0, s.n * 2);
    cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    cublasLtMatrixLayout_t A, B, C;
    CK(cublasLtMatrixLayoutCreate(&A, CUDA_R_16BF, s.k, s.n, s.k));
    CK(cublasLtMatrixLayoutCreate(&B, CUDA_R_16BF, s.k, s.m, s.k));
    CK(cublasLtMatrixLayoutCreate(&C, CUDA_R_16BF, s.n, s.m, s.n));
    cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size));
    std::vector<cublasLtMatmulHeuristicResult_t> res(64); int got = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, A, B, C, C, pref, 64, res.data(), &got));
    float alpha = 1, beta = 0; cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    double best = 1e9; int besti = -1; double first = 0;
    for (int i = 0; i < got; ++i) {
      auto run = [&] { return cublasLtMatmul(lt, op, &alpha, w, A, x, B, &beta, d, C, d, C, &res[i].algo, ws, ws_size, 0); };
      if (run()) continue;
      for (int r = 0; r < 5; ++r) run();
      cudaEventRecord(e0); const int reps = s.m * (double)s.n * s.k > 1e10 ? 20 : 200;
      for (int r = 0; r < reps; ++r) run();
      cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1);
      double us = ms * 1e3 / reps; if (i == 0) first = us;
      int splitk = 0; size_t sz; cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &sz);
      if (us < best) { best = us; besti = i; }
      if (i < 3 || us <= best) printf("  %dx%dx%d cand %2d: %8.2f us (splitk %d, ws %zu)\n", s.m, s.n, s.k, i, us, splitk, res[i].workspaceSize);
    }
    printf("%dx%d->%d: %d candidates, heuristic #0 %.2f us, best #%d %.2f us (%.2fx)\n", s.m, s.k, s.n, got, first, besti, best, first / best);
    cudaFree(x); cudaFree(w); cudaFree(d); cudaFree(bias);
  }
  return 0;
}
