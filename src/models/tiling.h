#pragma once
// Tile geometry and blending for tiled VAE encode/decode (reference: ltx_core/tiling.py).
//
// A dimension of the latent grid is split into intervals [start, end) with left/right blend ramps
// (split operations); a mapping operation turns each interval into an output range and a 1-D blend
// mask; the tiles are the cartesian product over all five axes (B, C, F, H, W), frames varying
// slowest among the tiled axes. Tiles are blended by multiplying each tile by its separable masks
// and accumulating; when the masks of every axis sum to one (complementary) no weight division
// is needed, otherwise the accumulator is divided by the accumulated weights (clamped to 1e-8).
#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace ltx::models::tiling {

// Video <-> latent scale factors (time, height, width), e.g. (8, 32, 32).
struct ScaleFactors {
  int64_t time = 8, height = 32, width = 32;
  bool operator==(const ScaleFactors&) const = default;
};
inline constexpr ScaleFactors kVideoScaleFactors{8, 32, 32};

// One interval of one axis: [start, end) plus the ramp lengths at both ends.
struct Interval {
  int64_t start = 0, end = 0, left_ramp = 0, right_ramp = 0;
  bool operator==(const Interval&) const = default;
};
using Intervals = std::vector<Interval>;
// Splits an axis of the given length into intervals.
using SplitOperation = std::function<Intervals(int64_t length)>;

// A half-open range of one axis; `stop` is resolved (never "to the end").
struct Range {
  int64_t start = 0, stop = 0;
  int64_t length() const { return stop - start; }
  bool operator==(const Range&) const = default;
};
// A mapped interval: where its output goes and its 1-D blend mask (length 1 = untiled axis, which
// broadcasts). `stop` may be nullopt ("to the end of the axis"), resolved by create_tiles.
struct Mapped {
  int64_t start = 0;
  std::optional<int64_t> stop;
  std::vector<float> mask;
};
using MappingOperation = std::function<std::vector<Mapped>(const Intervals&)>;

// ---- masks (float32 values computed exactly like the reference's torch.linspace) ----
// Trapezoid of `length` ones with linear fade-in / fade-out ramps (clamped to [0, length]).
// left_starts_from_0: the fade-in starts at 0 (temporal tiles) instead of its first positive step.
std::vector<float> trapezoidal_mask_1d(int64_t length, int64_t ramp_left, int64_t ramp_right,
                                       bool left_starts_from_0 = false);
// Ones with `left` leading and `right` trailing zeros.
std::vector<float> rectangular_mask_1d(int64_t length, int64_t left, int64_t right);
// torch.linspace(start, end, steps) in float32 (the CPU kernel's two-sided evaluation).
std::vector<float> linspace_f32(float start, float end, int64_t steps);

// ---- split operations ----
// The whole axis as one interval.
SplitOperation split_default();
// Tiles of `size` sharing `overlap` elements; the last may be shorter, or grown leftwards to
// min_tile_size when given. Throws for size <= 0, overlap outside [0, size), min_tile_size < 1.
SplitOperation split_by_size(int64_t size, int64_t overlap,
                             std::optional<int64_t> min_tile_size = std::nullopt);
// split_by_size, then every tile after the first starts one element earlier with left_ramp + 1.
SplitOperation split_temporal_causal(int64_t size, int64_t overlap,
                                     std::optional<int64_t> min_tile_size = std::nullopt);
// `num_tiles` tiles with `overlap`; remainders go to the first tiles.
SplitOperation split_by_count(int64_t num_tiles, int64_t overlap = 0,
                              std::optional<int64_t> min_tile_size = std::nullopt);
SplitOperation split_by_count_temporal_causal(int64_t num_tiles, int64_t overlap = 0,
                                              std::optional<int64_t> min_tile_size = std::nullopt);

// ---- mapping operations ----
// Untiled axis: one output range covering the whole axis, mask {1}.
MappingOperation default_mapping();
// Latent interval -> pixel range of the video VAE: temporal [s*b, 1 + s*(e-1)), left ramp
// 1 + s*(l-1) (0 stays 0), right ramp s*r, mask starting from 0; spatial [s*b, s*e), ramps * s.
Mapped map_temporal_slice(const Interval& iv, int64_t scale);
Mapped map_spatial_slice(const Interval& iv, int64_t scale);
MappingOperation temporal_slice_mapping(int64_t scale);
MappingOperation spatial_slice_mapping(int64_t scale);

