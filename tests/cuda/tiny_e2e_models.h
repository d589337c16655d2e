#pragma once
// The tiny LTX-2.3 model set of the end-to-end recordings (tests/fixtures/e2e/) loaded on one
// device, for the pipelines' CUDA tests that compare a GPU run with the same run on the CPU, and
// the recordings' shared text contexts.
#include <memory>

#include "io/safetensors.h"
#include "models/audio_vae/audio_vae.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx::test {

struct TinyE2eModels {
  models::transformer::LTXModel transformer;
  models::video_vae::VideoEncoder encoder;
  models::upsampler::LatentUpsampler upsampler;
  std::unique_ptr<models::audio_vae::AudioEncoder> audio_encoder;  // with `audio_encoder`

  explicit TinyE2eModels(const nn::LoadOptions& opt, bool with_audio_encoder = false)
      : transformer(models::transformer::LTXModel::from_files(
            {fixture("e2e/ltx23_tiny.safetensors")}, models::transformer::LTXModelType::AudioVideo, opt)),
        encoder(models::video_vae::VideoEncoder::from_file(fixture("e2e/ltx23_tiny.safetensors"), opt)),
        upsampler(models::upsampler::LatentUpsampler::from_file(fixture("e2e/ltx23_tiny_upsampler_x2.safetensors"),
                                                                opt)) {
    if (with_audio_encoder)
      audio_encoder = std::make_unique<models::audio_vae::AudioEncoder>(models::audio_vae::AudioEncoder::from_file(
          io::SafetensorsFile::open(fixture("e2e/ltx23_tiny.safetensors")), opt));
  }

  pipelines::Components components(Device device) const {
    pipelines::Components c;
    c.transformer = &transformer;
    c.video_encoder = &encoder;
    c.spatial_upsampler = &upsampler;
    c.audio_encoder = audio_encoder.get();
    c.model_version = "2.3.0";
    c.device = device;
    return c;
  }
};

// The positive prompt's contexts of e2e_text.io (the audio one too when `audio`).
inline pipelines::TextContexts e2e_positive_contexts(bool audio = true) {
  auto text = io::SafetensorsFile::open(fixture("e2e_text.io.safetensors"));
  pipelines::TextContexts ctx;
  ctx.video_positive = text->tensor("out.text.positive.video_encoding").contiguous();
  if (audio) ctx.audio_positive = text->tensor("out.text.positive.audio_encoding").contiguous();
  return ctx;
}

}  // namespace ltx::test
