#include "quantization/ggml_dequant.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "op_types/ggml_blocks.h"

namespace ltx::quantization {

namespace {

constexpr GgmlType kDequantizable[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
    GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
};

// Values per parallel task: big enough that a task outweighs its scheduling.
constexpr int64_t kDequantValuesPerTask = int64_t{1} << 16;

}  // namespace

bool ggml_can_dequantize(GgmlType type) {
  return std::find(std::begin(kDequantizable), std::end(kDequantizable), type) !=
         std::end(kDequantizable);
}

std::string ggml_dequantizable_types() {
  std::string s;
  for (GgmlType t : kDequantizable) {
    if (!s.empty()) s += ", ";
    s += ggml_type_name(t);
  }
  return s;
}

void check_ggml_dequantizable(GgmlType type, const std::string& what) {
  if (ggml_can_dequantize(type)) return;
  fail(what, " is stored as GGML type ", ggml_type_name(type),
       ", which ltx cannot dequantise (supported: ", ggml_dequantizable_types(),
       "); use a file quantized to one of those types");
}

int64_t ggml_row_bytes(GgmlType type, int64_t cols) {
  LTX_CHECK(cols >= 0, "ggml_row_bytes: negative row length ", cols);
  const std::optional<uint64_t> n = ggml_nbytes(type, static_cast<uint64_t>(cols));
  LTX_CHECK(n.has_value() && *n <= static_cast<uint64_t>(INT64_MAX), "ggml: a row of ", cols,
            " values is not a whole number of ", ggml_type_name(type), " blocks (",
            ggml_traits(type).block_elems, " values each)");
  return static_cast<int64_t>(*n);
}

void dequantize_rows(GgmlType type, const void* blocks, int64_t rows, int64_t cols, float* out) {
  check_ggml_dequantizable(type, "dequantize_rows: the data");
  LTX_CHECK(rows >= 0, "dequantize_rows: negative row count ", rows);
  ggml_row_bytes(type, cols);  // checks that rows are whole blocks
  if (rows == 0 || cols == 0) return;
  const GgmlTypeTraits& t = ggml_traits(type);
  const auto* src = static_cast<const uint8_t*>(blocks);
  // Blocks never straddle rows, so the work splits into runs of whole blocks of the flat data.
  const int64_t blocks_per_row = cols / t.block_elems;
  const int64_t total_blocks = rows * blocks_per_row;
  const int64_t grain = std::max<int64_t>(1, kDequantValuesPerTask / t.block_elems);
  parallel_for(0, total_blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const bool ok = ops::ggml::dequantize_block(type, src + b * t.block_bytes,
                                                  out + b * t.block_elems);
      LTX_CHECK(ok, "dequantize_rows: no dequantiser for ", t.name);
    }
  });
}

Tensor dequantize(const io::GgmlTensor& tensor, DType dtype) {
  LTX_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16,
            "dequantize: the output dtype must be f32, bf16 or f16, not ", dtype_name(dtype));
  check_ggml_dequantizable(tensor.type, "tensor '" + tensor.name + "'");
  const Tensor bytes = tensor.bytes.contiguous();
  const int64_t numel = tensor.shape.numel();
  LTX_CHECK(tensor.row_elems > 0 || numel == 0, "dequantize: tensor '", tensor.name,
            "' has no row length");
  const int64_t cols = numel == 0 ? 0 : tensor.row_elems;
  const int64_t rows = numel == 0 ? 0 : numel / cols;
  LTX_CHECK(rows * cols == numel && bytes.nbytes() == static_cast<size_t>(rows) *
                                                          static_cast<size_t>(ggml_row_bytes(tensor.type, cols)),
            "dequantize: tensor '", tensor.name, "' holds ", bytes.nbytes(), " bytes, not ", rows,
            " rows of ", cols, " ", ggml_type_name(tensor.type), " values");
  Tensor out = Tensor::empty(tensor.shape, DType::F32);
  dequantize_rows(tensor.type, bytes.raw_data(), rows, cols, out.data<float>());
  return dtype == DType::F32 ? out : out.to(dtype);
}

Tensor take_dense(io::WeightMap& w, const std::string& name, const Shape& expected, DType dtype,
                  Device device) {
  if (!w.contains(name) || !w.is_quantized(name)) return w.take(name, expected, dtype, device);
  const io::GgmlTensor g = w.take_ggml(name, expected);
  if (!g.bytes.defined()) return Tensor();  // recorded for finish()
  check_ggml_dequantizable(g.type, "tensor '" + w.prefix() + name + "'");
  return dequantize(g, DType::F32).to(device, dtype);
}

std::optional<Tensor> take_dense_optional(io::WeightMap& w, const std::string& name,
                                          const Shape& expected, DType dtype, Device device) {
  if (!w.contains(name)) return std::nullopt;
  Tensor t = take_dense(w, name, expected, dtype, device);
  if (!t.defined()) return std::nullopt;
  return t;
}

}  // namespace ltx::quantization
