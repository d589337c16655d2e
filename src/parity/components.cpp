// The list of `ltx parity` components. Each lives next to its model (src/parity/<component>.cpp)
// and is declared here; add one line per component.
#include "parity/parity.h"

namespace ltx::parity {

const std::vector<ComponentInfo>& components() {
  static const std::vector<ComponentInfo> kComponents = {
  };
  return kComponents;
}

}  // namespace ltx::parity
