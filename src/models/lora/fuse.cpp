#include "models/lora/fuse.h"

#include <chrono>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "backend/device_query.h"
#include "core/dtype_bits.h"
#include "core/log.h"
#include "core/parallel.h"
#include "nn/linear.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/nvfp4.h"
#include "ops/quantized_linear.h"
#include "ops/shape.h"
#include "quantization/fp8_blockwise.h"
#include "quantization/fp8_cast.h"
#include "quantization/nvfp4.h"

namespace ltx::lora {

namespace {

constexpr int64_t kGrain = 1 << 15;

float round_bf16(float x) { return dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(x)); }

// The factor as the reference aggregates it: rounded to bf16, held in f32 for the GEMM (always a
// new contiguous CPU tensor: the bf16 -> f32 step copies).
Tensor bf16_valued(const Tensor& t) { return t.to(Device::cpu(), DType::BF16).to(DType::F32); }

// Element loop over contiguous f32 buffers of n elements.
template <typename Fn>
void for_each_element(int64_t n, Fn fn) {
  parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) fn(i);
  });
}

// The weights of `set` that `w` holds, sorted; throws one error per call listing, per file, the
// targets `w` lacks (strict files; non-strict ones warn) and those whose shape or dtype does not
// fit. `absent` receives the skipped targets of non-strict files.
std::vector<std::string> checked_targets(const io::WeightMap& w, const LoraSet& set,
                                         std::set<std::string>* absent = nullptr) {
  std::set<std::string> present;
  std::vector<std::string> errors;
  std::set<const LoraFile*> seen;
  for (const WeightedLora& l : set) {
    LTX_CHECK(l.lora != nullptr, "LoRA set: null LoRA file");
    if (!seen.insert(l.lora.get()).second) continue;
    std::vector<std::string> missing, misfit;
    for (const auto& [target, pair] : l.lora->targets()) {
      if (!w.contains(target)) {
        missing.push_back(target);
        continue;
      }
      const Shape s = w.shape(target);
      const DType d = w.dtype(target);
      // GGML blocks (a GGUF file) take the LoRA as a low-rank term beside the weight.
      if (!dtype_is_floating(d) && !w.is_quantized(target)) {
        misfit.push_back(str(target, " (the model stores ", dtype_name(d), ")"));
        continue;
      }
      if (s.size() != 2 || pair.b.size(0) != s[0] || pair.a.size(1) != s[1]) {
        misfit.push_back(str(target, " (model weight ", s.str(), ", lora_B ", pair.b.shape().str(),
                             " @ lora_A ", pair.a.shape().str(), " gives [", pair.b.size(0), ", ",
                             pair.a.size(1), "])"));
        continue;
      }
      present.insert(target);
    }
    const std::string file = l.lora->path();
    if (!missing.empty()) {
      if (l.lora->strict()) {
        errors.push_back(str("LoRA '", file, "': ", missing.size(), " of its ",
                             l.lora->targets().size(),
                             " targets are not weights of this model: ", detail::list_some(missing),
                             " (is the LoRA for this model version and type? Open it non-strict "
                             "to skip them, as the reference does)"));
      } else {
        log_warn("LoRA '", file, "': skipping ", missing.size(),
                 " targets this model lacks: ", detail::list_some(missing));
        if (absent) absent->insert(missing.begin(), missing.end());
      }
    }
    if (!misfit.empty())
      errors.push_back(str("LoRA '", file, "': ", misfit.size(),
                           " targets do not fit the model's weights: ", detail::list_some(misfit)));
  }
  if (!errors.empty()) {
    std::ostringstream os;
    for (size_t i = 0; i < errors.size(); ++i) os << (i ? "; " : "") << errors[i];
    os << ".";
    throw Error(os.str());
  }
  return {present.begin(), present.end()};
}

}  // namespace

namespace {

// Every pair must fit the 2-D floating-point weight [out, in].
void check_products(const Tensor& weight, const std::vector<Product>& products) {
  LTX_CHECK(weight.defined() && weight.dim() == 2 && dtype_is_floating(weight.dtype()),
            "LoRA fusion: the weight must be a 2-D floating-point [out, in] tensor, got ",
            weight.defined() ? weight.describe() : std::string("an undefined tensor"));
  for (const Product& p : products) {
    LTX_CHECK(p.pair != nullptr, "LoRA fusion: null factor pair");
    LTX_CHECK(p.pair->b.size(0) == weight.size(0) && p.pair->a.size(1) == weight.size(1) &&
                  p.pair->a.size(0) == p.pair->b.size(1),
              "LoRA fusion: lora_B ", p.pair->b.describe(), " @ lora_A ", p.pair->a.describe(),
              " does not fit the weight ", weight.describe());
  }
}

}  // namespace

