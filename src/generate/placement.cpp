#include "generate/placement.h"

#include "backend/device_query.h"
#include "core/log.h"

namespace ltx::generate {

Offload parse_offload(const std::string& text) {
  if (text == "none") return Offload::None;
  if (text == "cpu") return Offload::Cpu;
  if (text == "disk") return Offload::Disk;
  if (text == "auto") return Offload::Auto;
  throw Error(str("--offload: '", text, "' is not a mode; use none (weights on the GPU), cpu "
                  "(blocks in page-locked host memory, streamed to the GPU), disk (blocks read "
                  "from the model files at every pass, streamed to the GPU) or auto (resident or "
                  "streamed as the GPU budget allows)"));
}

const char* offload_name(Offload offload) {
  switch (offload) {
    case Offload::Cpu: return "cpu";
    case Offload::Disk: return "disk";
    case Offload::Auto: return "auto";
    case Offload::None: break;
  }
  return "none";
}

models::BlockStreaming block_streaming(Offload offload, Device device) {
  if (offload == Offload::None || offload == Offload::Auto) return {};
  LTX_CHECK(device.is_cuda(), "--offload ", offload_name(offload),
            " streams the transformer's blocks to a GPU; with --device ", device.str(),
            " use --offload none");
  return {kOffloadSlots, offload == Offload::Disk};
}

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