// ---- tiles ----
struct Tile {
  std::vector<Range> in;                  // per axis, where to cut the input
  std::vector<Range> out;                 // per axis, where the output goes
  std::vector<std::vector<float>> masks;  // per axis, 1-D blend mask in output units
};
// Splits `in_shape` with one splitter per axis and maps every interval with one mapper per axis;
// open-ended output ranges end at out_shape. The product runs over axes 0..rank-1, last fastest.
std::vector<Tile> create_tiles(const Shape& in_shape, const std::vector<SplitOperation>& splitters,
                               const std::vector<MappingOperation>& mappers,
                               const Shape& out_shape);
// Whether, per axis, the masks of the distinct output ranges sum to one (atol 1e-5).
bool masks_are_complementary(const std::vector<Tile>& tiles, const Shape& full_shape,
                             double atol = 1e-5);
// Consecutive tiles sharing the output range of axis 2 (frames).
std::vector<std::vector<Tile>> group_tiles_by_temporal_slice(const std::vector<Tile>& tiles);

// The accumulation buffers of one temporal group: zeros of the whole output's shape with the
// group's frames in the accumulation dtype, made on first use, so that the first tile's decode
// (the memory peak) runs before they take memory.
class GroupBuffers {
 public:
  GroupBuffers(Shape shape, bool with_weights, Device device, DType dtype = DType::F32)
      : shape_(std::move(shape)), with_weights_(with_weights), device_(device), dtype_(dtype) {}
  const Tensor& values();
  // Undefined when the masks are complementary (no weights are accumulated).
  const Tensor& weights();

 private:
  Shape shape_;
  bool with_weights_;
  Device device_;
  DType dtype_;
  Tensor values_, weights_;
};

// Adds one decoded tile into its temporal group's buffers (`buffers.values()` and, when the masks
// are not complementary, `buffers.weights()`); the group's first frame is `group_start` of the
// output.
using AccumulateFn =
    std::function<void(const Tile& tile, GroupBuffers& buffers, int64_t group_start)>;
// Receives finished frames [B, C, f, H, W] (f may be 0) and the output index of their first frame.
using EmitFn = std::function<void(const Tensor& frames, int64_t first_frame)>;
// slice += addend as torch's in-place add on the slice's dtype computes it: the sum in f32,
// stored in the slice's dtype. f16 slices (the diffusion decoder's blend buffers) go through an f32
// copy, since the backends' elementwise ops take f32 / bf16; the rest is ops::add_.
void accumulate_into(const Tensor& slice, const Tensor& addend);

// How finished frames are handed out. Default (the conv decoder's): in the accumulation dtype,
// divided by the weights clamped to 1e-8. With `dtype` (the diffusion decoder's emit): the values
// cast to `dtype` first, then divided in f32 by the weights clamped to max(1e-8, the smallest
// normal of the accumulation dtype) and rounded to `dtype` (the reference's as_fhwc emit:
// video = buffer.to(latent dtype); video.div_(weights.clamp_min(floor))).
struct BlendEmit {
  std::optional<DType> dtype;
};

// The blending loop of tiled decoding shared by the video decoders: tiles are accumulated group by
// group (group_tiles_by_temporal_slice) into zeroed buffers of `full` with the group's frames; the
// frames a group shares with the previous one are blended into it (accumulate_into), and the
// previous group's frames that no later group touches are emitted (divided by the accumulated
// weights when the masks of `tiles` are not complementary; see BlendEmit). The last group is
// emitted whole. The buffers live on `device` (the decoded tiles' device) in `accum` (on CUDA the
// reference's: the conv decoder's latent dtype, f16 for the diffusion decoder's bf16 features;
// the CPU's ops accumulate in f32).
void blend_tile_groups(const std::vector<Tile>& tiles, const Shape& full,
                       const AccumulateFn& accumulate, const EmitFn& emit,
                       Device device = Device::cpu(), DType accum = DType::F32,
                       const BlendEmit& emit_as = {});

