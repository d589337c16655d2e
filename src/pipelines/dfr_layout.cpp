#include "pipelines/dfr_layout.h"

#include <algorithm>

#include "core/error.h"
#include "ops/shape.h"

namespace ltx::pipelines::dfr {

namespace {

// Frames needed to reach the next multiple of `segment`.
int64_t padding(int64_t content, int64_t segment) { return (segment - content % segment) % segment; }

}  // namespace

int64_t choose_segment_length(int64_t content_frames) {
  LTX_CHECK(content_frames >= 1, "dfr layout: content frames (num_frames - 1) must be >= 1, got ", content_frames);
  int64_t best = kSegmentCandidates[0];
  int64_t best_pad = padding(content_frames, best);
  for (int64_t segment : kSegmentCandidates) {
    const int64_t pad = padding(content_frames, segment);
    if (pad < best_pad || (pad == best_pad && segment > best)) {
      best = segment;
      best_pad = pad;
    }
  }
  return best;
}

Canvas resolve_canvas(int64_t num_frames, int64_t temporal_scale) {
  LTX_CHECK(num_frames >= 1, "dfr layout: num_frames must be >= 1, got ", num_frames);
  LTX_CHECK(temporal_scale >= 1, "dfr layout: temporal scale must be >= 1, got ", temporal_scale);
  LTX_CHECK((num_frames - 1) % temporal_scale == 0, "dfr layout: num_frames ", num_frames, " is not ",
            temporal_scale, "k + 1 (e.g. 9, 17, ..., 121)");
  const int64_t content = num_frames - 1;
  LTX_CHECK(content > 0, "dfr layout: the canvas needs at least 2 pixel frames (num_frames 1 has no motion to "
            "render); pass --num-frames 9 or more");
  Canvas c;
  c.segment = choose_segment_length(content);
  const int64_t padded = content + padding(content, c.segment);
  for (int64_t p = c.segment; p <= padded; p += c.segment) c.positions.push_back(p);
  c.num_frames = padded + 1;
  return c;
}

int64_t pixel_to_latent_index(int64_t pixel_frame, int64_t temporal_scale) {
  LTX_CHECK(pixel_frame >= 0, "dfr layout: pixel frame must be >= 0, got ", pixel_frame);
  LTX_CHECK(pixel_frame % temporal_scale == 0, "dfr layout: pixel frame ", pixel_frame, " is not on the x",
            temporal_scale, " latent border");
  return pixel_frame / temporal_scale;
}

std::vector<int64_t> owned_segment_counts(int64_t n_segments, int64_t num_tiles) {
  LTX_CHECK(n_segments >= 1, "dfr layout: segment count must be >= 1, got ", n_segments);
  LTX_CHECK(num_tiles >= 1, "dfr layout: tile count must be >= 1, got ", num_tiles);
  const int64_t base = n_segments / num_tiles, rem = n_segments % num_tiles;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < num_tiles; ++i) out.push_back(base + (i < rem ? 1 : 0));
  return out;
}

namespace {

// The window owning segments [own_lo, own_hi), reaching `lead` segments back.
TileRange build_tile(const std::vector<int64_t>& b, int64_t own_lo, int64_t own_hi, int64_t lead, int64_t scale) {
  const int64_t window_lo = std::max<int64_t>(0, own_lo - lead);
  const auto at = [&](int64_t i) { return b[static_cast<size_t>(i)]; };
  TileRange t;
  t.pixel_start = at(window_lo);
  t.pixel_end = at(own_hi);
  t.latent_start = pixel_to_latent_index(t.pixel_start, scale);
  t.latent_end = pixel_to_latent_index(t.pixel_end, scale) + 1;
  // The previous tile keeps the seam latent (the token ending on the shared keyframe); this one
  // resumes strictly after it.
  t.drop_latent_prefix = pixel_to_latent_index(at(own_lo), scale) - t.latent_start + (own_lo > 0 ? 1 : 0);
  for (int64_t i = window_lo; i <= own_hi; ++i)
    if (at(i) != 0) t.anchors.push_back(at(i));
  for (int64_t i = window_lo; i < own_hi; ++i) t.slots.push_back((at(i) + at(i + 1)) / 2);
  return t;
}

}  // namespace

