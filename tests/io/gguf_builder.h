#pragma once
// Writes GGUF bytes field by field, so that tests can make valid files and then break exactly one
// thing (a count, a type id, an offset, ...). Every number is little-endian as the format says.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ltx::test {

class GgufBuilder {
 public:
  uint32_t version = 3;
  uint32_t alignment = 32;  // used to place tensor data; add general.alignment to change it
  std::optional<uint64_t> tensor_count;    // overrides the real count
  std::optional<uint64_t> metadata_count;  // overrides the real count

  template <typename T>
  static std::string le(T v) {
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &v, sizeof(T));
    return s;
  }
  static std::string gstr(const std::string& s) { return le<uint64_t>(s.size()) + s; }

  // A key with a value already encoded (type id + payload).
  GgufBuilder& kv_raw(const std::string& key, const std::string& type_and_value) {
    kv_ += gstr(key) + type_and_value;
    ++n_kv_;
    return *this;
  }
  GgufBuilder& kv_u32(const std::string& key, uint32_t v) {
    return kv_raw(key, le<uint32_t>(4) + le<uint32_t>(v));
  }
  GgufBuilder& kv_string(const std::string& key, const std::string& v) {
    return kv_raw(key, le<uint32_t>(8) + gstr(v));
  }
  GgufBuilder& kv_i32_array(const std::string& key, const std::vector<int32_t>& v) {
    std::string s = le<uint32_t>(9) + le<uint32_t>(5) + le<uint64_t>(v.size());
    for (int32_t x : v) s += le<int32_t>(x);
    return kv_raw(key, s);
  }

  // A tensor info with explicit fields; `data` is appended to the data section at `offset`
  // (padding with zeros up to it), unless empty.
  GgufBuilder& tensor_raw(const std::string& name, const std::vector<uint64_t>& ne,
                          int32_t type, uint64_t offset, const std::string& data) {
    ti_ += gstr(name) + le<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) ti_ += le<uint64_t>(d);
    ti_ += le<int32_t>(type) + le<uint64_t>(offset);
    ++n_tensors_;
    if (!data.empty()) {
      if (data_.size() < offset) data_.resize(offset, '\0');
      if (data_.size() < offset + data.size()) data_.resize(offset + data.size(), '\0');
      data_.replace(offset, data.size(), data);
    }
    return *this;
  }
  // A tensor placed after the previous one at the next aligned offset.
  GgufBuilder& tensor(const std::string& name, const std::vector<uint64_t>& ne, int32_t type,
                      const std::string& data) {
    const uint64_t offset = (data_.size() + alignment - 1) / alignment * alignment;
    return tensor_raw(name, ne, type, offset, data);
  }

  // The whole file: header, metadata, tensor infos, padding to the alignment, data.
  std::string bytes() const {
    std::string s = "GGUF" + le<uint32_t>(version) + le<uint64_t>(tensor_count.value_or(n_tensors_)) +
                    le<uint64_t>(metadata_count.value_or(n_kv_)) + kv_ + ti_;
    s.resize((s.size() + alignment - 1) / alignment * alignment, '\0');
    return s + data_;
  }
  // Offset of the metadata section (just after the fixed header) and of the tensor infos.
  static constexpr size_t kHeaderBytes = 24;
  size_t tensor_infos_offset() const { return kHeaderBytes + kv_.size(); }

 private:
  std::string kv_, ti_, data_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
};

}  // namespace ltx::test
