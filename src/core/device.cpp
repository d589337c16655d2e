#include "core/device.h"

#include "core/error.h"

namespace ltx {

Device parse_device(const std::string& text, const char* what) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string idx = text.substr(5);
    bool digits = !idx.empty() && idx.size() < 4;
    for (char c : idx) digits = digits && c >= '0' && c <= '9';
    if (digits) return Device::cuda(std::stoi(idx));
  }
  fail(what, ": unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace ltx
