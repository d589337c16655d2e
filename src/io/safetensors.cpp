#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <numeric>
#include <set>
#include <string_view>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_unique_keys.h"
#include "io/layouts.h"

namespace ltx::io {

namespace {

std::atomic<int64_t> g_safetensors_open_count{0};
std::atomic<int64_t> g_safetensors_parse_count{0};

// Parsed headers by content. One run opens the same checkpoint many times (each component's
// loader, the inspection, memory planning), and a large model's header is megabytes of JSON. A
// parse depends only on the header bytes and the file size, so those are the key; entries are
// compared byte for byte, never by name or date. A few recent headers are kept.
template <class Table>
class ParsedHeaderCache {
 public:
  std::shared_ptr<const Table> find(uint64_t file_size, std::string_view header) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->file_size != file_size || it->header != header) continue;
      entries_.splice(entries_.begin(), entries_, it);  // most recent first
      return entries_.front().table;
    }
    return nullptr;
  }
  void insert(uint64_t file_size, std::string_view header, std::shared_ptr<const Table> table) {
    if (header.size() > kMaxBytes / 4) return;  // a huge header is parsed each time
    const std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_front({file_size, std::string(header), std::move(table)});
    bytes_ += header.size();
    while (entries_.size() > kMaxEntries || bytes_ > kMaxBytes) {
      bytes_ -= entries_.back().header.size();
      entries_.pop_back();
    }
  }

 private:
  static constexpr size_t kMaxEntries = 16;
  static constexpr size_t kMaxBytes = size_t{64} << 20;
  struct Entry {
    uint64_t file_size;
    std::string header;
    std::shared_ptr<const Table> table;
  };
  std::mutex mutex_;
  std::list<Entry> entries_;
  size_t bytes_ = 0;
};

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"F64", DType::F64},   {"F32", DType::F32},          {"F16", DType::F16},
    {"BF16", DType::BF16}, {"F8_E4M3", DType::F8E4M3FN}, {"F8_E5M2", DType::F8E5M2},
    {"I64", DType::I64},   {"I32", DType::I32},          {"I8", DType::I8},
    {"U8", DType::U8},     {"BOOL", DType::Bool},
};
// Names the format defines but ltx has no element type for.
constexpr const char* kUnsupportedDTypes[] = {"I16", "U16",     "U32",     "U64", "F8_E8M0",
                                              "F4",  "F6_E2M3", "F6_E3M2", "C64"};

