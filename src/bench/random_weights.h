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
//
// Quantized weights (`ltx bench --weights-format q4_k`) come the same way: per distribution and
// GGML type, one pool of values (rounded to bf16, as the published checkpoints store them) is
// quantised once on the host with quantization/ggml_quant.h and its blocks copied to the device;
// a weight's bytes are windows of whole blocks of that pool at pseudo-random block offsets. Its
// dense twin (make_ggml_source) is the same windows of the values the blocks were quantised from,
// so a step on the twin is the unquantized reference of a step on the blocks.
//
//   io::WeightMap w = io::WeightMap::synthetic(rw.synthesizer(), rw.ggml_synthesizer(policy));
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/ggml_type.h"
#include "core/tensor.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "quantization/mode.h"

namespace ltx::bench {

// How one parameter is initialised: N(0, std^2), or a constant.
struct Init {
  enum class Kind { Normal, Constant } kind = Kind::Normal;
  double value = 0;  // std (Normal) or the constant
  static Init normal(double std) { return {Kind::Normal, std}; }
  static Init constant(double v) { return {Kind::Constant, v}; }
};
using InitRule = std::function<Init(const std::string& name, const Shape& shape)>;
// Which parameters are made as GGML blocks of which type (nullopt: dense), by name and shape.
using GgmlRule = std::function<std::optional<GgmlType>(const std::string& name, const Shape& shape)>;

// `ltx quantize --type`'s per-tensor policy (quantization/gguf_policy.h) for an LTX transformer
// quantised to `type` ("Q4_K", "Q8_0", ...; its names may carry "model.diffusion_model."), for
// weights whose dense source is bf16: the tensors the policy quantises get its type, the rest
// nullopt. Throws for a name that is not a quantized `ltx quantize` type.
GgmlRule transformer_gguf_rule(const std::string& type);

// `--weights-format` of `ltx bench transformer` and `ltx bench pipeline`: "dense" (every weight in
// the model dtype; "bf16" says the same under a bf16 model dtype), or a quantized type of `ltx
// quantize --type` (any case) whose policy (transformer_gguf_rule) makes the transformer's linear
// weights GGML blocks. The quantized type's name ("Q4_K_M"); nullopt for dense and for names
// that are neither (check_weights_format refuses those).
std::optional<std::string> weights_format_ggml_type(const std::string& format);
// Throws ltx::Error naming --weights-format for an unknown format (listing the accepted ones),
// "bf16" under another model dtype, and a quantized format with a --quantization mode (GGML
// blocks run as stored; a mode quantises dense weights at load).
void check_weights_format(const std::string& format, DType model_dtype,
                          quantization::Mode quantization);

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

  // GGML blocks of `type` for parameter `name` [rows, cols] (a normal init; cols a whole number
  // of blocks), its bytes on `device`.
  io::GgmlTensor make_ggml(const std::string& name, const Shape& shape, GgmlType type, Device device);
  // The values make_ggml(name, shape, type) was quantised from, as a dense `dtype` tensor.
  Tensor make_ggml_source(const std::string& name, const Shape& shape, GgmlType type, DType dtype,
                          Device device);
  // make_ggml for the parameters `rule` types, as an io::GgmlSynthesizer (the rest: synthesizer()).
  io::GgmlSynthesizer ggml_synthesizer(GgmlRule rule);
  // The dense twin of a map made with ggml_synthesizer(rule): make_ggml_source for the parameters
  // `rule` types, make() for the rest.
  io::WeightSynthesizer ggml_source_synthesizer(GgmlRule rule);

  int64_t tensors_made() const { return tensors_; }
  int64_t bytes_made() const { return bytes_; }
  int64_t ggml_tensors_made() const { return ggml_tensors_; }

  // The pool a GGML parameter of init std `std` reads: its values (f32, bf16-exact, on the
  // host) and their blocks (u8, on the host); for tests.
  struct GgmlPool {
    Tensor values, blocks;
  };
  const GgmlPool& ggml_pool(double std, GgmlType type);
  // The first pool block of each window of make_ggml(name, shape, type), in order; each window
  // covers min(blocks of the tensor, half the pool's blocks) blocks (the last one the rest).
  std::vector<int64_t> ggml_window_starts(const std::string& name, const Shape& shape, GgmlType type);

 private:
  const Tensor& pool(double std, DType dtype, Device device, int64_t wanted);
  // The windows of a GGML parameter: calls fn(first block of the tensor, first pool block, blocks).
  void for_each_ggml_window(const std::string& name, const Shape& shape, GgmlType type,
                            const std::function<void(int64_t, int64_t, int64_t)>& fn);
  double ggml_std(const std::string& name, const Shape& shape, GgmlType type) const;

  InitRule rule_;
  uint64_t seed_;
  int64_t pool_size_;
  std::map<std::tuple<double, DType, DeviceType, int>, Tensor> pools_;
  std::map<std::tuple<double, GgmlType>, GgmlPool> ggml_pools_;
  // Device copies of the GGML pools' blocks, and of their values in a dtype.
  std::map<std::tuple<double, GgmlType, DeviceType, int>, Tensor> ggml_blocks_on_;
  std::map<std::tuple<double, GgmlType, DType, DeviceType, int>, Tensor> ggml_values_on_;
  int64_t tensors_ = 0, bytes_ = 0, ggml_tensors_ = 0;
};

}  // namespace ltx::bench
