#pragma once
// Where each element of a padded dim comes from (torch.nn.functional.pad's modes), as a rule
// evaluated per index. The dispatch layer (ops::pad) builds the CPU's index maps from it; the
// CUDA kernel evaluates it per element, so that padding a long dim (a waveform) uploads no map.
#include <cstdint>

#include "core/dtype_bits.h"

namespace ltx::ops {

enum class PadMode { Constant, Reflect, Replicate, Circular };

// One dim of size `n` padded by `before` in front (negative: cropped) under `mode`.
struct PadRule {
  PadMode mode = PadMode::Constant;
  int64_t before = 0;
  int64_t n = 0;
};

// The source index of output index `o`, or -1 where a constant pad fills. The rule's sizes are
// checked by ops::pad (reflect pads < n, circular pads <= n, replicate needs n > 0).
LTX_HOST_DEVICE inline int64_t pad_source_index(const PadRule& r, int64_t o) {
  int64_t i = o - r.before;
  switch (r.mode) {
    case PadMode::Constant:
      if (i < 0 || i >= r.n) i = -1;
      break;
    case PadMode::Reflect:
      if (i < 0) i = -i;
      if (i >= r.n) i = 2 * (r.n - 1) - i;
      break;
    case PadMode::Replicate:
      i = i < 0 ? 0 : (i >= r.n ? r.n - 1 : i);
      break;
    case PadMode::Circular:
      i = ((i % r.n) + r.n) % r.n;
      break;
  }
  return i;
}

}  // namespace ltx::ops
