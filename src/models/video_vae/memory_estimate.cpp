#include "models/video_vae/memory_estimate.h"

#include <algorithm>
#include <vector>

#include "models/video_vae/conv_video_decoder.h"

namespace ltx::models::video_vae {

namespace {

constexpr int64_t kTimestepChannels = 256;  // PixArt sinusoid width
// Small tensors alive next to the big ones (blend masks, broadcast statistics, the timestep
// embedding and its modulation rows).
constexpr int64_t kSmallTensors = 16 * 1024;

// Bytes of one f32 allocation of n elements (Storage rounds to 64 bytes).
int64_t sz(int64_t n) { return (n * 4 + 63) / 64 * 64; }

struct Act {
  int64_t c, t, h, w;
  int64_t numel(int64_t b) const { return b * c * t * h * w; }
};

// Walks the decoder's forward pass, tracking the largest sum of live tensors.
class ForwardModel {
 public:
  ForwardModel(const DecoderConfig& c, int64_t batch) : cfg_(c), b_(batch) {}

  // Peak of a CausalConv3d (stride 1, kernel 3) whose input is moved in: input + temporal pad,
  // [temporal + spatial pad,] pad + output. `other` is what else is alive.
  int64_t conv(const Act& in, int64_t out_c, int64_t other) const {
    const int64_t x = sz(in.numel(b_));
    const int64_t pad_t = sz(b_ * in.c * (in.t + 2) * in.h * in.w);
    const bool spatial = cfg_.spatial_padding_mode != PaddingMode::Zeros;
    const int64_t pad_s = spatial ? sz(b_ * in.c * (in.t + 2) * (in.h + 2) * (in.w + 2)) : 0;
    const int64_t out = sz(b_ * out_c * in.t * in.h * in.w);
    const int64_t p = std::max({x + pad_t, spatial ? pad_t + pad_s : 0,
                                (spatial ? pad_s : pad_t) + out});
    return other + p;
  }

  // ResnetBlock3D in -> out channels; `x_bytes` is the storage behind its input (a view after a
  // temporal upsampling keeps the dropped frame's storage).
  int64_t resnet(const Act& a, int64_t out_c, int64_t x_bytes) const {
    const int64_t s_in = sz(a.numel(b_));
    const Act o{out_c, a.t, a.h, a.w};
    const int64_t s_out = sz(o.numel(b_));
    // norm (a contiguous copy of a strided input, then the output), modulate, SiLU: x + 2 more.
    int64_t p = x_bytes + 2 * s_in;
    p = std::max(p, conv(a, out_c, x_bytes));
    p = std::max(p, x_bytes + 2 * s_out);
    p = std::max(p, conv(o, out_c, x_bytes));
    if (out_c != a.c) {  // norm3 + conv_shortcut on the moved input
      p = std::max(p, s_out + x_bytes + s_in);
      p = std::max(p, s_out + s_in + s_out);
    }
    return p;
  }

