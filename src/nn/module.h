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
};

}  // namespace ltx::nn
