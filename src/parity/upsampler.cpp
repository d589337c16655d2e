// `ltx parity upsampler`: the upsampler_<case> io files (shared/golden/README-vae.md):
// out.latent = upsample_video(in.latent) with the video VAE's latent statistics (second --weights
// file; without it the io file's in.vae.per_channel_statistics.* copies), out.f64.latent (the
// same f32 compute stored as f64) and the inter.* tensors. --device cuda runs it on the GPU.
#include "core/log.h"
#include "models/upsampler/model.h"
#include "parity/parity.h"

namespace ltx::parity {

void upsampler_component(Run& run) {
  using namespace models;
  const auto& weights = run.args().weights;
  const Device dev = run.args().device;
  const nn::LoadOptions opt{run.args().dtype, dev};  // --dtype bf16: weights and activations
  const upsampler::LatentUpsampler up = upsampler::LatentUpsampler::from_file(weights.at(0), opt);
  video_vae::PerChannelStatistics stats;
  if (weights.size() >= 2) {
    stats = upsampler::load_video_latent_statistics(weights[1], opt);
  } else {
    log_warn("parity upsampler: no video VAE file given (second --weights); using the io "
             "file's in.vae.per_channel_statistics.* copies");
    stats.mean_of_means = run.tensor("in.vae.per_channel_statistics.mean-of-means").to(dev, opt.dtype);
    stats.std_of_means = run.tensor("in.vae.per_channel_statistics.std-of-means").to(dev, opt.dtype);
  }
  const Tensor latent = run.tensor("in.latent").to(dev);
  Tensor out = upsampler::upsample_video(latent, stats, up, [&run](const std::string& name,
                                                                    const Tensor& value) {
    const std::string key = "inter." + name;
    if (run.has(key)) run.emit(key, value);
  });
  run.emit("out.latent", out);
  if (run.has("out.f64.latent")) run.emit("out.f64.latent", out.to(DType::F64));
}

}  // namespace ltx::parity
