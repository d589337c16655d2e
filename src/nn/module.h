#pragma once
// What every model needs when it binds its weights: the compute dtype and device of its
// parameters. The CPU backend computes in f32 (bf16 checkpoints are widened at load); CUDA in bf16.
#include "core/device.h"
#include "core/dtype.h"

namespace ltx::nn {

struct LoadOptions {
  DType dtype = DType::F32;
  Device device = Device::cpu();
};

}  // namespace ltx::nn
