#pragma once
// Tensor: a strided view (shape, strides and offset in elements) of a shared Storage, with a dtype
// and a device. Views share storage; contiguous()/clone()/to() make copies. Eager and without
// autograd. Ops live in ltx::ops (src/ops); this class only handles layout, memory and copies.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace ltx {

class Tensor {
 public:
  Tensor() = default;

  // ---- creation ----
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::cpu());
  // A dense tensor of `shape` whose dims are laid out in `order` (a permutation of the dims,
  // order[0] outermost): empty_in_order(s, channels_last_order(5)) is PyTorch's channels_last_3d.
  static Tensor empty_in_order(const Shape& shape, const std::vector<int64_t>& order,
                               DType dtype = DType::F32, Device device = Device::cpu());
  // Wraps existing memory without copying; `owner` keeps it alive (may be null for borrowed data).
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device,
                          std::shared_ptr<void> owner, const Strides* strides = nullptr);
  // CPU tensor holding a copy of `values` (numel must match the shape).
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
    LTX_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: ",
              values.size(), " values for shape ", shape.str());
    Tensor t = empty(shape, DTypeOf<T>::value);
    if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
    return t;
  }
  // 1-D f32/f64/i64 ranges [0, n).
  static Tensor arange(int64_t n, DType dtype = DType::F32);

  // ---- properties ----
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int dim() const { return shape_.size(); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_.numel(); }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  // Memory layout beyond row-major (PyTorch's memory formats, generalised): a tensor is dense when
  // its elements fill one gap-free block of numel() elements in some order of its dims, e.g.
  // contiguous, channels-last ([N, C, D, H, W] stored as [N, D, H, W, C]) or any permute() of a
  // contiguous tensor. Size-1 dims never matter. dim_order() lists the dims from the outermost
  // (largest stride) to the innermost, ties in logical order; for a contiguous tensor 0, 1, ...
  bool is_dense() const;
  std::vector<int64_t> dim_order() const;
  // Whether the tensor is dense with its dims laid out in `order` (order[0] outermost).
  bool is_dense_in_order(const std::vector<int64_t>& order) const;
  // Channels-last: dim 1 innermost, then the others in logical order ([N, *spatial, C] memory);
  // rank >= 3. channels_last_order(n) = {0, 2, 3, ..., n - 1, 1}.
  static std::vector<int64_t> channels_last_order(int ndim);
  bool is_channels_last() const { return dim() >= 3 && is_dense_in_order(channels_last_order(dim())); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // "f32[2, 3] cpu"
  std::string describe() const;

  // Pointer to element 0 of this view (storage base + offset).
  void* raw_data() const;
  // Typed pointer to element 0; checks that T matches the dtype.
  template <typename T>
  T* data() const {
    LTX_CHECK(DTypeOf<T>::value == dtype_, "tensor of dtype ", dtype_name(dtype_),
              " accessed as ", dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(raw_data());
  }
  // Value of a one-element tensor (any dtype, any device), converted to double.
  double item() const;
  // All elements (row-major order) converted to f32 / f64 / i64 on the host; any device.
  std::vector<float> to_float_vector() const;
  std::vector<double> to_double_vector() const;
  std::vector<int64_t> to_int_vector() const;

  // ---- views (share storage) ----
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;  // python-like clamp
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;                // strict bounds
  Tensor select(int64_t dim, int64_t index) const;                                // drops `dim`
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;  // no-op unless that dim has size 1
  // Same data, new shape; one dim may be -1. Throws when the strides cannot express it.
  Tensor view(const Shape& shape) const;
  // view() when possible, otherwise a contiguous copy reshaped.
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // Broadcast to `shape` (stride 0 on expanded dims); -1 keeps a dim.
  Tensor expand(const Shape& shape) const;
  // View of the same bytes as another dtype of equal size (e.g. u8 <-> f8, i16 <-> bf16).
  Tensor view_as_dtype(DType dtype) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim) const;

  // ---- copies ----
  Tensor contiguous() const;  // self when already contiguous
  // Self when already dense in `order` (see is_dense_in_order), else a copy laid out that way.
  Tensor contiguous_in_order(const std::vector<int64_t>& order) const;
  // contiguous_in_order(channels_last_order(dim())): [N, C, *spatial] kept as is logically, stored
  // [N, *spatial, C] (PyTorch's .to(memory_format=torch.channels_last_3d)).
  Tensor to_channels_last() const { return contiguous_in_order(channels_last_order(dim())); }
  Tensor clone() const;
  Tensor to(DType dtype) const;  // self when already that dtype
  Tensor to(Device device) const;
  Tensor to(Device device, DType dtype) const;
  // Copies `src` (same shape, any dtype/device/strides) into this view, converting the dtype.
  void copy_from(const Tensor& src) const;
  // Sets every element to `value` (converted to the dtype).
  void fill(double value) const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;  // in elements
  DType dtype_ = DType::F32;

  Tensor with_layout(const Shape& shape, const Strides& strides, int64_t offset) const;
};

// The result of an elementwise op over `inputs` (PyTorch's layout rule, simplified): a new tensor
// of `shape` laid out in the dim order of the first input that has exactly that shape and is
// dense (so a channels-last input gives a channels-last result), else contiguous. Null or
// undefined entries are skipped.
Tensor empty_like_layout(const Shape& shape, DType dtype, Device device,
                         std::initializer_list<const Tensor*> inputs);

// Device -> host copies made by Tensor::copy_from (so by to(), to_float_vector(), item(), ...) in
// this process. Each one waits for the device, so a denoising step should make none: the
// generation's progress records them per stage and the GPU tests check that they stay at 0.
int64_t device_to_host_copies();

// Describes where two tensors first differ in shape etc., for error messages: "f32[2, 3] cpu".
inline std::string describe(const Tensor& t) { return t.describe(); }

}  // namespace ltx