std::string supported_dtype_list() {
  std::string s;
  for (const auto& d : kDTypeNames) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

std::string shape_text(const nlohmann::json& j) {
  std::string s = j.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Every problem with a file is reported through here, so all messages name the file the same way.
template <typename... Args>
[[noreturn]] void bad_file(const std::string& path, Args&&... args) {
  fail("invalid safetensors file '", path, "': ", std::forward<Args>(args)...);
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  fail("safetensors: no safetensors name for dtype ", dtype_name(dtype));
}

// The file's bytes: a read-only mapping of the file, or a buffer the object owns.
struct SafetensorsFile::Mapping {
  void* addr = nullptr;  // the first byte
  size_t size = 0;
  bool mapped = false;  // munmap on destruction
  std::vector<uint8_t> owned;
  Mapping(void* a, size_t s) : addr(a), size(s), mapped(true) {}
  explicit Mapping(std::vector<uint8_t> bytes) : size(bytes.size()), owned(std::move(bytes)) {
    addr = owned.data();
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (mapped && addr != nullptr) munmap(addr, size);
  }
};

int64_t safetensors_open_count() { return g_safetensors_open_count.load(std::memory_order_relaxed); }
int64_t safetensors_header_parse_count() {
  return g_safetensors_parse_count.load(std::memory_order_relaxed);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  g_safetensors_open_count.fetch_add(1, std::memory_order_relaxed);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open safetensors file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat safetensors file '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("cannot read safetensors file '", path, "': not a regular file");
  }
  file_size_ = static_cast<uint64_t>(st.st_size);
  if (file_size_ < 8) {
    ::close(fd);
    bad_file(path, "the file is ", file_size_,
             " bytes long, shorter than the 8-byte header length field (empty or truncated file)");
  }
  void* addr = mmap(nullptr, file_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  if (addr == MAP_FAILED)
    fail("cannot map safetensors file '", path, "': ", std::strerror(map_err));
  map_ = std::make_shared<Mapping>(addr, file_size_);
  validate();
}

SafetensorsFile::SafetensorsFile(std::string name, std::vector<uint8_t> bytes)
    : path_(std::move(name)) {
  g_safetensors_open_count.fetch_add(1, std::memory_order_relaxed);
  file_size_ = bytes.size();
  if (file_size_ < 8)
    bad_file(path_, "the file is ", file_size_,
             " bytes long, shorter than the 8-byte header length field (empty or truncated file)");
  map_ = std::make_shared<Mapping>(std::move(bytes));
  validate();
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::from_bytes(std::string name,
                                                                   std::vector<uint8_t> bytes) {
  return std::shared_ptr<const SafetensorsFile>(
      new SafetensorsFile(std::move(name), std::move(bytes)));
}

void SafetensorsFile::validate() {
  const auto* bytes = static_cast<const uint8_t*>(map_->addr);
  if (std::memcmp(bytes, "GGUF", 4) == 0)
    bad_file(path_, "this is a GGUF file, not safetensors: ltx loads GGUF files as the transformer "
                    "(--transformer-path, with its text connectors when the file holds them) and "
                    "`ltx inspect` describes them; this component needs a safetensors file");
  const uint64_t n = read_u64_le(bytes);
  if (n > kMaxSafetensorsHeader)
    bad_file(path_, "header length ", n, " exceeds the ", kMaxSafetensorsHeader,
             "-byte limit (corrupt length field or not a safetensors file)");
  if (n < 2) bad_file(path_, "header length ", n, " is too small (the shortest header is '{}')");
  if (n > file_size_ - 8)
    bad_file(path_, "header length ", n, " runs past the end of the file (", file_size_,
             " bytes): the file is truncated or not a safetensors file");
  header_size_ = n;
  static ParsedHeaderCache<Table> cache;
  const std::string_view header(reinterpret_cast<const char*>(bytes + 8), n);
  table_ = cache.find(file_size_, header);
  if (table_ == nullptr) {
    table_ = parse_header(header.data(), n);
    cache.insert(file_size_, header, table_);
  }
}

std::shared_ptr<const SafetensorsFile::Table> SafetensorsFile::parse_header(const char* header,
                                                                            uint64_t n) const {
  using nlohmann::json;
  g_safetensors_parse_count.fetch_add(1, std::memory_order_relaxed);
  auto table = std::make_shared<Table>();
  std::vector<TensorInfo>& infos = table->infos;
  if (header[0] != '{')
    bad_file(path_, "the header is not a JSON object (it must start with '{', found '",
             std::isprint(static_cast<unsigned char>(header[0])) ? std::string(1, header[0])
                                                                 : std::string("\\x?"),
             "')");
  RepeatedJsonKey dups;
  json root;
  try {
    root = parse_json_unique_keys(std::string_view(header, n), dups);
  } catch (const json::exception& e) {
    bad_file(path_, "the header is not valid JSON (", e.what(), ")");
  }
  if (dups.found) {
    if (dups.parent.empty()) bad_file(path_, "tensor '", dups.key, "' appears twice in the header");
    bad_file(path_, "key '", dups.key, "' appears twice in the header entry '", dups.parent, "'");
  }
  if (!root.is_object()) bad_file(path_, "the header is not a JSON object");

  const uint64_t data_size = file_size_ - 8 - n;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object())
        bad_file(path_, "__metadata__ must be a map of strings to strings, found a ",
                 v.type_name());
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          bad_file(path_, "__metadata__ must be a map of strings to strings, but key '", m.key(),
                   "' holds a ", m.value().type_name());
        table->metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object())
      bad_file(path_, "tensor '", name, "': the entry must be an object, found a ", v.type_name());
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!v.contains(field)) bad_file(path_, "tensor '", name, "': missing field '", field, "'");
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        bad_file(path_, "tensor '", name, "': unexpected field '", f.key(),
                 "' (entries hold exactly dtype, shape and data_offsets)");

    TensorInfo ti;
    ti.name = name;
    // dtype
    const json& jd = v["dtype"];
    if (!jd.is_string())
      bad_file(path_, "tensor '", name, "': dtype must be a string, found ", shape_text(jd));
    const std::string dname = jd.get<std::string>();
    bool known = false;
    for (const auto& d : kDTypeNames) {
      if (dname == d.name) {
        ti.dtype = d.dtype;
        known = true;
      }
    }
    if (!known) {
      for (const char* u : kUnsupportedDTypes)
        if (dname == u)
          bad_file(path_, "tensor '", name, "': unsupported dtype ", dname, " (ltx reads ",
                   supported_dtype_list(), ")");
      bad_file(path_, "tensor '", name, "': unknown dtype '", dname,
               "' (known: ", supported_dtype_list(), ")");
    }
    // shape
    const json& js = v["shape"];
    if (!js.is_array())
      bad_file(path_, "tensor '", name,
               "': shape must be an array of non-negative integers, found ", shape_text(js));
    if (js.size() > static_cast<size_t>(kMaxDims))
      bad_file(path_, "tensor '", name, "': shape ", shape_text(js), " has ", js.size(),
               " dimensions; ltx supports at most ", kMaxDims);
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : js) {
      if (!d.is_number_unsigned())  // JSON parsing stores non-negative integers as unsigned
        bad_file(path_, "tensor '", name, "': shape ", shape_text(js),
                 " must hold non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(INT64_MAX)) overflow = true;
      if (__builtin_mul_overflow(numel, dim, &numel)) overflow = true;
      ti.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t nbytes = 0;
    if (overflow || numel > static_cast<uint64_t>(INT64_MAX) ||
        __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(ti.dtype)), &nbytes))
      bad_file(path_, "tensor '", name, "': shape ", shape_text(js), " overflows 64 bits");
    // data_offsets
    const json& jo = v["data_offsets"];
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
        !jo[1].is_number_unsigned())
      bad_file(path_, "tensor '", name,
               "': data_offsets must be two non-negative integers [begin, end], found ",
               shape_text(jo));
    ti.begin = jo[0].get<uint64_t>();
    ti.end = jo[1].get<uint64_t>();
    if (ti.begin > ti.end)
      bad_file(path_, "tensor '", name, "': data_offsets [", ti.begin, ", ", ti.end,
               "] end before they begin");
    if (ti.end - ti.begin != nbytes)
      bad_file(path_, "tensor '", name, "': data_offsets [", ti.begin, ", ", ti.end, "] hold ",
               ti.end - ti.begin, " bytes but shape ", ti.shape.str(), " of ", dname, " needs ",
               nbytes, " bytes");
    if (ti.end > data_size)
      bad_file(path_, "tensor '", name, "': data_offsets [", ti.begin, ", ", ti.end,
               "] lie outside the data section (", data_size,
               " bytes): the file is truncated or the header is wrong");
    infos.push_back(std::move(ti));
  }

  std::sort(infos.begin(), infos.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  // The ranges must tile the data section: each tensor starts where the previous one ended.
  uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& ti : infos) {
    if (ti.begin < expected)
      bad_file(path_, "tensors '", prev->name, "' [", prev->begin, ", ", prev->end, ") and '",
               ti.name, "' [", ti.begin, ", ", ti.end, ") overlap in the data section");
    if (ti.begin > expected)
      bad_file(path_, "bytes [", expected, ", ", ti.begin,
               ") of the data section belong to no tensor (a hole ",
               prev ? "after tensor '" + prev->name + "'" : std::string("at the start"),
               ", before tensor '", ti.name, "')");
    expected = ti.end;
    prev = &ti;
  }
  if (expected != data_size)
    bad_file(path_, "the data section is ", data_size, " bytes but the tensors cover only ",
             expected, " (", data_size - expected, " unclaimed bytes at the end",
             prev ? " after tensor '" + prev->name + "'" : std::string(), ")");

  table->names.reserve(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    table->names.push_back(infos[i].name);
    table->index.emplace(infos[i].name, i);
  }
  return table;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = table_->index.find(name);
  if (it == table_->index.end())
    fail("safetensors file '", path_, "' has no tensor '", name, "' (", table_->infos.size(),
         " tensors in the file)");
  return table_->infos[it->second];
}

