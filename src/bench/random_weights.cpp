#include "bench/random_weights.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/hash.h"
#include "sampling/noise.h"

namespace ltx::bench {

Init transformer_init(const std::string& name, const Shape& shape) {
  if (name.ends_with("q_norm.weight") || name.ends_with("k_norm.weight")) return Init::constant(1);
  return Init::normal(shape.size() >= 2 ? 0.02 : 0.01);
}

Init vae_init(const std::string& name, const Shape& shape) {
  if (name.find("per_channel_statistics.") != std::string::npos)
    return Init::constant(name.find("std") != std::string::npos ? 1 : 0);
  if (shape.size() >= 2) {
    const int64_t fan_in = shape[0] > 0 ? shape.numel() / shape[0] : 1;
    return Init::normal(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1))));
  }
  return Init::constant(name.ends_with("weight") || name.ends_with("gamma") ? 1 : 0);
}

Init diffusion_vae_init(const std::string& name, const Shape& shape) {
  if (name.ends_with("scale_shift_table")) return Init::normal(0.02);
  return vae_init(name, shape);
}

std::vector<io::TensorInfo> parameter_infos(const std::function<void(io::WeightMap&)>& load) {
  std::vector<io::TensorInfo> out;
  io::WeightMap w = io::WeightMap::synthetic(
      [&out](const std::string& name, const Shape& shape, DType dtype, Device) {
        out.push_back({name, dtype, shape});
        return Tensor::zeros(Shape(std::vector<int64_t>(shape.size(), 1)), dtype).expand(shape);
      });
  load(w);
  return out;
}

int64_t count_parameters(const std::function<void(io::WeightMap&)>& load) {
  int64_t total = 0;
  for (const io::TensorInfo& info : parameter_infos(load)) total += info.numel();
  return total;
}

RandomWeights::RandomWeights(InitRule rule, uint64_t seed, int64_t pool_size)
    : rule_(std::move(rule)), seed_(seed), pool_size_(pool_size) {
  LTX_CHECK(static_cast<bool>(rule_), "RandomWeights: no init rule");
  LTX_CHECK(pool_size_ >= 2, "RandomWeights: the pool needs at least 2 values, got ", pool_size_);
}

const Tensor& RandomWeights::pool(double std, DType dtype, Device device, int64_t wanted) {
  const auto key = std::make_tuple(std, dtype, device.type, device.index);
  auto it = pools_.find(key);
  if (it != pools_.end() && it->second.numel() >= wanted) return it->second;
  // Small models get small pools; a pool grows (is redrawn) up to pool_size_ as tensors grow.
  const int64_t n = std::min(pool_size_, std::max<int64_t>(wanted, 4096));
  uint64_t s = seed_ ^ fnv1a(std::to_string(std));
  sampling::TorchCpuGenerator gen(static_cast<int64_t>(splitmix64(s) >> 1));
  Tensor host = gen.randn({n});
  float* p = host.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] * std);
  Tensor made = host.to(device, dtype);
  if (it != pools_.end()) return it->second = made;
  return pools_.emplace(key, made).first->second;
}

Tensor RandomWeights::make(const std::string& name, const Shape& shape, DType dtype, Device device) {
  LTX_CHECK(dtype_is_floating(dtype), "RandomWeights: parameter '", name, "' wants ",
            dtype_name(dtype), "; only floating-point parameters can be made");
  const Init init = rule_(name, shape);
  Tensor t = Tensor::empty(shape, dtype, device);
  ++tensors_;
  bytes_ += static_cast<int64_t>(t.nbytes());
  const int64_t n = t.numel();
  if (n == 0) return t;
  if (init.kind == Init::Kind::Constant || init.value == 0) {
    t.fill(init.kind == Init::Kind::Constant ? init.value : 0.0);
    return t;
  }
  // Windows of at most half the pool at pseudo-random starts, so that consecutive rows differ.
  const Tensor& src = pool(init.value, dtype, device, std::min(pool_size_, 2 * n));
  const int64_t size = src.numel(), window = std::min(n, size / 2);
  const Tensor flat = t.view({n});
  uint64_t state = seed_ ^ fnv1a(name);
  for (int64_t pos = 0; pos < n; pos += window) {
    const int64_t len = std::min(window, n - pos);
    const auto start = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(size - len + 1));
    flat.narrow(0, pos, len).copy_from(src.narrow(0, start, len));
  }
  return t;
}

io::WeightSynthesizer RandomWeights::synthesizer() {
  return [this](const std::string& name, const Shape& shape, DType dtype, Device device) {
    return make(name, shape, dtype, device);
  };
}

}  // namespace ltx::bench
