#include "models/video_vae/video_vae.h"

#include <type_traits>
#include <variant>

#include "core/log.h"
#include "io/safetensors.h"
#include "ops/elementwise.h"

namespace ltx::models::video_vae {

namespace {

// The 19B files carry two more statistics that no model reads (the reference drops them).
void ignore_extra_statistics(io::WeightMap& w) {
  w.ignore("per_channel_statistics.channel");
  w.ignore("per_channel_statistics.mean-of-stds");
}

}  // namespace

int64_t valid_frame_count(int64_t frames, int64_t time_factor) {
  LTX_CHECK(frames >= 1, "video VAE: the video has no frames");
  return frames - (frames - 1) % time_factor;
}

VideoEncoder VideoEncoder::load(io::WeightMap& w, const EncoderConfig& config,
                                const nn::LoadOptions& opt) {
  VideoEncoder e;
  e.config_ = config;
  const PaddingMode pad = config.spatial_padding_mode;
  const int64_t in = config.in_channels * config.patch_size * config.patch_size;
  int64_t ch = config.latent_channels;
  e.conv_in_ = CausalConv3d::load(w, "conv_in", in, ch, 3, {1, 1, 1}, pad, opt);
  for (size_t i = 0; i < config.blocks.size(); ++i) {
    const BlockSpec& b = config.blocks[i];
    io::WeightMap bw = w.scoped(str("down_blocks.", i, "."));
    const std::string& n = b.name;
    if (n == "res_x") {
      e.down_blocks_.emplace_back(UNetMidBlock3D::load(bw, ch, *b.num_layers, config.norm_layer,
                                                       false, pad, opt));
    } else if (n == "res_x_y") {
      const int64_t out = ch * b.multiplier_or(2);
      e.down_blocks_.emplace_back(
          ResnetBlock3D::load(bw, ch, out, config.norm_layer, 1e-6, 32, false, pad, opt));
      ch = out;
    } else if (n == "compress_time" || n == "compress_space" || n == "compress_all" ||
               n == "compress_all_x_y") {
      const std::array<int64_t, 3> stride = n == "compress_time"    ? std::array<int64_t, 3>{2, 1, 1}
                                            : n == "compress_space" ? std::array<int64_t, 3>{1, 2, 2}
                                                                    : std::array<int64_t, 3>{2, 2, 2};
      const int64_t out = n == "compress_all_x_y" ? ch * b.multiplier_or(2) : ch;
      e.down_blocks_.emplace_back(CausalConv3d::load(bw, "", ch, out, 3, stride, pad, opt));
      ch = out;
    } else if (n == "compress_all_res" || n == "compress_space_res" || n == "compress_time_res") {
      const std::array<int64_t, 3> stride = n == "compress_all_res"     ? std::array<int64_t, 3>{2, 2, 2}
                                            : n == "compress_space_res" ? std::array<int64_t, 3>{1, 2, 2}
                                                                        : std::array<int64_t, 3>{2, 1, 1};
      const int64_t out = ch * b.multiplier_or(2);
      e.down_blocks_.emplace_back(SpaceToDepthDownsample::load(bw, ch, out, stride, pad, opt));
      ch = out;
    } else if (n == "attn") {
      e.down_blocks_.emplace_back(AttnBlock3D::load(bw, ch, opt));
    } else {
      fail("video VAE encoder: unknown block '", n, "'");
    }
  }
  e.conv_norm_out_ = Norm::load(w, "conv_norm_out", config.norm_layer, ch, 32, 1e-6, opt);
  int64_t out_ch = config.latent_channels;
  if (config.latent_log_var == LogVarianceType::PerChannel) out_ch *= 2;
  else if (config.latent_log_var != LogVarianceType::None) out_ch += 1;
  e.conv_out_ = CausalConv3d::load(w, "conv_out", ch, out_ch, 3, {1, 1, 1}, pad, opt);
  io::WeightMap sw = w.scoped("per_channel_statistics.");
  e.stats_ = PerChannelStatistics::load(sw, config.latent_channels, opt);
  ignore_extra_statistics(w);
  return e;
}

VideoEncoder VideoEncoder::from_file(const std::string& path, const nn::LoadOptions& opt) {
  auto file = io::SafetensorsFile::open(path);
  const EncoderConfig config = encoder_config_from_metadata(file->metadata_json(), path);
  io::WeightMap w({file}, encoder_key_map());
  VideoEncoder e = load(w, config, opt);
  w.finish("video VAE encoder");
  return e;
}

Tensor VideoEncoder::operator()(const Tensor& video, const Probe& probe) const {
  LTX_CHECK(video.dim() == 5 && video.size(1) == config_.in_channels,
            "video VAE encoder: expected pixels [B, ", config_.in_channels, ", F, H, W], got ",
            video.describe());
  const tiling::ScaleFactors s = video_scale_factors();
  LTX_CHECK(video.size(3) % s.height == 0 && video.size(4) % s.width == 0,
            "video VAE encoder: height and width (", video.size(3), "x", video.size(4),
            ") must be multiples of ", s.height, "x", s.width);
  Tensor x = video;
  const int64_t frames = valid_frame_count(video.size(2), s.time);
  if (frames != video.size(2)) {
    log_warn("video VAE encoder: ", video.size(2), " frames is not 1 + ", s.time,
             "k; cropping the last ", video.size(2) - frames);
    x = x.narrow(2, 0, frames);
  }
  // The activations run in the weights' dtype, as the reference's encoder built in that dtype.
  x = patchify(x.to(conv_in_.weight.dtype()), config_.patch_size, 1);
  x = conv_in_(std::move(x), true);
  for (size_t i = 0; i < down_blocks_.size(); ++i) {
    x = std::visit(
        [&](const auto& b) -> Tensor {
          using B = std::decay_t<decltype(b)>;
          if constexpr (std::is_same_v<B, AttnBlock3D>) return b(x);
          else return b(std::move(x), true);
        },
        down_blocks_[i]);
    if (probe) probe(str("down_blocks.", i), x);
  }
  x = conv_norm_out_.then_silu(std::move(x));
  x = conv_out_(std::move(x), true);
  if (probe) probe("conv_out", x);
  // Means are the first C channels for every log-variance layout (uniform / constant: C + 1
  // channels, per_channel: 2C).
  return stats_.normalize(x.narrow(1, 0, config_.latent_channels));
}

std::vector<tiling::Tile> prepare_tiles_for_encoding(
    const Shape& video_shape, int64_t latent_channels,
    const std::optional<tiling::TilingConfig>& config, const tiling::ScaleFactors& scale) {
  using namespace tiling;
  LTX_CHECK(video_shape.size() == 5, "tiled encode: expected a 5-D video shape, got ",
            video_shape.str());
  const int64_t lf = (video_shape[2] - 1) / scale.time + 1;
  const int64_t lh = video_shape[3] / scale.height, lw = video_shape[4] / scale.width;
  const Shape latent{video_shape[0], latent_channels, lf, lh, lw};
  if (!config) {
    // One tile: the whole video in, the whole latent out.
    Tile t;
    for (int a = 0; a < 5; ++a) {
      t.in.push_back({0, video_shape[a]});
      t.out.push_back({0, latent[a]});
      t.masks.push_back({1.f});
    }
    return {t};
  }
  // Conv-VAE encode needs enough overlap to discard the symmetric-pad edge artifacts.
  validate_overlap(*config, 16, 64);
  const Splitters sp = to_splitters(*config, scale, std::nullopt, true);
  const Intervals ts = sp[0](lf), hs = sp[1](lh), ws = sp[2](lw);
  std::vector<Tile> tiles;
  for (const Interval& t : ts)
    for (const Interval& h : hs)
      for (const Interval& w : ws) {
        const Mapped tin = map_temporal_slice(t, scale.time);
        const Mapped hin = map_spatial_slice(h, scale.height);
        const Mapped win = map_spatial_slice(w, scale.width);
        Tile tile;
        tile.in = {{0, video_shape[0]}, {0, video_shape[1]}, {tin.start, *tin.stop},
                   {hin.start, *hin.stop}, {win.start, *win.stop}};
        tile.out = {{0, video_shape[0]}, {0, latent_channels}, {t.start, t.end}, {h.start, h.end},
                    {w.start, w.end}};
        tile.masks = {{1.f},
                      {1.f},
                      trapezoidal_mask_1d(t.end - t.start, t.left_ramp, t.right_ramp, true),
                      trapezoidal_mask_1d(h.end - h.start, h.left_ramp, h.right_ramp, false),
                      trapezoidal_mask_1d(w.end - w.start, w.left_ramp, w.right_ramp, false)};
        tiles.push_back(std::move(tile));
      }
  return tiles;
}

Tensor VideoEncoder::tiled_encode(const Tensor& video_in,
                                  const std::optional<tiling::TilingConfig>& config) const {
  using namespace tiling;
  LTX_CHECK(video_in.dim() == 5, "tiled encode: expected pixels [B, C, F, H, W], got ",
            video_in.describe());
  const ScaleFactors s = video_scale_factors();
  Tensor video = video_in;
  const int64_t frames = valid_frame_count(video.size(2), s.time);
  if (frames != video.size(2)) {
    log_warn("video VAE tiled encode: ", video.size(2), " frames is not 1 + ", s.time,
             "k; cropping the last ", video.size(2) - frames);
    video = video.narrow(2, 0, frames);
  }
  const int64_t b = video.size(0), c = config_.latent_channels;
  const Shape latent{b, c, (frames - 1) / s.time + 1, video.size(3) / s.height,
                     video.size(4) / s.width};
  const std::vector<Tile> tiles = prepare_tiles_for_encoding(video.shape(), c, config, s);
  const bool complementary = masks_are_complementary(tiles, latent);
  // The buffers are in the model's dtype, as the reference's (a bf16 encoder accumulates in bf16,
  // each masked tile added in f32 and rounded).
  const DType dtype = conv_in_.weight.dtype();
  Tensor acc = Tensor::zeros(latent, dtype, video.device());
  Tensor weights = complementary ? Tensor() : Tensor::zeros(latent, dtype, video.device());
  for (const Tile& t : tiles) {
    Tensor tile_latent = (*this)(slice_ranges(video, t.in));
    LTX_CHECK(tile_latent.shape() == Shape({b, c, t.out[2].length(), t.out[3].length(),
                                            t.out[4].length()}),
              "tiled encode: a tile encoded to ", tile_latent.describe(),
              ", which does not fit its latent range");
    ops::add_(slice_ranges(acc, t.out), scale_by_masks_1d(tile_latent, t.masks));
    if (weights.defined())
      ops::add_(slice_ranges(weights, t.out),
                scale_by_masks_1d(
                    Tensor::full(tile_latent.shape(), 1.0, DType::F32, tile_latent.device()),
                    t.masks));
  }
  if (!weights.defined()) return acc;
  return ops::div(acc, ops::maximum(weights, 1e-8));
}

}  // namespace ltx::models::video_vae
