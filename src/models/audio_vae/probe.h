#pragma once
// Named views of intermediate tensors during a forward pass, for parity checks against the
// reference's forward hooks (the `inter.*` tensors of the golden files).
#include <functional>
#include <string>

#include "core/tensor.h"

namespace ltx::models::audio_vae {

// Receives (name, tensor) pairs; an empty Probe observes nothing and costs nothing.
using Probe = std::function<void(const std::string& name, const Tensor& value)>;

inline void observe(const Probe& probe, const std::string& name, const Tensor& value) {
  if (probe) probe(name, value);
}

// A probe that forwards to `probe` with `prefix` prepended (empty when `probe` is).
inline Probe prefixed(const Probe& probe, const std::string& prefix) {
  if (!probe) return {};
  return [probe, prefix](const std::string& name, const Tensor& value) {
    probe(prefix + name, value);
  };
}

}  // namespace ltx::models::audio_vae
