#pragma once
// DFR canvas layout (reference: ltx_pipelines/dfr_layout.py): the keyframe segment grid a DFR
// canvas is padded to, the temporal tiles of a temporal x2 round, and the latent stitch that puts
// the tiles back together. Pure integer bookkeeping plus one concat; no model involved.
//
// Frame indices are pixel frames; latent index = pixel / temporal_scale (8) on the x8 borders the
// layout keeps to. A canvas of N' frames with segment S has keyframe positions S, 2S, ..., N' - 1
// (frame 0 is not a keyframe: the causal VAE already encodes it as a one-pixel-frame token).
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ltx::pipelines::dfr {

// Segment lengths the canvas may use (pixel frames); the one padding the least wins, ties the larger.
inline constexpr int64_t kSegmentCandidates[] = {24, 32};
// Lead-in of every non-first tile, in segments: its first two latents (the image latent at local
// frame 0 and the latent denoised against it) fall inside the discarded prefix, and the window
// still starts on a keyframe.
inline constexpr int64_t kTileLeadSegments = 1;

// Segment length for `content_frames` = num_frames - 1 (>= 1).
int64_t choose_segment_length(int64_t content_frames);

struct Canvas {
  int64_t num_frames = 0;           // padded: (num_frames - 1) rounded up to a multiple of segment, + 1
  int64_t segment = 0;              // 24 or 32
  std::vector<int64_t> positions;   // keyframe slots: segment, 2 * segment, ..., num_frames - 1
};
// Throws for num_frames < 2 or (num_frames - 1) not a multiple of temporal_scale.
Canvas resolve_canvas(int64_t num_frames, int64_t temporal_scale = 8);

// A pixel frame on a latent border (0 or a multiple of temporal_scale) -> its latent index.
int64_t pixel_to_latent_index(int64_t pixel_frame, int64_t temporal_scale = 8);

// `n_segments` split into `num_tiles` contiguous runs, the larger ones first (divmod).
std::vector<int64_t> owned_segment_counts(int64_t n_segments, int64_t num_tiles);

// One temporal tile in global coordinates. pixel_start / pixel_end inclusive, latents
// [latent_start, latent_end). A non-first tile starts kTileLeadSegments before the segments it
// owns; its first drop_latent_prefix latents (the lead-in plus the seam latent the previous tile
// keeps) are discarded when stitching. anchors: the seam keyframes inside the window (every
// boundary but frame 0); slots: the mid-segment positions the tile generates.
struct TileRange {
  int64_t pixel_start = 0, pixel_end = 0;
  int64_t latent_start = 0, latent_end = 0;
  std::vector<int64_t> anchors;
  std::vector<int64_t> slots;
  int64_t drop_latent_prefix = 0;

  int64_t latent_frames() const { return latent_end - latent_start; }
  // Pixel frames of the tile's own canvas: (latent frames - 1) * scale + 1.
  int64_t local_frames(int64_t temporal_scale = 8) const { return (latent_frames() - 1) * temporal_scale + 1; }
  bool operator==(const TileRange&) const = default;
};

// The canvas [0, num_frames) cut at `seam_positions` (strictly increasing, the last = num_frames - 1,
// every segment a multiple of temporal_scale and at least 2 latents long) into min(num_tiles,
// segments) gapless tiles, non-first ones with `lead_segments` of lead-in. Throws otherwise.
std::vector<TileRange> tile_ranges(const std::vector<int64_t>& seam_positions, int64_t num_frames, int64_t num_tiles,
                                   int64_t temporal_scale = 8, int64_t lead_segments = kTileLeadSegments);

// Tile latents [B, C, T_i, H, W] (T_i = the tile's latent_frames()) concatenated along T, each
// without its drop_latent_prefix leading latents.
Tensor stitch_tile_latents(const std::vector<Tensor>& tile_latents, const std::vector<TileRange>& ranges);

// global - pixel_start, element-wise.
std::vector<int64_t> remap_positions_to_local(const std::vector<int64_t>& positions, int64_t pixel_start);

}  // namespace ltx::pipelines::dfr
