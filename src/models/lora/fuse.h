#pragma once
// Fusing LoRA sets into the transformer's weights: W' = W + sum_i s_i B_i A_i, with the
// reference's rounding (fuse_loras.py, bf16_fuse_rule; aggregation dtype bf16 on CUDA and CPU):
//
//   A_i, B_i  rounded to bf16 first (whatever the file stores);
//   D = bf16((bf16(B_1 * s_1)) @ A_1)           first LoRA that has the target: matmul, then round
//   D = bf16(D + s_i * (B_i @ A_i))             each later one: addmm_(alpha = s_i), one rounding
//   W' = bf16(D + W)  cast to W's stored dtype  (f32 and f16 weights also go through bf16 here)
//
// products accumulate in f32, scalars are f32 (torch's opmath). For f8 weights this is the
// reference's fp8-cast rule on its deterministic path (bf16 add, then a round-to-nearest cast);
// on CUDA with Triton the reference rounds stochastically instead (seed 0), which is not
// reproduced. The factor products sum in one fixed order (ops::matmul_in_order) on every backend,
// so fusion on a GPU gives the CPU's bits; a model's weights are fused on the device they live on,
// and weights kept in host memory for a GPU that streams them are fused on that GPU.
//
// Two ways in:
//  * fuse_into(w, set): a state-dict transform before binding, for a model built once per set
//    (the reference's SingleGPUModelBuilder);
//  * Fuser: in-place on a loaded model, for pipelines that switch LoRA sets between stages
//    (two-stage: stage 1 user LoRAs, stage 2 user + distilled LoRA) without re-reading the base
//    weights. Construct it on the WeightMap BEFORE the model binds it:
//
//      io::WeightMap w({file}, tf::transformer_key_map(type));
//      lora::Fuser fuser(w, {stage1, stage2}, opt);       // every target gets its own buffer
//      tf::LTXModel model = tf::LTXModel::load(w, cfg, opt);  // binds those buffers, no copy
//      fuser.apply(stage1);  ... stage 1 ...
//      fuser.apply(stage2);  ... stage 2 ...
//      fuser.apply({});      // base weights again, bit for bit
//
//    This relies on the loaders binding a WeightMap tensor that already has the requested dtype
//    and device without copying it (WeightMap::take's contract; every transformer parameter is
//    taken with the model's LoadOptions).
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/weights.h"
#include "models/lora/lora.h"
#include "nn/module.h"

namespace ltx::lora {

// One factor pair at a strength, as the fusion consumes them.
struct Product {
  const LoraFile::Pair* pair = nullptr;
  double strength = 0.0;
};

// `weight` [out, in] (any float dtype, any device) plus the products, in order, with the rounding
// above; a new contiguous CPU tensor in weight's dtype. No products: a copy of the weight.
// Checks that every pair fits [out, in].
Tensor fused_weight(const Tensor& weight, const std::vector<Product>& products);

// fused_weight computed on `device` (the Fuser's, for a model on a GPU): the same roundings, each
// step an op there, the same bits; the result lives there, in weight's dtype. On the CPU it is
// fused_weight.
Tensor fused_weight_on(const Tensor& weight, const std::vector<Product>& products, Device device);

// The products of `set` for `target`, in set order (zero strengths included: they take part in
// the reference's rounding).
std::vector<Product> products_for(const LoraSet& set, const std::string& target);

// Replaces every tensor of `w` that `set` targets by its fused value (stored dtype, CPU), so a
// model that binds `w` afterwards gets the fused weights; a GGML-block target (GGUF) keeps its
// weight and gets the set's low-rank term instead (f32 factors under the names the Fuser uses). An identity set changes nothing.
// Throws naming the LoRA file for targets `w` lacks (strict files) or whose shape does not fit.
void fuse_into(io::WeightMap& w, const LoraSet& set);

class Fuser {
 public:
  // NVFP4 layers (nvfp4-cast's Linears, quantised here once as Linear::load would, or an
  // nvfp4-prequant file's) get their packed weight, block scales and tensor scale as buffers
  // under the pre-quantised names ("<layer>.weight", ".weight_scale", ".weight_scale_2"), which
  // Linear::load binds; fusion is the reference's nvfp4 rule: dequantise to bf16, add the
  // delta in bf16, quantise again (fresh scales).
  // Weights stored as GGML blocks (GGUF files) are not fused: their layer gets a low-rank term
  // "<layer>.lora_A.weight" / ".lora_B.weight" (nn::kLoraDownSuffix / kLoraUpSuffix) holding every
  // set's factors side by side, with the applied set's strengths folded into the up factor and
  // zeros for the files it does not apply.
  // Gives every weight that any of `sets` targets (absent targets of non-strict files skipped) a
  // buffer of its own in opt.dtype on opt.device (e4m3 for the Linears opt.quantization stores
  // so, quantization/fp8_cast.h), holding the base value, and puts it into `w`
  // for the model to bind. Under fp8-scaled-mm and fp8 the FP8 layers' weights get an e4m3 buffer
  // and their "<layer>.weight_scale" an f32 one (fp8: a bf16 file's weight quantised per tensor
  // first, as Linear::load would); fusion dequantises, adds the delta in f32 and requantises per
  // tensor (the reference's fp8_scaled_mm rule, ops::fuse_delta_fp8_per_tensor), and layers
  // without a scale take the bf16 rule. Validates every set against `w` (as fuse_into). The base values stay
  // where they were (for a file: its read-only mapping) to restore from.
  // `on_host(target)` true: that buffer is made on the host in opt.dtype instead (the weights a
  // model with streamed blocks binds there, models/block_streaming.h).
  Fuser(io::WeightMap& w, const std::vector<LoraSet>& sets, const nn::LoadOptions& opt,
        const std::function<bool(const std::string& target)>& on_host = {});