  int64_t forward(const Shape& latent) {
    const int64_t lat = sz(latent.numel());
    int64_t peak = 0;
    // Noise mix (noise, two products, sum), un-normalisation (product, sum).
    if (cfg_.timestep_conditioning) peak = 4 * lat;
    peak = std::max(peak, 3 * lat);
    Act a{cfg_.latent_channels, latent[2], latent[3], latent[4]};
    int64_t ch = cfg_.bottleneck_channels();
    peak = std::max(peak, conv(a, ch, 0));
    a.c = ch;
    int64_t x_bytes = sz(a.numel(b_));
    const size_t n = cfg_.blocks.size();
    for (size_t i = 0; i < n; ++i) {
      const BlockSpec& blk = cfg_.blocks[n - 1 - i];
      const std::string& name = blk.name;
      if (name == "res_x") {
        for (int64_t j = 0; j < *blk.num_layers; ++j) {
          peak = std::max(peak, resnet(a, a.c, x_bytes));
          x_bytes = sz(a.numel(b_));
        }
      } else if (name == "res_x_y") {
        const int64_t out = a.c / blk.multiplier_or(2);
        peak = std::max(peak, resnet(a, out, x_bytes));
        a.c = out;
        x_bytes = sz(a.numel(b_));
      } else if (name == "attn") {
        peak = std::max(peak, x_bytes + 7 * sz(a.numel(b_)));  // loose: copies, qkv, output
        x_bytes = sz(a.numel(b_));
      } else {  // compress_time / compress_space / compress_all: DepthToSpaceUpsample
        const int64_t st = name == "compress_space" ? 1 : 2;
        const int64_t ss = name == "compress_time" ? 1 : 2;
        const int64_t p = st * ss * ss, m = blk.multiplier_or(1);
        const bool residual = name == "compress_all" && blk.residual;
        const int64_t s_c = sz(b_ * (p * a.c / m) * a.t * a.h * a.w);
        int64_t skip = 0;
        if (residual) {
          const int64_t s_in = sz(a.numel(b_));
          peak = std::max(peak, x_bytes + s_in + s_c);  // depth_to_space(x), then repeat
          skip = s_c;
        }
        peak = std::max(peak, conv(a, p * a.c / m, skip));
        peak = std::max(peak, skip + 2 * s_c);  // conv output + its depth_to_space
        a = {a.c / m, a.t * st - (st == 2 ? 1 : 0), a.h * ss, a.w * ss};
        x_bytes = s_c;  // the view still holds the dropped first frame
      }
    }
    const int64_t s = sz(a.numel(b_));
    peak = std::max(peak, x_bytes + 2 * s);  // conv_norm_out (+ modulate), SiLU
    const int64_t out_c = cfg_.out_channels * cfg_.patch_size * cfg_.patch_size;
    peak = std::max(peak, conv(a, out_c, 0));
    const int64_t s48 = sz(b_ * out_c * a.t * a.h * a.w);
    peak = std::max(peak, 2 * s48);  // unpatchify
    return peak;
  }

