#include "bench/model_files.h"

#include <chrono>
#include <filesystem>

#include "bench/presets.h"
#include "bench/random_weights.h"
#include "core/error.h"
#include "generate/model_set_writer.h"

namespace ltx::bench {

namespace {

// The VAE-like parts of the single-file checkpoint take the VAE init, the rest the transformer's.
bool checkpoint_vae_key(const std::string& key) {
  return key.starts_with("vae.") || key.starts_with("audio_vae.") || key.starts_with("vocoder.");
}

}  // namespace

ModelFileSet model_files_in(const std::string& dir, const Preset& p) {
  const std::filesystem::path d(dir);
  return {(d / (p.name + "-checkpoint.safetensors")).string(),
          (d / (p.name + "-gemma.safetensors")).string(),
          (d / (p.name + "-spatial-upscaler-x2.safetensors")).string()};
}

ModelFileSet write_model_files(const Preset& p, const std::string& dir, uint64_t seed,
                               const std::function<void(const std::string&, double)>& on_file) {
  LTX_CHECK(!p.gemma.is_null() && !p.audio.is_null() && !p.upsampler.is_null() && p.has_conv_vae(),
            "--preset ", p.name, ": this preset has no pipeline models (text encoder, audio, "
            "upsampler); use ltx23-22b or tiny");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  LTX_CHECK(!ec, "--dir ", dir, ": cannot create the folder: ", ec.message());
  const ModelFileSet files = model_files_in(dir, p);

  RandomWeights transformer_values(transformer_init, seed);
  RandomWeights vae_values(vae_init, seed + 1);
  const auto host = [](RandomWeights& rw) -> generate::FileTensorValues {
    return [&rw](const std::string& key, const Shape& shape, DType dtype) {
      return rw.make(key, shape, dtype, Device::cpu());
    };
  };
  const auto timed = [&](const std::string& path, const std::function<void()>& write) {
    if (std::filesystem::is_regular_file(path, ec)) return;
    const auto t0 = std::chrono::steady_clock::now();
    write();
    if (on_file)
      on_file(path, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };

  const std::string gemma_config = p.gemma.dump();
  timed(files.checkpoint, [&] {
    nlohmann::json config = nlohmann::json::object();
    config["transformer"] = p.transformer;
    config["vae"] = p.vae;
    config["audio_vae"] = p.audio.at("audio_vae");
    config["vocoder"] = p.audio.at("vocoder");
    generate::write_checkpoint_file(
        files.checkpoint, config, p.model_version, gemma_config,
        [&](const std::string& key, const Shape& shape, DType dtype) {
          return (checkpoint_vae_key(key) ? vae_values : transformer_values)
              .make(key, shape, dtype, Device::cpu());
        });
  });
  timed(files.text_encoder, [&] {
    generate::write_text_encoder_file(files.text_encoder, gemma_config, DType::BF16,
                                      host(transformer_values));
  });
  timed(files.spatial_upsampler, [&] {
    generate::write_upsampler_file(files.spatial_upsampler, p.upsampler, host(vae_values));
  });
  return files;
}

}  // namespace ltx::bench
