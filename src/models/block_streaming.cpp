#include "models/block_streaming.h"

#include <cstring>

#include "core/log.h"

namespace ltx::models {

void visit_linear(nn::Linear& linear, const TensorVisitFn& fn) {
  fn(linear.weight);
  fn(linear.bias);
}

}  // namespace ltx::models

namespace ltx::models::detail {

namespace {

// Each tensor starts on a 256-byte boundary in the block's buffer (and so in its slot), the
// alignment the device allocator gives every tensor of a resident model, which the vectorised
// and TMA kernels rely on.
constexpr size_t kAlign = 256;

size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

PackedBlock pack_block(const std::function<void(const TensorVisitFn&)>& visit, Device device,
                       std::map<const void*, Tensor>& moved) {
  size_t total = 0;
  visit([&](Tensor& t) {
    if (!t.defined()) return;
    LTX_CHECK(t.device().is_cpu(), "block streaming: a block tensor is on ", t.device().str(),
              "; streamed blocks are bound on the host");
    total = aligned(total) + t.nbytes();
  });
  PackedBlock p;
  p.bytes = total;
  p.host = backend::streaming_host_allocate(total, device);
  auto* base = static_cast<unsigned char*>(p.host.get());
  size_t at = 0;
  visit([&](Tensor& t) {
    if (!t.defined()) return;
    at = aligned(at);
    Tensor home = Tensor::from_blob(base + at, t.shape(), t.dtype(), Device::cpu(), p.host);
    home.copy_from(t);
    if (t.numel() > 0) moved[t.raw_data()] = home;
    t = home;
    at += t.nbytes();
  });
  return p;
}

void log_pass_end_failure(const std::exception& e) {
  log_warn("block streaming: ending the pass failed: ", e.what());
}

void view_in_slot(const std::function<void(const TensorVisitFn&)>& visit, const PackedBlock& packed,
                  const std::shared_ptr<void>& slot, Device device) {
  const auto* host = static_cast<const unsigned char*>(packed.host.get());
  auto* dev = static_cast<unsigned char*>(slot.get());
  visit([&](Tensor& t) {
    if (!t.defined()) return;
    const size_t offset = static_cast<size_t>(static_cast<const unsigned char*>(t.raw_data()) - host);
    LTX_CHECK(offset + t.nbytes() <= packed.bytes, "block streaming: a tensor outside its block");
    t = Tensor::from_blob(dev + offset, t.shape(), t.dtype(), device, slot);
  });
}

}  // namespace ltx::models::detail
