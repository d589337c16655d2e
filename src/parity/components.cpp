// The list of `ltx parity` components. Each lives next to its model (src/parity/<component>.cpp)
// and is declared here; add one line per component.
#include "parity/parity.h"

namespace ltx::parity {

void run_audio_parity(Run& run);  // audio.cpp

const std::vector<ComponentInfo>& components() {
  static const std::vector<ComponentInfo> kComponents = {
      {"audio", "audio_<case>.weights.safetensors", run_audio_parity},
  };
  return kComponents;
}

}  // namespace ltx::parity
