#include "bench/random_weights.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "quantization/ggml_quant.h"
#include "quantization/gguf_policy.h"
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

GgmlRule transformer_gguf_rule(const std::string& type) {
  const std::optional<quantization::GgufQuantType> t = quantization::parse_gguf_quant_type(type);
  LTX_CHECK(t && ggml_is_quantized(t->base), "transformer_gguf_rule: '", type,
            "' is not a quantized type of ltx quantize (", quantization::gguf_quant_type_names(), ")");
  return [t = *t](const std::string& name, const Shape& shape) -> std::optional<GgmlType> {
    const std::string prefix = quantization::kTransformerPrefix;
    const std::string bare = name.starts_with(prefix) ? name.substr(prefix.size()) : name;
    const GgmlType g = quantization::community_gguf_type(bare, shape, GgmlType::BF16, t);
    if (!ggml_is_quantized(g)) return std::nullopt;
    return g;
  };
}

namespace {

// The quantized types of `ltx quantize --type` (the GGUF policy's list without BF16 / F16).
std::vector<std::string> quantized_weight_formats() {
  std::vector<std::string> out;
  std::stringstream names(quantization::gguf_quant_type_names());
  for (std::string name; std::getline(names, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    const auto t = quantization::parse_gguf_quant_type(name);
    if (t && ggml_is_quantized(t->base)) out.push_back(name);
  }
  return out;
}

std::string weights_format_lower_case(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::optional<std::string> weights_format_ggml_type(const std::string& format) {
  const std::optional<quantization::GgufQuantType> t = quantization::parse_gguf_quant_type(format);
  if (!t || !ggml_is_quantized(t->base)) return std::nullopt;
  return t->name;
}

void check_weights_format(const std::string& format, DType model_dtype,
                          quantization::Mode quantization) {
  const std::string lower = weights_format_lower_case(format);
  const std::optional<std::string> ggml = weights_format_ggml_type(format);
  if (lower != "dense" && lower != "bf16" && !ggml) {
    std::string accepted = "dense, bf16";
    for (const std::string& name : quantized_weight_formats()) accepted += ", " + weights_format_lower_case(name);
    fail("--weights-format: unknown format '", format, "'; use one of ", accepted);
  }
  LTX_CHECK(lower != "bf16" || model_dtype == DType::BF16, "--weights-format bf16: the dense "
            "weights under --dtype bf16 (the CUDA default), but this run's dtype is ",
            dtype_name(model_dtype), "; use --weights-format dense");
  LTX_CHECK(!ggml || quantization == quantization::Mode::None, "--weights-format ", format,
            " makes the transformer's linear weights GGML blocks, which run as stored (as a GGUF "
            "file's); --quantization ", quantization::mode_name(quantization),
            " quantises dense weights at load: use one of the two");
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

double RandomWeights::ggml_std(const std::string& name, const Shape& shape, GgmlType type) const {
  const Init init = rule_(name, shape);
  LTX_CHECK(init.kind == Init::Kind::Normal && init.value > 0, "RandomWeights: parameter '", name,
            "' is not drawn from a normal distribution, so it cannot be made as ",
            ggml_type_name(type), " blocks");
  return init.value;
}

const RandomWeights::GgmlPool& RandomWeights::ggml_pool(double std, GgmlType type) {
  LTX_CHECK(ggml_is_quantized(type) && quantization::ggml_can_quantize(type), "RandomWeights: ",
            ggml_type_name(type), " is not a block type ltx quantises (",
            quantization::ggml_quantizable_types(), ")");
  const auto key = std::make_tuple(std, type);
  if (auto it = ggml_pools_.find(key); it != ggml_pools_.end()) return it->second;
  // Whole super-blocks (256 values: every type's block divides it); the same values for every
  // type, so that the types are compared on one set of weights.
  const int64_t n = std::max<int64_t>(256, pool_size_ / 256 * 256);
  uint64_t s = seed_ ^ fnv1a("ggml " + std::to_string(std));
  sampling::TorchCpuGenerator gen(static_cast<int64_t>(splitmix64(s) >> 1));
  Tensor host = gen.randn({n});
  float* p = host.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] * std);
  GgmlPool pool;
  pool.values = host.to(Device::cpu(), DType::BF16).to(Device::cpu(), DType::F32);
  pool.blocks = Tensor::empty({static_cast<int64_t>(*ggml_nbytes(type, static_cast<uint64_t>(n)))},
                              DType::U8, Device::cpu());
  quantization::quantize_rows(type, pool.values.data<float>(), 1, n, pool.blocks.raw_data());
  return ggml_pools_.emplace(key, std::move(pool)).first->second;
}

void RandomWeights::for_each_ggml_window(const std::string& name, const Shape& shape, GgmlType type,
                                         const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  const int64_t elems = ggml_traits(type).block_elems;
  LTX_CHECK(shape.size() == 2 && shape[1] > 0 && shape[1] % elems == 0, "RandomWeights: parameter '",
            name, "' ", shape.str(), " is not rows of whole ", ggml_type_name(type), " blocks (",
            elems, " values)");
  const GgmlPool& p = ggml_pool(ggml_std(name, shape, type), type);
  const int64_t pool_blocks = p.values.numel() / elems, blocks = shape.numel() / elems;
  const int64_t window = std::max<int64_t>(1, std::min(blocks, pool_blocks / 2));
  uint64_t state = seed_ ^ fnv1a(name);
  for (int64_t pos = 0; pos < blocks; pos += window) {
    const int64_t len = std::min(window, blocks - pos);
    fn(pos, static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(pool_blocks - len + 1)), len);
  }
}

std::vector<int64_t> RandomWeights::ggml_window_starts(const std::string& name, const Shape& shape,
                                                       GgmlType type) {
  std::vector<int64_t> starts;
  for_each_ggml_window(name, shape, type, [&](int64_t, int64_t start, int64_t) { starts.push_back(start); });
  return starts;
}

io::GgmlTensor RandomWeights::make_ggml(const std::string& name, const Shape& shape, GgmlType type,
                                        Device device) {
  const double std = ggml_std(name, shape, type);
  const int64_t bytes = ggml_traits(type).block_bytes;
  io::GgmlTensor g;
  g.name = name;
  g.type = type;
  g.shape = shape;
  g.row_elems = shape.size() == 2 ? shape[1] : 0;
  Tensor out;
  for_each_ggml_window(name, shape, type, [&](int64_t pos, int64_t start, int64_t len) {
    Tensor& src = ggml_blocks_on_[std::make_tuple(std, type, device.type, device.index)];
    if (!src.defined()) src = ggml_pool(std, type).blocks.to(device);
    if (!out.defined())
      out = Tensor::empty({shape.numel() / ggml_traits(type).block_elems * bytes}, DType::U8, device);
    out.narrow(0, pos * bytes, len * bytes).copy_from(src.narrow(0, start * bytes, len * bytes));
  });
  g.bytes = out;
  ++tensors_;
  ++ggml_tensors_;
  bytes_ += static_cast<int64_t>(out.nbytes());
  return g;
}

Tensor RandomWeights::make_ggml_source(const std::string& name, const Shape& shape, GgmlType type,
                                       DType dtype, Device device) {
  const double std = ggml_std(name, shape, type);
  const int64_t elems = ggml_traits(type).block_elems;
  const Tensor out = Tensor::empty(shape, dtype, device);
  const Tensor flat = out.view({out.numel()});
  for_each_ggml_window(name, shape, type, [&](int64_t pos, int64_t start, int64_t len) {
    Tensor& src = ggml_values_on_[std::make_tuple(std, type, dtype, device.type, device.index)];
    if (!src.defined()) src = ggml_pool(std, type).values.to(device, dtype);
    flat.narrow(0, pos * elems, len * elems).copy_from(src.narrow(0, start * elems, len * elems));
  });
  ++tensors_;
  bytes_ += static_cast<int64_t>(out.nbytes());
  return out;
}

io::GgmlSynthesizer RandomWeights::ggml_synthesizer(GgmlRule rule) {
  LTX_CHECK(static_cast<bool>(rule), "RandomWeights: no GGML rule");
  io::GgmlSynthesizer s;
  s.type = std::move(rule);
  s.make = [this](const std::string& name, const Shape& shape, GgmlType type, Device device) {
    return make_ggml(name, shape, type, device);
  };
  return s;
}

io::WeightSynthesizer RandomWeights::ggml_source_synthesizer(GgmlRule rule) {
  LTX_CHECK(static_cast<bool>(rule), "RandomWeights: no GGML rule");
  return [this, rule = std::move(rule)](const std::string& name, const Shape& shape, DType dtype,
                                        Device device) {
    if (const std::optional<GgmlType> type = rule(name, shape))
      return make_ggml_source(name, shape, *type, dtype, device);
    return make(name, shape, dtype, device);
  };
}

io::WeightSynthesizer RandomWeights::synthesizer() {
  return [this](const std::string& name, const Shape& shape, DType dtype, Device device) {
    return make(name, shape, dtype, device);
  };
}

}  // namespace ltx::bench
