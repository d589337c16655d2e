// `ltx parity video-vae`: the vae_<case> io files (shared/golden/README-vae.md). Computes, for the
// inputs the io file has: out.encode.latent, out.tiled_encode.latent, out.decode.pixels, out.decode_default_t.pixels,
// out.decode_causal.pixels, out.tiled_decode.{pixels,chunk_frames} and the inter.encode.* /
// inter.decode.* tensors the file stores; an out.f64.<x> twin is written from the same f32 values
// (the CPU backend has no f64 path). Tiling configs come from the io file's metadata
// (notes.tiled_encode.tiling_config / notes.tiled_decode.tiling_config); recorded decoder noise
// from in.decode.noise / in.tiled_decode.noise_flat. With --device cuda the weights and inputs
// are moved to the GPU and every op runs there; only the outputs come back.
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "io/safetensors.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/video_vae.h"
#include "ops/elementwise.h"
#include "parity/parity.h"

namespace ltx::parity {

namespace {

namespace tiling = models::tiling;
using namespace models::video_vae;

std::optional<tiling::TilingConfig> tiling_from_notes(const Run& run, const char* section) {
  const nlohmann::json notes = run.io().metadata_json("notes");
  if (!notes.is_object() || !notes.contains(section) || !notes[section].is_object() ||
      !notes[section].contains("tiling_config"))
    return std::nullopt;
  return tiling::tiling_config_from_json(notes[section]["tiling_config"]);
}

// Emits out.<name>, and out.f64.<name> from the same f32 values when the io file has that twin
// (the CPU backend computes in f32 only).
void emit_out_with_f64(Run& run, const std::string& name, const Tensor& value) {
  run.emit("out." + name, value);
  if (run.has("out.f64." + name)) run.emit("out.f64." + name, value.to(DType::F64));
}

// Emits `inter.<stage>.<name>` for the intermediates the io file stores.
Probe probe_into(Run& run, const std::string& stage) {
  return [&run, stage](const std::string& name, const Tensor& value) {
    const std::string key = "inter." + stage + "." + name;
    if (run.has(key)) run.emit(key, value);
  };
}

// Hands out consecutive pieces of a flat noise tensor, one per draw, checking it is used up.
struct FlatNoise {
  std::vector<float> values;
  size_t pos = 0;
  Device device = Device::cpu();
  Tensor operator()(const Shape& shape) {
    const size_t n = static_cast<size_t>(shape.numel());
    LTX_CHECK(pos + n <= values.size(), "parity video-vae: the recorded noise has ", values.size(),
              " values, the tiled decode needs more (draw of ", shape.str(), " at ", pos, ")");
    std::vector<float> part(values.begin() + static_cast<std::ptrdiff_t>(pos),
                            values.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
    return Tensor::from_vector(part, shape).to(device);
  }
};

void encode(Run& run, const std::string& weights) {
  if (!run.has("in.encode.pixels_u8")) return;
  const Device dev = run.args().device;
  const VideoEncoder encoder = VideoEncoder::from_file(weights, nn::LoadOptions{run.args().dtype, dev});
  // pixels_u8.float() / 127.5 - 1.0, in f32 as the pipelines do.
  Tensor pixels = ops::sub(ops::div(run.tensor("in.encode.pixels_u8").to(dev), 127.5), 1.0);
  Tensor latent = encoder(pixels, probe_into(run, "encode"));
  emit_out_with_f64(run, "encode.latent", latent);
  if (run.has("out.tiled_encode.latent")) {
    const auto cfg = tiling_from_notes(run, "tiled_encode");
    if (cfg)
      emit_out_with_f64(run, "tiled_encode.latent", encoder.tiled_encode(pixels, cfg));
    else
      log_warn("parity video-vae: the io file has no notes.tiled_encode.tiling_config; "
               "out.tiled_encode.latent not computed");
  }
}

void decode(Run& run, const std::string& weights) {
  const bool plain = run.has("in.decode.latent");
  const bool tiled = run.has("in.tiled_decode.latent");
  if (!plain && !tiled) return;
  const Device dev = run.args().device;
  auto file = io::SafetensorsFile::open(weights);
  DecoderConfig config = decoder_config_from_metadata(file->metadata_json(), weights);
  auto build = [&](const DecoderConfig& c) {
    io::WeightMap w({file}, decoder_key_map());
    ConvVideoDecoder d = ConvVideoDecoder::load(w, c, nn::LoadOptions{run.args().dtype, dev});
    w.finish("video VAE decoder");
    return d;
  };
  const ConvVideoDecoder decoder = build(config);

  if (plain) {
    const Tensor latent = run.tensor("in.decode.latent").to(dev);
    std::optional<Tensor> timestep;
    if (run.has("in.decode.timestep")) timestep = run.tensor("in.decode.timestep").to(dev);
    NoiseFn noise;
    if (run.has("in.decode.noise")) {
      const Tensor recorded = run.tensor("in.decode.noise").to(dev);
      noise = [recorded](const Shape& shape) {
        LTX_CHECK(recorded.shape() == shape, "parity video-vae: in.decode.noise is ",
                  recorded.shape().str(), ", the decoder draws ", shape.str());
        return recorded;
      };
    }
    emit_out_with_f64(run, "decode.pixels", decoder(latent, timestep, noise, probe_into(run, "decode")));
    if (run.has("out.decode_default_t.pixels"))
      emit_out_with_f64(run, "decode_default_t.pixels", decoder(latent, std::nullopt, noise));
    if (run.has("out.decode_causal.pixels")) {
      DecoderConfig causal = config;
      causal.causal = true;
      emit_out_with_f64(run, "decode_causal.pixels", build(causal)(latent, timestep, noise));
    }
  }
  if (tiled) {
    const auto cfg = tiling_from_notes(run, "tiled_decode");
    if (!cfg) {
      log_warn("parity video-vae: the io file has no notes.tiled_decode.tiling_config; "
               "out.tiled_decode.* not computed");
      return;
    }
    const Tensor latent = run.tensor("in.tiled_decode.latent").to(dev);
    std::optional<Tensor> timestep;
    if (run.has("in.tiled_decode.timestep"))
      timestep = run.tensor("in.tiled_decode.timestep").to(dev);
    NoiseFn noise;
    auto flat = std::make_shared<FlatNoise>();
    flat->device = dev;
    if (run.has("in.tiled_decode.noise_flat")) {
      flat->values = run.tensor("in.tiled_decode.noise_flat").to_float_vector();
      noise = [flat](const Shape& shape) { return (*flat)(shape); };
    }
    std::vector<int64_t> frames;
    emit_out_with_f64(run, "tiled_decode.pixels",
             decoder.tiled_decode_all(latent, cfg, timestep, noise, &frames));
    if (noise)
      LTX_CHECK(flat->pos == flat->values.size(), "parity video-vae: the tiled decode used ",
                flat->pos, " of the ", flat->values.size(), " recorded noise values");
    run.emit("out.tiled_decode.chunk_frames",
             Tensor::from_vector(frames, {static_cast<int64_t>(frames.size())}));
  }
}

}  // namespace

void video_vae_component(Run& run) {
  const std::string& weights = run.args().weights.at(0);
  encode(run, weights);
  decode(run, weights);
}

}  // namespace ltx::parity
