#include "core/tensor.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/device_hooks.h"
#include "core/out_of_memory.h"
#include "core/parallel.h"

namespace ltx {

namespace {

std::atomic<int64_t> g_device_to_host_copies{0};

// The storage of a new tensor; a device out of memory names the tensor it was for.
std::shared_ptr<Storage> allocate_for(const Shape& shape, DType dtype, Device device) {
  try {
    return Storage::allocate(static_cast<size_t>(shape.numel()) * dtype_size(dtype), device);
  } catch (const OutOfMemory& e) {
    if (!e.report() || !e.report()->tensor.empty()) throw;
    OutOfMemoryReport r = *e.report();
    r.tensor = str(dtype_name(dtype), shape.str());
    throw OutOfMemory(std::move(r));
  }
}

// PyTorch's rule for when a reshape can be a view: each run of dims that is contiguous in the old
// layout must map to whole dims of the new shape. Returns false when a copy is needed.
bool compute_view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape,
                          Strides* out) {
  Strides ns;
  for (int i = 0; i < shape.size(); ++i) ns.push_back(0);
  if (old_shape.numel() == 0 || old_shape.size() == 0) {
    *out = contiguous_strides(shape);
    return true;
  }
  int view_d = shape.size() - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int tensor_d = old_shape.size() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    if (tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        ns[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return false;
  *out = ns;
  return true;
}

Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      LTX_CHECK(infer < 0, op, ": only one dimension can be -1 in ", shape.str());
      infer = i;
    } else {
      LTX_CHECK(s[i] >= 0, op, ": invalid size ", s[i], " in ", shape.str());
      known *= s[i];
    }
  }
  if (infer >= 0) {
    LTX_CHECK(known != 0 && numel % known == 0, op, ": cannot infer -1 in ", shape.str(),
              " for ", numel, " elements");
    s[infer] = numel / known;
  }
  LTX_CHECK(s.numel() == numel, op, ": shape ", shape.str(), " is invalid for ", numel,
            " elements");
  return s;
}

// Strided CPU copy with dtype conversion. Rows along the last dim are converted in one call when
// both sides are dense along it; otherwise they are gathered into a scratch buffer first.
void cpu_copy(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const size_t ss = src.element_size(), ds = dst.element_size();
  auto* sbase = static_cast<const char*>(src.raw_data());
  auto* dbase = static_cast<char*>(dst.raw_data());
  if (src.is_contiguous() && dst.is_contiguous()) {
    parallel_for(0, n, 1 << 16, [&](int64_t b, int64_t e) {
      convert_dense(sbase + b * ss, src.dtype(), dbase + b * ds, dst.dtype(),
                    static_cast<size_t>(e - b));
    });
    return;
  }
  const int nd = dst.dim();
  const int64_t inner = nd == 0 ? 1 : dst.size(-1);
  const int64_t sis = nd == 0 ? 1 : src.stride(-1), dis = nd == 0 ? 1 : dst.stride(-1);
  const int64_t rows = n / inner;
  parallel_for(0, rows, std::max<int64_t>(1, (1 << 14) / inner), [&](int64_t b, int64_t e) {
    std::vector<char> sbuf, dbuf;
    for (int64_t r = b; r < e; ++r) {
      // Decompose the row index over dims [0, nd-1).
      int64_t rem = r, soff = 0, doff = 0;
      for (int d = nd - 2; d >= 0; --d) {
        const int64_t i = rem % dst.size(d);
        rem /= dst.size(d);
        soff += i * src.stride(d);
        doff += i * dst.stride(d);
      }
      const char* sp = sbase + soff * static_cast<int64_t>(ss);
      char* dp = dbase + doff * static_cast<int64_t>(ds);
      if (sis == 1 && dis == 1) {
        convert_dense(sp, src.dtype(), dp, dst.dtype(), static_cast<size_t>(inner));
        continue;
      }
      const char* s_dense = sp;
      if (sis != 1) {
        sbuf.resize(inner * ss);
        for (int64_t i = 0; i < inner; ++i) std::memcpy(&sbuf[i * ss], sp + i * sis * static_cast<int64_t>(ss), ss);
        s_dense = sbuf.data();
      }
      if (dis == 1) {
        convert_dense(s_dense, src.dtype(), dp, dst.dtype(), static_cast<size_t>(inner));
      } else {
        dbuf.resize(inner * ds);
        convert_dense(s_dense, src.dtype(), dbuf.data(), dst.dtype(), static_cast<size_t>(inner));
        for (int64_t i = 0; i < inner; ++i) std::memcpy(dp + i * dis * static_cast<int64_t>(ds), &dbuf[i * ds], ds);
      }
    }
  });
}

}  // namespace

