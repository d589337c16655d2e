#include "generate/placement.h"

#include "backend/device_query.h"
#include "core/log.h"

namespace ltx::generate {

nn::LoadOptions model_placement(Device device, std::optional<DType> dtype) {
  if (device.is_cpu()) return {DType::F32, device};
  return {dtype.value_or(DType::BF16), device};
}

std::string describe_placement(const nn::LoadOptions& where) {
  std::string s = backend::device_description(where.device);
  if (where.device.is_cuda()) s += " " + where.device.str();
  return s + ", " + dtype_name(where.dtype) + " weights";
}

void log_placement(const std::string& component, const nn::LoadOptions& where) {
  log_info(component, " runs on ", describe_placement(where));
}

}  // namespace ltx::generate