  // Moves the buffers the model moved after binding them (block streaming copies the streamed
  // blocks' host weights into page-locked memory): `home(bound)` is the tensor that replaced
  // `bound` (equal values), or undefined when it stayed. Fusion writes the new homes from then on,
  // after waiting for `reader` (the GPU that copies from them) to finish the work queued so far.
  void rebind(const std::function<Tensor(const Tensor& bound)>& home, Device reader);

  // Makes the bound weights the base fused with `set`: targets `set` does not touch go back to
  // their base values exactly. `set` may only target weights one of the constructor's sets
  // targeted. Re-applying the current set does nothing.
  void apply(const LoraSet& set);
  // The base weights (apply of an empty set).
  void reset() { apply({}); }

  const LoraSet& current() const { return current_; }
  // Names of the weights this fuser owns, sorted.
  std::vector<std::string> targets() const;
  // The buffer bound for `target`, or for "<target>_scale" of an FP8 target or an NVFP4 target's
  // block scales, or "<target>_scale_2" of an NVFP4 target's tensor scale (tests, diagnostics);
  // throws for an unknown name.
  const Tensor& bound(const std::string& target) const;

 private:
  struct Slot {
    // How the layer stores its weight, which picks the fusion rule.
    enum class Kind { Dense, Fp8PerTensor, Fp8Blockwise, Nvfp4, LowRank };
    Kind kind = Kind::Dense;
    Tensor base;         // the value before any LoRA, as stored (NVFP4: the packed weight)
    Tensor bound;        // what the model uses (opt.dtype, opt.device)
    // FP8 layers: the weight's scale, base and bound as above (0-d per tensor under
    // fp8-scaled-mm and fp8; [out/128, in/128] per tile under fp8-blockwise). NVFP4 layers: the
    // block scales here, the tensor scale in *_scale_2.
    Tensor base_scale;
    Tensor bound_scale;
    Tensor base_scale_2;
    Tensor bound_scale_2;
    // GGML layers (a GGUF file's blocks, never rewritten): `bound` is the low-rank term's down
    // factor [rank, in] (every file's lora_A stacked), bound_up its up factor [out, rank], each
    // file's columns starting at low_rank_columns[file].
    Tensor bound_up;
    std::map<const LoraFile*, int64_t> low_rank_columns;
    bool fused = false;  // bound differs from base
  };
  std::map<std::string, Slot> slots_;
  std::set<std::string> absent_;  // targets of non-strict files the weights lack
  LoraSet current_;               // starts empty: the buffers hold the base values
  std::optional<Device> reader_;  // set by rebind: waited for before the buffers are written
};

}  // namespace ltx::lora
