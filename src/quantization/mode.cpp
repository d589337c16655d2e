#include "quantization/mode.h"

#include "core/error.h"

namespace ltx::quantization {

namespace {

constexpr Mode kModes[] = {Mode::None,      Mode::Fp8Cast,       Mode::Fp8ScaledMm, Mode::Fp8,
                           Mode::Nvfp4Cast, Mode::Nvfp4Prequant, Mode::Fp8Blockwise};

}  // namespace

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::None: return "none";
    case Mode::Fp8Cast: return "fp8-cast";
    case Mode::Fp8ScaledMm: return "fp8-scaled-mm";
    case Mode::Fp8: return "fp8";
    case Mode::Nvfp4Cast: return "nvfp4-cast";
    case Mode::Nvfp4Prequant: return "nvfp4-prequant";
    case Mode::Fp8Blockwise: return "fp8-blockwise";
  }
  return "?";
}

std::string available_modes() {
  std::string out;
  for (Mode m : kModes) out += std::string(out.empty() ? "" : ", ") + mode_name(m);
  return out;
}

Mode parse_mode(std::string_view text, std::string_view flag) {
  for (Mode m : kModes)
    if (text == mode_name(m)) return m;
  fail(flag, ": unknown quantization '", text, "'; available: ", available_modes());
}

}  // namespace ltx::quantization
