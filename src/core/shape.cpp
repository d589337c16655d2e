#include "core/shape.h"

#include <algorithm>

namespace ltx {

Strides contiguous_strides(const Shape& shape) {
  Strides s;
  for (int i = 0; i < shape.size(); ++i) s.push_back(0);
  int64_t acc = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

int wrap_dim(int64_t dim, int ndim, const char* op) {
  const int64_t lo = -std::max(ndim, 1), hi = std::max(ndim, 1) - 1;
  LTX_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " out of range for a ", ndim,
            "-d tensor (expected ", lo, "..", hi, ")");
  return static_cast<int>(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int n = std::max(a.size(), b.size());
  Shape out;
  for (int i = 0; i < n; ++i) {
    const int ia = i - (n - a.size()), ib = i - (n - b.size());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    LTX_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a.str(), " and ", b.str(),
              " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

bool broadcasts_to(const Shape& s, const Shape& target) {
  const int n = s.size(), m = target.size();
  if (n > m) return false;
  for (int i = 0; i < n; ++i)
    if (s[i] != 1 && s[i] != target[m - n + i]) return false;
  return true;
}

}  // namespace ltx
