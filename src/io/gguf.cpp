#include "io/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace ltx::io {

namespace {

std::atomic<int64_t> g_gguf_open_count{0};

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
// The smallest encodings, to bound counts by what the rest of the file can hold.
constexpr uint64_t kMinMetadataBytes = 8 + 4 + 1;      // empty key, type, a 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims 0, type, offset
constexpr const char* kOrigShapePrefix = "comfy.gguf.orig_shape.";

template <typename... Args>
[[noreturn]] void bad_gguf_file(const std::string& path, Args&&... args) {
  fail("invalid GGUF file '", path, "': ", std::forward<Args>(args)...);
}

// A printable excerpt of a name for messages.
std::string shown(const std::string& s) {
  std::string out;
  for (char ch : s.substr(0, 120)) {
    const auto c = static_cast<unsigned char>(ch);
    out += (c >= 0x20 && c < 0x7F) ? ch : '?';
  }
  if (s.size() > 120) out += "...";
  return out;
}

// Bounds-checked little-endian reads over the mapped bytes; every failure names what was being
// read, so a truncated file says where it ends.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, uint64_t size)
      : path_(path), data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    if (n > remaining())
      bad_gguf_file(path_, "the file is truncated: it ends inside ", what, " (", n,
               " bytes needed at offset ", pos_, ", the file has ", size_, " bytes)");
  }
  const uint8_t* take(uint64_t n, const std::string& what) {
    need(n, what);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T read(const std::string& what) {
    const uint8_t* p = take(sizeof(T), what);
    T v;
    std::memcpy(&v, p, sizeof(T));  // the format and every host ltx runs on are little-endian
    return v;
  }
  std::string read_string(const std::string& what, uint64_t max_bytes) {
    const auto n = read<uint64_t>(what + " (its length)");
    if (n > max_bytes)
      bad_gguf_file(path_, what, " is ", n, " bytes long, over the ", max_bytes,
               "-byte limit (corrupt length field)");
    if (n > remaining())
      bad_gguf_file(path_, "the file is truncated: ", what, " is ", n, " bytes long but only ",
               remaining(), " bytes follow at offset ", pos_);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::Bool: return 1;
    case GgufValueType::U16:
    case GgufValueType::I16: return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32: return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64: return 8;
    case GgufValueType::String: return 8;  // at least its length field
    case GgufValueType::Array: return 0;
  }
  return 0;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::F64); }

nlohmann::json read_scalar(Cursor& c, GgufValueType t, const std::string& path,
                           const std::string& what) {
  switch (t) {
    case GgufValueType::U8: return c.read<uint8_t>(what);
    case GgufValueType::I8: return c.read<int8_t>(what);
    case GgufValueType::U16: return c.read<uint16_t>(what);
    case GgufValueType::I16: return c.read<int16_t>(what);
    case GgufValueType::U32: return c.read<uint32_t>(what);
    case GgufValueType::I32: return c.read<int32_t>(what);
    case GgufValueType::U64: return c.read<uint64_t>(what);
    case GgufValueType::I64: return c.read<int64_t>(what);
    case GgufValueType::F32: return static_cast<double>(c.read<float>(what));
    case GgufValueType::F64: return c.read<double>(what);
    case GgufValueType::Bool: {
      const auto b = c.read<uint8_t>(what);
      if (b > 1)
        bad_gguf_file(path, what, " is a bool stored as ", static_cast<int>(b),
                 " (the format allows only 0 and 1)");
      return b == 1;
    }
    case GgufValueType::String: {
      // GGUF strings are UTF-8 (the spec; gguf-py decodes them so); anything else would also
      // break every JSON report of the metadata.
      std::string v = c.read_string(what, kMaxGgufStringBytes);
      if (!is_valid_utf8(v)) bad_gguf_file(path, what, " is a string that is not valid UTF-8");
      return v;
    }
    case GgufValueType::Array: break;
  }
  bad_gguf_file(path, what, ": internal error, no scalar type");
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

bool is_valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(extra) >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF.
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

const char* gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8: return "u8";
    case GgufValueType::I8: return "i8";
    case GgufValueType::U16: return "u16";
    case GgufValueType::I16: return "i16";
    case GgufValueType::U32: return "u32";
    case GgufValueType::I32: return "i32";
    case GgufValueType::F32: return "f32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::U64: return "u64";
    case GgufValueType::I64: return "i64";
    case GgufValueType::F64: return "f64";
  }
  return "?";
}

