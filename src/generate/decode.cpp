#include "generate/decode.h"

#include <algorithm>
#include <memory>
#include <variant>

#include "core/error.h"
#include "core/storage.h"
#include "generate/progress.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/vocoder.h"
#include "models/video_vae/diffusion_tiling.h"
#include "models/video_vae/model_configurator.h"
#include "models/video_vae/video_decoder.h"
#include "pipelines/pipeline.h"
#include "sampling/noise.h"

namespace ltx::generate {

namespace {

models::audio_vae::Audio decode_audio_file(const Tensor& latent, const std::string& path) {
  const auto file = io::SafetensorsFile::open(path);
  const auto decoder = models::audio_vae::AudioDecoder::from_file(file);
  const auto vocoder = models::audio_vae::VocoderModel::from_file(file);
  LTX_CHECK(latent.size(1) == decoder.config().z_channels, "decode: the audio latent has ",
            latent.size(1), " channels but the audio VAE decoder of '", path, "' takes ",
            decoder.config().z_channels, "; were the latents made with another model?");
  return models::audio_vae::decode_audio(latent, decoder, vocoder);
}

// The pipelines' tiling for the decoder (reference: ensure_tiling_config): a given layout is
// checked against the decoder's grid (and the diffusion decoder's overlap floors) before any work;
// automatic tiling is the conv VAE's long-side layout or the diffusion decoder's memory-aware
// recommendation.
std::optional<models::tiling::TilingConfig> decode_tiling(
    const models::video_vae::VideoDecoder& decoder, const std::string& path,
    const DecodeResult& video, const DecodeOptions& options) {
  namespace vae = models::video_vae;
  namespace tiling = models::tiling;
  const auto* diffusion = std::get_if<vae::DiffusionVideoDecoder>(&decoder);
  const vae::DiffusionTilingGeometry geometry =
      diffusion ? vae::diffusion_tiling_geometry(diffusion->config()) : vae::DiffusionTilingGeometry{};
  if (options.tiling) {
    try {
      tiling::validate(*options.tiling,
                       diffusion ? geometry.pixel_scale : tiling::kVideoScaleFactors,
                       {1, video.frames, video.height, video.width});
      if (diffusion) {
        const auto [overlap_t, overlap_hw] =
            vae::recommended_pixel_overlaps(geometry.tile_halos, geometry.pixel_scale);
        tiling::validate_overlap(*options.tiling, overlap_t, overlap_hw);
      }
    } catch (const Error& e) {
      fail("decode: the video decode tiling (", tiling::describe(*options.tiling),
           ") does not suit the ", diffusion ? "diffusion" : "convolutional",
           " video decoder of '", path, "' for ", video.frames, " frames of ", video.width, "x",
           video.height, ": ", e.what());
    }
    return options.tiling;
  }
  if (!options.auto_tiling) return std::nullopt;
  if (!diffusion) return tiling::auto_tiling_config(video.height, video.width);
  vae::DiffusionTilingBudget budget;
  budget.free_bytes = options.decode_free_bytes.value_or(host_available_bytes());
  budget.model_bytes = vae::diffusion_decoder_weight_bytes(*io::SafetensorsFile::open(path));
  return vae::recommended_decode_tiling(geometry, video.height, video.width, video.frames, budget);
}

}  // namespace

DecodeResult decode_to_mp4(const std::string& output_path, const Tensor& video_latent_in,
                           const Tensor& audio_latent_in, const std::string& video_vae_path,
                           const std::string& audio_vae_path, const DecodeOptions& options,
                           Progress* progress) {
  // The pipelines' latents are bf16 by default; the CPU decoders compute in f32.
  const Tensor video_latent = video_latent_in.defined() ? video_latent_in.to(DType::F32) : Tensor();
  const Tensor audio_latent = audio_latent_in.defined() ? audio_latent_in.to(DType::F32) : Tensor();
  LTX_CHECK(video_latent.defined() && video_latent.dim() == 5 && video_latent.size(0) == 1,
            "decode: the video latent must be [1, C, F, H, W], got ",
            video_latent.defined() ? video_latent.describe() : "nothing");
  LTX_CHECK(!audio_latent.defined() || (audio_latent.dim() == 4 && audio_latent.size(0) == 1),
            "decode: the audio latent must be [1, C, T, mel], got ", audio_latent.describe());
  LTX_CHECK(options.fps > 0, "decode: the frame rate must be positive, got ", options.fps);

  DecodeResult r;
  models::audio_vae::Audio audio;
  if (audio_latent.defined()) {
    if (progress) progress->stage("audio decode");
    audio = decode_audio_file(audio_latent, audio_vae_path);
    LTX_CHECK(audio.waveform.dim() == 2, "decode: the vocoder returned ", audio.waveform.describe(),
              ", expected [channels, samples]");
    pipelines::GenerationResult cut;  // the pipelines' rule for the cut
    cut.audio_max_seconds = options.audio_max_seconds;
    audio.waveform = audio.waveform.narrow(
        1, 0,
        pipelines::audio_samples_to_keep(cut, audio.waveform.size(1),
                                         static_cast<double>(audio.sampling_rate)));
    r.audio_samples = audio.waveform.size(1);
    r.audio_sample_rate = audio.sampling_rate;
    if (progress) progress->end_stage();
  }

  if (progress) progress->stage("video decode");
  // Convolutional or diffusion decoder, chosen from the file's metadata like the reference.
  const bool diffusion_file = models::video_vae::is_diffusion_video_vae(
      io::SafetensorsFile::open(video_vae_path)->metadata_json());
  const Device device = diffusion_file ? Device::cpu() : options.device;
  const nn::LoadOptions load{device.is_cuda() ? DType::BF16 : DType::F32, device};
  const models::video_vae::VideoDecoder decoder =
      models::video_vae::load_video_decoder(video_vae_path, load);
  const auto* diffusion = std::get_if<models::video_vae::DiffusionVideoDecoder>(&decoder);
  const int64_t latent_channels =
      diffusion ? diffusion->config().in_channels
                : std::get<models::video_vae::ConvVideoDecoder>(decoder).config().latent_channels;
  LTX_CHECK(video_latent.size(1) == latent_channels, "decode: the video latent has ",
            video_latent.size(1), " channels but the ", diffusion ? "diffusion " : "",
            "video VAE decoder of '", video_vae_path, "' takes ", latent_channels,
            "; were the latents made with another model?");
  const Shape out_shape =
      std::visit([&](const auto& d) { return d.output_shape(video_latent.shape()); }, decoder);
  r.frames = out_shape[2];
  r.height = out_shape[3];
  r.width = out_shape[4];
  const std::optional<models::tiling::TilingConfig> tiling =
      decode_tiling(decoder, video_vae_path, r, options);
  const int64_t chunks = models::tiling::video_chunks_number(r.frames, tiling);

  media::Mp4Options mp4 = options.mp4;
  if (audio.waveform.defined()) {
    mp4.audio_sample_rate = static_cast<int>(audio.sampling_rate);
    mp4.audio_channels = static_cast<int>(audio.waveform.size(0));
  } else {
    mp4.audio_sample_rate = 0;
  }
  media::Mp4Writer writer(output_path, options.fps, mp4);
  sampling::TorchCpuGenerator generator(options.noise_seed);
  const models::video_vae::NoiseFn noise = [&](const Shape& shape) {
    return generator.randn(shape, DType::F32).to(device);  // drawn on the host, as before
  };
  int64_t done = 0;
  if (progress) progress->step(0, chunks);
  const Tensor latent_on_device = video_latent.to(device, load.dtype);
  models::video_vae::decode_video(decoder, latent_on_device, tiling, noise, [&](const Tensor& chunk) {
    if (chunk.size(0) > 0) writer.write_frames(chunk.to(Device::cpu(), DType::F32));
    if (progress) progress->step(++done, std::max(chunks, done));
  });
  LTX_CHECK(writer.frames_written() == r.frames, "decode: the video decoder produced ",
            writer.frames_written(), " frames, expected ", r.frames);
  if (audio.waveform.defined()) writer.write_audio(audio.waveform);
  writer.finish();
  if (progress) progress->end_stage();
  return r;
}

}  // namespace ltx::generate