Tensor fused_weight(const Tensor& weight, const std::vector<Product>& products) {
  check_products(weight, products);
  const int64_t n = weight.size(0) * weight.size(1);
  if (products.empty()) return weight.to(Device::cpu()).clone();

  Tensor agg;  // f32 holding bf16 values: the reference's bf16 aggregator
  for (const Product& p : products) {
    const float s = static_cast<float>(p.strength);
    const Tensor a = bf16_valued(p.pair->a);
    const Tensor b = bf16_valued(p.pair->b);  // a fresh contiguous buffer
    if (!agg.defined()) {
      // matmul(B * s, A): the scaled factor is rounded to bf16 before the product.
      float* pb = b.data<float>();
      for_each_element(b.numel(), [&](int64_t i) { pb[i] = round_bf16(pb[i] * s); });
      agg = ops::matmul_in_order(b, a);
      float* pg = agg.data<float>();
      for_each_element(n, [&](int64_t i) { pg[i] = round_bf16(pg[i]); });
    } else {
      // addmm_(B, A, alpha = s): one rounding of D + s * (B @ A).
      const Tensor q = ops::matmul_in_order(b, a);
      const float* pq = q.data<float>();
      float* pg = agg.data<float>();
      for_each_element(n, [&](int64_t i) { pg[i] = round_bf16(pg[i] + s * pq[i]); });
    }
  }
  // deltas.add_(weight) in bf16, then cast to the weight's dtype.
  const Tensor w32 = weight.to(Device::cpu(), DType::F32).contiguous();
  const float* pw = w32.data<float>();
  float* pg = agg.data<float>();
  for_each_element(n, [&](int64_t i) { pg[i] = round_bf16(pg[i] + pw[i]); });
  return agg.to(weight.dtype());
}

namespace {

// The summed LoRA delta as the reference aggregates it in bf16 (f32 holding bf16 values), on
// `device`: the roundings of fused_weight_on without the weight.
Tensor aggregated_delta(const std::vector<Product>& products, Device device) {
  const auto bf16_round = [](const Tensor& t) { return t.to(DType::BF16).to(DType::F32); };
  Tensor agg;
  for (const Product& p : products) {
    const double s = static_cast<float>(p.strength);
    const Tensor a = p.pair->a.to(device, DType::BF16).to(DType::F32);
    const Tensor b = p.pair->b.to(device, DType::BF16).to(DType::F32);
    if (!agg.defined())
      agg = bf16_round(ops::matmul_in_order(bf16_round(ops::mul(b, s)), a));
    else
      agg = bf16_round(ops::add(agg, ops::mul(ops::matmul_in_order(b, a), s)));
  }
  return agg;
}

// "<layer>.weight" -> "<layer>.weight_scale"; empty for a name that is not a weight.
std::string scale_name_of(const std::string& weight_name) {
  return weight_name.ends_with(".weight") ? weight_name + "_scale" : std::string();
}

// Whether `name` is a weight the quantization mode stores as e4m3 with a scale beside it (per
// tensor, or per 128 x 128 tile under fp8-blockwise).
bool is_fp8_scaled_target(const io::WeightMap& w, const std::string& name,
                          quantization::Mode mode) {
  const std::string scale = scale_name_of(name);
  if (scale.empty()) return false;
  const bool stored_scaled = w.dtype(name) == DType::F8E4M3FN && w.contains(scale);
  switch (mode) {
    case quantization::Mode::Fp8ScaledMm: return stored_scaled;
    case quantization::Mode::Fp8:
      return stored_scaled || quantization::is_fp8_cast_parameter(name);
    case quantization::Mode::Fp8Blockwise:
      return stored_scaled || quantization::is_fp8_blockwise_linear(
                                  name.substr(0, name.size() - std::string(".weight").size()));
    default: return false;
  }
}

}  // namespace

