#include "models/block_streaming.h"

#include <cstring>

#include "core/log.h"

namespace ltx::models {

void visit_linear(nn::Linear& linear, const TensorVisitFn& fn) {
  linear.for_each_parameter([&](const char*, Tensor& t) { fn(t); });
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
  PackedBlock p;
  p.bytes = block_bytes(visit);
  p.host = backend::streaming_host_allocate(p.bytes, device);
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

size_t block_bytes(const std::function<void(const TensorVisitFn&)>& visit) {
  size_t total = 0;
  visit([&](Tensor& t) {
    if (!t.defined()) return;
    LTX_CHECK(t.device().is_cpu(), "block streaming: a block tensor is on ", t.device().str(),
              "; streamed blocks are bound on the host");
    total = aligned(total) + t.nbytes();
  });
  return total;
}

void fill_block(const std::function<void(const TensorVisitFn&)>& visit, void* dst) {
  auto* base = static_cast<unsigned char*>(dst);
  size_t at = 0;
  visit([&](Tensor& t) {
    if (!t.defined()) return;
    at = aligned(at);
    Tensor::from_blob(base + at, t.shape(), t.dtype(), Device::cpu(), nullptr).copy_from(t);
    at += t.nbytes();
  });
}

void view_in_slot(const std::function<void(const TensorVisitFn&)>& visit,
                  const std::shared_ptr<void>& slot, Device device) {
  auto* base = static_cast<unsigned char*>(slot.get());
  size_t at = 0;
  visit([&](Tensor& t) {
    if (!t.defined()) return;
    at = aligned(at);
    Tensor view = Tensor::from_blob(base + at, t.shape(), t.dtype(), device, slot);
    at += t.nbytes();
    t = view;
  });
}

}  // namespace ltx::models::detail
