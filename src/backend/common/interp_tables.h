#pragma once
// The interpolation's index tables, shared by the CPU and CUDA backends so that both pick the
// same sources and weights (ATen's UpSample.h rules, in float, as ATen's CPU kernels for f32).
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ltx::interp {

// Nearest / nearest-exact: gather maps over all dims of x (identity for N and C).
std::vector<std::vector<int64_t>> nearest_maps(const Tensor& x,
                                               const std::vector<int64_t>& output_size,
                                               const std::vector<double>& scales, bool exact);
int64_t nearest_index(int64_t o, int64_t in, int64_t out, double scale, bool exact);
// Linear: out[o] = w0[o] * in[i0[o]] + w1[o] * in[i1[o]] along one axis.
struct LinearTaps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
};
LinearTaps linear_taps(int64_t in, int64_t out, bool align_corners, double scale);
// Area: the mean of in[start[o], end[o]).
void area_windows(int64_t in, int64_t out, std::vector<int64_t>* start, std::vector<int64_t>* end);

}  // namespace ltx::interp