Tensor fused_weight_on(const Tensor& weight, const std::vector<Product>& products, Device device) {
  if (device.is_cpu() || products.empty()) return fused_weight(weight, products).to(device);
  check_products(weight, products);
  // The same roundings as fused_weight, each step an op on the device: f32 values rounded to bf16
  // by a bf16 round trip (round to nearest even, as round_bf16), the factor products summed in
  // the CPU's order (ops::matmul_in_order): the same bits.
  const auto bf16_round = [](const Tensor& t) { return t.to(DType::BF16).to(DType::F32); };
  const Tensor agg = aggregated_delta(products, device);
  return bf16_round(ops::add(agg, weight.to(device, DType::F32))).to(weight.dtype());
}

std::vector<Product> products_for(const LoraSet& set, const std::string& target) {
  std::vector<Product> out;
  for (const WeightedLora& l : set) {
    auto it = l.lora->targets().find(target);
    if (it != l.lora->targets().end()) out.push_back({&it->second, l.strength});
  }
  return out;
}

namespace {

// "<layer>.weight" -> "<layer>"; empty for a name that is not a weight.
std::string layer_of(const std::string& weight_name) {
  const std::string suffix = ".weight";
  return weight_name.ends_with(suffix) ? weight_name.substr(0, weight_name.size() - suffix.size())
                                       : std::string();
}

// The factors of `products` side by side, f32 on the CPU: down = [A_1; A_2; ...] [rank, in] and
// up = [s_1 B_1, s_2 B_2, ...] [out, rank], so that x down^T up^T = sum_i s_i x A_i^T B_i^T.
std::pair<Tensor, Tensor> stacked_factors(const std::vector<Product>& products) {
  std::vector<Tensor> downs, ups;
  for (const Product& p : products) {
    downs.push_back(p.pair->a.to(Device::cpu(), DType::F32));
    ups.push_back(ops::mul(p.pair->b.to(Device::cpu(), DType::F32), p.strength));
  }
  return {ops::concat(downs, 0), ops::concat(ups, 1)};
}

}  // namespace

void fuse_into(io::WeightMap& w, const LoraSet& set) {
  if (is_identity(set)) return;
  for (const std::string& name : checked_targets(w, set)) {
    if (w.is_quantized(name)) {
      // Not fused: the layer adds the low-rank term (nn::Linear, LinearFormat::GgmlBlocks).
      const std::string layer = layer_of(name);
      LTX_CHECK(!layer.empty(), "LoRA: target '", name, "' is not a layer's weight");
      auto [down, up] = stacked_factors(products_for(set, name));
      w.add(layer + nn::kLoraDownSuffix, down);
      w.add(layer + nn::kLoraUpSuffix, up);
      continue;
    }
    const Tensor base = w.take_any_shape(name, w.dtype(name));
    w.add(name, fused_weight(base, products_for(set, name)));
  }
}

namespace {

// The NVFP4 value of target `name` under an nvfp4 mode, on the host: an nvfp4-prequant file's
// tensors as stored, or nvfp4-cast's quantisation of the bf16 weight (made on opt.device, as
// Linear::load makes it there: the same bits on either backend); nullopt for a layer the mode
// keeps dense.
std::optional<ops::Nvfp4Weight> nvfp4_base(io::WeightMap& w, const std::string& name,
                                           const nn::LoadOptions& opt) {
  if (!quantization::is_nvfp4(opt.quantization)) return std::nullopt;
  const std::string layer = layer_of(name);
  if (layer.empty()) return std::nullopt;
  const std::string scale = layer + ".weight_scale", scale_2 = layer + ".weight_scale_2";
  if (opt.quantization == quantization::Mode::Nvfp4Prequant) {
    if (!w.contains(scale) || !w.contains(scale_2) || w.dtype(name) != DType::U8)
      return std::nullopt;
    const Shape stored = w.shape(name);
    ops::Nvfp4Weight q{w.take_any_shape(name, DType::U8), w.take_any_shape(scale, DType::F8E4M3FN),
                       w.take_any_shape(scale_2, DType::F32).reshape({})};
    ops::check_nvfp4_weight(q, stored[0], stored[1] * 2, layer);
    return q;
  }
  if (!quantization::is_nvfp4_cast_linear(layer)) return std::nullopt;
  const Tensor dense = w.take_any_shape(name, DType::BF16);
  LTX_CHECK(dense.dim() == 2 && dense.size(1) % ops::kNvfp4BlockSize == 0,
            "--quantization nvfp4-cast: layer ", layer, " is ", dense.describe(),
            "; NVFP4 needs a 2-D weight whose input features are a multiple of ",
            ops::kNvfp4BlockSize);
  const ops::Nvfp4Weight q = ops::quantize_nvfp4(dense.to(opt.device));
  return ops::Nvfp4Weight{q.packed.to(Device::cpu()), q.block_scales.to(Device::cpu()),
                          q.tensor_scale.to(Device::cpu())};
}

}  // namespace