// What a view reads its tensors with, and the tensors tensor_bytes() handed out (kept alive).
struct SafetensorsFile::ViewState {
  std::vector<std::function<Tensor()>> readers;  // by table_->index
  std::mutex mutex;
  std::map<std::string, Tensor> read_for_bytes;
};

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return open_layout_folder(path);
  return adapt_file_layout(std::make_shared<const SafetensorsFile>(path));
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::view(
    std::string path, std::string layout, std::vector<ViewTensor> tensors,
    std::map<std::string, std::string> metadata) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(path);
  f->layout_ = std::move(layout);
  auto table = std::make_shared<Table>();
  table->metadata = std::move(metadata);
  f->view_ = std::make_shared<ViewState>();
  std::sort(tensors.begin(), tensors.end(),
            [](const ViewTensor& a, const ViewTensor& b) { return a.name < b.name; });
  uint64_t offset = 0;
  for (ViewTensor& t : tensors) {
    LTX_CHECK(t.read != nullptr, "file view '", f->path_, "': tensor '", t.name, "' has no reader");
    LTX_CHECK(table->index.emplace(t.name, table->infos.size()).second, "file view '", f->path_,
              "': two tensors are named '", t.name, "'");
    TensorInfo ti;
    ti.name = t.name;
    ti.dtype = t.dtype;
    ti.shape = t.shape;
    ti.begin = offset;
    offset += static_cast<uint64_t>(t.shape.numel()) * dtype_size(t.dtype);
    ti.end = offset;
    table->infos.push_back(std::move(ti));
    table->names.push_back(t.name);
    f->view_->readers.push_back(std::move(t.read));
  }
  f->file_size_ = offset;
  f->table_ = std::move(table);
  return f;
}

