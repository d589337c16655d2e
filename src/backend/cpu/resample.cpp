#include "backend/cpu/resample.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/shape.h"
#include "core/parallel.h"

namespace ltx::cpu {

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

Tensor interpolate(const Tensor& x, const std::vector<int64_t>& output_size,
                   const std::vector<double>& scales, ops::InterpMode mode, bool align_corners) {
  const int R = x.dim() - 2;
  auto scale_of = [&](int i) { return scales.empty() ? 0.0 : scales[i]; };

  if (mode == ops::InterpMode::Nearest || mode == ops::InterpMode::NearestExact)
    return gather_by_maps(
        x, nearest_maps(x, output_size, scales, mode == ops::InterpMode::NearestExact), 0.0);

  // Pad the spatial dims to three (D, H, W) with leading size-1 dims.
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  for (int i = 0; i < R; ++i) {
    in[3 - R + i] = x.size(2 + i);
    out[3 - R + i] = output_size[i];
  }
  const Tensor xc = x.contiguous();
  Shape out_shape = {x.size(0), x.size(1)};
  for (int i = 0; i < R; ++i) out_shape.push_back(output_size[i]);
  Tensor y = Tensor::empty(out_shape);
  const int64_t nc = x.size(0) * x.size(1);
  if (y.numel() == 0) return y;
  const float* xp = xc.data<float>();
  float* yp = y.data<float>();
  const int64_t in_plane = in[0] * in[1] * in[2];
  const int64_t rows = nc * out[0] * out[1];

  if (mode == ops::InterpMode::Linear) {
    LinearTaps taps[3];
    for (int k = 0; k < 3; ++k) {
      const int i = k - (3 - R);  // spatial dim of x, or < 0 for a padded dim
      taps[k] = linear_taps(in[k], out[k], align_corners, i >= 0 ? scale_of(i) : 0.0);
    }
    parallel_for(0, rows, std::max<int64_t>(1, 4096 / out[2]), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t oh = r % out[1], od = (r / out[1]) % out[0], c = r / (out[0] * out[1]);
        const float* xb = xp + c * in_plane;
        const LinearTaps &td = taps[0], &th = taps[1], &tw = taps[2];
        const float* r00 = xb + (td.i0[od] * in[1] + th.i0[oh]) * in[2];
        const float* r01 = xb + (td.i0[od] * in[1] + th.i1[oh]) * in[2];
        const float* r10 = xb + (td.i1[od] * in[1] + th.i0[oh]) * in[2];
        const float* r11 = xb + (td.i1[od] * in[1] + th.i1[oh]) * in[2];
        const float d0 = td.w0[od], d1 = td.w1[od], h0 = th.w0[oh], h1 = th.w1[oh];
        float* yrow = yp + r * out[2];
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t a = tw.i0[ow], bb = tw.i1[ow];
          const float w0 = tw.w0[ow], w1 = tw.w1[ow];
          yrow[ow] = d0 * (h0 * (w0 * r00[a] + w1 * r00[bb]) + h1 * (w0 * r01[a] + w1 * r01[bb])) +
                     d1 * (h0 * (w0 * r10[a] + w1 * r10[bb]) + h1 * (w0 * r11[a] + w1 * r11[bb]));
        }
      }
    });
    return y;
  }

  // Area.
  std::vector<int64_t> st[3], en[3];
  for (int k = 0; k < 3; ++k) area_windows(in[k], out[k], &st[k], &en[k]);
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / out[2]), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t oh = r % out[1], od = (r / out[1]) % out[0], c = r / (out[0] * out[1]);
      const float* xb = xp + c * in_plane;
      float* yrow = yp + r * out[2];
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        float sum = 0;
        for (int64_t id = st[0][od]; id < en[0][od]; ++id)
          for (int64_t ih = st[1][oh]; ih < en[1][oh]; ++ih) {
            const float* xr = xb + (id * in[1] + ih) * in[2];
            for (int64_t iw = st[2][ow]; iw < en[2][ow]; ++iw) sum += xr[iw];
          }
        const int64_t count =
            (en[0][od] - st[0][od]) * (en[1][oh] - st[1][oh]) * (en[2][ow] - st[2][ow]);
        yrow[ow] = sum / static_cast<float>(count);
      }
    }
  });
  return y;
}

}  // namespace ltx::cpu
