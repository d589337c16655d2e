// The list of `ltx parity` components. Each lives next to its model (src/parity/<component>.cpp)
// and is declared here; add one line per component.
#include "parity/parity.h"

namespace ltx::parity {

void run_transformer(Run& run);
void run_connector(Run& run);

const std::vector<ComponentInfo>& components() {
  static const std::vector<ComponentInfo> kComponents = {
      {"transformer", "<case>.weights.safetensors [then the bf16 weights for bf16w]", run_transformer},
      {"connector", "<case>.weights.safetensors [then the text-encoder / text_proj file of a split pack]",
       run_connector},
  };
  return kComponents;
}

}  // namespace ltx::parity