// ------------------------------------------------------------------------------------ Fuser

Fuser::Fuser(io::WeightMap& w, const std::vector<LoraSet>& sets, const nn::LoadOptions& opt,
             const std::function<bool(const std::string& target)>& on_host) {
  std::set<std::string> names;
  for (const LoraSet& set : sets)
    for (const std::string& n : checked_targets(w, set, &absent_)) names.insert(n);
  for (const std::string& name : names) {
    Slot& s = slots_[name];
    const Device device = on_host && on_host(name) ? Device::cpu() : opt.device;
    if (w.is_quantized(name)) {
      // GGML blocks: a low-rank term with a column range per LoRA file of any set (strengths
      // are written into the up factor at each apply; zero while a file is not applied).
      const std::string layer = layer_of(name);
      LTX_CHECK(!layer.empty(), "LoRA: target '", name, "' is not a layer's weight");
      std::vector<Tensor> downs;
      int64_t rank = 0;
      for (const LoraSet& set : sets)
        for (const WeightedLora& l : set) {
          auto it = l.lora->targets().find(name);
          if (it == l.lora->targets().end() || s.low_rank_columns.count(l.lora.get())) continue;
          s.low_rank_columns[l.lora.get()] = rank;
          rank += it->second.rank();
          downs.push_back(it->second.a.to(Device::cpu(), DType::F32));
        }
      const Shape shape = w.shape(name);
      s.bound = Tensor::empty({rank, shape[1]}, opt.dtype, device);
      s.bound.copy_from(ops::concat(downs, 0));
      s.bound_up = Tensor::zeros({shape[0], rank}, opt.dtype, device);
      s.kind = Slot::Kind::LowRank;
      w.add(layer + nn::kLoraDownSuffix, s.bound);
      w.add(layer + nn::kLoraUpSuffix, s.bound_up);
      continue;
    }
    if (std::optional<ops::Nvfp4Weight> q = nvfp4_base(w, name, opt)) {
      const std::string layer = layer_of(name);
      s.kind = Slot::Kind::Nvfp4;
      s.base = q->packed;
      s.base_scale = q->block_scales;
      s.base_scale_2 = q->tensor_scale;
      s.bound = Tensor::empty(s.base.shape(), DType::U8, device);
      s.bound.copy_from(s.base);
      s.bound_scale = Tensor::empty(s.base_scale.shape(), DType::F8E4M3FN, device);
      s.bound_scale.copy_from(s.base_scale);
      s.bound_scale_2 = Tensor::empty(s.base_scale_2.shape(), DType::F32, device);
      s.bound_scale_2.copy_from(s.base_scale_2);
      w.add(name, s.bound);
      w.add(layer + ".weight_scale", s.bound_scale);
      w.add(layer + ".weight_scale_2", s.bound_scale_2);
      continue;
    }
    if (is_fp8_scaled_target(w, name, opt.quantization)) {
      const std::string scale = scale_name_of(name);
      if (w.dtype(name) == DType::F8E4M3FN && w.contains(scale)) {
        s.base = w.take_any_shape(name, DType::F8E4M3FN);
        s.base_scale = w.take_any_shape(scale, DType::F32);
      } else if (opt.quantization == quantization::Mode::Fp8Blockwise) {
        // The tile quantisation Linear::load makes (from the file's values in f32), done once.
        ops::Fp8Blockwise q = ops::quantize_fp8_blockwise(w.take_any_shape(name, DType::F32));
        s.base = q.weight;
        s.base_scale = q.weight_scale;
      } else {
        // fp8 on a dense file: the per-tensor quantisation Linear::load makes, done here once.
        ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(w.take_any_shape(name, opt.dtype));
        s.base = q.weight;
        s.base_scale = q.weight_scale;
      }
      s.bound = Tensor::empty(s.base.shape(), DType::F8E4M3FN, device);
      s.bound.copy_from(s.base);
      s.bound_scale = Tensor::empty(s.base_scale.shape(), DType::F32, device);
      s.bound_scale.copy_from(s.base_scale);
      s.kind = s.base_scale.dim() == 2 ? Slot::Kind::Fp8Blockwise : Slot::Kind::Fp8PerTensor;
      w.add(name, s.bound);
      w.add(scale, s.bound_scale);
      continue;
    }
    // Marks the file tensor used; the buffer added below replaces it for the model.
    s.base = w.take_any_shape(name, w.dtype(name));
    // Under fp8-cast the policy's Linears bind e4m3: the base is that e4m3 value (the same
    // conversion Linear::load makes), and fusion adds the delta to it and casts back.
    DType bound_dtype = opt.dtype;
    if (opt.quantization == quantization::Mode::Fp8Cast &&
        quantization::is_fp8_cast_parameter(name)) {
      bound_dtype = DType::F8E4M3FN;
      s.base = s.base.to(DType::F8E4M3FN);
    }
    // Always a fresh buffer (never the read-only mapping); the same conversion take() would make,
    // so the bound base value is bit for bit what the model would bind without the fuser.
    s.bound = Tensor::empty(s.base.shape(), bound_dtype, device);
    s.bound.copy_from(s.base);
    w.add(name, s.bound);
  }
}

