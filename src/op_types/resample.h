#pragma once
// The interpolation modes, shared by the dispatch layer (ops/resample.h) and both backends.

namespace ltx::ops {

enum class InterpMode {
  Nearest,       // torch "nearest": src = min(floor(dst * scale), in - 1)
  NearestExact,  // torch "nearest-exact": src = min(floor((dst + 0.5) * scale), in - 1)
  Linear,        // torch "linear" / "bilinear" / "trilinear" for 1 / 2 / 3 spatial dims
  Area,          // torch "area" (adaptive average pooling windows)
};

}  // namespace ltx::ops
