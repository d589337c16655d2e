#include "backend/cpu/resample.h"

#include <algorithm>

#include "backend/common/interp_tables.h"
#include "backend/cpu/shape.h"
#include "core/parallel.h"

namespace ltx::cpu {

Tensor interpolate(const Tensor& x, const std::vector<int64_t>& output_size,
                   const std::vector<double>& scales, ops::InterpMode mode, bool align_corners) {
  const int R = x.dim() - 2;
  auto scale_of = [&](int i) { return scales.empty() ? 0.0 : scales[i]; };

  if (mode == ops::InterpMode::Nearest || mode == ops::InterpMode::NearestExact)
    return gather_by_maps(
        x, interp::nearest_maps(x, output_size, scales, mode == ops::InterpMode::NearestExact),
        0.0);

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
    interp::LinearTaps taps[3];
    for (int k = 0; k < 3; ++k) {
      const int i = k - (3 - R);  // spatial dim of x, or < 0 for a padded dim
      taps[k] = interp::linear_taps(in[k], out[k], align_corners, i >= 0 ? scale_of(i) : 0.0);
    }
    parallel_for(0, rows, std::max<int64_t>(1, 4096 / out[2]), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t oh = r % out[1], od = (r / out[1]) % out[0], c = r / (out[0] * out[1]);
        const float* xb = xp + c * in_plane;
        const interp::LinearTaps &td = taps[0], &th = taps[1], &tw = taps[2];
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
  for (int k = 0; k < 3; ++k) interp::area_windows(in[k], out[k], &st[k], &en[k]);
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
