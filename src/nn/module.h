#pragma once
// What every model needs when it binds its weights: the compute dtype and device of its
// parameters, and the quantization its Linears are stored with. The CPU backend computes in f32
// (bf16 checkpoints are widened at load); CUDA in bf16.
#include "core/device.h"
#include "core/dtype.h"
#include "quantization/mode.h"

namespace ltx::nn {

struct LoadOptions {
  DType dtype = DType::F32;
  Device device = Device::cpu();
  // Which Linears Linear::load stores quantized (the transformer's loads set it; the policy
  // itself picks the layers by name, so other models are unaffected even when it is set).
  quantization::Mode quantization = quantization::Mode::None;
  // Linears whose weight the map stores as float8_e4m3fn are bound as stored
  // (LinearFormat::Fp8Cast, with the file's per-tensor weight_scale when it has one) and upcast
  // at each forward, bf16(f32(w) * scale), instead of widened once at load: the same bits at a
  // byte a weight. Set by loaders that compute in bf16 (the Gemma text encoder on the GPU); it
  // comes before `quantization`'s choice for those layers.
  bool keep_fp8_linears = false;
};

}  // namespace ltx::nn
