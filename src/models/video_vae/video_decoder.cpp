#include "models/video_vae/video_decoder.h"

#include "io/safetensors.h"

namespace ltx::models::video_vae {

VideoDecoder load_video_decoder(const std::string& path, const nn::LoadOptions& opt) {
  if (is_diffusion_video_vae(io::SafetensorsFile::open(path)->metadata_json()))
    return DiffusionVideoDecoder::from_file(path, opt);
  return ConvVideoDecoder::from_file(path, opt);
}

void decode_video(const VideoDecoder& decoder, const Tensor& latent,
                  const std::optional<tiling::TilingConfig>& tiling, const NoiseFn& noise,
                  const ChunkFn& on_chunk) {
  std::visit([&](const auto& d) { d.decode_video(latent, tiling, noise, on_chunk); }, decoder);
}

}  // namespace ltx::models::video_vae
