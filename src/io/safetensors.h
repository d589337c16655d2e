#pragma once
// Reading and writing the safetensors format.
//
// A file is: 8 bytes little-endian header length N, N bytes of JSON header, then the data section.
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end)} (offsets
// relative to the data section) plus an optional "__metadata__" map of strings to strings.
//
// SafetensorsFile maps the whole file read-only and validates the header at least as strictly as
// the official Rust `safetensors` crate: header length in [2, 100 MB] and inside the file, a JSON
// object starting with '{', no duplicate keys, string-to-string metadata, exactly the three fields
// per tensor, known dtypes, non-negative shapes whose byte size equals end - begin, and ranges that
// tile the data section exactly (no overlap, no hole, nothing after the last tensor). Any violation
// throws ltx::Error naming the file, the tensor when there is one, and the problem.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ltx::io {

// The largest header the reader accepts (the crate's limit).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;  // byte range [begin, end) inside the data section
  uint64_t end = 0;

  int64_t numel() const { return shape.numel(); }
  uint64_t nbytes() const { return end - begin; }
};

// One tensor of a file view (SafetensorsFile::view): its name there, what it holds and how to read
// it (a CPU tensor of exactly that dtype and shape: another file's zero-copy tensor, or one
// computed on each read).
struct ViewTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::function<Tensor()> read;
};

// Name of a dtype in safetensors headers ("F32", "BF16", "F8_E4M3", ...).
const char* safetensors_dtype_name(DType dtype);

// SafetensorsFile objects made by this process so far (every open, also of a file opened before):
// how a test proves a step read no weight file.
int64_t safetensors_open_count();
// Headers parsed so far: opening a file whose header this process parsed before (the same bytes,
// in a file of the same size) reuses that parse.
int64_t safetensors_header_parse_count();

class SafetensorsFile {
 public:
  // Opens, maps and validates `path`; throws ltx::Error on any problem.
  explicit SafetensorsFile(const std::string& path);
  // Opens `path` as the models read it: a safetensors file as it is, or, where it is in another
  // layout that io/layouts.h knows (a Diffusers folder, a ComfyUI file), a view of it under the
  // official single-file names (layout() says which). Throws ltx::Error naming the file.
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);
  // A file made of `tensors` (unique names) and `metadata`, standing for `path` in messages;
  // `layout` names what it presents ("Diffusers folder", ...). Views own nothing but what their
  // readers capture. infos() give each tensor's byte range as if stored back to back.
  static std::shared_ptr<const SafetensorsFile> view(std::string path, std::string layout,
                                                     std::vector<ViewTensor> tensors,
                                                     std::map<std::string, std::string> metadata);
  // Validates a file held in memory (it keeps `bytes`; tensors view them) exactly as a mapped one;
  // `name` stands for the path in messages and path(). For bytes that never were a file (a
  // fuzzer's input, a download in memory).
  static std::shared_ptr<const SafetensorsFile> from_bytes(std::string name,
                                                           std::vector<uint8_t> bytes);

  const std::string& path() const { return path_; }
  // "" for a file read as stored; the layout a view presents otherwise.
  const std::string& layout() const { return layout_; }
  bool is_view() const { return view_ != nullptr; }
  // The sum of the tensors' sizes for a view.
  uint64_t file_size() const { return file_size_; }
  // Length of the JSON header (without the 8-byte length field); data starts at 8 + header_size().
  uint64_t header_size() const { return header_size_; }
  uint64_t data_offset() const { return 8 + header_size_; }

  size_t size() const { return table_->infos.size(); }
  // Tensor names in file order: sorted by data offset (ties, i.e. empty tensors, by name).
  const std::vector<std::string>& names() const { return table_->names; }
  // All tensor infos, in the same order as names().
  const std::vector<TensorInfo>& infos() const { return table_->infos; }
  bool contains(const std::string& name) const { return table_->index.count(name) != 0; }
  // Throws naming the file when `name` is absent.
  const TensorInfo& info(const std::string& name) const;
  // A CPU tensor viewing the mapped bytes (no copy). The tensor keeps the mapping alive, so it may
  // outlive this object. The memory is mapped read-only: never write into these tensors (copy with
  // clone() first). Data whose address is not a multiple of the element size (possible only in
  // files whose header length is not a multiple of 8) is copied instead.
  Tensor tensor(const std::string& name) const;
  // Raw bytes of a tensor inside the mapping (read-only; a view keeps the tensor it read alive).
  const uint8_t* tensor_bytes(const std::string& name) const;

  // "__metadata__" as stored (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return table_->metadata; }
  bool has_metadata(const std::string& key) const { return table_->metadata.count(key) != 0; }
  // A metadata value decoded like the reference's SafetensorsModelStateDictLoader.metadata(): a
  // value that parses as JSON is returned decoded (objects, numbers, ...), any other value as a
  // JSON string ("2.3.0" stays the string "2.3.0", "2.5" becomes the number 2.5). Null when the
  // key is absent.
  nlohmann::json metadata_json(const std::string& key) const;
  // Every metadata value decoded as above, as one object.
  nlohmann::json metadata_json() const;

 private:
  struct Mapping;
  struct ViewState;
  std::string path_;
  std::string layout_;
  std::shared_ptr<ViewState> view_;  // views only
  std::shared_ptr<Mapping> map_;
  uint64_t file_size_ = 0;
  uint64_t header_size_ = 0;
  // What the header says. Immutable once built, so files with the same header share one.
  struct Table {
    std::vector<TensorInfo> infos;  // in file order
    std::vector<std::string> names;
    std::unordered_map<std::string, size_t> index;
    std::map<std::string, std::string> metadata;
    // metadata_json(key) results, decoded on first use.
    mutable std::mutex decoded_mutex;
    mutable std::map<std::string, nlohmann::json> decoded;
  };
  std::shared_ptr<const Table> table_;

  SafetensorsFile(std::string name, std::vector<uint8_t> bytes);
  SafetensorsFile() = default;
  // Checks the length field and the header of the bytes map_ holds.
  void validate();
  // The header's table, validated against the file size; the parse is skipped where this
  // process already parsed the same header bytes for a file of the same size.
  std::shared_ptr<const Table> parse_header(const char* header, uint64_t n) const;
};

// Writes `tensors` (any device, dtype and strides; copied to contiguous CPU memory one at a time)
// and `metadata` to `path` in the crate's layout: header padded with spaces to a multiple of 8,
// tensors ordered by element size, largest first (so every tensor is aligned), and otherwise in the
// given order. Writes `path + ".tmp"` and renames it over `path` at the end, so a failure never
// leaves a partial file at `path`. Throws on duplicate or empty names, undefined tensors and I/O
// errors.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// What write_safetensors_streamed writes for one tensor.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
};

// The same file as write_safetensors, with the tensors made one at a time: the header comes from
// `entries`, then `produce(i)` is called once per entry, in file order (element size, largest
// first, then the given order), and must return a tensor of entry i's dtype and shape (any device
// and strides); it is written and released before the next call. For outputs larger than memory
// (a quantised checkpoint made tensor by tensor).
void write_safetensors_streamed(const std::string& path,
                                const std::vector<SafetensorsEntry>& entries,
                                const std::function<Tensor(size_t)>& produce,
                                const std::map<std::string, std::string>& metadata = {});

}  // namespace ltx::io
