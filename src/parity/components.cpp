// The list of `ltx parity` components. Each lives next to its model (src/parity/<component>.cpp)
// and is declared here; add one declaration and one entry per component.
#include "parity/parity.h"

namespace ltx::parity {

void run_transformer(Run& run);   // transformer.cpp
void run_audio_parity(Run& run);  // audio.cpp
void run_text_encoder(Run& run);  // text_encoder.cpp

const std::vector<ComponentInfo>& components() {
  static const std::vector<ComponentInfo> kComponents = {
      {"transformer", "<case>.weights.safetensors [then the bf16 weights for bf16w]", run_transformer},
      {"audio", "audio_<case>.weights.safetensors", run_audio_parity},
      {"text-encoder", "text_gemma*.te.safetensors or a Gemma root folder, then the LTX file",
       run_text_encoder},
  };
  return kComponents;
}

}  // namespace ltx::parity
