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

namespace ltx::io {
class SafetensorsFile;
}

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

// ---- automatic decode tiling (reference: recommended_decode_tiling_config, the pipelines'
// AUTO_TILING for a diffusion VAE) ----

// What the recommendation needs of a decoder config (reference:
// diffvae_tiling_geometry_from_vae_config).
struct DiffusionTilingGeometry {
  std::pair<Axis3, Axis3> tile_halos;  // stage 4, stage 5 (compute_tile_halos)
  tiling::ScaleFactors pixel_scale;    // stage4_to_pixel_scale_factors(upsamples[3], patch)
  Axis3 min_tile_size_s4{};            // compute_tile_min_size
  int64_t patch_size = 4;
  int64_t stage5_channels = 0, stage4_channels = 0;  // diffusion_channels(), stage_channels[3]
  std::vector<Axis3> upsample_strides;
  int64_t trailing_pad_latent_frames = 0;  // the ghost frames, (K_t of stage 1 / 2) * 2
  int64_t out_channels = 3;
};
DiffusionTilingGeometry diffusion_tiling_geometry(const DiffusionDecoderConfig& config);

// The memory model of the recommendation. The defaults are the pipelines' CHUNKED_EAGER mode
// (stage-5 working-set coefficient 5, 1 GiB withheld; the reference's compiled modes use 11 / 7 /
// 2.5 and 2 GiB) with bf16 activations (2 bytes).
struct DiffusionTilingBudget {
  int64_t free_bytes = 0;   // memory still free on the decoding device
  int64_t model_bytes = 0;  // the decoder's weights (counted as at least 1 GiB)
  double stage5_coef = 5.0;
  int64_t safety_bytes = int64_t{1} << 30;
  int64_t element_size = 2;
};

// Resident stage-4 input of a decode of `num_frames` x `height` x `width` pixels: the latent
// ((F - 1) / 8 + 1, H / 32, W / 32) plus the ghost frames through upsamples 0-2, times
// stage4_channels x element_size.
int64_t stage4_feature_bytes(const DiffusionTilingGeometry& g, int64_t height, int64_t width,
                             int64_t num_frames, int64_t element_size);
// Sum over the decoder tensors (`decoder.*`, `vae.decoder.*`, any `per_channel_statistics`) of
// numel x 2 bytes, from the header only (reference: estimate_diffusion_decoder_weight_bytes).
int64_t diffusion_decoder_weight_bytes(const io::SafetensorsFile& file);

// The reference's recommended_decode_tiling_config: overlaps = recommended_pixel_overlaps; tile
// sizes enumerated per axis on lcm(pixel_scale, 8 / 32 / 32) from a floor of max(2 scale,
// 2 overlap, the stage-4 tile floor in pixels, 16 frames / 64 px) up to the axis rounded up;
// a (frames, height, width) triple is kept when the accumulator (2 tile_t x H x W x out_channels
// x element_size) stays below the usable bytes (free - max(model, 1 GiB) - safety - stage-4
// feature) and the stage-5 tokens (tile_t x tile_h / patch x tile_w / patch) fit the rest at
// stage5_channels x element_size x coef bytes each; the least processed / unique volume wins
// (ties: larger tiles, then fewer tiles). Every axis is tiled. Throws when nothing fits, as the
// reference does (so always with free_bytes 0).
tiling::TileSizeConfig recommended_decode_tiling(const DiffusionTilingGeometry& g, int64_t height,
                                                 int64_t width, int64_t num_frames,
                                                 const DiffusionTilingBudget& budget);

}  // namespace ltx::models::video_vae
