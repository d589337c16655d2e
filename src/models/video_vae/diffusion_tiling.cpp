#include "models/video_vae/diffusion_tiling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "io/safetensors.h"
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

DiffusionTilingGeometry diffusion_tiling_geometry(const DiffusionDecoderConfig& c) {
  LTX_CHECK(c.stage_kernels.size() == 5 && c.stage_depths.size() == 5 &&
                c.stage_channels.size() == 5 && c.upsamples.size() == 4,
            "diffusion decoder tiling: the config needs 5 stages and 4 upsamples");
  const Axis3& stride3 = c.upsamples[3].stride;
  DiffusionTilingGeometry g;
  g.tile_halos = compute_tile_halos(c.stage_kernels[3], c.stage_depths[3], c.stage5_kernel,
                                    c.stage_depths[4], stride3);
  g.pixel_scale = stage4_to_pixel_scale_factors(stride3, c.patch_size);
  g.min_tile_size_s4 = compute_tile_min_size(c.stage_kernels[3], c.stage5_kernel, stride3);
  g.patch_size = c.patch_size;
  g.stage5_channels = c.diffusion_channels();
  g.stage4_channels = c.stage_channels[3];
  for (const Upsample& u : c.upsamples) g.upsample_strides.push_back(u.stride);
  g.trailing_pad_latent_frames = (c.stage_kernels[0][0] / 2) * 2;
  g.out_channels = c.out_channels;
  return g;
}

int64_t stage4_feature_bytes(const DiffusionTilingGeometry& g, int64_t height, int64_t width,
                             int64_t num_frames, int64_t element_size) {
  LTX_CHECK(g.upsample_strides.size() >= 3 && g.stage4_channels >= 1 && element_size >= 1,
            "stage4_feature_bytes: needs 3 upsample strides, stage4_channels >= 1 and "
            "element_size >= 1");
  const tiling::ScaleFactors& v = tiling::kVideoScaleFactors;
  std::vector<Upsample> ups;
  for (const Axis3& s : g.upsample_strides) ups.push_back({s, 1});
  const Axis3 s4 = stage4_thw_from_latent(
      ups, {(num_frames - 1) / v.time + 1 + g.trailing_pad_latent_frames, height / v.height,
            width / v.width});
  return s4[0] * s4[1] * s4[2] * g.stage4_channels * element_size;
}

int64_t diffusion_decoder_weight_bytes(const io::SafetensorsFile& file) {
  int64_t total = 0;
  for (const io::TensorInfo& info : file.infos()) {
    const std::string& name = info.name;
    if (name.rfind("vae.decoder.", 0) == 0 || name.rfind("decoder.", 0) == 0 ||
        name.find("per_channel_statistics") != std::string::npos)
      total += info.numel() * 2;  // counted as bf16 whatever the stored dtype
  }
  return total;
}