std::vector<TileRange> tile_ranges(const std::vector<int64_t>& seams, int64_t num_frames, int64_t num_tiles,
                                   int64_t scale, int64_t lead_segments) {
  LTX_CHECK(num_frames >= 2, "dfr layout: tiles need num_frames >= 2, got ", num_frames);
  LTX_CHECK(!seams.empty(), "dfr layout: no seam positions to tile at");
  LTX_CHECK(seams.back() == num_frames - 1, "dfr layout: the last seam must be the terminal frame ", num_frames - 1,
            ", got ", seams.back());
  LTX_CHECK(lead_segments >= 1, "dfr layout: the tile lead-in must be >= 1 segment, got ", lead_segments);
  std::vector<int64_t> b{0};
  b.insert(b.end(), seams.begin(), seams.end());
  for (size_t i = 1; i < b.size(); ++i) {
    const int64_t span = b[i] - b[i - 1];
    LTX_CHECK(span > 0, "dfr layout: seam positions must be strictly increasing (", b[i - 1], " then ", b[i], ")");
    LTX_CHECK(span % scale == 0, "dfr layout: segment [", b[i - 1], ", ", b[i], "] spans ", span,
              " frames, not a multiple of the temporal scale ", scale);
    LTX_CHECK(span / scale >= 2, "dfr layout: segment [", b[i - 1], ", ", b[i], "] spans ", span,
              " frames, under 2 latent frames: too short to carry a tile lead-in");
  }
  const int64_t n_segments = static_cast<int64_t>(b.size()) - 1;
  std::vector<TileRange> tiles;
  int64_t own_lo = 0;
  const std::vector<int64_t> counts = owned_segment_counts(n_segments, std::min(num_tiles, n_segments));
  for (size_t i = 0; i < counts.size(); ++i) {
    tiles.push_back(build_tile(b, own_lo, own_lo + counts[i], i > 0 ? lead_segments : 0, scale));
    own_lo += counts[i];
  }
  return tiles;
}

Tensor stitch_tile_latents(const std::vector<Tensor>& latents, const std::vector<TileRange>& ranges) {
  LTX_CHECK(latents.size() == ranges.size(), "dfr stitch: ", ranges.size(), " tiles but ", latents.size(),
            " tile latents");
  LTX_CHECK(!latents.empty(), "dfr stitch: no tile latents");
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < latents.size(); ++i) {
    const Tensor& l = latents[i];
    const TileRange& t = ranges[i];
    LTX_CHECK(l.dim() == 5, "dfr stitch: tile ", i, " latent must be [B, C, T, H, W], got ", l.describe());
    LTX_CHECK(l.size(2) == t.latent_frames(), "dfr stitch: tile ", i, " latent has T=", l.size(2), ", expected ",
              t.latent_frames(), " for latents [", t.latent_start, ", ", t.latent_end, ")");
    LTX_CHECK(t.drop_latent_prefix >= 0 && t.drop_latent_prefix < l.size(2), "dfr stitch: tile ", i,
              " drop_latent_prefix ", t.drop_latent_prefix, " is invalid for T=", l.size(2));
    pieces.push_back(l.narrow(2, t.drop_latent_prefix, l.size(2) - t.drop_latent_prefix));
  }
  return ops::concat(pieces, 2);
}

std::vector<int64_t> remap_positions_to_local(const std::vector<int64_t>& positions, int64_t pixel_start) {
  std::vector<int64_t> out;
  out.reserve(positions.size());
  for (int64_t p : positions) out.push_back(p - pixel_start);
  return out;
}

}  // namespace ltx::pipelines::dfr
