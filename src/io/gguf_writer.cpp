#include "io/gguf_writer.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "core/error.h"
#include "io/atomic_file.h"

namespace ltx::io {

namespace {

constexpr uint32_t kVersion = 3;
constexpr const char* kAlignmentKey = "general.alignment";

uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Little-endian encoding into a growing byte string.
struct Encoder {
  std::string bytes;
  template <typename T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // every host ltx runs on is little-endian, as the format
    bytes.append(b, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes += s;
  }
};

template <typename T>
T checked_int(const nlohmann::json& v, const std::string& what) {
  bool ok = v.is_number_integer();
  if (ok && v.is_number_unsigned()) {
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (ok) {
    const auto x = v.get<int64_t>();
    ok = x >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
         (x < 0 || static_cast<uint64_t>(x) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
  }
  LTX_CHECK(ok, what, " must be an integer in [", +std::numeric_limits<T>::min(), ", ",
            +std::numeric_limits<T>::max(), "], got ", v.dump());
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
}

void put_scalar(Encoder& e, GgufValueType t, const nlohmann::json& v, const std::string& what) {
  switch (t) {
    case GgufValueType::U8: e.put(checked_int<uint8_t>(v, what)); return;
    case GgufValueType::I8: e.put(checked_int<int8_t>(v, what)); return;
    case GgufValueType::U16: e.put(checked_int<uint16_t>(v, what)); return;
    case GgufValueType::I16: e.put(checked_int<int16_t>(v, what)); return;
    case GgufValueType::U32: e.put(checked_int<uint32_t>(v, what)); return;
    case GgufValueType::I32: e.put(checked_int<int32_t>(v, what)); return;
    case GgufValueType::U64: e.put(checked_int<uint64_t>(v, what)); return;
    case GgufValueType::I64: e.put(checked_int<int64_t>(v, what)); return;
    case GgufValueType::F32:
      LTX_CHECK(v.is_number(), what, " must be a number, got ", v.dump());
      e.put(static_cast<float>(v.get<double>()));
      return;
    case GgufValueType::F64:
      LTX_CHECK(v.is_number(), what, " must be a number, got ", v.dump());
      e.put(v.get<double>());
      return;
    case GgufValueType::Bool:
      LTX_CHECK(v.is_boolean(), what, " must be a bool, got ", v.dump());
      e.put<uint8_t>(v.get<bool>() ? 1 : 0);
      return;
    case GgufValueType::String: {
      LTX_CHECK(v.is_string(), what, " must be a string, got ", v.dump());
      const auto& s = v.get_ref<const std::string&>();
      LTX_CHECK(s.size() <= kMaxGgufStringBytes, what, " is ", s.size(),
                " bytes long, over the readers' limit of ", kMaxGgufStringBytes);
      e.put_string(s);
      return;
    }
    case GgufValueType::Array: break;
  }
  fail(what, ": arrays of arrays cannot be written (GGUF readers reject them)");
}

// The encoded metadata (with general.alignment added when needed) and tensor infos: everything
// before the padding that precedes the data section.
std::string encode_header(const std::string& path, const std::vector<GgufMetadata>& metadata,
                          const std::vector<GgufTensorSpec>& tensors, uint32_t alignment) {
  const std::string where = "write_gguf '" + path + "'";
  LTX_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, where, ": alignment ", alignment,
            " is not a power of two");
  std::vector<GgufMetadata> kvs = metadata;
  std::set<std::string> keys;
  bool has_alignment = false;
  for (const GgufMetadata& kv : kvs) {
    const std::string what = where + ": metadata '" + kv.key + "'";
    LTX_CHECK(!kv.key.empty(), where, ": a metadata key is empty");
    LTX_CHECK(kv.key.size() <= kMaxGgufNameBytes && is_valid_utf8(kv.key), what,
              ": keys must be UTF-8 of at most ", kMaxGgufNameBytes, " bytes");
    LTX_CHECK(keys.insert(kv.key).second, what, " is given twice");
    if (kv.key == kAlignmentKey) {
      LTX_CHECK(kv.type == GgufValueType::U32 && kv.value.is_number_unsigned() &&
                    kv.value.get<uint64_t>() == alignment,
                what, " must be the u32 ", alignment, " (the alignment the file is written with)");
      has_alignment = true;
    }
  }
  if (!has_alignment && alignment != kDefaultGgufAlignment)
    kvs.push_back(gguf_u32(kAlignmentKey, alignment));

  Encoder e;
  e.bytes = "GGUF";
  e.put<uint32_t>(kVersion);
  e.put<uint64_t>(tensors.size());
  e.put<uint64_t>(kvs.size());
  for (const GgufMetadata& kv : kvs) {
    const std::string what = where + ": metadata '" + kv.key + "'";
    e.put_string(kv.key);
    e.put<uint32_t>(static_cast<uint32_t>(kv.type));
    if (kv.type == GgufValueType::Array) {
      LTX_CHECK(kv.value.is_array(), what, " is declared an array but holds ", kv.value.dump());
      LTX_CHECK(kv.element_type != GgufValueType::Array, what,
                " is an array of arrays, which GGUF readers reject");
      LTX_CHECK(kv.value.size() <= kMaxGgufArrayElements, what, " has ", kv.value.size(),
                " elements, over the readers' limit of ", kMaxGgufArrayElements);
      e.put<uint32_t>(static_cast<uint32_t>(kv.element_type));
      e.put<uint64_t>(kv.value.size());
      for (size_t k = 0; k < kv.value.size(); ++k)
        put_scalar(e, kv.element_type, kv.value[k], str(what, " element ", k));
    } else {
      put_scalar(e, kv.type, kv.value, what);
    }
  }

  std::set<std::string> names;
  uint64_t offset = 0;
  for (const GgufTensorSpec& t : tensors) {
    const std::string what = where + ": tensor '" + t.name + "'";
    LTX_CHECK(!t.name.empty(), where, ": a tensor name is empty");
    LTX_CHECK(t.name.size() <= kMaxGgufNameBytes && is_valid_utf8(t.name), what,
              ": names must be UTF-8 of at most ", kMaxGgufNameBytes, " bytes");
    LTX_CHECK(names.insert(t.name).second, what, " is given twice");
    LTX_CHECK(t.shape.size() <= kMaxGgufDims, what, " has ", t.shape.size(),
              " dimensions; GGUF allows at most ", kMaxGgufDims);
    for (int d = 0; d < t.shape.size(); ++d)
      LTX_CHECK(t.shape[d] >= 1, what, " has shape ", t.shape.str(),
                "; GGUF sizes must be at least 1");
    const uint64_t nbytes = gguf_tensor_bytes(t);
    e.put_string(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int d = t.shape.size() - 1; d >= 0; --d) e.put<uint64_t>(static_cast<uint64_t>(t.shape[d]));
    e.put<int32_t>(static_cast<int32_t>(t.type));
    e.put<uint64_t>(offset);
    offset += pad_to(nbytes, alignment);
  }
  return std::move(e.bytes);
}

}  // namespace

GgufMetadata gguf_string(std::string key, std::string value) {
  GgufMetadata m;
  m.key = std::move(key);
  m.type = GgufValueType::String;
  m.value = std::move(value);
  return m;
}

GgufMetadata gguf_u32(std::string key, uint32_t value) {
  GgufMetadata m;
  m.key = std::move(key);
  m.type = GgufValueType::U32;
  m.value = value;
  return m;
}

GgufMetadata gguf_i32_array(std::string key, const std::vector<int32_t>& values) {
  GgufMetadata m;
  m.key = std::move(key);
  m.type = GgufValueType::Array;
  m.element_type = GgufValueType::I32;
  m.value = values;
  return m;
}

uint64_t gguf_tensor_bytes(const GgufTensorSpec& spec) {
  const GgmlTypeTraits& tr = ggml_traits(spec.type);
  const int64_t row = spec.shape.size() == 0 ? 1 : spec.shape[spec.shape.size() - 1];
  LTX_CHECK(row % tr.block_elems == 0, "GGUF tensor '", spec.name, "' of type ", tr.name,
            " has rows of ", row, " values, not a multiple of its block of ", tr.block_elems);
  const std::optional<uint64_t> n = ggml_nbytes(spec.type, static_cast<uint64_t>(spec.shape.numel()));
  LTX_CHECK(n.has_value(), "GGUF tensor '", spec.name, "': its byte size overflows 64 bits");
  return *n;
}

uint64_t gguf_file_size(const std::vector<GgufMetadata>& metadata,
                        const std::vector<GgufTensorSpec>& tensors, uint32_t alignment) {
  uint64_t size = pad_to(encode_header("(size)", metadata, tensors, alignment).size(), alignment);
  for (const GgufTensorSpec& t : tensors) size += pad_to(gguf_tensor_bytes(t), alignment);
  return size;
}

void write_gguf(const std::string& path, const std::vector<GgufMetadata>& metadata,
                const std::vector<GgufTensorSpec>& tensors,
                const std::function<void(size_t, std::span<uint8_t>)>& fill, uint32_t alignment) {
  const std::string header = encode_header(path, metadata, tensors, alignment);
  AtomicFile out(path, "write_gguf");
  out.write(header.data(), header.size());
  out.write_zeros(pad_to(header.size(), alignment) - header.size());
  std::vector<uint8_t> buffer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t nbytes = gguf_tensor_bytes(tensors[i]);
    buffer.assign(nbytes, 0);
    fill(i, std::span<uint8_t>(buffer.data(), buffer.size()));
    out.write(buffer.data(), buffer.size());
    out.write_zeros(pad_to(nbytes, alignment) - nbytes);
  }
  out.commit();
}

void write_gguf_header_only(const std::string& path, const std::vector<GgufMetadata>& metadata,
                            const std::vector<GgufTensorSpec>& tensors, uint32_t alignment) {
  const std::string header = encode_header(path, metadata, tensors, alignment);
  const uint64_t size = gguf_file_size(metadata, tensors, alignment);
  AtomicFile out(path, "write_gguf_header_only");
  out.write(header.data(), header.size());
  // Extended before the rename, so that a failure leaves nothing at `path`.
  std::error_code ec;
  std::filesystem::resize_file(out.temp_path(), size, ec);
  LTX_CHECK(!ec, "write_gguf_header_only '", path, "': cannot extend the file to ", size,
            " bytes: ", ec.message());
  out.commit();
}

}  // namespace ltx::io
