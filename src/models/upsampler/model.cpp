#include "models/upsampler/model.h"

#include "io/safetensors.h"
#include "models/video_vae/model_configurator.h"
#include "ops/elementwise.h"
#include "ops/resample.h"

namespace ltx::models::upsampler {

LatentUpsampler LatentUpsampler::load(io::WeightMap& w, const LatentUpsamplerConfig& config,
                                      const nn::LoadOptions& opt) {
  LatentUpsampler u;
  u.config_ = config;
  const int dims = static_cast<int>(config.dims);
  const int64_t in = config.in_channels, mid = config.mid_channels;
  u.initial_conv_ = Conv::load(w, "initial_conv", in, mid, 3, dims, opt);
  u.initial_norm_weight_ = w.take("initial_norm.weight", {mid}, opt.dtype, opt.device);
  u.initial_norm_bias_ = w.take("initial_norm.bias", {mid}, opt.dtype, opt.device);
  for (int64_t i = 0; i < config.num_blocks_per_stage; ++i) {
    io::WeightMap bw = w.scoped(str("res_blocks.", i, "."));
    u.res_blocks_.push_back(ResBlock::load(bw, mid, dims, opt));
  }
  if (config.spatial_upsample && config.temporal_upsample) {
    u.kind_ = Kind::SpatioTemporal;
    u.upsampler_conv_ = Conv::load(w, "upsampler.0", mid, 8 * mid, 3, 3, opt);
  } else if (config.spatial_upsample && config.rational_resampler) {
    u.kind_ = Kind::Rational;
    io::WeightMap rw = w.scoped("upsampler.");
    u.rational_ = SpatialRationalResampler::load(rw, mid, config.spatial_scale, opt);
  } else if (config.spatial_upsample) {
    u.kind_ = Kind::Spatial2x;
    u.upsampler_conv_ = Conv::load(w, "upsampler.0", mid, 4 * mid, 3, 2, opt);
  } else {
    u.kind_ = Kind::Temporal;
    u.upsampler_conv_ = Conv::load(w, "upsampler.0", mid, 2 * mid, 3, 3, opt);
  }
  for (int64_t i = 0; i < config.num_blocks_per_stage; ++i) {
    io::WeightMap bw = w.scoped(str("post_upsample_res_blocks.", i, "."));
    u.post_upsample_res_blocks_.push_back(ResBlock::load(bw, mid, dims, opt));
  }
  u.final_conv_ = Conv::load(w, "final_conv", mid, in, 3, dims, opt);
  return u;
}

LatentUpsampler LatentUpsampler::from_file(const std::string& path, const nn::LoadOptions& opt) {
  auto file = io::SafetensorsFile::open(path);
  const LatentUpsamplerConfig config = upsampler_config_from_metadata(file->metadata_json(), path);
  io::WeightMap w({file}, io::KeyMap::all("latent upsampler (bare keys)"));
  LatentUpsampler u = load(w, config, opt);
  w.finish("latent upsampler");
  return u;
}

Shape LatentUpsampler::output_shape(const Shape& s) const {
  LTX_CHECK(s.size() == 5, "latent upsampler: expected [B, C, F, H, W], got ", s.str());
  switch (kind_) {
    case Kind::Spatial2x: return {s[0], s[1], s[2], 2 * s[3], 2 * s[4]};
    case Kind::Rational: {
      // Up by num, then a stride-den blur with padding 2 and kernel 5: ceil(H num / den).
      const int64_t n = rational_->num, d = rational_->den;
      auto out = [&](int64_t v) { return (v * n - 1) / d + 1; };
      return {s[0], s[1], s[2], out(s[3]), out(s[4])};
    }
    case Kind::Temporal: return {s[0], s[1], 2 * s[2] - 1, s[3], s[4]};
    case Kind::SpatioTemporal: return {s[0], s[1], 2 * s[2] - 1, 2 * s[3], 2 * s[4]};
  }
  return s;
}

Tensor LatentUpsampler::operator()(const Tensor& latent, const Probe& probe) const {
  LTX_CHECK(latent.dim() == 5 && latent.size(1) == config_.in_channels,
            "latent upsampler: expected a latent [B, ", config_.in_channels, ", F, H, W], got ",
            latent.describe());
  const bool per_frame = config_.dims == 2;
  // The activations run in the weights' dtype, as the reference's upsampler built in that dtype.
  Tensor x = initial_conv_(latent.to(initial_conv_.weight.dtype()));
  x = ops::silu(group_norm_32(x, initial_norm_weight_, initial_norm_bias_, per_frame));
  if (probe) probe("after_initial", x);
  for (const ResBlock& b : res_blocks_) x = b(x);
  if (probe) probe("after_res_blocks", x);
  switch (kind_) {
    case Kind::Spatial2x:
      // Conv2d + PixelShuffleND(2) per frame: "b (c p1 p2) h w -> b c (h p1) (w p2)".
      x = ops::depth_to_space(upsampler_conv_(x), {1, 2, 2}, {0, 1, 2});
      break;
    case Kind::Rational: x = (*rational_)(x); break;
    case Kind::Temporal:
      // Conv3d + PixelShuffleND(1): "b (c p1) f h w -> b c (f p1) h w".
      x = ops::depth_to_space(upsampler_conv_(x), {2, 1, 1}, {0, 1, 2});
      break;
    case Kind::SpatioTemporal:
      x = ops::depth_to_space(upsampler_conv_(x), {2, 2, 2}, {0, 1, 2});
      break;
  }
  if (probe) probe("after_upsampler", x);
  // The first output frame stands for the single pixel frame of latent frame 0: drop it.
  if (config_.temporal_upsample) x = x.narrow(2, 1, x.size(2) - 1);
  for (const ResBlock& b : post_upsample_res_blocks_) x = b(x);
  if (probe) probe("after_post_res_blocks", x);
  return final_conv_(x);
}

video_vae::PerChannelStatistics load_video_latent_statistics(const std::string& vae_path,
                                                             const nn::LoadOptions& opt) {
  auto file = io::SafetensorsFile::open(vae_path);
  io::WeightMap w({file}, video_vae::encoder_key_map());
  io::WeightMap sw = w.scoped("per_channel_statistics.");
  LTX_CHECK(sw.contains("mean-of-means"), "'", vae_path,
            "' has no video latent statistics (vae.per_channel_statistics.* or "
            "per_channel_statistics.*): pass the video VAE file");
  LTX_CHECK(sw.shape("mean-of-means").size() == 1, "'", vae_path,
            "': per_channel_statistics.mean-of-means must be 1-D, got ",
            sw.shape("mean-of-means").str());
  const int64_t c = sw.shape("mean-of-means")[0];
  video_vae::PerChannelStatistics s = video_vae::PerChannelStatistics::load(sw, c, opt);
  sw.ignore("channel");  // 19B-only extras nobody reads
  sw.ignore("mean-of-stds");
  sw.finish("video latent statistics");  // reports a misshaped std-of-means
  return s;
}

Tensor upsample_video(const Tensor& latent, const video_vae::PerChannelStatistics& stats,
                      const LatentUpsampler& upsampler, const Probe& probe) {
  // In the statistics' dtype (the model dtype in the pipelines): a bf16 un-normalisation rounds
  // per op, as the reference's.
  Tensor x = stats.un_normalize(latent.to(stats.mean_of_means.dtype()));
  if (probe) probe("unnormalized", x);
  x = upsampler(x, probe);
  if (probe) probe("upsampled_raw", x);
  return stats.normalize(x);
}

}  // namespace ltx::models::upsampler