void Fuser::apply(const LoraSet& set) {
  const auto same = [](const LoraSet& x, const LoraSet& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].lora != y[i].lora || x[i].strength != y[i].strength) return false;
    return true;
  };
  if (same(set, current_)) return;

  // Every target must have a slot (or be an absent target of a non-strict file).
  std::vector<std::string> unprepared;
  for (const WeightedLora& l : set) {
    LTX_CHECK(l.lora != nullptr, "LoRA set: null LoRA file");
    for (const auto& [target, pair] : l.lora->targets())
      if (!absent_.count(target) && !slots_.count(target))
        unprepared.push_back(str(target, " (", l.lora->path(), ")"));
  }
  LTX_CHECK(unprepared.empty(), "LoRA fuser: ", unprepared.size(),
            " targets were not prepared when the model was loaded, e.g. ", unprepared.front(),
            ". Pass every LoRA set the pipeline will apply to the Fuser constructor.");

  const auto start = std::chrono::steady_clock::now();
  // Copies from the buffers to the GPU may still be queued (block streaming).
  if (reader_) backend::synchronize(*reader_);
  const bool identity = is_identity(set);
  size_t fused = 0;
  // Weights bound in host memory for a GPU that streams them are fused on that GPU (the same
  // bits as on the host, in a fraction of the time) and copied back.
  const auto fusion_device = [this](const Tensor& bound) {
    return bound.device().is_cpu() && reader_ && reader_->is_cuda() ? *reader_ : bound.device();
  };
  for (auto& [name, s] : slots_) {
    const std::vector<Product> products =
        identity ? std::vector<Product>{} : products_for(set, name);
    if (s.kind == Slot::Kind::LowRank) {
      // The low-rank term: each applied file's columns of the up factor are its B * strength.
      if (products.empty() && !s.fused) continue;
      Tensor up = Tensor::zeros(s.bound_up.shape());
      for (const WeightedLora& l : identity ? LoraSet{} : set) {
        auto it = l.lora->targets().find(name);
        if (it == l.lora->targets().end()) continue;
        const int64_t col0 = s.low_rank_columns.at(l.lora.get());
        const Tensor cols = up.narrow(1, col0, it->second.rank());
        cols.copy_from(ops::add(cols, ops::mul(it->second.b.to(Device::cpu(), DType::F32),
                                               l.strength)));
      }
      s.bound_up.copy_from(up);
      s.fused = !products.empty();
      if (s.fused) ++fused;
      continue;
    }
    if (products.empty()) {
      if (s.fused) {
        s.bound.copy_from(s.base);
        if (s.bound_scale.defined()) s.bound_scale.copy_from(s.base_scale);
        if (s.bound_scale_2.defined()) s.bound_scale_2.copy_from(s.base_scale_2);
      }
      s.fused = false;
      continue;
    }
    if (s.kind == Slot::Kind::Nvfp4) {
      // The reference's nvfp4 rule: the weight dequantised to bf16, plus the delta in bf16,
      // quantised again with fresh block and tensor scales.
      const Device d = fusion_device(s.bound);
      const Tensor dense = ops::dequantize_nvfp4(
          {s.base.to(d), s.base_scale.to(d), s.base_scale_2.to(d)}, DType::BF16);
      check_products(dense, products);
      const Tensor merged = ops::add(dense.to(DType::F32), aggregated_delta(products, d));
      const ops::Nvfp4Weight q = ops::quantize_nvfp4(merged.to(DType::BF16));
      s.bound.copy_from(q.packed);
      s.bound_scale.copy_from(q.block_scales);
      s.bound_scale_2.copy_from(q.tensor_scale.reshape(s.bound_scale_2.shape()));
    } else if (s.kind == Slot::Kind::Fp8Blockwise) {
      // Blockwise (fuse_rule_fp8): tile scales, the delta added in bf16.
      const Device d = fusion_device(s.bound);
      check_products(s.base, products);
      const ops::Fp8Blockwise q = ops::fuse_delta_fp8_blockwise(
          s.base.to(d), s.base_scale.to(d), aggregated_delta(products, d));
      s.bound.copy_from(q.weight);
      s.bound_scale.copy_from(q.weight_scale);
    } else if (s.kind == Slot::Kind::Fp8PerTensor) {
      const Device d = fusion_device(s.bound);
      check_products(s.base, products);
      const ops::Fp8PerTensor q = ops::fuse_delta_fp8_per_tensor(
          s.base.to(d), s.base_scale.to(d), aggregated_delta(products, d));
      s.bound.copy_from(q.weight);
      s.bound_scale.copy_from(q.weight_scale.reshape(s.bound_scale.shape()));
    } else {
      s.bound.copy_from(fused_weight_on(s.base, products, fusion_device(s.bound)));
    }
    s.fused = true;
    ++fused;
  }
  current_ = set;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (fused > 0)
    log_info("LoRA: ", fused, " of ", slots_.size(), " weights fused with ", describe(set), " in ",
             std::fixed, std::setprecision(2), seconds, " s");
}