int64_t gguf_open_count() { return g_gguf_open_count.load(std::memory_order_relaxed); }

bool is_gguf_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  if (!f.read(magic, 4)) return false;
  return std::memcmp(magic, kMagic, 4) == 0;
}

std::string ltx_key_prefix_to_add(const GgufFile& file) {
  bool bare_dit = false;
  for (const std::string& n : file.names()) {
    if (n.starts_with("model.")) return "";
    bare_dit = bare_dit || n.starts_with("transformer_blocks.") || n.starts_with("adaln_single.") ||
               n.starts_with("audio_adaln_single.") || n.starts_with("patchify_proj.") ||
               n.starts_with("scale_shift_table");
  }
  const GgufMetadata* arch = file.find("general.architecture");
  const bool ltxv = arch != nullptr && arch->type == GgufValueType::String &&
                    arch->value.get<std::string>() == "ltxv";
  return bare_dit || ltxv ? "model.diffusion_model." : "";
}

struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  std::vector<uint8_t> owned;  // from_bytes: the bytes themselves instead of a file mapping
  Mapping(void* a, size_t s) : addr(a), size(s) {}
  explicit Mapping(std::vector<uint8_t> bytes) : size(bytes.size()), owned(std::move(bytes)) {
    addr = owned.data();
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (addr != nullptr && owned.empty()) munmap(addr, size);
  }
};

std::shared_ptr<const GgufFile> GgufFile::from_bytes(std::string name, std::vector<uint8_t> bytes) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  g_gguf_open_count.fetch_add(1, std::memory_order_relaxed);
  f->path_ = std::move(name);
  f->file_size_ = bytes.size();
  if (f->file_size_ == 0) bad_gguf_file(f->path_, "the file is empty");
  f->map_ = std::make_shared<Mapping>(std::move(bytes));
  f->parse(static_cast<const uint8_t*>(f->map_->addr));
  return f;
}

GgufFile::GgufFile(const std::string& path) : path_(path) {
  g_gguf_open_count.fetch_add(1, std::memory_order_relaxed);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open GGUF file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat GGUF file '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("cannot read GGUF file '", path, "': not a regular file");
  }
  file_size_ = static_cast<uint64_t>(st.st_size);
  if (file_size_ == 0) {
    ::close(fd);
    bad_gguf_file(path, "the file is empty");
  }
  void* addr = mmap(nullptr, file_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) fail("cannot map GGUF file '", path, "': ", std::strerror(map_err));
  map_ = std::make_shared<Mapping>(addr, file_size_);
  parse(static_cast<const uint8_t*>(addr));
}

