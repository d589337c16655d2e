#pragma once
// Host-side analysis of a token attention mask and the row movements the text path does with it
// (gathering the valid tokens, the stable valid-first reordering of the embeddings processor).
// Masks are tiny ([B, T] with T = 1024), so they are read to the host once; the rows themselves
// are moved with slices + concat, which run on every device.
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ltx::models::text {

class TokenMask {
 public:
  // A maximal run of equal mask values in one row.
  struct Run {
    int64_t start = 0, length = 0;
    bool valid = false;
  };

  // A binary [B, T] mask of any integer, bool or float dtype: 1 = valid token, 0 = pad. Other
  // values are refused (the reference counts them as they are in one place and as booleans in
  // another, so they have no consistent meaning). `what` names the mask in errors.
  static TokenMask from_binary(const Tensor& mask, const char* what = "attention mask");
  // An additive [B, 1, 1, T] (or [B, T]) mask: valid where the value is >= 0 (the reference's
  // test), pad otherwise.
  static TokenMask from_additive(const Tensor& additive, const char* what = "additive mask");

  int64_t batch() const { return batch_; }
  int64_t length() const { return length_; }
  bool valid(int64_t b, int64_t t) const { return valid_[static_cast<size_t>(b * length_ + t)] != 0; }
  int64_t count(int64_t b) const;  // valid tokens of row b
  std::vector<Run> runs(int64_t b) const;

  // The valid-first stable order (torch.argsort(mask, descending=True, stable=True)): the mask
  // after reordering.
  TokenMask valid_first() const;
  // [B, T] of `dtype` (1 / 0), on `device`.
  Tensor binary(DType dtype = DType::I64, Device device = Device::cpu()) const;
  // (mask - 1) * finfo(f32).max as [B, 1, 1, T] f32: 0 for valid tokens, -3.4e38 for pads
  // (convert_to_additive_mask).
  Tensor additive(Device device = Device::cpu()) const;

 private:
  int64_t batch_ = 0, length_ = 0;
  std::vector<uint8_t> valid_;
};

// The valid tokens of row b of x [B, T, ...] (dim 1 is the token axis), in order: [n, ...].
Tensor gather_valid_rows(const Tensor& x, const TokenMask& mask, int64_t b);
// x [B, T, ...] reordered per row so that the valid tokens come first, both groups keeping their
// order (_compute_right_pad_order + _apply_right_pad_order).
Tensor reorder_valid_first(const Tensor& x, const TokenMask& mask);

}  // namespace ltx::models::text
