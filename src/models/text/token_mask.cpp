#include "models/text/token_mask.h"

#include <limits>

#include "core/error.h"
#include "ops/shape.h"

namespace ltx::models::text {

TokenMask TokenMask::from_binary(const Tensor& mask, const char* what) {
  LTX_CHECK(mask.defined() && mask.dim() == 2, what, " must be [B, T] (1 = token, 0 = pad), got ",
            mask.defined() ? mask.describe() : std::string("nothing"));
  LTX_CHECK(mask.size(1) > 0, what, " has no tokens: ", mask.describe());
  TokenMask m;
  m.batch_ = mask.size(0);
  m.length_ = mask.size(1);
  const std::vector<double> v = mask.to_double_vector();
  m.valid_.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    LTX_CHECK(v[i] == 0.0 || v[i] == 1.0, what, " must hold only 0 and 1, found ", v[i],
              " at [", static_cast<int64_t>(i) / m.length_, ", ", static_cast<int64_t>(i) % m.length_, "]");
    m.valid_[i] = v[i] == 1.0 ? 1 : 0;
  }
  return m;
}

TokenMask TokenMask::from_additive(const Tensor& additive, const char* what) {
  LTX_CHECK(additive.defined() &&
                (additive.dim() == 2 ||
                 (additive.dim() == 4 && additive.size(1) == 1 && additive.size(2) == 1)),
            what, " must be [B, 1, 1, T] or [B, T] (0 = token, negative = pad), got ",
            additive.defined() ? additive.describe() : std::string("nothing"));
  TokenMask m;
  m.batch_ = additive.size(0);
  m.length_ = additive.size(additive.dim() - 1);
  LTX_CHECK(m.length_ > 0, what, " has no tokens: ", additive.describe());
  const std::vector<double> v = additive.to_double_vector();
  m.valid_.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) m.valid_[i] = v[i] >= 0.0 ? 1 : 0;  // NaN: pad
  return m;
}

int64_t TokenMask::count(int64_t b) const {
  int64_t n = 0;
  for (int64_t t = 0; t < length_; ++t) n += valid(b, t) ? 1 : 0;
  return n;
}

std::vector<TokenMask::Run> TokenMask::runs(int64_t b) const {
  LTX_CHECK(b >= 0 && b < batch_, "token mask: row ", b, " out of range for batch ", batch_);
  std::vector<Run> out;
  for (int64_t t = 0; t < length_; ++t) {
    const bool v = valid(b, t);
    if (out.empty() || out.back().valid != v) out.push_back({t, 0, v});
    ++out.back().length;
  }
  return out;
}

TokenMask TokenMask::valid_first() const {
  TokenMask m = *this;
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t n = count(b);
    for (int64_t t = 0; t < length_; ++t)
      m.valid_[static_cast<size_t>(b * length_ + t)] = t < n ? 1 : 0;
  }
  return m;
}

Tensor TokenMask::binary(DType dtype, Device device) const {
  std::vector<int64_t> v(valid_.begin(), valid_.end());
  return Tensor::from_vector(v, {batch_, length_}).to(dtype).to(device);
}

Tensor TokenMask::additive(Device device) const {
  // (int64(mask) - 1) cast to f32, times finfo(f32).max: exactly 0 or -max.
  constexpr float kMax = std::numeric_limits<float>::max();
  std::vector<float> v(valid_.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = valid_[i] ? 0.0f : -kMax;
  return Tensor::from_vector(v, {batch_, 1, 1, length_}).to(device);
}

Tensor gather_valid_rows(const Tensor& x, const TokenMask& mask, int64_t b) {
  LTX_CHECK(x.dim() >= 2 && x.size(0) == mask.batch() && x.size(1) == mask.length(),
            "gather_valid_rows: x must be [", mask.batch(), ", ", mask.length(), ", ...] like the mask, got ",
            x.describe());
  const Tensor row = x.select(0, b);
  std::vector<Tensor> parts;
  for (const TokenMask::Run& r : mask.runs(b))
    if (r.valid) parts.push_back(row.narrow(0, r.start, r.length));
  if (parts.empty()) {
    Shape s = row.shape();
    s[0] = 0;
    return Tensor::empty(s, x.dtype(), x.device());
  }
  return parts.size() == 1 ? parts[0].contiguous() : ops::concat(parts, 0);
}

Tensor reorder_valid_first(const Tensor& x, const TokenMask& mask) {
  LTX_CHECK(x.dim() >= 2 && x.size(0) == mask.batch() && x.size(1) == mask.length(),
            "reorder_valid_first: x must be [", mask.batch(), ", ", mask.length(),
            ", ...] like the mask, got ", x.describe());
  std::vector<Tensor> rows;
  for (int64_t b = 0; b < mask.batch(); ++b) {
    const Tensor row = x.select(0, b);
    const std::vector<TokenMask::Run> runs = mask.runs(b);
    std::vector<Tensor> parts;
    for (const bool valid : {true, false})
      for (const TokenMask::Run& r : runs)
        if (r.valid == valid) parts.push_back(row.narrow(0, r.start, r.length));
    rows.push_back(parts.size() == 1 ? parts[0] : ops::concat(parts, 0));
  }
  return ops::stack(rows, 0);
}

}  // namespace ltx::models::text