void GgufFile::parse(const uint8_t* bytes) {
  Cursor c(path_, bytes, file_size_);
  const uint8_t* magic = c.take(4, "the magic");
  if (std::memcmp(magic, kMagic, 4) != 0) {
    std::string m;
    for (int i = 0; i < 4; ++i) {
      const auto ch = magic[i];
      m += (ch >= 0x20 && ch < 0x7F) ? static_cast<char>(ch) : '?';
    }
    bad_gguf_file(path_, "bad magic '", m, "' (a GGUF file starts with 'GGUF'): not a GGUF file");
  }
  version_ = c.read<uint32_t>("the version");
  if (version_ == 1)
    bad_gguf_file(path_, "GGUF version 1 is obsolete and not supported (ltx reads versions 2 and 3); "
                    "convert the file with a current llama.cpp");
  if (version_ == 0x02000000u || version_ == 0x03000000u)
    bad_gguf_file(path_, "the file is big-endian GGUF (version field ", version_,
             "); ltx reads little-endian files only");
  if (version_ != 2 && version_ != 3)
    bad_gguf_file(path_, "unsupported GGUF version ", version_, " (ltx reads versions 2 and 3)");

  const auto n_tensors = c.read<uint64_t>("the tensor count");
  const auto n_kv = c.read<uint64_t>("the metadata count");
  if (n_tensors > kMaxGgufTensors)
    bad_gguf_file(path_, "tensor count ", n_tensors, " exceeds the limit of ", kMaxGgufTensors,
             " (corrupt header)");
  if (n_kv > kMaxGgufMetadata)
    bad_gguf_file(path_, "metadata count ", n_kv, " exceeds the limit of ", kMaxGgufMetadata,
             " (corrupt header)");
  if (n_kv * kMinMetadataBytes + n_tensors * kMinTensorInfoBytes > c.remaining())
    bad_gguf_file(path_, "the header announces ", n_kv, " metadata entries and ", n_tensors,
             " tensors, more than the remaining ", c.remaining(),
             " bytes can hold (corrupt counts or truncated file)");

  // ---- metadata
  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufMetadata kv;
    kv.key = c.read_string(str("metadata key ", i), kMaxGgufNameBytes);
    const std::string what = "metadata '" + shown(kv.key) + "'";
    if (kv.key.empty()) bad_gguf_file(path_, "metadata key ", i, " is empty");
    if (!is_valid_utf8(kv.key)) bad_gguf_file(path_, what, ": the key is not valid UTF-8");
    if (metadata_index_.count(kv.key) != 0) bad_gguf_file(path_, what, " appears twice");
    const auto type = c.read<uint32_t>(what + " (its type)");
    if (!known_value_type(type))
      bad_gguf_file(path_, what, " has unknown value type ", type, " (GGUF types are 0..12)");
    kv.type = static_cast<GgufValueType>(type);
    if (kv.type == GgufValueType::Array) {
      const auto et = c.read<uint32_t>(what + " (its element type)");
      if (!known_value_type(et))
        bad_gguf_file(path_, what, " is an array of unknown value type ", et,
                 " (GGUF types are 0..12)");
      kv.element_type = static_cast<GgufValueType>(et);
      if (kv.element_type == GgufValueType::Array)
        bad_gguf_file(path_, what, " is an array of arrays, which GGUF readers (ggml, ltx) reject");
      const auto n = c.read<uint64_t>(what + " (its element count)");
      if (n > kMaxGgufArrayElements)
        bad_gguf_file(path_, what, " announces ", n, " elements, over the limit of ",
                 kMaxGgufArrayElements, " (corrupt count)");
      const uint64_t min_bytes = scalar_size(kv.element_type);
      if (n > c.remaining() / min_bytes)
        bad_gguf_file(path_, what, " announces ", n, " ", gguf_value_type_name(kv.element_type),
                 " elements, more than the remaining ", c.remaining(),
                 " bytes can hold (corrupt count or truncated file)");
      kv.value = nlohmann::json::array();
      kv.value.get_ref<nlohmann::json::array_t&>().reserve(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k)
        kv.value.push_back(read_scalar(c, kv.element_type, path_, str(what, " element ", k)));
    } else {
      kv.value = read_scalar(c, kv.type, path_, what);
    }
    metadata_index_.emplace(kv.key, metadata_.size());
    metadata_.push_back(std::move(kv));
  }

  if (const GgufMetadata* a = find("general.alignment")) {
    if (a->type != GgufValueType::U32)
      bad_gguf_file(path_, "metadata 'general.alignment' must be a u32, found a ",
               gguf_value_type_name(a->type));
    const auto v = a->value.get<uint32_t>();
    if (v == 0 || (v & (v - 1)) != 0)
      bad_gguf_file(path_, "metadata 'general.alignment' is ", v, ", not a power of two");
    alignment_ = v;
  }

  // ---- tensor infos
  infos_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo ti;
    ti.name = c.read_string(str("the name of tensor ", i), kMaxGgufNameBytes);
    if (ti.name.empty()) bad_gguf_file(path_, "tensor ", i, " has an empty name");
    const std::string what = "tensor '" + shown(ti.name) + "'";
    if (!is_valid_utf8(ti.name)) bad_gguf_file(path_, what, ": the name is not valid UTF-8");
    if (index_.count(ti.name) != 0) bad_gguf_file(path_, what, " appears twice");
    const auto n_dims = c.read<uint32_t>(what + " (its dimension count)");
    if (n_dims > static_cast<uint32_t>(kMaxGgufDims))
      bad_gguf_file(path_, what, " has ", n_dims, " dimensions; GGUF allows at most ", kMaxGgufDims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = c.read<uint64_t>(str(what, " (dimension ", d, ")"));
      if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX))
        bad_gguf_file(path_, what, ": dimension ", d, " has size ", static_cast<int64_t>(ne),
                 " (sizes must be at least 1)");
      if (__builtin_mul_overflow(numel, ne, &numel) || numel > static_cast<uint64_t>(INT64_MAX))
        bad_gguf_file(path_, what, ": its element count overflows 64 bits");
      ti.ne.push_back(static_cast<int64_t>(ne));
    }
    const auto type_id = c.read<int32_t>(what + " (its type)");
    const GgmlTypeTraits* traits = ggml_type_traits(type_id);
    if (traits == nullptr)
      bad_gguf_file(path_, what, " has unknown GGML type id ", type_id,
               " (a newer or corrupt file; ltx knows ids 0-3, 6-30, 34, 35, 39)");
    ti.type = traits->type;
    if (ti.row_elems() % traits->block_elems != 0)
      bad_gguf_file(path_, what, " of type ", traits->name, " has rows of ", ti.row_elems(),
               " values, not a multiple of its block of ", traits->block_elems);
    const std::optional<uint64_t> nbytes = ggml_nbytes(ti.type, numel);
    if (!nbytes) bad_gguf_file(path_, what, ": its byte size overflows 64 bits");
    ti.nbytes = *nbytes;
    ti.offset = c.read<uint64_t>(what + " (its data offset)");
    if (ti.offset % alignment_ != 0)
      bad_gguf_file(path_, what, " has data offset ", ti.offset, ", not a multiple of the alignment ",
               alignment_);
    for (auto it = ti.ne.rbegin(); it != ti.ne.rend(); ++it) ti.shape.push_back(*it);
    index_.emplace(ti.name, infos_.size());
    infos_.push_back(std::move(ti));
  }

  // ---- data section
  data_offset_ = align_up(c.pos(), alignment_);
  const uint64_t data_size = file_size_ > data_offset_ ? file_size_ - data_offset_ : 0;
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(infos_.size());
  for (const GgufTensorInfo& ti : infos_) {
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset)
      bad_gguf_file(path_, "tensor '", shown(ti.name), "' occupies bytes [", ti.offset, ", ",
               ti.offset + ti.nbytes, ") of the data section, which holds ", data_size,
               " bytes (from offset ", data_offset_,
               "): the file is truncated or the tensor info is wrong");
    by_offset.push_back(&ti);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->name < b->name;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& p = *by_offset[i - 1];
    const GgufTensorInfo& q = *by_offset[i];
    if (q.offset < p.offset + p.nbytes)
      bad_gguf_file(path_, "tensors '", shown(p.name), "' [", p.offset, ", ", p.offset + p.nbytes,
               ") and '", shown(q.name), "' [", q.offset, ", ", q.offset + q.nbytes,
               ") overlap in the data section");
  }

  // ---- logical shapes recorded by ComfyUI-GGUF
  for (const GgufMetadata& kv : metadata_) {
    if (!kv.key.starts_with(kOrigShapePrefix)) continue;
    const std::string name = kv.key.substr(std::strlen(kOrigShapePrefix));
    auto it = index_.find(name);
    if (it == index_.end()) continue;  // a record for a tensor this file does not hold
    GgufTensorInfo& ti = infos_[it->second];
    if (kv.type != GgufValueType::Array || kv.element_type != GgufValueType::I32)
      bad_gguf_file(path_, "metadata '", shown(kv.key), "' must be an array of i32, found a ",
               gguf_value_type_name(kv.type));
    if (kv.value.empty() || kv.value.size() > static_cast<size_t>(kMaxDims))
      bad_gguf_file(path_, "metadata '", shown(kv.key), "' lists ", kv.value.size(),
               " dimensions (1 to ", kMaxDims, " expected)");
    Shape shape;
    int64_t values = 1;
    bool overflow = false;  // i32 dimensions can multiply past int64
    for (const auto& d : kv.value) {
      const auto v = d.get<int64_t>();
      if (v < 1) bad_gguf_file(path_, "metadata '", shown(kv.key), "' has a dimension of size ", v);
      shape.push_back(v);
      overflow = overflow || __builtin_mul_overflow(values, v, &values);
    }
    if (overflow || values != ti.numel())
      bad_gguf_file(path_, "metadata '", shown(kv.key), "' gives shape ", shape.str(), " (",
               overflow ? std::string("more than 2^63") : std::to_string(values),
               " values) for tensor '", shown(name), "' of ", ti.numel(), " values");
    ti.shape = shape;
  }

  names_.reserve(infos_.size());
  for (const GgufTensorInfo& ti : infos_) names_.push_back(ti.name);
}