const uint8_t* SafetensorsFile::tensor_bytes(const std::string& name) const {
  const TensorInfo& ti = info(name);
  if (view_) {
    const Tensor t = tensor(name).contiguous();
    const std::lock_guard<std::mutex> lock(view_->mutex);
    Tensor& kept = view_->read_for_bytes[name];
    if (!kept.defined()) kept = t;
    return static_cast<const uint8_t*>(kept.raw_data());
  }
  return static_cast<const uint8_t*>(map_->addr) + data_offset() + ti.begin;
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorInfo& ti = info(name);
  if (view_) {
    Tensor t = view_->readers[table_->index.at(name)]();
    LTX_CHECK(t.defined() && t.dtype() == ti.dtype && t.shape() == ti.shape, "file view '", path_,
              "': tensor '", name, "' read as ", t.defined() ? t.describe() : "nothing",
              ", its header says ", dtype_name(ti.dtype), " ", ti.shape.str());
    return t;
  }
  auto* p = const_cast<uint8_t*>(tensor_bytes(name));
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(ti.dtype) != 0) {
    Tensor t = Tensor::empty(ti.shape, ti.dtype);
    if (ti.nbytes() > 0) std::memcpy(t.raw_data(), p, ti.nbytes());
    return t;
  }
  // The aliasing constructor shares ownership of the mapping while pointing at its base.
  std::shared_ptr<void> owner(map_, map_->addr);
  return Tensor::from_blob(p, ti.shape, ti.dtype, Device::cpu(), std::move(owner));
}

nlohmann::json SafetensorsFile::metadata_json(const std::string& key) const {
  auto it = table_->metadata.find(key);
  if (it == table_->metadata.end()) return nullptr;
  const std::lock_guard<std::mutex> lock(table_->decoded_mutex);
  auto done = table_->decoded.find(key);
  if (done != table_->decoded.end()) return done->second;
  nlohmann::json j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) j = it->second;
  return table_->decoded.emplace(key, std::move(j)).first->second;
}

nlohmann::json SafetensorsFile::metadata_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : table_->metadata) out[k] = metadata_json(k);
  return out;
}

// ------------------------------------------------------------------------------------ writer

void write_safetensors_streamed(const std::string& path,
                                const std::vector<SafetensorsEntry>& entries,
                                const std::function<Tensor(size_t)>& produce,
                                const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  for (const SafetensorsEntry& e : entries) {
    LTX_CHECK(!e.name.empty(), "write_safetensors '", path, "': empty tensor name");
    LTX_CHECK(e.name != "__metadata__", "write_safetensors '", path,
              "': '__metadata__' is reserved and cannot name a tensor");
    LTX_CHECK(seen.insert(e.name).second, "write_safetensors '", path, "': tensor '", e.name,
              "' given twice");
  }
  // Largest elements first keeps every tensor aligned to its element size (the header is padded to
  // a multiple of 8); stable, so the caller's order survives within one element size.
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(entries[a].dtype) > dtype_size(entries[b].dtype);
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json md = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) md[k] = v;
    header["__metadata__"] = std::move(md);
  }
  uint64_t offset = 0;
  for (size_t i : order) {
    const SafetensorsEntry& e = entries[i];
    const uint64_t nb = static_cast<uint64_t>(e.shape.numel()) * dtype_size(e.dtype);
    header[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)},
                      {"shape", e.shape.vec()},
                      {"data_offsets", {offset, offset + nb}}};
    offset += nb;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail("write_safetensors '", path, "': cannot encode the header (", e.what(),
         "); tensor names and metadata must be valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  LTX_CHECK(text.size() <= kMaxSafetensorsHeader, "write_safetensors '", path, "': header of ",
            text.size(), " bytes exceeds the ", kMaxSafetensorsHeader, "-byte limit");

  AtomicFile out(path, "write_safetensors");
  uint8_t len[8];
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (size_t i : order) {
    const SafetensorsEntry& e = entries[i];
    const Tensor t = produce(i);
    LTX_CHECK(t.defined(), "write_safetensors '", path, "': tensor '", e.name, "' is undefined");
    LTX_CHECK(t.dtype() == e.dtype && t.shape() == e.shape, "write_safetensors '", path,
              "': tensor '", e.name, "' was announced as ", dtype_name(e.dtype), " ",
              e.shape.str(), " but produced as ", dtype_name(t.dtype()), " ", t.shape().str());
    const Tensor host = t.to(Device::cpu()).contiguous();
    out.write(host.raw_data(), host.nbytes());
  }
  out.commit();
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    LTX_CHECK(t.defined(), "write_safetensors '", path, "': tensor '", name, "' is undefined");
    entries.push_back({name, t.dtype(), t.shape()});
  }
  write_safetensors_streamed(
      path, entries, [&](size_t i) { return tensors[i].second; }, metadata);
}

}  // namespace ltx::io
