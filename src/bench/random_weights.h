#pragma once
// Random model weights made in memory on the target device, for benchmarks: no files, no host
// copy of the model. Plug a RandomWeights into io::WeightMap::synthetic() and load the model as
// from a checkpoint:
//
//   bench::RandomWeights rw(bench::transformer_init, /*seed=*/0);
//   io::WeightMap w = io::WeightMap::synthetic(rw.synthesizer());
//   auto model = LTXModel::load(w, config, {DType::BF16, Device::cuda()});
//
// Each distribution is drawn once as a small pool (at most `pool_size` values, 1M by default, on
// the host, then copied to the device once); a tensor is filled with device-to-device copies of pool windows starting at
// pseudo-random offsets. The values are therefore not independent across a large tensor, which
// does not matter for timing: every weight is real memory with the distribution's scale.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "io/weights.h"

namespace ltx::bench {

// How one parameter is initialised: N(0, std^2), or a constant.
struct Init {
  enum class Kind { Normal, Constant } kind = Kind::Normal;
  double value = 0;  // std (Normal) or the constant
  static Init normal(double std) { return {Kind::Normal, std}; }
  static Init constant(double v) { return {Kind::Constant, v}; }
};
using InitRule = std::function<Init(const std::string& name, const Shape& shape)>;

// The official benchmark's transformer init: q_norm / k_norm weights 1, tensors of >= 2 dims
// N(0, 0.02^2), the rest N(0, 0.01^2).
Init transformer_init(const std::string& name, const Shape& shape);
// The official benchmark's VAE init: tensors of >= 2 dims N(0, 1 / fan_in) (fan_in = numel /
// shape[0]), per-channel statistics: std 1 / mean 0, other 1-D weights 1, biases and the rest 0.
Init vae_init(const std::string& name, const Shape& shape);
// The official diffusion-decoder benchmark's init (bench_official_diffdec.py): vae_init, except
// the stage-5 blocks' scale_shift_table N(0, 0.02^2).
Init diffusion_vae_init(const std::string& name, const Shape& shape);

// Elements of every parameter that `load` takes from a synthetic weight map, without making
// them (each is a broadcast view of one host zero): the size of a model before building it.
int64_t count_parameters(const std::function<void(io::WeightMap&)>& load);
// The same walk, listing each parameter's name (as the loader asks for it), dtype and shape; the
// byte ranges are left 0.
std::vector<io::TensorInfo> parameter_infos(const std::function<void(io::WeightMap&)>& load);

class RandomWeights {
 public:
  explicit RandomWeights(InitRule rule, uint64_t seed = 0, int64_t pool_size = int64_t{1} << 20);

  // A new contiguous tensor for parameter `name`.
  Tensor make(const std::string& name, const Shape& shape, DType dtype, Device device);
  // make() as an io::WeightSynthesizer; refers to this object (keep it alive while loading).
  io::WeightSynthesizer synthesizer();

  int64_t tensors_made() const { return tensors_; }
  int64_t bytes_made() const { return bytes_; }

 private:
  const Tensor& pool(double std, DType dtype, Device device, int64_t wanted);

  InitRule rule_;
  uint64_t seed_;
  int64_t pool_size_;
  std::map<std::tuple<double, DType, DeviceType, int>, Tensor> pools_;
  int64_t tensors_ = 0, bytes_ = 0;
};

}  // namespace ltx::bench
