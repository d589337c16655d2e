#include "core/constant_cache.h"

#include <map>
#include <mutex>
#include <utility>

namespace ltx {

Tensor cached_constant(const std::string& key, Device device, const std::function<Tensor()>& make) {
  static std::mutex mu;
  // Leaked on purpose: device tensors must not be freed during static destruction (the CUDA
  // allocator may be gone by then).
  static auto* cache = new std::map<std::pair<std::string, std::string>, Tensor>();
  const std::pair<std::string, std::string> k{key, device.str()};
  std::lock_guard<std::mutex> lock(mu);
  const auto it = cache->find(k);
  if (it != cache->end()) return it->second;
  const Tensor t = make().to(device);
  cache->emplace(k, t);
  return t;
}

}  // namespace ltx
