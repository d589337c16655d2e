#include "nn/linear.h"

#include "core/error.h"
#include "op_types/ggml_blocks.h"
#include "ops/elementwise.h"
#include "ops/ggml_linear.h"
#include "ops/linalg.h"
#include "ops/nvfp4.h"
#include "ops/quantized_linear.h"
#include "quantization/fp8_blockwise.h"
#include "quantization/fp8_cast.h"
#include "quantization/ggml_dequant.h"
#include "quantization/nvfp4.h"

namespace ltx::nn {

namespace {

// A pre-quantised FP8 layer of the file: an e4m3 weight with a weight_scale beside it. The
// reference finds these by suffix-matching the file's keys against the model's module names; the
// weight map's key map already made the file's keys the model's names, so a lookup is the match.
bool file_has_fp8_scaled(const io::WeightMap& w, const std::string& name) {
  return w.contains(name + ".weight") && w.dtype(name + ".weight") == DType::F8E4M3FN &&
         w.contains(name + ".weight_scale");
}

LinearFormat format_for(const io::WeightMap& w, const std::string& name, quantization::Mode mode) {
  const std::string full_name = w.prefix() + name;
  switch (mode) {
    case quantization::Mode::None: return LinearFormat::Dense;
    case quantization::Mode::Fp8Cast:
      return quantization::is_fp8_cast_linear(full_name) ? LinearFormat::Fp8Cast
                                                         : LinearFormat::Dense;
    case quantization::Mode::Fp8ScaledMm:
      return file_has_fp8_scaled(w, name) ? LinearFormat::Fp8Scaled : LinearFormat::Dense;
    case quantization::Mode::Fp8:
      // fp8-cast's layers, and any layer the file already stores FP8 with a scale (used as stored
      // rather than widened without its scale).
      return quantization::is_fp8_cast_linear(full_name) || file_has_fp8_scaled(w, name)
                 ? LinearFormat::Fp8PerToken
                 : LinearFormat::Dense;
    case quantization::Mode::Nvfp4Cast:
      return quantization::is_nvfp4_cast_linear(full_name) ? LinearFormat::Nvfp4
                                                           : LinearFormat::Dense;
    // The file says which layers are NVFP4 (Linear::load).
    case quantization::Mode::Nvfp4Prequant: return LinearFormat::Dense;
    case quantization::Mode::Fp8Blockwise:
      return quantization::is_fp8_blockwise_linear(full_name) ||
                     quantization::file_has_fp8_blockwise(w, name)
                 ? LinearFormat::Fp8Blockwise
                 : LinearFormat::Dense;
  }
  return LinearFormat::Dense;
}

Tensor take_scale(io::WeightMap& w, const std::string& name, Device device) {
  Tensor s = w.take_any_shape(name, DType::F32, device);
  if (!s.defined()) return s;  // recorded for finish()
  // The CUDA GEMM never reads a scale back, so a zero / NaN scale is refused here, once.
  ops::check_fp8_scale(s, w.prefix() + name);
  return s;
}

// A layer whose file weight is GGML blocks (a GGUF file's quantized tensor): bound as stored, the
// bias and any low-rank LoRA term in the compute dtype.
// `type`: the weight's GGML type (stored, or what a synthetic map makes it in).
Linear load_ggml(io::WeightMap& w, const std::string& name, int64_t in_features,
                 int64_t out_features, bool has_bias, GgmlType type, const LoadOptions& opt) {
  const std::string layer = w.prefix() + name;
  LTX_CHECK(opt.quantization == quantization::Mode::None, "layer '", layer, "' is stored as GGML ",
            ggml_type_name(type), " blocks (a quantized GGUF file) and "
            "is used as stored; --quantization ", quantization::mode_name(opt.quantization),
            " applies to dense checkpoints only: use --quantization none");
  Linear l;
  l.format = LinearFormat::GgmlBlocks;
  l.compute = opt.dtype;
  const io::GgmlTensor g = w.take_ggml(name + ".weight", {out_features, in_features}, opt.device);
  l.ggml_type = g.type;
  if (g.bytes.defined()) {
    const int64_t elems = ops::ggml::block_elems(g.type), bytes = ops::ggml::block_bytes(g.type);
    if (elems > 0 && in_features % elems == 0) {
      // Rows of whole blocks: the flat block sequence is the rows one after the other, whatever
      // row length the file records (ComfyUI-GGUF reshapes some tensors before quantizing).
      const int64_t row_bytes = in_features / elems * bytes;
      LTX_CHECK(static_cast<int64_t>(g.bytes.nbytes()) == out_features * row_bytes, "layer '",
                layer, "': the GGML weight holds ", g.bytes.nbytes(), " bytes, not ",
                out_features, " rows of ", row_bytes);
      l.weight = g.bytes.contiguous().view({out_features, row_bytes}).to(opt.device);
      ops::check_ggml_weight(l.ggml_weight(), "layer '" + layer + "'");
    } else {
      // Blocks that straddle the layer's rows cannot be dequantised a row group at a time: the
      // layer is widened once, here.
      quantization::check_ggml_dequantizable(g.type, "layer '" + layer + "'");
      l.format = LinearFormat::Dense;
      l.weight = quantization::dequantize(g, opt.dtype).to(opt.device);
    }
  }
  if (has_bias) l.bias = w.take(name + ".bias", {out_features}, opt.dtype, opt.device);
  if (w.contains(name + kLoraDownSuffix)) {
    l.lora_a = w.take(name + kLoraDownSuffix, {-1, in_features}, opt.dtype, opt.device);
    const int64_t rank = l.lora_a.defined() ? l.lora_a.size(0) : -1;
    l.lora_b = w.take(name + kLoraUpSuffix, {out_features, rank}, opt.dtype, opt.device);
  }
  return l;
}

// A layer whose file weight is float8_e4m3fn, bound as stored (LoadOptions::keep_fp8_linears):
// the weight in e4m3, its scalar weight_scale when the file has one, the bias in the compute dtype.
Linear load_kept_fp8(io::WeightMap& w, const std::string& name, int64_t in_features,
                     int64_t out_features, bool has_bias, const LoadOptions& opt) {
  Linear l;
  l.format = LinearFormat::Fp8Cast;
  l.weight = w.take(name + ".weight", {out_features, in_features}, DType::F8E4M3FN, opt.device);
  const std::string scale = name + ".weight_scale";
  if (w.stored_dtype(scale, Shape{})) {
    // Per-tensor scales only: a scale of another shape is reported by finish() with the rest.
    l.weight_scale = w.take(scale, Shape{}, DType::F32, opt.device);
    if (l.weight_scale.defined()) ops::check_fp8_scale(l.weight_scale, w.prefix() + scale);
  }
  if (has_bias) l.bias = w.take(name + ".bias", {out_features}, opt.dtype, opt.device);
  return l;
}

// y plus the layer's low-rank term, when it has one.
Tensor add_low_rank(const Linear& l, const Tensor& x, Tensor y) {
  if (!l.lora_a.defined()) return y;
  return ops::add(y, ops::linear(ops::linear(x, l.lora_a), l.lora_b));
}

}  // namespace

Linear Linear::load(io::WeightMap& w, const std::string& name, int64_t in_features,
                    int64_t out_features, bool has_bias, const LoadOptions& opt) {
  const std::string weight = name + ".weight";
  if (w.contains(weight) && w.is_quantized(weight))
    return load_ggml(w, name, in_features, out_features, has_bias, *w.ggml_type(weight), opt);
  if (const auto made = w.synthesized_ggml_type(weight, {out_features, in_features}))
    return load_ggml(w, name, in_features, out_features, has_bias, *made, opt);
  if (opt.keep_fp8_linears &&
      w.stored_dtype(weight, {out_features, in_features}) == DType::F8E4M3FN)
    return load_kept_fp8(w, name, in_features, out_features, has_bias, opt);
  Linear l;
  // nvfp4-prequant: the file's NVFP4 layers. nvfp4-cast: a LoRA fuser (models/lora/fuse.h) puts
  // the layers it owns into the map already quantised, under the same names.
  if (opt.quantization == quantization::Mode::Nvfp4Prequant ||
      (opt.quantization == quantization::Mode::Nvfp4Cast && w.contains(name + ".weight_scale_2"))) {
    if (auto p = quantization::take_prequant_nvfp4(w, name, in_features, out_features, opt.device)) {
      l.format = LinearFormat::Nvfp4;
      l.weight = p->weight.packed;
      l.block_scales = p->weight.block_scales;
      l.tensor_scale = p->weight.tensor_scale;
      l.input_scale = p->input_scale;
      if (has_bias) l.bias = w.take(name + ".bias", {out_features}, opt.dtype, opt.device);
      return l;
    }
  }
  l.format = format_for(w, name, opt.quantization);
  const Shape weight_shape{out_features, in_features};
  switch (l.format) {
    case LinearFormat::Dense:
    case LinearFormat::Fp8Cast: {
      const DType dtype = l.format == LinearFormat::Fp8Cast ? DType::F8E4M3FN : opt.dtype;
      l.weight = w.take(name + ".weight", weight_shape, dtype, opt.device);
      if (has_bias) l.bias = w.take(name + ".bias", {out_features}, dtype, opt.device);
      return l;
    }
    case LinearFormat::Fp8Scaled:
      l.weight = w.take(name + ".weight", weight_shape, DType::F8E4M3FN, opt.device);
      l.weight_scale = take_scale(w, name + ".weight_scale", opt.device);
      LTX_CHECK(w.contains(name + ".input_scale"), "--quantization fp8-scaled-mm: layer '",
                w.prefix(), name, "' has a weight_scale but no input_scale, which the static FP8 "
                "GEMM needs; use --quantization fp8 (activation scales computed per token)");
      l.input_scale = take_scale(w, name + ".input_scale", opt.device);
      break;
    case LinearFormat::Fp8PerToken:
      if (file_has_fp8_scaled(w, name)) {
        l.weight = w.take(name + ".weight", weight_shape, DType::F8E4M3FN, opt.device);
        l.weight_scale = take_scale(w, name + ".weight_scale", opt.device);
      } else {
        // Quantised here from the weight as the dense model would bind it (the amax and the
        // products are computed in f32 either way).
        const Tensor dense = w.take(name + ".weight", weight_shape, opt.dtype, opt.device);
        if (dense.defined()) {
          const ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(dense);
          l.weight = q.weight;
          l.weight_scale = q.weight_scale;
        }
      }
      // The activation scale is computed per token; a static one in the file is not used.
      w.ignore(name + ".input_scale");
      break;
    case LinearFormat::Fp8Blockwise:
      if (quantization::file_has_fp8_blockwise(w, name)) {
        l.weight = w.take(name + ".weight", weight_shape, DType::F8E4M3FN, opt.device);
        l.weight_scale = w.take(name + ".weight_scale",
                                {ops::fp8_blocks(out_features), ops::fp8_blocks(in_features)},
                                DType::F32, opt.device);
      } else {
        // Quantised here from the file's values in f32, as the reference does (w.float()).
        const Tensor dense = w.take(name + ".weight", weight_shape, DType::F32, opt.device);
        if (dense.defined()) {
          try {
            ops::Fp8Blockwise q = ops::quantize_fp8_blockwise(dense);
            l.weight = q.weight;
            l.weight_scale = q.weight_scale;
          } catch (const Error& e) {
            fail("--quantization fp8-blockwise: layer '", w.prefix(), name, "': ", e.what());
          }
        }
      }
      // A static activation scale, if the file has one, is not used: groups are scaled per token.
      w.ignore(name + ".input_scale");
      break;
    case LinearFormat::Nvfp4: {
      const ops::Nvfp4Weight q =
          quantization::take_cast_nvfp4(w, name, in_features, out_features, opt.device);
      l.weight = q.packed;
      l.block_scales = q.block_scales;
      l.tensor_scale = q.tensor_scale;
      break;
    }
    case LinearFormat::GgmlBlocks: break;  // chosen above from the file, never by a mode
  }
  if (has_bias) l.bias = w.take(name + ".bias", {out_features}, opt.dtype, opt.device);
  return l;
}

int64_t Linear::in_features() const {
  switch (format) {
    case LinearFormat::Nvfp4: return weight.size(1) * 2;
    case LinearFormat::GgmlBlocks:
      return weight.size(1) / ops::ggml::block_bytes(ggml_type) * ops::ggml::block_elems(ggml_type);
    default: return weight.size(1);
  }
}

Tensor Linear::dense_weight(DType dtype) const {
  if (format == LinearFormat::GgmlBlocks) return ops::dequantize_ggml(ggml_weight(), dtype);
  if (format == LinearFormat::Nvfp4)
    return ops::dequantize_nvfp4({weight, block_scales, tensor_scale}, dtype);
  if (format == LinearFormat::Fp8Blockwise)
    return ops::dequantize_fp8_blockwise(weight, weight_scale, dtype);
  if (!weight_scale.defined()) return weight.to(dtype);
  if (format == LinearFormat::Fp8Cast && (dtype == DType::BF16 || dtype == DType::F32)) {
    // A kept file weight, upcast at each forward: its per-tensor scale as a grid of equal tiles
    // makes it the blockwise dequantisation, one pass at a byte read a weight (the composition
    // below gives the same bits through two f32 intermediates).
    const Tensor grid = weight_scale.reshape({1, 1}).expand(
        {ops::fp8_blocks(weight.size(0)), ops::fp8_blocks(weight.size(1))});
    return ops::dequantize_fp8_blockwise(weight, grid, dtype);
  }
  return ops::mul(weight.to(DType::F32), weight_scale).to(dtype);
}

Tensor Linear::dense_bias(DType dtype) const {
  return bias.defined() ? bias.to(dtype) : Tensor();
}

Tensor Linear::operator()(const Tensor& x) const {
  if (lora_a.defined()) return add_low_rank(*this, x, product(x));
  return product(x);
}

Tensor Linear::product(const Tensor& x) const {
  switch (format) {
    case LinearFormat::Dense: return ops::linear(x, weight, bias);
    case LinearFormat::Fp8Cast:
    case LinearFormat::Nvfp4:
      return ops::linear(x, dense_weight(x.dtype()), dense_bias(x.dtype()));
    case LinearFormat::Fp8Scaled:
      return ops::linear_fp8_scaled(x, weight, weight_scale, input_scale, bias);
    case LinearFormat::Fp8PerToken: return ops::linear_fp8_per_token(x, weight, weight_scale, bias);
    case LinearFormat::Fp8Blockwise:
      return ops::linear_fp8_blockwise(x, weight, weight_scale, bias);
    case LinearFormat::GgmlBlocks: return ops::linear_ggml(x, ggml_weight(), bias);
  }
  return Tensor();
}

Tensor Linear::gelu_tanh(const Tensor& x) const {
  // A low-rank term goes in before the activation.
  if (lora_a.defined()) return ops::gelu_tanh((*this)(x));
  switch (format) {
    case LinearFormat::Dense: return ops::linear_gelu_tanh(x, weight, bias);
    case LinearFormat::Fp8Cast:
    case LinearFormat::Nvfp4:
      return ops::linear_gelu_tanh(x, dense_weight(x.dtype()), dense_bias(x.dtype()));
    case LinearFormat::Fp8Scaled:
    case LinearFormat::Fp8PerToken:
    case LinearFormat::Fp8Blockwise: return ops::gelu_tanh((*this)(x));
    case LinearFormat::GgmlBlocks: return ops::linear_ggml_gelu_tanh(x, ggml_weight(), bias);
  }
  return Tensor();
}

void Linear::for_each_parameter(const std::function<void(const char*, Tensor&)>& fn) {
  fn("weight", weight);
  if (bias.defined()) fn("bias", bias);
  if (weight_scale.defined()) fn("weight_scale", weight_scale);
  if (block_scales.defined()) fn("weight_scale", block_scales);
  if (tensor_scale.defined()) fn("weight_scale_2", tensor_scale);
  if (input_scale.defined()) fn("input_scale", input_scale);
  if (lora_a.defined()) fn("lora_A", lora_a);
  if (lora_b.defined()) fn("lora_B", lora_b);
}

void Linear::for_each_parameter(const std::function<void(const char*, const Tensor&)>& fn) const {
  fn("weight", weight);
  if (bias.defined()) fn("bias", bias);
  if (weight_scale.defined()) fn("weight_scale", weight_scale);
  if (block_scales.defined()) fn("weight_scale", block_scales);
  if (tensor_scale.defined()) fn("weight_scale_2", tensor_scale);
  if (input_scale.defined()) fn("input_scale", input_scale);
  if (lora_a.defined()) fn("lora_A", lora_a);
  if (lora_b.defined()) fn("lora_B", lora_b);
}

}  // namespace ltx::nn
