#include "backend/cpu/shape.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/parallel.h"

namespace ltx::cpu {

namespace {

constexpr int64_t kFill = INT64_MIN;  // byte offset marking "write the fill value"

// A run of the innermost output dim: `len` elements from output position `out` that either read
// consecutive source bytes starting at `src` or are all fill (src == kFill).
struct Run {
  int64_t out, len, src;
};

template <size_t S>
void copy_elements(char* dst, const char* base, const int64_t* offs, int64_t n, const char* fill) {
  for (int64_t i = 0; i < n; ++i) {
    const char* s = offs[i] == kFill ? fill : base + offs[i];
    std::memcpy(dst + i * static_cast<int64_t>(S), s, S);
  }
}

void copy_elements_any(size_t es, char* dst, const char* base, const int64_t* offs, int64_t n,
                       const char* fill) {
  switch (es) {
    case 1: copy_elements<1>(dst, base, offs, n, fill); return;
    case 2: copy_elements<2>(dst, base, offs, n, fill); return;
    case 4: copy_elements<4>(dst, base, offs, n, fill); return;
    case 8: copy_elements<8>(dst, base, offs, n, fill); return;
    default:
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(dst + i * static_cast<int64_t>(es), offs[i] == kFill ? fill : base + offs[i],
                    es);
  }
}

void fill_elements(size_t es, char* dst, int64_t n, const char* fill) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * static_cast<int64_t>(es), fill, es);
}

}  // namespace

Tensor gather_by_maps(const Tensor& x, const std::vector<std::vector<int64_t>>& maps, double fill) {
  LTX_CHECK(static_cast<int>(maps.size()) == x.dim(), "gather_by_maps: ", maps.size(), " maps for ",
            x.describe());
  Shape out_shape;
  for (const auto& m : maps) out_shape.push_back(static_cast<int64_t>(m.size()));
  Tensor out = Tensor::empty(out_shape, x.dtype());
  const size_t es = x.element_size();
  alignas(8) char fill_bytes[8];
  convert_dense(&fill, DType::F64, fill_bytes, x.dtype(), 1);
  if (out.numel() == 0) return out;
  char* dst = static_cast<char*>(out.raw_data());
  const char* src = static_cast<const char*>(x.raw_data());
  const int nd = x.dim();
  if (nd == 0) {
    std::memcpy(dst, src, es);
    return out;
  }

  // Per-dim byte offsets into x (kFill where the map says -1).
  std::vector<std::vector<int64_t>> offs(nd);
  for (int d = 0; d < nd; ++d) {
    const int64_t step = x.stride(d) * static_cast<int64_t>(es);
    offs[d].resize(maps[d].size());
    for (size_t i = 0; i < maps[d].size(); ++i) {
      const int64_t m = maps[d][i];
      offs[d][i] = m < 0 ? kFill : m * step;
    }
  }
  // Innermost dim as runs, so plain copies (concat-like, pad interiors) become memcpy.
  const std::vector<int64_t>& last = offs[nd - 1];
  const int64_t inner = static_cast<int64_t>(last.size());
  std::vector<Run> runs;
  for (int64_t i = 0; i < inner; ++i) {
    if (!runs.empty()) {
      Run& r = runs.back();
      const bool extends =
          r.src == kFill ? last[i] == kFill
                         : last[i] != kFill && last[i] == r.src + r.len * static_cast<int64_t>(es);
      if (extends) {
        ++r.len;
        continue;
      }
    }
    runs.push_back({i, 1, last[i]});
  }
  const bool use_runs = static_cast<int64_t>(runs.size()) * 4 <= inner;

  const int64_t rows = out.numel() / inner;
  const int64_t row_bytes = inner * static_cast<int64_t>(es);
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
               [&](int64_t b, int64_t e) {
                 int64_t idx[kMaxDims] = {};
                 int64_t rem = b;
                 for (int d = nd - 2; d >= 0; --d) {
                   idx[d] = rem % out_shape[d];
                   rem /= out_shape[d];
                 }
                 for (int64_t r = b; r < e; ++r) {
                   char* drow = dst + r * row_bytes;
                   int64_t base = 0;
                   bool filled = false;
                   for (int d = 0; d < nd - 1; ++d) {
                     const int64_t o = offs[d][idx[d]];
                     if (o == kFill) {
                       filled = true;
                       break;
                     }
                     base += o;
                   }
                   if (filled) {
                     fill_elements(es, drow, inner, fill_bytes);
                   } else if (use_runs) {
                     for (const Run& run : runs) {
                       char* d0 = drow + run.out * static_cast<int64_t>(es);
                       if (run.src == kFill) {
                         fill_elements(es, d0, run.len, fill_bytes);
                       } else {
                         std::memcpy(d0, src + base + run.src, static_cast<size_t>(run.len) * es);
                       }
                     }
                   } else {
                     copy_elements_any(es, drow, src + base, last.data(), inner, fill_bytes);
                   }
                   // Next row index (odometer over dims [0, nd-1)).
                   for (int d = nd - 2; d >= 0; --d) {
                     if (++idx[d] < out_shape[d]) break;
                     idx[d] = 0;
                   }
                 }
               });
  return out;
}

Tensor gather(const Tensor& x, int dim, const Shape& index_shape, const std::vector<int64_t>& idx) {
  Tensor out = Tensor::empty(index_shape, x.dtype());
  if (out.numel() == 0) return out;
  const size_t es = x.element_size();
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const Shape& shape = index_shape;
  const int nd = index_shape.size();
  const Strides xs = x.strides();
  parallel_for(0, out.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t rem = i, off = 0;
      for (int d = nd - 1; d >= 0; --d) {
        const int64_t c = rem % shape[d];
        rem /= shape[d];
        off += (d == dim ? idx[i] : c) * xs[d];
      }
      std::memcpy(dst + i * static_cast<int64_t>(es), src + off * static_cast<int64_t>(es), es);
    }
  });
  return out;
}

}  // namespace ltx::cpu
