#include "models/tiling.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "ops/elementwise.h"

namespace ltx::models::tiling {

// ------------------------------------------------------------------------------------- masks

std::vector<float> linspace_f32(float start, float end, int64_t steps) {
  LTX_CHECK(steps >= 0, "linspace: steps must be >= 0, got ", steps);
  std::vector<float> v(static_cast<size_t>(steps));
  if (steps == 0) return v;
  if (steps == 1) {
    v[0] = start;
    return v;
  }
  // torch's CPU kernel: float step, the first half counted from `start`, the rest from `end`.
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    v[i] = i < halfway ? start + step * static_cast<float>(i)
                       : end - step * static_cast<float>(steps - i - 1);
  return v;
}

std::vector<float> trapezoidal_mask_1d(int64_t length, int64_t ramp_left, int64_t ramp_right,
                                       bool left_starts_from_0) {
  LTX_CHECK(length > 0, "tiling: blend mask length must be positive, got ", length);
  ramp_left = std::clamp<int64_t>(ramp_left, 0, length);
  ramp_right = std::clamp<int64_t>(ramp_right, 0, length);
  std::vector<float> mask(static_cast<size_t>(length), 1.f);
  if (ramp_left > 0) {
    // linspace(0, 1, n)[:-1], without its leading 0 unless the ramp starts from 0.
    const int64_t n = left_starts_from_0 ? ramp_left + 1 : ramp_left + 2;
    const std::vector<float> ramp = linspace_f32(0.f, 1.f, n);
    const int64_t first = left_starts_from_0 ? 0 : 1;
    for (int64_t i = 0; i < ramp_left; ++i) mask[i] *= ramp[first + i];
  }
  if (ramp_right > 0) {
    const std::vector<float> ramp = linspace_f32(1.f, 0.f, ramp_right + 2);  // [1:-1] used
    for (int64_t i = 0; i < ramp_right; ++i) mask[length - ramp_right + i] *= ramp[1 + i];
  }
  for (float& m : mask) m = std::clamp(m, 0.f, 1.f);
  return mask;
}

std::vector<float> rectangular_mask_1d(int64_t length, int64_t left, int64_t right) {
  LTX_CHECK(length > 0, "tiling: mask length must be positive, got ", length);
  std::vector<float> mask(static_cast<size_t>(length), 1.f);
  for (int64_t i = 0; i < std::min(left, length); ++i) mask[i] = 0.f;
  for (int64_t i = 0; i < std::min(right, length); ++i) mask[length - 1 - i] = 0.f;
  return mask;
}

// ------------------------------------------------------------------------------------- splits

namespace {

Intervals whole(int64_t length) { return {Interval{0, length, 0, 0}}; }

Intervals grow_last_tile_to_min(Intervals ivs, int64_t min_tile_size) {
  if (ivs.size() <= 1) return ivs;
  Interval& last = ivs.back();
  if (last.end - last.start >= min_tile_size) return ivs;
  const int64_t new_start = last.end - min_tile_size;
  Interval& prev = ivs[ivs.size() - 2];
  const int64_t new_overlap = prev.end - new_start;
  prev.right_ramp = new_overlap;
  last.start = new_start;
  last.left_ramp = new_overlap;
  return ivs;
}

void validate_tile_intervals(const Intervals& ivs, int64_t dim_size, int64_t min_tile_size) {
  LTX_CHECK(!ivs.empty() && ivs.front().start == 0 && ivs.back().end == dim_size,
            "tiling: tiles must cover [0, ", dim_size, ")");
  for (size_t i = 0; i < ivs.size(); ++i) {
    const Interval& iv = ivs[i];
    const int64_t length = iv.end - iv.start;
    LTX_CHECK(length >= min_tile_size, "tiling: tile ", i, " length ", length,
              " is below min_tile_size=", min_tile_size);
    LTX_CHECK(iv.left_ramp >= 0 && iv.right_ramp >= 0 && iv.left_ramp <= length &&
                  iv.right_ramp <= length,
              "tiling: tile ", i, " has invalid ramps: left=", iv.left_ramp,
              ", right=", iv.right_ramp, ", length=", length);
    if (i == 0) continue;
    const int64_t overlap = ivs[i - 1].end - iv.start;
    LTX_CHECK(overlap >= 0 && ivs[i - 1].right_ramp == overlap && iv.left_ramp == overlap,
              "tiling: tiles ", i - 1, "/", i, ": ramp/overlap mismatch (overlap=", overlap, ")");
  }
}

Intervals causal_shift(Intervals ivs) {
  for (size_t i = 1; i < ivs.size(); ++i) {
    ivs[i].start -= 1;
    ivs[i].left_ramp += 1;
  }
  return ivs;
}

}  // namespace

SplitOperation split_default() {
  return [](int64_t length) { return whole(length); };
}

SplitOperation split_by_size(int64_t size, int64_t overlap, std::optional<int64_t> min_tile_size) {
  LTX_CHECK(size > 0, "tiling: tile size must be > 0, got ", size);
  LTX_CHECK(overlap >= 0 && overlap < size,
            "tiling: overlap must satisfy 0 <= overlap < size, got overlap=", overlap,
            ", size=", size);
  LTX_CHECK(!min_tile_size || *min_tile_size >= 1, "tiling: min_tile_size must be >= 1, got ",
            min_tile_size.value_or(0));
  return [size, overlap, min_tile_size](int64_t dim) -> Intervals {
    if (min_tile_size && dim < *min_tile_size) return whole(dim);
    if (dim <= size) return whole(dim);
    const int64_t stride = size - overlap;
    const int64_t amount = (dim + size - 2 * overlap - 1) / stride;
    Intervals ivs;
    ivs.push_back({0, size, 0, overlap});
    for (int64_t i = 1; i < amount - 1; ++i)
      ivs.push_back({i * stride, i * stride + size, overlap, overlap});
    ivs.push_back({(amount - 1) * stride, dim, overlap, 0});
    if (min_tile_size) {
      ivs = grow_last_tile_to_min(std::move(ivs), *min_tile_size);
      validate_tile_intervals(ivs, dim, *min_tile_size);
    }
    return ivs;
  };
}

SplitOperation split_temporal_causal(int64_t size, int64_t overlap,
                                     std::optional<int64_t> min_tile_size) {
  SplitOperation plain = split_by_size(size, overlap, min_tile_size);
  return [plain, size](int64_t dim) -> Intervals {
    if (dim <= size) return whole(dim);
    return causal_shift(plain(dim));
  };
}

SplitOperation split_by_count(int64_t num_tiles, int64_t overlap,
                              std::optional<int64_t> min_tile_size) {
  LTX_CHECK(num_tiles >= 1, "tiling: num_tiles must be >= 1, got ", num_tiles);
  LTX_CHECK(overlap >= 0, "tiling: overlap must be >= 0, got ", overlap);
  LTX_CHECK(!min_tile_size || *min_tile_size >= 1, "tiling: min_tile_size must be >= 1, got ",
            min_tile_size.value_or(0));
  return [num_tiles, overlap, min_tile_size](int64_t dim) -> Intervals {
    LTX_CHECK(num_tiles <= dim, "tiling: num_tiles (", num_tiles, ") exceeds the axis length (",
              dim, "); cannot assign at least 1 unit per tile");
    if (num_tiles == 1) return whole(dim);
    const int64_t total = dim + overlap * (num_tiles - 1);
    const int64_t tile = total / num_tiles;
    LTX_CHECK(tile > overlap, "tiling: split_by_count produced size=", tile,
              " <= overlap=", overlap, " for length ", dim, " and ", num_tiles, " tiles");
    const int64_t remainder = total % num_tiles;
    Intervals base = split_by_size(tile, overlap)(dim - remainder);
    Intervals ivs;
    for (size_t i = 0; i < base.size(); ++i) {
      const int64_t shift = std::min<int64_t>(static_cast<int64_t>(i), remainder);
      const int64_t grow = static_cast<int64_t>(i) < remainder ? 1 : 0;
      Interval iv = base[i];
      iv.start += shift;
      iv.end += shift + grow;
      ivs.push_back(iv);
    }
    if (min_tile_size) {
      ivs = grow_last_tile_to_min(std::move(ivs), *min_tile_size);
      validate_tile_intervals(ivs, dim, *min_tile_size);
    }
    return ivs;
  };
}

SplitOperation split_by_count_temporal_causal(int64_t num_tiles, int64_t overlap,
                                              std::optional<int64_t> min_tile_size) {
  SplitOperation plain = split_by_count(num_tiles, overlap, min_tile_size);
  return [plain](int64_t dim) { return causal_shift(plain(dim)); };
}

// ------------------------------------------------------------------------------------ mappings

MappingOperation default_mapping() {
  return [](const Intervals&) { return std::vector<Mapped>{Mapped{0, std::nullopt, {1.f}}}; };
}

Mapped map_temporal_slice(const Interval& iv, int64_t scale) {
  const int64_t start = iv.start * scale;
  const int64_t stop = 1 + (iv.end - 1) * scale;
  const int64_t left = iv.left_ramp == 0 ? 0 : 1 + (iv.left_ramp - 1) * scale;
  const int64_t right = iv.right_ramp * scale;
  return {start, stop, trapezoidal_mask_1d(stop - start, left, right, true)};
}

Mapped map_spatial_slice(const Interval& iv, int64_t scale) {
  const int64_t start = iv.start * scale, stop = iv.end * scale;
  return {start, stop,
          trapezoidal_mask_1d(stop - start, iv.left_ramp * scale, iv.right_ramp * scale, false)};
}

namespace {
MappingOperation per_interval(Mapped (*fn)(const Interval&, int64_t), int64_t scale) {
  return [fn, scale](const Intervals& ivs) {
    std::vector<Mapped> out;
    out.reserve(ivs.size());
    for (const Interval& iv : ivs) out.push_back(fn(iv, scale));
    return out;
  };
}
}  // namespace

MappingOperation temporal_slice_mapping(int64_t scale) {
  return per_interval(&map_temporal_slice, scale);
}
MappingOperation spatial_slice_mapping(int64_t scale) {
  return per_interval(&map_spatial_slice, scale);
}

// --------------------------------------------------------------------------------------- tiles

std::vector<Tile> create_tiles(const Shape& in_shape, const std::vector<SplitOperation>& splitters,
                               const std::vector<MappingOperation>& mappers,
                               const Shape& out_shape) {
  const int rank = in_shape.size();
  LTX_CHECK(static_cast<int>(splitters.size()) == rank && static_cast<int>(mappers.size()) == rank &&
                out_shape.size() == rank,
            "tiling: need one splitter and one mapper per axis of ", in_shape.str(), " (got ",
            splitters.size(), " / ", mappers.size(), ")");
  std::vector<std::vector<Range>> ins(rank), outs(rank);
  std::vector<std::vector<std::vector<float>>> masks(rank);
  for (int a = 0; a < rank; ++a) {
    const Intervals ivs = splitters[a](in_shape[a]);
    const std::vector<Mapped> mapped = mappers[a](ivs);
    LTX_CHECK(mapped.size() == ivs.size(), "tiling: axis ", a, ": the mapper produced ",
              mapped.size(), " output slices for ", ivs.size(), " input intervals");
    for (size_t i = 0; i < ivs.size(); ++i) {
      ins[a].push_back({ivs[i].start, ivs[i].end});
      const int64_t stop = mapped[i].stop.value_or(out_shape[a]);
      outs[a].push_back({mapped[i].start, std::min(stop, out_shape[a])});
      masks[a].push_back(mapped[i].mask);
    }
  }
  std::vector<Tile> tiles;
  std::vector<size_t> idx(rank, 0);
  while (true) {
    Tile t;
    for (int a = 0; a < rank; ++a) {
      t.in.push_back(ins[a][idx[a]]);
      t.out.push_back(outs[a][idx[a]]);
      t.masks.push_back(masks[a][idx[a]]);
    }
    tiles.push_back(std::move(t));
    int a = rank - 1;
    for (; a >= 0; --a) {
      if (++idx[a] < ins[a].size()) break;
      idx[a] = 0;
    }
    if (a < 0) break;
  }
  return tiles;
}

bool masks_are_complementary(const std::vector<Tile>& tiles, const Shape& full_shape,
                             double atol) {
  if (tiles.empty()) return true;
  const int rank = full_shape.size();
  for (const Tile& t : tiles)
    LTX_CHECK(static_cast<int>(t.out.size()) == rank && static_cast<int>(t.masks.size()) == rank,
              "tiling: tile rank ", t.out.size(), " != shape rank ", rank);
  for (int a = 0; a < rank; ++a) {
    std::vector<float> acc(static_cast<size_t>(full_shape[a]), 0.f);
    std::set<std::pair<int64_t, int64_t>> seen;
    for (const Tile& t : tiles) {
      const Range r = t.out[a];
      if (!seen.insert({r.start, r.stop}).second) continue;
      const std::vector<float>& m = t.masks[a];
      LTX_CHECK(m.size() == 1 || static_cast<int64_t>(m.size()) == r.length(), "tiling: axis ", a,
                ": mask of length ", m.size(), " for an output range of length ", r.length());
      for (int64_t i = r.start; i < r.stop; ++i) acc[i] += m.size() == 1 ? m[0] : m[i - r.start];
    }
    for (float v : acc)
      if (std::fabs(static_cast<double>(v) - 1.0) > atol) return false;
  }
  return true;
}

std::vector<std::vector<Tile>> group_tiles_by_temporal_slice(const std::vector<Tile>& tiles) {
  std::vector<std::vector<Tile>> groups;
  for (const Tile& t : tiles) {
    LTX_CHECK(t.out.size() > 2, "tiling: temporal grouping needs 5-D tiles");
    if (groups.empty() || !(groups.back().front().out[2] == t.out[2])) groups.emplace_back();
    groups.back().push_back(t);
  }
  return groups;
}

const Tensor& GroupBuffers::values() {
  if (!values_.defined()) values_ = Tensor::zeros(shape_, dtype_, device_);
  return values_;
}

const Tensor& GroupBuffers::weights() {
  if (with_weights_ && !weights_.defined()) weights_ = Tensor::zeros(shape_, dtype_, device_);
  return weights_;
}

void accumulate_into(const Tensor& slice, const Tensor& addend) {
  if (slice.dtype() != DType::F16) {
    ops::add_(slice, addend);
    return;
  }
  slice.copy_from(ops::add(slice.to(DType::F32), addend.to(DType::F32)));  // rounded once to f16
}

namespace {

// torch.finfo(dt).tiny: the smallest normal value.
double smallest_normal(DType dt) {
  switch (dt) {
    case DType::F16: return 6.103515625e-05;  // 2^-14
    case DType::BF16: return 1.1754943508222875e-38;
    case DType::F64: return 2.2250738585072014e-308;
    default: return 1.1754943508222875e-38;  // f32
  }
}

}  // namespace

void blend_tile_groups(const std::vector<Tile>& tiles, const Shape& full,
                       const AccumulateFn& accumulate, const EmitFn& emit, Device device,
                       DType accum, const BlendEmit& emit_as) {
  const bool complementary = masks_are_complementary(tiles, full);
  const double floor = std::max(1e-8, smallest_normal(accum));
  auto finished = [&](const Tensor& values, const Tensor& weights, int64_t frames) {
    const Tensor v = values.narrow(2, 0, frames);
    if (emit_as.dtype) {
      const Tensor cast = v.to(*emit_as.dtype);
      if (!weights.defined() || frames == 0) return cast;
      // The clamp is exact in the weights' dtype (the floor is one of its values); the division in
      // f32, rounded to the emit dtype.
      const Tensor w = ops::maximum(weights.narrow(2, 0, frames).to(DType::F32), floor);
      return ops::div(cast.to(DType::F32), w).to(*emit_as.dtype);
    }
    if (!weights.defined() || frames == 0) return v;
    return ops::div(v, ops::maximum(weights.narrow(2, 0, frames), 1e-8));
  };
  Tensor prev, prev_weights;
  Range prev_slice;
  for (const std::vector<Tile>& group : group_tiles_by_temporal_slice(tiles)) {
    const Range slice = group.front().out[2];
    Shape buffer_shape = full;
    buffer_shape[2] = slice.length();
    GroupBuffers buffers(buffer_shape, !complementary, device, accum);
    for (const Tile& t : group) accumulate(t, buffers, slice.start);
    Tensor buffer = buffers.values();
    Tensor weights = buffers.weights();
    if (prev.defined()) {
      // Blend the frames this group shares with the previous one, then hand out the previous
      // group's frames that no later group touches.
      if (prev_slice.stop > slice.start) {
        const int64_t overlap = prev_slice.stop - slice.start;
        Tensor prev_tail = prev.narrow(2, slice.start - prev_slice.start, overlap);
        accumulate_into(prev_tail, buffer.narrow(2, 0, overlap));
        buffer.narrow(2, 0, overlap).copy_from(prev_tail);
        if (weights.defined()) {
          Tensor prev_wtail = prev_weights.narrow(2, slice.start - prev_slice.start, overlap);
          accumulate_into(prev_wtail, weights.narrow(2, 0, overlap));
          weights.narrow(2, 0, overlap).copy_from(prev_wtail);
        }
      }
      emit(finished(prev, prev_weights, slice.start - prev_slice.start), prev_slice.start);
    }
    prev = buffer;
    prev_weights = weights;
    prev_slice = slice;
  }
  if (prev.defined()) emit(finished(prev, prev_weights, prev.size(2)), prev_slice.start);
}

Tensor scale_by_masks_1d(const Tensor& x, const std::vector<std::vector<float>>& masks) {
  LTX_CHECK(static_cast<int>(masks.size()) == x.dim(), "tiling: ", masks.size(),
            " masks for a tensor of rank ", x.dim());
  Tensor out = x;
  for (int a = 0; a < x.dim(); ++a) {
    const std::vector<float>& m = masks[a];
    // Multiplying by an all-ones mask is exact: skip it.
    if (std::all_of(m.begin(), m.end(), [](float v) { return v == 1.f; })) continue;
    LTX_CHECK(m.size() == 1 || static_cast<int64_t>(m.size()) == x.size(a), "tiling: axis ", a,
              ": mask of length ", m.size(), " for ", x.describe());
    std::vector<int64_t> dims(x.dim(), 1);
    dims[a] = static_cast<int64_t>(m.size());
    out = ops::mul(out, Tensor::from_vector(m, Shape(dims)).to(x.device()));
  }
  return out;
}

Tensor slice_ranges(const Tensor& t, const std::vector<Range>& ranges) {
  LTX_CHECK(static_cast<int>(ranges.size()) == t.dim(), "tiling: ", ranges.size(),
            " ranges for ", t.describe());
  Tensor v = t;
  for (int a = 0; a < t.dim(); ++a) {
    const Range r = ranges[a];
    LTX_CHECK(r.start >= 0 && r.stop <= t.size(a) && r.start <= r.stop, "tiling: range [",
              r.start, ", ", r.stop, ") outside axis ", a, " of ", t.describe());
    if (r.start != 0 || r.stop != t.size(a)) v = v.narrow(a, r.start, r.length());
  }
  return v;
}

// -------------------------------------------------------------------------------------- configs

DimensionSizeConfig::DimensionSizeConfig(int64_t tile_size_, int64_t overlap_)
    : tile_size(tile_size_), overlap(overlap_) {
  LTX_CHECK(tile_size >= 0, "tiling: tile_size must be >= 0, got ", tile_size);
  LTX_CHECK(overlap >= 0, "tiling: overlap must be >= 0, got ", overlap);
  if (tile_size == 0)
    LTX_CHECK(overlap == 0, "tiling: an untiled axis (tile_size=0) must have overlap=0");
  else
    LTX_CHECK(overlap < tile_size, "tiling: overlap must be less than the tile size, got ",
              overlap, " and ", tile_size);
}

DimensionTilingConfig::DimensionTilingConfig(int64_t num_tiles_, int64_t overlap_)
    : num_tiles(num_tiles_), overlap(overlap_) {
  LTX_CHECK(num_tiles >= 1, "tiling: num_tiles must be >= 1, got ", num_tiles);
  LTX_CHECK(overlap >= 0, "tiling: overlap must be >= 0, got ", overlap);
}

namespace {

// Whether the temporal axis is known (frames > 0); throws when the video is off the VAE grid.
bool assert_video_on_vae_grid(const ScaleFactors& s, const VideoPixelShape& v) {
  LTX_CHECK(s.time >= 1 && s.height >= 1 && s.width >= 1,
            "tiling: scale factors must be >= 1 on each axis");
  LTX_CHECK(v.height >= 1 && v.width >= 1, "tiling: video height/width must be >= 1, got ",
            v.height, "x", v.width);
  LTX_CHECK(v.height % s.height == 0, "tiling: video height ", v.height,
            " must be divisible by the VAE scale ", s.height);
  LTX_CHECK(v.width % s.width == 0, "tiling: video width ", v.width,
            " must be divisible by the VAE scale ", s.width);
  if (v.frames <= 0) return false;
  LTX_CHECK((v.frames - 1) % s.time == 0, "tiling: video frames ", v.frames,
            " must satisfy (frames - 1) % ", s.time, " == 0");
  return true;
}

void validate_size_axis(const DimensionSizeConfig& c, int64_t factor, const char* name) {
  if (!c.is_tiled()) return;
  LTX_CHECK(c.tile_size >= 2 * factor, "tiling: ", name, ".tile_size must be at least ",
            2 * factor, ", got ", c.tile_size);
  LTX_CHECK(c.tile_size % factor == 0, "tiling: ", name, ".tile_size must be divisible by ",
            factor, ", got ", c.tile_size);
  LTX_CHECK(c.overlap % factor == 0, "tiling: ", name, ".overlap must be divisible by ", factor,
            ", got ", c.overlap);
}

void validate_count_axis(const DimensionTilingConfig& c, int64_t extent, const char* name) {
  if (!c.is_tiled()) return;
  LTX_CHECK(c.num_tiles <= extent, "tiling: ", name, ".num_tiles ", c.num_tiles,
            " exceeds the latent ", name, " extent ", extent);
  const int64_t max_overlap = extent - c.num_tiles;
  LTX_CHECK(c.overlap <= max_overlap, "tiling: ", name, ".overlap ", c.overlap,
            " exceeds the latent bound ", max_overlap, " for extent ", extent, " with ",
            c.num_tiles, " tiles");
}

}  // namespace

TileSizeConfig TileSizeConfig::default_config() {
  return {DimensionSizeConfig(80, 24), DimensionSizeConfig(768, 64), DimensionSizeConfig(768, 64)};
}

TileSizeConfig TileSizeConfig::from_long_side(const DimensionSizeConfig& long_side, int64_t height,
                                              int64_t width, const ScaleFactors& scale,
                                              std::optional<DimensionSizeConfig> frames) {
  LTX_CHECK(height >= 1 && width >= 1, "tiling: height/width must be >= 1, got ", height, "x",
            width);
  LTX_CHECK(long_side.is_tiled(), "tiling: long_side must be tiled (tile_size > 0)");
  LTX_CHECK(scale.height >= 1 && scale.width >= 1, "tiling: scale factors must be >= 1");
  const int64_t span = std::max(height, width);
  auto axis_size = [&](int64_t axis_len, int64_t factor) {
    const int64_t axis_lat = axis_len / factor, long_lat = span / factor;
    const int64_t size_lat = long_side.tile_size / factor, overlap_lat = long_side.overlap / factor;
    const int64_t lower = std::max<int64_t>(2, overlap_lat + 1);
    // Python's round(): half to even, which nearbyint does in the default rounding mode.
    const double ratio = static_cast<double>(size_lat * axis_lat) / static_cast<double>(long_lat);
    const int64_t tile_lat = std::max(lower, static_cast<int64_t>(std::nearbyint(ratio)));
    const int64_t min_legal = std::max(2 * factor, long_side.overlap + factor);
    return std::max(tile_lat * factor, min_legal);
  };
  TileSizeConfig c;
  c.frames = frames.value_or(DimensionSizeConfig());
  c.height = DimensionSizeConfig(axis_size(height, scale.height), long_side.overlap);
  c.width = DimensionSizeConfig(axis_size(width, scale.width), long_side.overlap);
  return c;
}

void TileSizeConfig::validate(const ScaleFactors& scale, const VideoPixelShape& video) const {
  const bool check_time = assert_video_on_vae_grid(scale, video);
  validate_size_axis(height, scale.height, "height");
  validate_size_axis(width, scale.width, "width");
  if (check_time) validate_size_axis(frames, scale.time, "frames");
}

Splitters TileSizeConfig::to_splitters(const ScaleFactors& scale, const MinTileSize& min_tile_size,
                                       bool causal_temporal) const {
  auto axis = [&](const DimensionSizeConfig& c, int64_t factor, int i, const char* name,
                  bool temporal) -> SplitOperation {
    if (!c.is_tiled()) return split_default();
    validate_size_axis(c, factor, name);
    const int64_t size = c.tile_size / factor, overlap = c.overlap / factor;
    const int64_t tile = std::max(std::max<int64_t>(2, overlap + 1), size);
    std::optional<int64_t> min;
    if (min_tile_size) min = (*min_tile_size)[i];
    if (temporal && causal_temporal) return split_temporal_causal(tile, overlap, min);
    return split_by_size(tile, overlap, min);
  };
  return {axis(frames, scale.time, 0, "frames", true), axis(height, scale.height, 1, "height", false),
          axis(width, scale.width, 2, "width", false)};
}

int64_t TileSizeConfig::video_chunks_number(int64_t num_frames) const {
  if (!frames.is_tiled()) return 1;
  const int64_t stride = frames.tile_size - frames.overlap;
  return (num_frames - 1 + stride - 1) / stride;
}

void TileCountConfig::validate(const ScaleFactors& scale, const VideoPixelShape& video) const {
  const bool check_time = assert_video_on_vae_grid(scale, video);
  validate_count_axis(height, video.height / scale.height, "height");
  validate_count_axis(width, video.width / scale.width, "width");
  if (check_time) validate_count_axis(frames, (video.frames - 1) / scale.time + 1, "frames");
}

Splitters TileCountConfig::to_splitters(const ScaleFactors& /*scale: counts are grid units*/,
                                        const MinTileSize& min_tile_size,
                                        bool causal_temporal) const {
  auto axis = [&](const DimensionTilingConfig& c, int i, bool temporal) -> SplitOperation {
    if (!c.is_tiled()) return split_default();
    std::optional<int64_t> min;
    if (min_tile_size) min = (*min_tile_size)[i];
    if (temporal && causal_temporal) return split_by_count_temporal_causal(c.num_tiles, c.overlap, min);
    return split_by_count(c.num_tiles, c.overlap, min);
  };
  return {axis(frames, 0, true), axis(height, 1, false), axis(width, 2, false)};
}

int64_t TileCountConfig::video_chunks_number(int64_t /*num_frames*/) const {
  return std::max<int64_t>(1, frames.num_tiles);
}

bool frames_tiled(const TilingConfig& c) {
  return std::visit([](const auto& v) { return v.frames.is_tiled(); }, c);
}
bool height_tiled(const TilingConfig& c) {
  return std::visit([](const auto& v) { return v.height.is_tiled(); }, c);
}
bool width_tiled(const TilingConfig& c) {
  return std::visit([](const auto& v) { return v.width.is_tiled(); }, c);
}

void validate(const TilingConfig& c, const ScaleFactors& scale, const VideoPixelShape& video) {
  std::visit([&](const auto& v) { v.validate(scale, video); }, c);
}

Splitters to_splitters(const TilingConfig& c, const ScaleFactors& scale,
                       const MinTileSize& min_tile_size, bool causal_temporal) {
  return std::visit(
      [&](const auto& v) { return v.to_splitters(scale, min_tile_size, causal_temporal); }, c);
}

int64_t video_chunks_number(int64_t num_frames, const std::optional<TilingConfig>& c) {
  if (!c) return 1;
  return std::visit([&](const auto& v) { return v.video_chunks_number(num_frames); }, *c);
}

void validate_overlap(const TilingConfig& c, int64_t min_overlap_frames,
                      int64_t min_overlap_pixels) {
  const auto* s = std::get_if<TileSizeConfig>(&c);
  if (s == nullptr) return;
  const std::tuple<const char*, const DimensionSizeConfig*, int64_t, const char*> axes[] = {
      {"frames", &s->frames, min_overlap_frames, "frames"},
      {"height", &s->height, min_overlap_pixels, "px"},
      {"width", &s->width, min_overlap_pixels, "px"}};
  for (const auto& [name, cfg, floor, unit] : axes)
    LTX_CHECK(!cfg->is_tiled() || cfg->overlap >= floor, "tiling: ", name, " overlap ",
              cfg->overlap, " ", unit, " is below the required ", floor, " ", unit,
              " (increase the overlap)");
}

TileSizeConfig auto_tiling_config(int64_t height, int64_t width) {
  return TileSizeConfig::from_long_side(DimensionSizeConfig(768, 64), height, width,
                                        kVideoScaleFactors, DimensionSizeConfig(80, 24));
}

TilingConfig tiling_config_from_json(const nlohmann::json& j) {
  LTX_CHECK(j.is_object(), "tiling config: expected a JSON object, got ", j.dump());
  const std::string type = j.value("type", std::string("TileSizeConfig"));
  auto field = [&](const nlohmann::json& axis, const char* key, int64_t dflt) -> int64_t {
    if (!axis.contains(key) || axis[key].is_null()) return dflt;
    LTX_CHECK(axis[key].is_number_integer(), "tiling config: '", key, "' must be an integer, got ",
              axis[key].dump());
    return axis[key].get<int64_t>();
  };
  auto axis_json = [&](const char* name) -> nlohmann::json {
    if (!j.contains(name) || j[name].is_null()) return nlohmann::json::object();
    LTX_CHECK(j[name].is_object(), "tiling config: '", name, "' must be an object");
    return j[name];
  };
  if (type == "TileSizeConfig") {
    TileSizeConfig c;
    for (auto [name, dst] : {std::pair{"frames", &c.frames}, std::pair{"height", &c.height},
                             std::pair{"width", &c.width}}) {
      const nlohmann::json a = axis_json(name);
      *dst = DimensionSizeConfig(field(a, "tile_size", 0), field(a, "overlap", 0));
    }
    return c;
  }
  if (type == "TileCountConfig") {
    TileCountConfig c;
    for (auto [name, dst] : {std::pair{"frames", &c.frames}, std::pair{"height", &c.height},
                             std::pair{"width", &c.width}}) {
      const nlohmann::json a = axis_json(name);
      *dst = DimensionTilingConfig(field(a, "num_tiles", 1), field(a, "overlap", 0));
    }
    return c;
  }
  fail("tiling config: unknown type '", type, "' (expected TileSizeConfig or TileCountConfig)");
}

std::string describe(const TilingConfig& c) {
  if (const auto* s = std::get_if<TileSizeConfig>(&c))
    return str("TileSizeConfig(frames=", s->frames.tile_size, "/", s->frames.overlap, ", height=",
               s->height.tile_size, "/", s->height.overlap, ", width=", s->width.tile_size, "/",
               s->width.overlap, ")");
  const auto& n = std::get<TileCountConfig>(c);
  return str("TileCountConfig(frames=", n.frames.num_tiles, "/", n.frames.overlap, ", height=",
             n.height.num_tiles, "/", n.height.overlap, ", width=", n.width.num_tiles, "/",
             n.width.overlap, ")");
}

}  // namespace ltx::models::tiling
