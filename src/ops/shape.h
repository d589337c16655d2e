#pragma once
// Shape ops with torch semantics. They only move elements, so every dtype is accepted; inputs may
// be any strided view; outputs are new contiguous tensors of the input's dtype and device.
// concat/stack are built from copies and so run on every device; the others have CPU kernels.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "op_types/pad_rule.h"

namespace ltx::ops {

// torch.nn.functional.pad: `pads` holds (before, after) pairs starting from the LAST dim, e.g.
// {1, 2} pads the last dim by 1 in front and 2 behind, {0, 0, 3, 0} pads dim -2 by 3 in front.
// Negative pads crop. Constant fills with `value` (converted to the dtype); Reflect mirrors without
// repeating the edge (needs pad < size), Replicate repeats the edge element, Circular wraps
// (needs pad <= size). Unlike torch, every mode works on any number of trailing dims.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode = PadMode::Constant,
           double value = 0.0);

// torch.cat: same dtype, device and rank; sizes equal except along `dim`.
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);
// torch.stack: same shape; a new dim is inserted at `dim` (in [-(rank+1), rank]).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

// torch.index_select: `index` is a 0-/1-D I64 or I32 tensor of indices in [0, x.size(dim)).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// torch.gather: out[i..] = x[..., index[i..], ...] along `dim`; `index` (I64/I32) has x's rank
// and index.size(d) <= x.size(d) for d != dim; the output has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

// torch.Tensor.repeat: tiles x; repeats.size() >= rank (extra entries add leading dims).
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
// torch.repeat_interleave along `dim`: each element repeated `repeats` times...
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim);
// ...or element i repeated repeats[i] times (repeats.size() == x.size(dim)).
Tensor repeat_interleave(const Tensor& x, const std::vector<int64_t>& repeats, int64_t dim);

// torch.flip: reverses the order along each of `dims` (distinct).
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);

// torch.nn.functional.embedding: rows of weight [V, D] picked by ids (I64/I32, any shape);
// the output has shape ids.shape + [D].
Tensor embedding(const Tensor& weight, const Tensor& ids);

}  // namespace ltx::ops
