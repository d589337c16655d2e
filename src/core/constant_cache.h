#pragma once
// Small constant tensors (frequency ladders and the like) made on the host once per key and kept
// on every device they are used on. A model step that uploaded them on each call waited on a
// host-to-device copy, and could not be recorded as a CUDA graph (a graph cannot replay a copy
// from pageable host memory). The returned tensor is shared: never modify it in place.
#include <functional>
#include <string>

#include "core/tensor.h"

namespace ltx {

// The tensor `make()` returns (a host tensor) for `key`, on `device`. `key` must name every
// input of `make` exactly (floating-point inputs in hex, `str(std::hexfloat, ...)`: six digits
// could make two inputs one key). Thread-safe; the tensors live until the process ends.
Tensor cached_constant(const std::string& key, Device device, const std::function<Tensor()>& make);

}  // namespace ltx
