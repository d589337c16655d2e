#include "models/video_vae/diffusion_tiling.h"

#include <algorithm>

#include "ops/shape.h"

namespace ltx::models::video_vae {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t v, int64_t m) { return ceil_div(v, m) * m; }

// One interval carried through an upsample hop of `stride` (reference:
// _propagate_interval_through_upsample_hops).
tiling::Interval propagate(const tiling::Interval& iv, int64_t stride, bool causal) {
  tiling::Interval o{iv.start * stride, iv.end * stride, iv.left_ramp * stride,
                     iv.right_ramp * stride};
  if (causal && stride == 2) {
    o.end -= 1;
    if (iv.start != 0) o.start -= 1;
  }
  return o;
}

}  // namespace

Axis3 all_stages_min_tile_size(const std::vector<Axis3>& kernels,
                               const std::vector<Upsample>& upsamples, const Axis3& k5) {
  Axis3 mins{1, 1, 1}, cum{1, 1, 1};
  for (size_t s = 0; s < upsamples.size(); ++s) {
    for (int a = 0; a < 3; ++a) mins[a] = std::max(mins[a], ceil_div(kernels[s][a], cum[a]));
    for (int a = 0; a < 3; ++a) cum[a] *= upsamples[s].stride[a];
  }
  for (int a = 0; a < 3; ++a) mins[a] = std::max(mins[a], ceil_div(k5[a], cum[a]));
  return mins;
}

Axis3 compute_tile_min_size(const Axis3& k4, const Axis3& k5, const Axis3& stride3) {
  Axis3 m{};
  for (int a = 0; a < 3; ++a) m[a] = std::max(k4[a], ceil_div(k5[a], stride3[a]));
  return m;
}

std::pair<Axis3, Axis3> compute_tile_halos(const Axis3& k4, int64_t depth4, const Axis3& k5,
                                           int64_t depth5, const Axis3& stride3) {
  Axis3 h4{}, h5{};
  for (int a = 0; a < 3; ++a) {
    h4[a] = depth4 * (k4[a] / 2);
    h5[a] = ceil_div(depth5 * (k5[a] / 2), stride3[a]);
  }
  return {h4, h5};
}

tiling::ScaleFactors stage4_to_pixel_scale_factors(const Axis3& stride3, int64_t patch) {
  return {stride3[0], stride3[1] * patch, stride3[2] * patch};
}

std::pair<int64_t, int64_t> recommended_pixel_overlaps(const std::pair<Axis3, Axis3>& halos,
                                                       const tiling::ScaleFactors& scale) {
  auto dominant = [&](int a) { return std::max(halos.first[a], halos.second[a]); };
  const int64_t overlap_t = round_up(dominant(0) * scale.time, 8);
  const int64_t overlap_hw = round_up(std::max(dominant(1), dominant(2)) * scale.height, 32);
  return {overlap_t, overlap_hw};
}

Axis3 stage4_thw_from_latent(const std::vector<Upsample>& upsamples, const Axis3& latent,
                             bool drop_leading_frame) {
  Axis3 x = latent;
  for (size_t s = 0; s < 3 && s < upsamples.size(); ++s) {
    for (int a = 0; a < 3; ++a) x[a] *= upsamples[s].stride[a];
    if (upsamples[s].stride[0] == 2 && drop_leading_frame) x[0] -= 1;
  }
  return x;
}

Axis3 stage5_pixel_shape_from_stage4(const Axis3& s4, const Axis3& stride, int64_t patch,
                                     int64_t stage5_kernel_t, bool drop_leading_frame,
                                     bool pad_trailing) {
  int64_t frames = drop_leading_frame && stride[0] == 2 ? s4[0] * stride[0] - 1 : s4[0] * stride[0];
  if (pad_trailing) frames = std::max(frames, stage5_kernel_t);
  return {frames, s4[1] * stride[1] * patch, s4[2] * stride[2] * patch};
}

int64_t trailing_ghost_keep(int64_t frames, int64_t ghost, int64_t floor) {
  if (ghost <= 0) return frames;
  return std::min(frames, std::max(std::max<int64_t>(frames - ghost, 1), floor));
}

