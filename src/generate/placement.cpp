#include "generate/placement.h"

#include "backend/device_query.h"
#include "core/log.h"

namespace ltx::generate {

nn::LoadOptions model_placement(Device device, std::optional<DType> dtype) {
  if (device.is_cpu()) return {DType::F32, device};
  return {dtype.value_or(DType::BF16), device};
}

nn::LoadOptions transformer_placement(const nn::LoadOptions& where, quantization::Mode quantization) {
  nn::LoadOptions t = where;
  t.quantization = quantization;
  return t;
}

std::string describe_placement(const nn::LoadOptions& where) {
  std::string s = backend::device_description(where.device);
  if (where.device.is_cuda()) s += " " + where.device.str();
  s += str(", ", dtype_name(where.dtype), " weights");
  if (where.quantization != quantization::Mode::None)
    s += str(" (--quantization ", quantization::mode_name(where.quantization), ")");
  return s;
}

void log_placement(const std::string& component, const nn::LoadOptions& where) {
  log_info(component, " runs on ", describe_placement(where));
}

}  // namespace ltx::generate
