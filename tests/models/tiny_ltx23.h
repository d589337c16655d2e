#pragma once
// The tiny LTX-2.3 transformer fixture (tests/fixtures/ltx23.*): its config, a checkpoint bound as
// the transformer binds one, and one forward on the inputs recorded in ltx23.io.
#include <string>

#include "io/safetensors.h"
#include "io/weights.h"
#include "models/transformer/model.h"
#include "support/test_support.h"

namespace ltx::test::tiny_ltx23 {

inline constexpr const char* kBf16Weights = "ltx23.weights.bf16.safetensors";

// `path` (a file in the published transformer layout) under the transformer's key map.
inline io::WeightMap weights(const std::string& path = fixture(kBf16Weights)) {
  namespace tf = models::transformer;
  return io::WeightMap({io::SafetensorsFile::open(path)},
                       tf::transformer_key_map(tf::LTXModelType::AudioVideo));
}

inline models::transformer::LTXModelConfig config() {
  namespace tf = models::transformer;
  return tf::LTXModelConfig::from_file(io::SafetensorsFile(fixture(kBf16Weights)),
                                       tf::LTXModelType::AudioVideo);
}

// One stream's inputs ("video" or "audio") as ltx23.io records them.
inline models::transformer::Modality modality(const io::SafetensorsFile& io,
                                              const std::string& stream) {
  const std::string p = "in." + stream + ".";
  models::transformer::Modality m;
  m.latent = io.tensor(p + "latent");
  m.sigma = io.tensor(p + "sigma");
  m.timesteps = io.tensor(p + "timesteps");
  m.positions = io.tensor(p + "positions");
  m.context = io.tensor(p + "context");
  return m;
}

inline models::transformer::ModelOutputs forward(const models::transformer::LTXModel& model) {
  const io::SafetensorsFile io(fixture("ltx23.io.safetensors"));
  const models::transformer::Modality v = modality(io, "video"), a = modality(io, "audio");
  return model.forward(&v, &a, nullptr);
}

}  // namespace ltx::test::tiny_ltx23
