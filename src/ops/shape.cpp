#include "ops/shape.h"

#include <algorithm>
#include <string>
#include <utility>

#include "backend/cpu/shape.h"
#include "ops/dispatch.h"
#if LTX_WITH_CUDA
#include "backend/cuda/shape.h"
#endif

namespace ltx::ops {

namespace {

const char* pad_mode_name(PadMode m) {
  switch (m) {
    case PadMode::Constant: return "constant";
    case PadMode::Reflect: return "reflect";
    case PadMode::Replicate: return "replicate";
    case PadMode::Circular: return "circular";
  }
  return "?";
}

void check_index_dtype(const char* op, const Tensor& index) {
  LTX_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32, op,
            ": index must be i64 or i32, got ", index.describe());
}

std::string list_str(const std::vector<int64_t>& v) { return Dims(v).str(); }

// Most shape ops are one gather: out[o_0, ...] = x[maps[0][o_0], ...] (-1 = fill), see
// cpu::gather_by_maps. The maps are built here on the host, the gather runs on x's device.
using Maps = std::vector<std::vector<int64_t>>;

std::vector<int64_t> identity_map(int64_t n) {
  std::vector<int64_t> m(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) m[i] = i;
  return m;
}

Maps identity_maps(const Tensor& x) {
  Maps maps;
  for (int d = 0; d < x.dim(); ++d) maps.push_back(identity_map(x.size(d)));
  return maps;
}

// The index values on the host (a device index is copied back: the values decide the shape of
// the work and must be range-checked before any kernel reads through them).
std::vector<int64_t> checked_indices(const char* op, const Tensor& index, int64_t size, int dim) {
  std::vector<int64_t> v = index.to_int_vector();
  for (size_t i = 0; i < v.size(); ++i)
    LTX_CHECK(v[i] >= 0 && v[i] < size, op, ": index value ", v[i], " (entry ", i,
              " of the index) is out of range for dim ", dim, " of size ", size);
  return v;
}

Tensor gather_by_maps(const char* op, const Tensor& x, const Maps& maps, double fill) {
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::gather_by_maps(x, maps, fill);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::gather_by_maps(x, maps, fill), op);
  }
  unreachable_device(op);
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode, double value) {
  check_defined("pad", {&x});
  LTX_CHECK(pads.size() % 2 == 0, "pad: pads must hold (before, after) pairs, got ", pads.size(),
            " values ", list_str(pads));
  LTX_CHECK(static_cast<int>(pads.size() / 2) <= x.dim(), "pad: ", pads.size() / 2,
            " (before, after) pairs for ", x.describe(), " with only ", x.dim(), " dims");
  LTX_CHECK(mode == PadMode::Constant || value == 0.0,
            "pad: a fill value only applies to "
            "constant mode, got ",
            pad_mode_name(mode), " with value ", value);
  for (size_t j = 0; j < pads.size() / 2; ++j) {
    const int d = x.dim() - 1 - static_cast<int>(j);
    const int64_t n = x.size(d), before = pads[2 * j], after = pads[2 * j + 1];
    LTX_CHECK(n + before + after >= 0, "pad: pads (", before, ", ", after, ") give a negative ",
              "size for dim ", d, " of ", x.describe());
    const char* mname = pad_mode_name(mode);
    switch (mode) {
      case PadMode::Constant: break;
      case PadMode::Reflect:
        LTX_CHECK(before < n && after < n, "pad: reflect pads (", before, ", ", after,
                  ") must be smaller than dim ", d, " of size ", n, " of ", x.describe());
        break;
      case PadMode::Circular:
        LTX_CHECK(before <= n && after <= n, "pad: circular pads (", before, ", ", after,
                  ") must not exceed dim ", d, " of size ", n, " of ", x.describe());
        [[fallthrough]];
      case PadMode::Replicate:
        LTX_CHECK(n > 0 || n + before + after == 0, "pad: ", mname, " padding of empty dim ", d,
                  " of ", x.describe());
        break;
    }
  }
  std::vector<std::pair<int, PadRule>> rules;  // (dim, its rule), from the last dim back
  Shape out_shape = x.shape();
  for (size_t j = 0; j < pads.size() / 2; ++j) {
    const int d = x.dim() - 1 - static_cast<int>(j);
    rules.emplace_back(d, PadRule{mode, pads[2 * j], x.size(d)});
    out_shape[d] += pads[2 * j] + pads[2 * j + 1];
  }
  // On the GPU the rules travel in the kernel's arguments: no index map to upload.
  if (x.device().is_cuda())
    LTX_CUDA_DISPATCH(return cuda::gather_by_pad_rules(x, out_shape, rules, value), "pad");
  Maps maps = identity_maps(x);
  for (const auto& [d, rule] : rules) {
    std::vector<int64_t>& m = maps[d];
    m.resize(static_cast<size_t>(out_shape[d]));
    for (int64_t o = 0; o < out_shape[d]; ++o) m[static_cast<size_t>(o)] = pad_source_index(rule, o);
  }
  return gather_by_maps("pad", x, maps, value);
}