tiling::TileSizeConfig recommended_decode_tiling(const DiffusionTilingGeometry& g, int64_t height,
                                                 int64_t width, int64_t num_frames,
                                                 const DiffusionTilingBudget& budget) {
  LTX_CHECK(height >= 1 && width >= 1 && num_frames >= 1,
            "diffusion decoder tiling: the video must be at least 1 x 1 x 1, got ", num_frames,
            " frames of ", width, "x", height);
  LTX_CHECK(g.patch_size >= 1 && g.stage5_channels >= 1 && g.out_channels >= 1 &&
                budget.element_size >= 1,
            "diffusion decoder tiling: patch size, stage-5 channels, output channels and element "
            "size must be >= 1");
  const auto [overlap_t, overlap_hw] = recommended_pixel_overlaps(g.tile_halos, g.pixel_scale);
  const tiling::ScaleFactors& v = tiling::kVideoScaleFactors;
  const tiling::ScaleFactors& p = g.pixel_scale;
  // Sizes must sit on the decoder's grid and pass the 8 / 32 / 32 checks of TileSizeConfig.
  const int64_t step[3] = {std::lcm(p.time, v.time), std::lcm(p.height, v.height),
                           std::lcm(p.width, v.width)};
  const int64_t scale[3] = {p.time, p.height, p.width};
  const int64_t overlap[3] = {overlap_t, overlap_hw, overlap_hw};
  const int64_t floor_units[3] = {16, 64, 64};  // frames, pixels
  const int64_t length[3] = {num_frames, height, width};
  // (tile size, tile count) per axis; the floor keeps both ramps inside a tile.
  std::array<std::vector<std::pair<int64_t, int64_t>>, 3> candidates;
  int64_t min_px[3];
  for (int a = 0; a < 3; ++a) {
    min_px[a] = round_up(std::max({2 * scale[a], 2 * overlap[a],
                                   round_up(g.min_tile_size_s4[a] * scale[a], scale[a]),
                                   floor_units[a]}),
                         step[a]);
    const int64_t max_size = std::max(round_up(length[a], step[a]), min_px[a]);
    for (int64_t size = min_px[a]; size <= max_size; size += step[a]) {
      if (size <= overlap[a]) continue;
      const int64_t n =
          static_cast<int64_t>(tiling::split_by_size(size, overlap[a])(length[a]).size());
      candidates[a].push_back({size, n});
    }
  }

  const int64_t model_cost = std::max<int64_t>(budget.model_bytes, int64_t{1} << 30);
  const int64_t s4_bytes = stage4_feature_bytes(g, height, width, num_frames, budget.element_size);
  const int64_t usable =
      std::max<int64_t>(0, budget.free_bytes - model_cost - budget.safety_bytes - s4_bytes);
  const double s5_bytes_per_token = std::max(
      1.0, static_cast<double>(g.stage5_channels) * static_cast<double>(budget.element_size) *
               budget.stage5_coef);
  const int64_t acc_bytes_per_pixel = g.out_channels * budget.element_size;
  const double unique = static_cast<double>(std::max<int64_t>(1, num_frames * height * width));

  // (waste, -volume, tiles, t, h, w): the smallest wins.
  using Score = std::tuple<double, int64_t, int64_t, int64_t, int64_t, int64_t>;
  std::optional<Score> best;
  for (const auto& [tile_t, n_t] : candidates[0]) {
    // The group buffer and the still-live previous chunk / overlap stub: 2 tile_t frames.
    const int64_t acc_bytes = 2 * tile_t * height * width * acc_bytes_per_pixel;
    if (acc_bytes >= usable) continue;
    const auto max_s5_tokens = static_cast<int64_t>(
        std::floor(static_cast<double>(usable - acc_bytes) / s5_bytes_per_token));
    for (const auto& [tile_h, n_h] : candidates[1])
      for (const auto& [tile_w, n_w] : candidates[2]) {
        const int64_t tokens = tile_t * std::max<int64_t>(1, tile_h / g.patch_size) *
                               std::max<int64_t>(1, tile_w / g.patch_size);
        if (tokens > max_s5_tokens) continue;
        const int64_t tiles = n_t * n_h * n_w;
        const Score s{static_cast<double>(tiles * tile_t * tile_h * tile_w) / unique,
                      -tile_t * tile_h * tile_w, tiles, tile_t, tile_h, tile_w};
        if (!best || s < *best) best = s;
      }
  }
  LTX_CHECK(best.has_value(),
            "diffusion decoder tiling: no decode tile fits the memory budget (smallest tile ",
            min_px[0], " frames x ", min_px[1], "x", min_px[2], " px, overlaps ", overlap_t,
            " frames / ", overlap_hw, " px; ", budget.free_bytes, " bytes free, ", usable,
            " usable after the weights (", model_cost, "), the reserve (", budget.safety_bytes,
            ") and the stage-4 feature (", s4_bytes,
            ")); lower the resolution, free memory, or give the tiling explicitly");
  tiling::TileSizeConfig c;
  c.frames = tiling::DimensionSizeConfig(std::get<3>(*best), overlap_t);
  c.height = tiling::DimensionSizeConfig(std::get<4>(*best), overlap_hw);
  c.width = tiling::DimensionSizeConfig(std::get<5>(*best), overlap_hw);
  return c;
}

}  // namespace ltx::models::video_vae