 private:
  const DecoderConfig& cfg_;
  int64_t b_;
};

int64_t conv_params(int64_t in, int64_t out, int64_t k) { return out * in * k * k * k + out; }

int64_t timestep_embedder_params(int64_t dim) {
  return kTimestepChannels * dim + dim + dim * dim + dim;
}

// Products a mask list makes in scale_by_masks_1d (all-ones masks are skipped).
int64_t mask_products(const std::vector<std::vector<float>>& masks) {
  int64_t k = 0;
  for (const auto& m : masks)
    if (!std::all_of(m.begin(), m.end(), [](float v) { return v == 1.f; })) ++k;
  return k;
}

}  // namespace

int64_t decoder_parameter_count(const DecoderConfig& c) {
  const bool tc = c.timestep_conditioning;
  const bool gn = c.norm_layer == NormLayer::GroupNorm;
  int64_t ch = c.bottleneck_channels();
  int64_t n = 2 * c.latent_channels;  // per-channel statistics
  n += conv_params(c.latent_channels, ch, 3);
  for (size_t i = c.blocks.size(); i-- > 0;) {
    const BlockSpec& b = c.blocks[i];
    if (b.name == "res_x") {
      if (tc) n += timestep_embedder_params(4 * ch);
      const int64_t per = 2 * conv_params(ch, ch, 3) + (gn ? 4 * ch : 0) + (tc ? 4 * ch : 0);
      n += *b.num_layers * per;
    } else if (b.name == "res_x_y") {
      const int64_t out = ch / b.multiplier_or(2);
      n += conv_params(ch, out, 3) + conv_params(out, out, 3) + (gn ? 2 * ch + 2 * out : 0);
      n += 2 * ch + conv_params(ch, out, 1);  // norm3 + conv_shortcut
      ch = out;
    } else if (b.name == "attn") {
      n += ch + 3 * ch * ch + 3 * ch + ch * ch + ch;
    } else {
      const int64_t p = b.name == "compress_space" ? 4 : b.name == "compress_time" ? 2 : 8;
      n += conv_params(ch, p * ch / b.multiplier_or(1), 3);
      ch /= b.multiplier_or(1);
    }
  }
  if (gn) n += 2 * ch;
  n += conv_params(ch, c.out_channels * c.patch_size * c.patch_size, 3);
  if (tc) n += 1 + timestep_embedder_params(2 * ch) + 2 * ch;
  return n;
}

int64_t estimate_forward_peak_bytes(const DecoderConfig& config, const Shape& latent) {
  LTX_CHECK(latent.size() == 5, "decode memory estimate: expected a latent [B, C, F, H, W], got ",
            latent.str());
  return ForwardModel(config, latent[0]).forward(latent) + kSmallTensors;
}

DecodeMemoryEstimate estimate_decode_memory(const DecoderConfig& config, const Shape& latent,
                                            const std::optional<tiling::TilingConfig>& tiling) {
  LTX_CHECK(latent.size() == 5, "decode memory estimate: expected a latent [B, C, F, H, W], got ",
            latent.str());
  DecodeMemoryEstimate e;
  e.weight_bytes = 4 * decoder_parameter_count(config);
  e.latent_bytes = sz(latent.numel());
  const tiling::ScaleFactors s = config.scale_factors();
  const Shape out{latent[0], config.out_channels, (latent[2] - 1) * s.time + 1,
                  latent[3] * s.height, latent[4] * s.width};
  if (!tiling) {
    e.tiles = 1;
    e.largest_tile = latent;
    e.tile_peak_bytes = estimate_forward_peak_bytes(config, latent);
    return e;
  }
  const std::vector<tiling::Tile> tiles = prepare_tiles_for_decoding(latent, out, s, tiling);
  const bool complementary = tiling::masks_are_complementary(tiles, out);
  e.tiles = static_cast<int64_t>(tiles.size());
  const auto groups = tiling::group_tiles_by_temporal_slice(tiles);
  const int64_t per_frame = out[0] * out[1] * out[3] * out[4];
  const int64_t bufs = complementary ? 1 : 2;  // pixel buffer (+ weights)
  int64_t prev = 0, best = 0;
  for (const auto& group : groups) {
    const int64_t len = group.front().out[2].length();
    const int64_t cur = bufs * sz(per_frame * len);
    for (const tiling::Tile& t : group) {
      const Shape tl{latent[0], latent[1], t.in[2].length(), t.in[3].length(), t.in[4].length()};
      int64_t tile = estimate_forward_peak_bytes(config, tl);
      // Blending: the decoded tile plus up to two live mask products (and, for the weights, the
      // ones tensor being masked).
      const int64_t pix = sz(out[0] * out[1] * t.out[2].length() * t.out[3].length() *
                             t.out[4].length());
      const int64_t k = std::min<int64_t>(mask_products(t.masks), 2);
      tile = std::max(tile, pix * ((complementary ? 1 : 2) + k) + kSmallTensors);
      if (prev + cur + tile > best) {
        best = prev + cur + tile;
        e.buffer_bytes = prev + cur;
        e.tile_peak_bytes = tile;
        e.largest_tile = tl;
      }
    }
    // Handing out a weighted chunk divides: a clamped copy and the quotient.
    if (!complementary && prev > 0 && prev + cur + prev > best) {
      best = prev + cur + prev;
      e.buffer_bytes = prev + cur;
      e.tile_peak_bytes = prev;
    }
    prev = cur;
  }
  return e;
}

tiling::TileSizeConfig budgeted_decode_tiling(const DecoderConfig& config, const Shape& latent,
                                              int64_t free_bytes) {
  LTX_CHECK(latent.size() == 5, "budgeted decode tiling: expected a latent [B, C, F, H, W], got ",
            latent.str());
  const tiling::ScaleFactors s = config.scale_factors();
  const int64_t height = latent[3] * s.height, width = latent[4] * s.width;
  std::vector<tiling::TileSizeConfig> candidates = {tiling::auto_tiling_config(height, width)};
  for (int64_t frames : {80, 48})
    for (int64_t side : {640, 512, 384, 256})
      candidates.push_back(tiling::TileSizeConfig::from_long_side(
          tiling::DimensionSizeConfig(side, 64), height, width, s,
          tiling::DimensionSizeConfig(frames, 24)));
  for (const tiling::TileSizeConfig& c : candidates) {
    const DecodeMemoryEstimate e = estimate_decode_memory(config, latent, c);
    if (e.total_bytes() - e.weight_bytes <= free_bytes) return c;
  }
  return candidates.back();
}

}  // namespace ltx::models::video_vae