Tensor concat(const std::vector<Tensor>& tensors, int64_t dim) {
  LTX_CHECK(!tensors.empty(), "concat: no tensors given");
  const Tensor& first = tensors[0];
  for (size_t i = 0; i < tensors.size(); ++i)
    LTX_CHECK(tensors[i].defined(), "concat: tensor ", i, " is undefined");
  LTX_CHECK(first.dim() > 0, "concat: zero-dim tensor ", first.describe(),
            " cannot be concatenated (use stack)");
  const int d = wrap_dim(dim, first.dim(), "concat");
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    LTX_CHECK(t.dtype() == first.dtype(), "concat: tensor ", i, " is ", t.describe(),
              " but tensor 0 is ", first.describe(), "; convert with .to(dtype)");
    LTX_CHECK(t.device() == first.device(), "concat: tensor ", i, " is ", t.describe(),
              " but tensor 0 is ", first.describe(), "; move it with .to(device)");
    LTX_CHECK(t.dim() == first.dim(), "concat: tensor ", i, " is ", t.describe(),
              " but tensor 0 is ", first.describe(), " (ranks differ)");
    for (int k = 0; k < t.dim(); ++k)
      LTX_CHECK(k == d || t.size(k) == first.size(k), "concat: tensor ", i, " is ", t.describe(),
                " but tensor 0 is ", first.describe(),
                "; sizes must match "
                "except in dim ",
                d);
    total += t.size(d);
  }
  Shape shape = first.shape();
  shape[d] = total;
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    if (t.size(d) > 0) out.narrow(d, at, t.size(d)).copy_from(t);
    at += t.size(d);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  LTX_CHECK(!tensors.empty(), "stack: no tensors given");
  for (size_t i = 0; i < tensors.size(); ++i) {
    LTX_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    LTX_CHECK(tensors[i].shape() == tensors[0].shape(), "stack: tensor ", i, " is ",
              tensors[i].describe(), " but tensor 0 is ", tensors[0].describe(),
              "; all shapes must be equal");
  }
  const int d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  return concat(parts, d);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("index_select", {&x, &index});
  check_index_dtype("index_select", index);
  LTX_CHECK(index.dim() <= 1, "index_select: index must be 0-D or 1-D, got ", index.describe());
  LTX_CHECK(x.dim() > 0, "index_select: input ", x.describe(), " has no dims");
  const int d = wrap_dim(dim, x.dim(), "index_select");
  common_device("index_select", {&x, &index});
  Maps maps = identity_maps(x);
  maps[d] = checked_indices("index_select", index, x.size(d), d);
  return gather_by_maps("index_select", x, maps, 0.0);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("gather", {&x, &index});
  check_index_dtype("gather", index);
  LTX_CHECK(index.dim() == x.dim(), "gather: index ", index.describe(), " must have the rank of ",
            "the input ", x.describe());
  LTX_CHECK(x.dim() > 0, "gather: input ", x.describe(), " has no dims");
  const int d = wrap_dim(dim, x.dim(), "gather");
  for (int k = 0; k < x.dim(); ++k)
    LTX_CHECK(k == d || index.size(k) <= x.size(k), "gather: index ", index.describe(),
              " is larger than the input ", x.describe(), " in dim ", k);
  const Device device = common_device("gather", {&x, &index});
  const std::vector<int64_t> idx = checked_indices("gather", index, x.size(d), d);
  switch (device.type) {
    case DeviceType::CPU: return cpu::gather(x, d, index.shape(), idx);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::gather(x, d, index.shape(), idx), "gather");
  }
  unreachable_device("gather");
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  check_defined("repeat", {&x});
  LTX_CHECK(static_cast<int>(repeats.size()) >= x.dim(), "repeat: ", repeats.size(), " repeats ",
            list_str(repeats), " for ", x.describe(), "; give at least one per dim");
  for (int64_t r : repeats)
    LTX_CHECK(r >= 0, "repeat: negative repeat count in ", list_str(repeats));
  Tensor v = x;
  while (v.dim() < static_cast<int>(repeats.size())) v = v.unsqueeze(0);
  Maps maps(static_cast<size_t>(v.dim()));
  for (int d = 0; d < v.dim(); ++d) {
    const int64_t n = v.size(d);
    maps[d].resize(static_cast<size_t>(n * repeats[d]));
    for (size_t o = 0; o < maps[d].size(); ++o) maps[d][o] = static_cast<int64_t>(o) % n;
  }
  return gather_by_maps("repeat", v, maps, 0.0);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim) {
  check_defined("repeat_interleave", {&x});
  LTX_CHECK(repeats >= 0, "repeat_interleave: negative repeat count ", repeats);
  LTX_CHECK(x.dim() > 0, "repeat_interleave: input ", x.describe(), " has no dims");
  const int d = wrap_dim(dim, x.dim(), "repeat_interleave");
  return repeat_interleave(x, std::vector<int64_t>(static_cast<size_t>(x.size(d)), repeats), d);
}