const GgufMetadata* GgufFile::find(const std::string& key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second];
}

std::optional<std::string> GgufFile::string_value(const std::string& key) const {
  const GgufMetadata* kv = find(key);
  if (kv == nullptr) return std::nullopt;
  LTX_CHECK(kv->type == GgufValueType::String, "GGUF file '", path_, "': metadata '", key,
            "' is a ", gguf_value_type_name(kv->type), ", not a string");
  return kv->value.get<std::string>();
}

std::map<std::string, std::string> GgufFile::string_metadata() const {
  std::map<std::string, std::string> out;
  for (const GgufMetadata& kv : metadata_)
    if (kv.type == GgufValueType::String) out[kv.key] = kv.value.get<std::string>();
  return out;
}

nlohmann::json GgufFile::decoded_string_metadata() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : string_metadata()) {
    nlohmann::json j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
    out[k] = j.is_discarded() ? nlohmann::json(v) : j;
  }
  return out;
}

nlohmann::json GgufFile::metadata_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const GgufMetadata& kv : metadata_) out[kv.key] = kv.value;
  return out;
}

const GgufTensorInfo& GgufFile::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    fail("GGUF file '", path_, "' has no tensor '", name, "' (", infos_.size(),
         " tensors in the file)");
  return infos_[it->second];
}