void Fuser::rebind(const std::function<Tensor(const Tensor& bound)>& home, Device reader) {
  for (auto& [name, s] : slots_) {
    if (s.bound_scale.defined()) {
      Tensor moved_scale = home(s.bound_scale);
      if (moved_scale.defined()) s.bound_scale = moved_scale;
    }
    if (s.bound_scale_2.defined()) {
      Tensor moved_scale_2 = home(s.bound_scale_2);
      if (moved_scale_2.defined()) s.bound_scale_2 = moved_scale_2;
    }
    if (s.bound_up.defined()) {
      Tensor moved_up = home(s.bound_up);
      if (moved_up.defined()) s.bound_up = moved_up;
    }
    Tensor moved = home(s.bound);
    if (!moved.defined()) continue;
    LTX_CHECK(moved.shape() == s.bound.shape() && moved.dtype() == s.bound.dtype(),
              "LoRA fuser: the new home of ", name, " is ", moved.describe(), ", the buffer ",
              s.bound.describe());
    s.bound = moved;
    reader_ = reader;
  }
}

std::vector<std::string> Fuser::targets() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : slots_) out.push_back(name);
  return out;
}

const Tensor& Fuser::bound(const std::string& target) const {
  auto it = slots_.find(target);
  if (it != slots_.end()) return it->second.bound;
  const std::string scale_2_suffix = "_scale_2";
  if (target.ends_with(scale_2_suffix)) {
    it = slots_.find(target.substr(0, target.size() - scale_2_suffix.size()));
    if (it != slots_.end() && it->second.bound_scale_2.defined()) return it->second.bound_scale_2;
  }
  // "<layer>.weight_scale" of an FP8 or NVFP4 slot.
  const std::string scale_suffix = "_scale";
  if (target.ends_with(scale_suffix)) {
    it = slots_.find(target.substr(0, target.size() - scale_suffix.size()));
    if (it != slots_.end() && it->second.bound_scale.defined()) return it->second.bound_scale;
  }
  fail("LoRA fuser: no weight '", target, "' (it is not a target of the fuser's LoRA sets)");
}

}  // namespace ltx::lora
