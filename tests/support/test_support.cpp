#include "support/test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "core/device_hooks.h"

namespace ltx::test {

namespace {

template <typename T>
Tensor uniform(const Shape& shape, uint64_t seed, T lo, T hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<T> dist(lo, hi);
  std::vector<T> v(static_cast<size_t>(shape.numel()));
  for (T& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape);
}

}  // namespace

Tensor random_tensor(const Shape& shape, uint64_t seed, float lo, float hi) { return uniform(shape, seed, lo, hi); }

Tensor random_f64(const Shape& shape, uint64_t seed, double lo, double hi) { return uniform(shape, seed, lo, hi); }

Tensor non_contiguous_copy(const Tensor& t) {
  if (t.dim() == 0) return t.clone();
  // Reverse the dims, pad the new innermost dim by 3, copy, then view back in the original order.
  std::vector<int64_t> rev(t.dim());
  for (int i = 0; i < t.dim(); ++i) rev[i] = t.dim() - 1 - i;
  Shape padded;
  for (int i = 0; i < t.dim(); ++i) padded.push_back(t.size(rev[i]) + (i == t.dim() - 1 ? 3 : 0));
  Tensor buf = Tensor::zeros(padded, t.dtype(), t.device());
  Tensor inner = buf.narrow(t.dim() - 1, 0, t.size(rev[t.dim() - 1]));
  Tensor view = inner.permute(rev);  // logical shape == t.shape()
  view.copy_from(t);
  return view;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_double_vector(), vb = b.to_double_vector();
  double m = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    const double d = std::fabs(va[i] - vb[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

double max_rel_err(const Tensor& a, const Tensor& b) {
  const auto vb = b.to_double_vector();
  double ref = 0;
  for (double x : vb) ref = std::max(ref, std::fabs(x));
  const double d = max_abs_diff(a, b);
  if (ref == 0) return d;
  return d / ref;
}

// Both paths are compiled in, and can be overridden at run time (e.g. when a build made on one
// machine runs from another checkout): LTX_FIXTURES_DIR, LTX_BINARY.
std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = shape.size() - 1; d >= 0; --d) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t r = 0;
  for (int d = 0; d < shape.size(); ++d) r = r * shape[d] + idx[d];
  return r;
}

std::string fixture(const std::string& name) {
  const char* env = std::getenv("LTX_FIXTURES_DIR");
  return std::string(env && *env ? env : LTX_FIXTURES_DIR) + "/" + name;
}

std::string ltx_binary() {
  const char* env = std::getenv("LTX_BINARY");
  return env && *env ? env : LTX_BINARY;
}

bool cuda_available() {
  if (!detail::cuda_compiled()) return false;
  try {
    Tensor t = Tensor::zeros({1}, DType::F32, Device::cuda(0));
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace ltx::test
