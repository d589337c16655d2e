#include "quantization/mode.h"

#include "core/error.h"

namespace ltx::quantization {

namespace {

constexpr Mode kModes[] = {Mode::None, Mode::Fp8Cast, Mode::Nvfp4Cast, Mode::Nvfp4Prequant};

// The reference's other kinds: recognised so that asking for one says it is not available here,
// rather than calling it unknown.
constexpr const char* kNotYet[] = {"fp8-scaled-mm"};

}  // namespace

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::None: return "none";
    case Mode::Fp8Cast: return "fp8-cast";
    case Mode::Nvfp4Cast: return "nvfp4-cast";
    case Mode::Nvfp4Prequant: return "nvfp4-prequant";
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
  for (const char* name : kNotYet)
    LTX_CHECK(text != name, flag, " ", text, " is not available in this build; available: ",
              available_modes());
  fail(flag, ": unknown quantization '", text, "'; available: ", available_modes());
}

}  // namespace ltx::quantization
