#pragma once
// Geometry of the diffusion video decoder: size floors, ghost frames, stage-5 canvases, padding /
// cropping and the tile schedule of tiled decoding (reference:
// model/video_vae/diffusion_tiling.py).
//
// Stages 1-3 run once on the (padded) latent; stages 4-5 run per tile on the stage-4 input grid,
// which is (4T - 3, 4H, 4W) for the default strides. One stage-4 cell is (2 frames, 8, 8) pixels.
// Tile sizes and overlaps are given in pixels / frames (TileSizeConfig) and split on that grid
// without the conv VAE's causal tricks: intervals are carried through the last upsample (time:
// x2, end - 1, and start - 1 unless at the origin) and the patchify (x4), with symmetric
// trapezoid masks that sum to one.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "models/tiling.h"
#include "models/video_vae/model_configurator.h"

namespace ltx::models::video_vae {

// Per-axis latent floor so that every stage's attention sees at least its kernel:
// max over det stages i of ceil(K_i / cum_i) and ceil(K5 / cum_4), cum = product of the strides
// before the stage.
Axis3 all_stages_min_tile_size(const std::vector<Axis3>& stage_kernels,
                               const std::vector<Upsample>& upsamples, const Axis3& stage5_kernel);
// Minimum stage-4 tile: max(K4, ceil(K5 / stride3)) per axis.
Axis3 compute_tile_min_size(const Axis3& stage4_kernel, const Axis3& stage5_kernel,
                            const Axis3& upsample3_stride);
// One-sided halos on the stage-4 grid: depth4 * (K4 / 2) and ceil(depth5 * (K5 / 2) / stride3).
std::pair<Axis3, Axis3> compute_tile_halos(const Axis3& stage4_kernel, int64_t stage4_depth,
                                           const Axis3& stage5_kernel, int64_t stage5_depth,
                                           const Axis3& upsample3_stride);
// Pixels / frames per stage-4 cell: (stride_t, stride_h * patch, stride_w * patch).
tiling::ScaleFactors stage4_to_pixel_scale_factors(const Axis3& upsample3_stride, int64_t patch);
// The smallest legal overlaps: (roundup(halo_t * scale_t, 8) frames, roundup(halo_hw * scale_h,
// 32) pixels) with the larger halo of stages 4 and 5.
std::pair<int64_t, int64_t> recommended_pixel_overlaps(const std::pair<Axis3, Axis3>& halos,
                                                       const tiling::ScaleFactors& pixel_scale);
// Stage-4 input (T, H, W) of a latent (T, H, W) after the first three upsamples.
Axis3 stage4_thw_from_latent(const std::vector<Upsample>& upsamples, const Axis3& latent,
                             bool drop_leading_frame = true);
// Pixel (F, H, W) of the stage-5 canvas of a stage-4 extent; F >= stage5_kernel_t on trailing
// tiles.
Axis3 stage5_pixel_shape_from_stage4(const Axis3& stage4, const Axis3& upsample_stride,
                                     int64_t patch, int64_t stage5_kernel_t,
                                     bool drop_leading_frame, bool pad_trailing);
// Frames kept of a context / feature of `frames` frames when `ghost` trailing frames are the
// replicated ghost frames: max(frames - ghost, 1), at least `floor`, at most `frames`.
int64_t trailing_ghost_keep(int64_t frames, int64_t ghost, int64_t floor);

// How many elements were added (pad) or removed (crop) on each side of an axis.
struct AxisPad {
  int64_t before = 0, after = 0;
};
enum class ResizeMode { RepeatLast, Symmetric };
// Pads or crops axis `dim` to `size`: RepeatLast appends copies of the last slice or drops from
// the end; Symmetric edge-replicates / crops both ends with before = need / 2, after = rest.
std::pair<Tensor, AxisPad> resize_axis(const Tensor& x, int dim, int64_t size, ResizeMode mode);
// Pads a latent [B, C, T, H, W] up to `min_sizes` (T: repeat last; H, W: symmetric).
std::pair<Tensor, std::array<AxisPad, 3>> ensure_min_latent_shape(const Tensor& latent,
                                                                  const Axis3& min_sizes);

// A tile of a diffusion decode: `in` ranges on the stage-4 feature [B, T, H, W, C] (content
// frames only), `out` ranges on the pixel canvas [B, C, F, H, W], 1-D masks per output axis.
using tiling::Tile;

// The tiles of a decode whose stage-4 input is `stage4` (T, H, W; content frames) and whose
// pixel canvas is `pixels` [B, C, F, H, W]: one whole tile without a config; otherwise the
// config's axes split on the stage-4 grid. Throws when an overlap is below
// recommended_pixel_overlaps or a size is not on the grid.
std::vector<Tile> prepare_tile_schedule(const Axis3& stage4, const Shape& pixels, int64_t batch,
                                        int64_t stage4_channels,
                                        const std::optional<tiling::TilingConfig>& config,
                                        const Axis3& upsample3_stride, int64_t patch,
                                        const Axis3& min_tile_size,
                                        const std::pair<Axis3, Axis3>& halos);

}  // namespace ltx::models::video_vae
