#pragma once
// The video decoder of a VAE file, chosen from its metadata like the reference's
// VideoDecoderConfigurator: config.vae._class_name "CausalVideoAutoencoder" (or absent) is the
// convolutional decoder, anything else (LTX-2.5's "CausalDiffusionVAE") the diffusion decoder.
//
//   VideoDecoder dec = load_video_decoder(vae_path);
//   decode_video(dec, latent, tiling, noise, [](const Tensor& frames) { ... });  // [f, H, W, 3]
#include <optional>
#include <string>
#include <variant>

#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/diffusion_video_decoder.h"

namespace ltx::models::video_vae {

using VideoDecoder = std::variant<ConvVideoDecoder, DiffusionVideoDecoder>;

VideoDecoder load_video_decoder(const std::string& path, const nn::LoadOptions& opt = {});

// The pipelines' decode_video on either decoder: sample 0 as [f, H, W, C] chunks in [0, 1].
// `noise` feeds the timestep-conditioned conv decoder and the diffusion decoder's draws.
void decode_video(const VideoDecoder& decoder, const Tensor& latent,
                  const std::optional<tiling::TilingConfig>& tiling, const NoiseFn& noise,
                  const ChunkFn& on_chunk);

}  // namespace ltx::models::video_vae