// ---------------------------------------------------------------- creation

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) LTX_CHECK(d >= 0, "empty: negative size in shape ", shape.str());
  Tensor t;
  t.storage_ = allocate_for(shape, dtype, device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::empty_in_order(const Shape& shape, const std::vector<int64_t>& order, DType dtype,
                              Device device) {
  LTX_CHECK(static_cast<int>(order.size()) == shape.size(), "empty_in_order: order ",
            Dims(order).str(), " for shape ", shape.str(), " must list every dim once");
  bool seen[kMaxDims] = {};
  for (const int64_t d : order) {
    LTX_CHECK(d >= 0 && d < shape.size() && !seen[d], "empty_in_order: order ", Dims(order).str(),
              " is not a permutation of the dims of ", shape.str());
    seen[d] = true;
  }
  Tensor t = empty(shape, dtype, device);
  int64_t acc = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    const int d = static_cast<int>(order[static_cast<size_t>(i)]);
    t.strides_[d] = acc;
    acc *= std::max<int64_t>(shape[d], 1);
  }
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill(value);
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device,
                         std::shared_ptr<void> owner, const Strides* strides) {
  Tensor t;
  size_t span = 0;
  if (shape.numel() > 0) {
    int64_t last = 0;
    const Strides st = strides ? *strides : contiguous_strides(shape);
    for (int i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * st[i];
    span = static_cast<size_t>(last + 1) * dtype_size(dtype);
  }
  t.storage_ = std::make_shared<Storage>(data, span, device, std::move(owner));
  t.shape_ = shape;
  t.strides_ = strides ? *strides : contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  std::vector<double> v(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return from_vector(v, {static_cast<int64_t>(v.size())}).to(dtype);
}

// ---------------------------------------------------------------- properties

int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::vector<int64_t> Tensor::dim_order() const {
  std::vector<int64_t> order(static_cast<size_t>(dim()));
  for (int i = 0; i < dim(); ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return strides_[int(a)] > strides_[int(b)]; });
  return order;
}

bool Tensor::is_dense_in_order(const std::vector<int64_t>& order) const {
  if (static_cast<int>(order.size()) != dim()) return false;
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    const int d = static_cast<int>(order[static_cast<size_t>(i)]);
    if (d < 0 || d >= dim()) return false;
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

bool Tensor::is_dense() const { return is_dense_in_order(dim_order()); }

std::vector<int64_t> Tensor::channels_last_order(int ndim) {
  LTX_CHECK(ndim >= 3, "channels-last layout needs [N, C, *spatial] (>= 3 dims), got ", ndim,
            " dims");
  std::vector<int64_t> order{0};
  for (int i = 2; i < ndim; ++i) order.push_back(i);
  order.push_back(1);
  return order;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return str(dtype_name(dtype_), shape_.str(), " ", device().str());
}

void* Tensor::raw_data() const {
  LTX_CHECK(defined(), "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

double Tensor::item() const {
  LTX_CHECK(numel() == 1, "item(): tensor ", describe(), " has ", numel(), " elements, not 1");
  return to_double_vector()[0];
}

std::vector<float> Tensor::to_float_vector() const {
  Tensor c = to(Device::cpu(), DType::F32).contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}

std::vector<double> Tensor::to_double_vector() const {
  Tensor c = to(Device::cpu(), DType::F64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

std::vector<int64_t> Tensor::to_int_vector() const {
  Tensor c = to(Device::cpu(), DType::I64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// ---------------------------------------------------------------- views

Tensor Tensor::with_layout(const Shape& shape, const Strides& strides, int64_t offset) const {
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = strides;
  t.offset_ = offset;
  return t;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  const int dd = wrap_dim(d, dim(), "slice");
  LTX_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = shape_[dd];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape_;
  Strides st = strides_;
  s[dd] = (end - start + step - 1) / step;
  st[dd] = strides_[dd] * step;
  return with_layout(s, st, offset_ + start * strides_[dd]);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  const int dd = wrap_dim(d, dim(), "narrow");
  LTX_CHECK(start >= 0 && length >= 0 && start + length <= shape_[dd], "narrow: range [", start,
            ", ", start + length, ") is outside dim ", dd, " of size ", shape_[dd], " of ",
            describe());
  return slice(dd, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  const int dd = wrap_dim(d, dim(), "select");
  const int64_t n = shape_[dd];
  if (index < 0) index += n;
  LTX_CHECK(index >= 0 && index < n, "select: index ", index, " out of range for dim ", dd,
            " of size ", n);
  Shape s = shape_;
  Strides st = strides_;
  s.erase(dd);
  st.erase(dd);
  return with_layout(s, st, offset_ + index * strides_[dd]);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  LTX_CHECK(static_cast<int>(dims.size()) == dim(), "permute: ", dims.size(),
            " dims given for a ", dim(), "-d tensor");
  Shape s;
  Strides st;
  bool seen[kMaxDims] = {};
  for (int64_t d : dims) {
    const int dd = wrap_dim(d, dim(), "permute");
    LTX_CHECK(!seen[dd], "permute: dim ", dd, " repeated");
    seen[dd] = true;
    s.push_back(shape_[dd]);
    st.push_back(strides_[dd]);
  }
  return with_layout(s, st, offset_);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> p(dim());
  for (int i = 0; i < dim(); ++i) p[i] = i;
  std::swap(p[wrap_dim(d0, dim(), "transpose")], p[wrap_dim(d1, dim(), "transpose")]);
  return permute(p);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int dd = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape_;
  Strides st = strides_;
  const int64_t stride = dd < dim() ? strides_[dd] * shape_[dd] : 1;
  s.insert(dd, 1);
  st.insert(dd, stride);
  return with_layout(s, st, offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  const int dd = wrap_dim(d, dim(), "squeeze");
  if (shape_[dd] != 1) return *this;
  Shape s = shape_;
  Strides st = strides_;
  s.erase(dd);
  st.erase(dd);
  return with_layout(s, st, offset_);
}

Tensor Tensor::view(const Shape& shape) const {
  const Shape s = infer_shape(shape, numel(), "view");
  Strides st;
  LTX_CHECK(compute_view_strides(shape_, strides_, s, &st), "view: ", describe(),
            " with strides ", strides_.str(), " cannot be viewed as ", s.str(),
            " (use reshape, which copies)");
  return with_layout(s, st, offset_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape s = infer_shape(shape, numel(), "reshape");
  Strides st;
  if (compute_view_strides(shape_, strides_, s, &st)) return with_layout(s, st, offset_);
  return contiguous().view(s);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int a = wrap_dim(start_dim, dim(), "flatten"), b = wrap_dim(end_dim, dim(), "flatten");
  LTX_CHECK(a <= b, "flatten: start_dim ", a, " > end_dim ", b);
  Shape s;
  for (int i = 0; i < a; ++i) s.push_back(shape_[i]);
  int64_t m = 1;
  for (int i = a; i <= b; ++i) m *= shape_[i];
  s.push_back(m);
  for (int i = b + 1; i < dim(); ++i) s.push_back(shape_[i]);
  return reshape(s);
}

Tensor Tensor::expand(const Shape& shape) const {
  LTX_CHECK(shape.size() >= dim(), "expand: cannot expand ", describe(), " to fewer dims ",
            shape.str());
  Shape s;
  Strides st;
  const int lead = shape.size() - dim();
  for (int i = 0; i < shape.size(); ++i) {
    const int src = i - lead;
    int64_t want = shape[i];
    if (src < 0) {
      LTX_CHECK(want >= 0, "expand: -1 not allowed for a new leading dim in ", shape.str());
      s.push_back(want);
      st.push_back(0);
      continue;
    }
    if (want == -1) want = shape_[src];
    LTX_CHECK(shape_[src] == want || shape_[src] == 1, "expand: ", describe(),
              " cannot be expanded to ", shape.str(), " (dim ", i, ")");
    s.push_back(want);
    st.push_back(shape_[src] == want ? strides_[src] : 0);
  }
  return with_layout(s, st, offset_);
}

Tensor Tensor::view_as_dtype(DType dtype) const {
  LTX_CHECK(dtype_size(dtype) == element_size(), "view_as_dtype: ", dtype_name(dtype_), " and ",
            dtype_name(dtype), " have different element sizes");
  Tensor t = *this;
  t.dtype_ = dtype;
  return t;
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  const int dd = wrap_dim(d, dim(), "split");
  LTX_CHECK(split_size > 0, "split: split_size must be positive");
  std::vector<Tensor> out;
  for (int64_t s = 0; s < shape_[dd]; s += split_size)
    out.push_back(slice(dd, s, std::min(shape_[dd], s + split_size)));
  return out;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  const int dd = wrap_dim(d, dim(), "chunk");
  LTX_CHECK(chunks > 0, "chunk: chunks must be positive");
  return split(std::max<int64_t>(1, (shape_[dd] + chunks - 1) / chunks), dd);
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::contiguous_in_order(const std::vector<int64_t>& order) const {
  if (is_dense_in_order(order)) return *this;
  Tensor t = empty_in_order(shape_, order, dtype_, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor t = empty(shape_, dtype, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const { return to(device, dtype_); }

Tensor Tensor::to(Device dev, DType dtype) const {
  if (dev == device() && dtype == dtype_) return *this;
  Tensor t = empty(shape_, dtype, dev);
  t.copy_from(*this);
  return t;
}

int64_t device_to_host_copies() { return g_device_to_host_copies.load(std::memory_order_relaxed); }

void Tensor::copy_from(const Tensor& src) const {
  LTX_CHECK(defined() && src.defined(), "copy_from: undefined tensor");
  LTX_CHECK(shape_ == src.shape_, "copy_from: shape mismatch, destination ", describe(),
            ", source ", src.describe());
  if (device().is_cuda() || src.device().is_cuda()) {
    if (!device().is_cuda()) g_device_to_host_copies.fetch_add(1, std::memory_order_relaxed);
    detail::cuda_copy(*this, src);
    return;
  }
  cpu_copy(*this, src);
}

void Tensor::fill(double value) const {
  // Convert once on the host, then replicate the element bytes.
  alignas(8) unsigned char elem[8];
  convert_dense(&value, DType::F64, elem, dtype_, 1);
  if (device().is_cuda()) {
    detail::cuda_fill(*this, elem);  // on the device: no host buffer or transfer
    return;
  }
  const size_t es = element_size();
  Tensor one = from_blob(elem, {}, dtype_, Device::cpu(), nullptr);
  if (is_contiguous()) {
    char* p = static_cast<char*>(raw_data());
    parallel_for(0, numel(), 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) std::memcpy(p + i * es, elem, es);
    });
    return;
  }
  cpu_copy(*this, one.expand(shape_));
}

Tensor empty_like_layout(const Shape& shape, DType dtype, Device device,
                         std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined() || t->shape() != shape || !t->is_dense()) continue;
    if (t->is_contiguous()) break;
    return Tensor::empty_in_order(shape, t->dim_order(), dtype, device);
  }
  return Tensor::empty(shape, dtype, device);
}

}  // namespace ltx