Tensor repeat_interleave(const Tensor& x, const std::vector<int64_t>& repeats, int64_t dim) {
  check_defined("repeat_interleave", {&x});
  LTX_CHECK(x.dim() > 0, "repeat_interleave: input ", x.describe(), " has no dims");
  const int d = wrap_dim(dim, x.dim(), "repeat_interleave");
  LTX_CHECK(static_cast<int64_t>(repeats.size()) == x.size(d),
            "repeat_interleave: ", repeats.size(), " repeat counts for dim ", d, " of size ",
            x.size(d), " of ", x.describe());
  for (int64_t r : repeats)
    LTX_CHECK(r >= 0, "repeat_interleave: negative repeat count in ", list_str(repeats));
  Maps maps = identity_maps(x);
  std::vector<int64_t>& m = maps[d];
  m.clear();
  for (size_t i = 0; i < repeats.size(); ++i)
    for (int64_t r = 0; r < repeats[i]; ++r) m.push_back(static_cast<int64_t>(i));
  return gather_by_maps("repeat_interleave", x, maps, 0.0);
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined("flip", {&x});
  std::vector<int> ds;
  bool seen[kMaxDims] = {};
  for (int64_t d : dims) {
    const int w = wrap_dim(d, x.dim(), "flip");
    LTX_CHECK(!seen[w], "flip: dim ", w, " appears more than once in ", list_str(dims));
    seen[w] = true;
    ds.push_back(w);
  }
  Maps maps = identity_maps(x);
  for (int d : ds) std::reverse(maps[d].begin(), maps[d].end());
  return gather_by_maps("flip", x, maps, 0.0);
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_defined("embedding", {&weight, &ids});
  check_dim("embedding", "weight", weight, 2);
  check_index_dtype("embedding", ids);
  LTX_CHECK(ids.dim() < kMaxDims, "embedding: ids ", ids.describe(), " has too many dims");
  Shape out_shape = ids.shape();
  out_shape.push_back(weight.size(1));
  return index_select(weight, 0, ids.reshape({-1})).view(out_shape);
}

}  // namespace ltx::ops
