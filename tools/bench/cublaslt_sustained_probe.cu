// Times cuBLASLt's heuristic candidates on the transformer step's big GEMMs under sustained load:
// each candidate runs back to back for about 1.5 s, so the GPU is at its power limit as in a
// full-size step (short runs see boost clocks and rank candidates by speed, not by energy). y[M, N]
// = x[M, K] W[N, K]^T + bias, bf16 in / out, f32 accumulation, as ops::linear calls it (GELU
// epilogue for the FFN up projection). Standalone (no ltx code), for experiments on the GPU machine:
//   nvcc -O2 -arch=sm_90a tools/bench/cublaslt_sustained_probe.cu -lcublasLt -o probe && ./probe
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <chrono>
#include <cstdio>
#include <vector>

#define CK(x)                                                                    \
  do {                                                                           \
    auto e_ = (x);                                                               \
    if ((int)e_) {                                                               \
      std::printf("error %d at %s:%d (%s)\n", (int)e_, __FILE__, __LINE__, #x); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.5;
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  const size_t ws_size = 64u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_size));
  cudaEvent_t e0;
  cudaEventCreate(&e0);
  struct S {
    int m, n, k;
    bool gelu;
  } shapes[] = {{6144, 4096, 4096, false}, {6144, 16384, 4096, true}, {6144, 4096, 16384, false}};
  for (const S& s : shapes) {
    void *x, *w, *d, *bias;
    CK(cudaMalloc(&x, size_t(s.m) * s.k * 2));
    CK(cudaMalloc(&w, size_t(s.n) * s.k * 2));
    CK(cudaMalloc(&d, size_t(s.m) * s.n * 2));
    CK(cudaMalloc(&bias, size_t(s.n) * 2));
    // Small random-ish bits (0x3c.. patterns make every product equal; vary them a little).
    std::vector<uint16_t> hx(size_t(s.m) * s.k), hw(size_t(s.n) * s.k);
    uint32_t seed = 7;
    for (auto& v : hx) v = uint16_t(0x3c00u + ((seed = seed * 1664525u + 1013904223u) >> 22));
    for (auto& v : hw) v = uint16_t(0x3800u + ((seed = seed * 1664525u + 1013904223u) >> 22));
    CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(bias, 0, size_t(s.n) * 2));
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t ep = s.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    cublasLtMatrixLayout_t A, B, C;
    CK(cublasLtMatrixLayoutCreate(&A, CUDA_R_16BF, s.k, s.n, s.k));
    CK(cublasLtMatrixLayoutCreate(&B, CUDA_R_16BF, s.k, s.m, s.k));
    CK(cublasLtMatrixLayoutCreate(&C, CUDA_R_16BF, s.n, s.m, s.n));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size));
    std::vector<cublasLtMatmulHeuristicResult_t> res(16);
    int got = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, A, B, C, C, pref, 16, res.data(), &got));
    const double flop = 2.0 * s.m * s.n * s.k;
    float alpha = 1, beta = 0;
    std::printf("%dx%d->%d%s: %d candidates, %.1f s each\n", s.m, s.k, s.n, s.gelu ? " gelu" : "", got, seconds);
    for (int i = 0; i < got; ++i) {
      auto run = [&] { return cublasLtMatmul(lt, op, &alpha, w, A, x, B, &beta, d, C, d, C, &res[i].algo, ws, ws_size, 0); };
      if (run()) continue;
      // Warm to the power limit, then count calls over the window (wall time from a synchronised
      // start to a synchronised end; the host stays at most 10 calls ahead).
      const auto window = [&](double sec) {
        cudaDeviceSynchronize();
        const auto t0 = std::chrono::steady_clock::now();
        double el = 0;
        int n = 0;
        while (el < sec) {
          for (int r = 0; r < 10; ++r) run();
          n += 10;
          cudaEventRecord(e0);
          cudaEventSynchronize(e0);
          el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        return el / n;
      };
      window(0.5);
      const double per = window(seconds);
      int tile = 0, stages = 0, cluster = 0, swizzle = 0;
      size_t sz;
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &sz);
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &sz);
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle, &sz);
      std::printf("  cand %2d: %.4f ms/call sustained (%.0f TFLOP/s), tile %d stages %d cluster %d swizzle %d\n", i,
                  per * 1e3, flop / per / 1e12, tile, stages, cluster, swizzle);
    }
    cudaFree(x);
    cudaFree(w);
    cudaFree(d);
    cudaFree(bias);
  }
  return 0;
}