// x * mask_0 * mask_1 * ... (each mask broadcast along its axis), in that order.
Tensor scale_by_masks_1d(const Tensor& x, const std::vector<std::vector<float>>& masks);
// A view of `t` restricted to `ranges` (one per axis).
Tensor slice_ranges(const Tensor& t, const std::vector<Range>& ranges);

// ---- tiling configurations ----
// Tile size and overlap of one axis in pixel / frame units; tile_size 0 = untiled.
struct DimensionSizeConfig {
  int64_t tile_size = 0, overlap = 0;
  DimensionSizeConfig() = default;
  DimensionSizeConfig(int64_t tile_size, int64_t overlap);  // validates
  bool is_tiled() const { return tile_size > 0; }
};
// Tile count and overlap (latent units) of one axis; 1 tile without overlap = untiled.
struct DimensionTilingConfig {
  int64_t num_tiles = 1, overlap = 0;
  DimensionTilingConfig() = default;
  DimensionTilingConfig(int64_t num_tiles, int64_t overlap);  // validates
  bool is_tiled() const { return num_tiles > 1 || overlap > 0; }
};

struct VideoPixelShape {
  int64_t batch = 1, frames = 0, height = 0, width = 0;
};

using Splitters = std::array<SplitOperation, 3>;  // frames, height, width
using MinTileSize = std::optional<std::array<int64_t, 3>>;

struct TileSizeConfig {
  DimensionSizeConfig frames, height, width;
  // The pipelines' default: 80/24 frames, 768/64 pixels.
  static TileSizeConfig default_config();
  // Aspect-coupled spatial tiles from a long-side tile (latent-grid rounding, as the reference).
  static TileSizeConfig from_long_side(const DimensionSizeConfig& long_side, int64_t height,
                                       int64_t width, const ScaleFactors& scale,
                                       std::optional<DimensionSizeConfig> frames = std::nullopt);
  // Throws when the layout is illegal for the video on this grid (frames <= 0 skips time).
  void validate(const ScaleFactors& scale, const VideoPixelShape& video) const;
  Splitters to_splitters(const ScaleFactors& scale, const MinTileSize& min_tile_size = std::nullopt,
                         bool causal_temporal = true) const;
  int64_t video_chunks_number(int64_t num_frames) const;
};

struct TileCountConfig {
  DimensionTilingConfig frames, height, width;
  void validate(const ScaleFactors& scale, const VideoPixelShape& video) const;
  Splitters to_splitters(const ScaleFactors& scale, const MinTileSize& min_tile_size = std::nullopt,
                         bool causal_temporal = true) const;
  int64_t video_chunks_number(int64_t num_frames) const;
};

using TilingConfig = std::variant<TileSizeConfig, TileCountConfig>;

bool frames_tiled(const TilingConfig& c);
bool height_tiled(const TilingConfig& c);
bool width_tiled(const TilingConfig& c);
void validate(const TilingConfig& c, const ScaleFactors& scale, const VideoPixelShape& video);
Splitters to_splitters(const TilingConfig& c, const ScaleFactors& scale,
                       const MinTileSize& min_tile_size = std::nullopt, bool causal_temporal = true);
// 1 without a config.
int64_t video_chunks_number(int64_t num_frames, const std::optional<TilingConfig>& c);
// Raises when a tiled axis of a TileSizeConfig overlaps less than the floors (encode needs 16
// frames / 64 pixels); count configs pass.
void validate_overlap(const TilingConfig& c, int64_t min_overlap_frames, int64_t min_overlap_pixels);

// The pipelines' automatic decode tiling for the conv VAE: from_long_side(768/64) on H/W with the
// default video scale factors, plus 80/24 frames.
TileSizeConfig auto_tiling_config(int64_t height, int64_t width);

// Parses {"type": "TileSizeConfig"|"TileCountConfig", "frames": {...}, "height": ..., "width": ...}
// with tile_size/overlap (size) or num_tiles/overlap (count) per axis; a missing axis is untiled.
TilingConfig tiling_config_from_json(const nlohmann::json& j);
std::string describe(const TilingConfig& c);

}  // namespace ltx::models::tiling
