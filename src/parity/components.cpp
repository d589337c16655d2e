// The list of `ltx parity` components. Each lives next to its model (src/parity/<component>.cpp)
// and is declared here; add one line per component.
#include "parity/parity.h"

namespace ltx::parity {

void video_vae_component(Run& run);  // video_vae.cpp
void upsampler_component(Run& run);  // upsampler.cpp

const std::vector<ComponentInfo>& components() {
  static const std::vector<ComponentInfo> kComponents = {
      {"video-vae", "vae_<case>.weights.safetensors", video_vae_component},
      {"upsampler",
       "upsampler_<case>.weights.safetensors + vae_ltx23.weights.safetensors (latent statistics)",
       upsampler_component},
  };
  return kComponents;
}

}  // namespace ltx::parity