std::pair<Tensor, AxisPad> resize_axis(const Tensor& x, int dim, int64_t size, ResizeMode mode) {
  LTX_CHECK(size >= 1, "resize_axis: target size must be >= 1, got ", size);
  const int64_t length = x.size(dim);
  if (length == size) return {x, {}};
  const bool symmetric = mode == ResizeMode::Symmetric;
  const int64_t need = std::abs(size - length);
  const AxisPad pad = symmetric ? AxisPad{need / 2, need - need / 2} : AxisPad{0, need};
  if (length > size) return {x.narrow(dim, pad.before, size).contiguous(), pad};
  std::vector<int64_t> index(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) index[i] = std::clamp<int64_t>(i - pad.before, 0, length - 1);
  return {ops::index_select(x, dim, Tensor::from_vector(index, {size}).to(x.device())), pad};
}

std::pair<Tensor, std::array<AxisPad, 3>> ensure_min_latent_shape(const Tensor& latent,
                                                                  const Axis3& min_sizes) {
  Tensor x = latent;
  std::array<AxisPad, 3> pads{};
  for (int a = 0; a < 3; ++a)
    if (x.size(2 + a) < min_sizes[a])
      std::tie(x, pads[a]) = resize_axis(x, 2 + a, min_sizes[a],
                                         a == 0 ? ResizeMode::RepeatLast : ResizeMode::Symmetric);
  return {x, pads};
}

std::vector<Tile> prepare_tile_schedule(const Axis3& s4, const Shape& pixels, int64_t batch,
                                        int64_t channels,
                                        const std::optional<tiling::TilingConfig>& config,
                                        const Axis3& stride3, int64_t patch, const Axis3& min_tile,
                                        const std::pair<Axis3, Axis3>& halos) {
  using tiling::Range;
  const Range all_b{0, batch}, all_c{0, channels}, all_px_c{0, pixels[1]};
  struct Spec {
    Range in, out;
    std::vector<float> mask;
  };
  std::array<std::vector<Spec>, 3> specs;
  if (!config) {
    for (int a = 0; a < 3; ++a) specs[a] = {{{0, s4[a]}, {0, pixels[2 + a]}, {1.f}}};
  } else {
    const tiling::ScaleFactors scale = stage4_to_pixel_scale_factors(stride3, patch);
    const auto [overlap_t, overlap_hw] = recommended_pixel_overlaps(halos, scale);
    tiling::validate_overlap(*config, overlap_t, overlap_hw);
    const tiling::Splitters split =
        tiling::to_splitters(*config, scale, tiling::MinTileSize(min_tile), false);
    const bool tiled[3] = {tiling::frames_tiled(*config), tiling::height_tiled(*config),
                           tiling::width_tiled(*config)};
    for (int a = 0; a < 3; ++a) {
      if (!tiled[a]) {
        specs[a] = {{{0, s4[a]}, {0, pixels[2 + a]}, {1.f}}};
        continue;
      }
      for (const tiling::Interval& iv : split[a](s4[a])) {
        tiling::Interval px = propagate(iv, stride3[a], a == 0);
        if (a > 0) px = propagate(px, patch, false);
        specs[a].push_back(
            {{iv.start, iv.end},
             {px.start, std::min(px.end, pixels[2 + a])},
             tiling::trapezoidal_mask_1d(px.end - px.start, px.left_ramp, px.right_ramp, false)});
      }
    }
  }
  std::vector<Tile> tiles;
  for (const Spec& t : specs[0])
    for (const Spec& h : specs[1])
      for (const Spec& w : specs[2]) {
        Tile tile;
        tile.in = {all_b, t.in, h.in, w.in, all_c};
        tile.out = {all_b, all_px_c, t.out, h.out, w.out};
        tile.masks = {{1.f}, {1.f}, t.mask, h.mask, w.mask};
        tiles.push_back(std::move(tile));
      }
  return tiles;
}

}  // namespace ltx::models::video_vae