const uint8_t* GgufFile::tensor_bytes(const std::string& name) const {
  const GgufTensorInfo& ti = info(name);
  return static_cast<const uint8_t*>(map_->addr) + data_offset_ + ti.offset;
}

Tensor GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo& ti = info(name);
  const std::optional<DType> dtype = ggml_dense_dtype(ti.type);
  if (!dtype)
    fail("GGUF file '", path_, "': tensor '", name, "' is stored as ", ggml_type_name(ti.type),
         ggml_is_quantized(ti.type) ? " blocks, which load as a quantized weight (or dequantised), "
                                      "not as a dense tensor"
                                    : ", which has no ltx element type");
  auto* p = const_cast<uint8_t*>(tensor_bytes(name));
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(*dtype) != 0) {
    Tensor t = Tensor::empty(ti.shape, *dtype);
    std::memcpy(t.raw_data(), p, ti.nbytes);
    return t;
  }
  std::shared_ptr<void> owner(map_, map_->addr);
  return Tensor::from_blob(p, ti.shape, *dtype, Device::cpu(), std::move(owner));
}

GgmlTensor GgufFile::ggml_tensor(const std::string& name) const {
  const GgufTensorInfo& ti = info(name);
  auto* p = const_cast<uint8_t*>(tensor_bytes(name));
  std::shared_ptr<void> owner(map_, map_->addr);
  GgmlTensor out;
  out.name = name;
  out.type = ti.type;
  out.shape = ti.shape;
  out.row_elems = ti.row_elems();
  out.bytes = Tensor::from_blob(p, Shape{static_cast<int64_t>(ti.nbytes)}, DType::U8,
                                Device::cpu(), std::move(owner));
  return out;
}

}  // namespace ltx::io
