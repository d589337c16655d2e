#include "backend/common/interp_tables.h"

#include <algorithm>
#include <cmath>

namespace ltx::interp {

namespace {

// The index arithmetic below follows ATen's UpSample.h step by step, in float like ATen's CPU
// kernels for f32, so indices agree with torch also at rounding edges.

// compute_scales_value: 1/scale_factor when one was given, else in/out.
float scale_value(double scale, int64_t in, int64_t out) {
  return scale > 0 ? static_cast<float>(1.0 / scale)
                   : static_cast<float>(in) / static_cast<float>(out);
}

// area_pixel_compute_scale.
float linear_scale(int64_t in, int64_t out, bool align_corners, double scale) {
  if (align_corners)
    return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.f;
  return scale_value(scale, in, out);
}

}  // namespace

int64_t nearest_index(int64_t o, int64_t in, int64_t out, double scale, bool exact) {
  if (exact) {
    const float s = scale_value(scale, in, out);
    return std::min(static_cast<int64_t>(std::floor(static_cast<float>((o + 0.5) * s))), in - 1);
  }
  // torch's nearest_idx shortcuts these two cases whatever the scale factor was.
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const float s = scale_value(scale, in, out);
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * s)), in - 1);
}

LinearTaps linear_taps(int64_t in, int64_t out, bool align_corners, double scale) {
  LinearTaps t;
  const float s = linear_scale(in, out, align_corners, scale);
  for (int64_t o = 0; o < out; ++o) {
    if (out == in) {  // torch copies through whatever the scale factor was
      t.i0.push_back(o);
      t.i1.push_back(o);
      t.w0.push_back(1.f);
      t.w1.push_back(0.f);
      continue;
    }
    float src =
        align_corners ? s * static_cast<float>(o) : s * (static_cast<float>(o) + 0.5f) - 0.5f;
    if (!align_corners && src < 0) src = 0;
    const int64_t i = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const float lambda = std::clamp(src - static_cast<float>(i), 0.f, 1.f);
    t.i0.push_back(i);
    t.i1.push_back(i + (i < in - 1 ? 1 : 0));
    t.w0.push_back(1.f - lambda);
    t.w1.push_back(lambda);
  }
  return t;
}

// Adaptive-average-pool windows [start, end) (ATen's start_index / end_index).
void area_windows(int64_t in, int64_t out, std::vector<int64_t>* start, std::vector<int64_t>* end) {
  for (int64_t o = 0; o < out; ++o) {
    start->push_back((o * in) / out);
    end->push_back(((o + 1) * in + out - 1) / out);
  }
}

std::vector<std::vector<int64_t>> nearest_maps(const Tensor& x,
                                               const std::vector<int64_t>& output_size,
                                               const std::vector<double>& scales, bool exact) {
  const int R = x.dim() - 2;
  std::vector<std::vector<int64_t>> maps(x.dim());
  for (int d = 0; d < 2; ++d)
    for (int64_t i = 0; i < x.size(d); ++i) maps[d].push_back(i);
  for (int i = 0; i < R; ++i)
    for (int64_t o = 0; o < output_size[i]; ++o)
      maps[2 + i].push_back(nearest_index(o, x.size(2 + i), output_size[i],
                                          scales.empty() ? 0.0 : scales[i], exact));
  return maps;
}

}  // namespace ltx::interp
