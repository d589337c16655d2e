#pragma once
// Reading GGUF files (ggml's format: llama.cpp, stable-diffusion.cpp and the ComfyUI-GGUF node
// write it), versions 2 and 3, little-endian.
//
// A file is: magic "GGUF", u32 version, u64 tensor count, u64 metadata count; the metadata, each a
// string key, a u32 value type and the value (arrays: element type, u64 count, elements; strings:
// u64 length + bytes); the tensor infos, each a string name, u32 n_dims, n_dims u64 sizes
// (innermost first), i32 GGML type and u64 offset into the data section; padding to the alignment
// (metadata "general.alignment", u32, default 32); the data section.
//
// GgufFile maps the whole file read-only and validates it before anything is used: magic and
// version, every count and length against what the file can hold (before allocating), known value
// and tensor types, no arrays of arrays, bools 0 or 1, unique non-empty UTF-8 keys and tensor
// names, general.alignment a u32 power of two, at most 4 dimensions each > 0, sizes that do not
// overflow, rows a whole number of blocks, offsets aligned and inside the data section, no two
// tensors overlapping. Any violation throws ltx::Error naming the file, the key or tensor when
// there is one, and the problem.
//
// Shapes: GGUF lists sizes innermost first; shape() is the PyTorch order (reversed), unless the
// file carries "comfy.gguf.orig_shape.<name>" (ComfyUI-GGUF's record of a tensor it reshaped
// before quantizing), which then gives the logical shape.
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ggml_type.h"
#include "core/tensor.h"

namespace ltx::io {

// Limits checked before anything is allocated (each far above what real files hold).
inline constexpr uint64_t kMaxGgufTensors = 1'000'000;
inline constexpr uint64_t kMaxGgufMetadata = 1'000'000;
inline constexpr uint64_t kMaxGgufNameBytes = 65'535;  // keys and tensor names
inline constexpr uint64_t kMaxGgufStringBytes = uint64_t{1} << 28;  // a string value
inline constexpr uint64_t kMaxGgufArrayElements = uint64_t{1} << 24;
inline constexpr uint32_t kDefaultGgufAlignment = 32;
inline constexpr int kMaxGgufDims = 4;

enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF):
// what keys and tensor names must be.
bool is_valid_utf8(const std::string& s);

// "u8", "i32", "f32", "bool", "string", "array", ... (gguf.h's names).
const char* gguf_value_type_name(GgufValueType type);

struct GgufMetadata {
  std::string key;
  GgufValueType type = GgufValueType::U8;
  GgufValueType element_type = GgufValueType::U8;  // the elements' type when type is Array
  // The value: integers as JSON integers (exact), f32 / f64 as doubles (exact), bools, strings
  // (bytes as stored), arrays as JSON arrays.
  nlohmann::json value;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;  // sizes as stored, innermost first
  Shape shape;              // logical (PyTorch) shape
  uint64_t offset = 0;      // inside the data section
  uint64_t nbytes = 0;

  int64_t numel() const { return shape.numel(); }
  // Values per stored row (ne[0]): the blocks run along it and never straddle two rows.
  int64_t row_elems() const { return ne.empty() ? 1 : ne[0]; }
};

// A tensor in GGML storage, viewed without copying: what a quantized weight binds to.
struct GgmlTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  Shape shape;             // logical (PyTorch) shape
  int64_t row_elems = 0;   // values per stored row; rows follow one another in `bytes`
  Tensor bytes;            // u8 [nbytes], read-only: a view of the mapping (CPU), or made on a
                           // device by a synthetic WeightMap (io::GgmlSynthesizer)
};

// The key prefix the safetensors checkpoint had where a GGUF file dropped it: "model.diffusion_model."
// for a file holding an LTX transformer under bare names (ComfyUI-GGUF's converter strips the
// prefix; general.architecture "ltxv", or transformer names such as "transformer_blocks.*"), ""
// otherwise (names already prefixed, or another model).
class GgufFile;
std::string ltx_key_prefix_to_add(const GgufFile& file);

// GgufFile objects made by this process so far (as safetensors_open_count()).
int64_t gguf_open_count();

// True when `path` is a readable file that starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

class GgufFile {
 public:
  // Opens, maps and validates `path`; throws ltx::Error on any problem.
  explicit GgufFile(const std::string& path);
  static std::shared_ptr<const GgufFile> open(const std::string& path) {
    return std::make_shared<const GgufFile>(path);
  }
  // Validates `bytes` as a GGUF file called `name` in errors, keeping them: data that is not a
  // file (the fuzz target).
  static std::shared_ptr<const GgufFile> from_bytes(std::string name, std::vector<uint8_t> bytes);

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  // Where the data section starts (the end of the tensor infos, padded to the alignment).
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<GgufMetadata>& metadata() const { return metadata_; }
  // nullptr when absent.
  const GgufMetadata* find(const std::string& key) const;
  // A string value, nullopt when the key is absent; throws naming the key when it is not a string.
  std::optional<std::string> string_value(const std::string& key) const;
  // The string-valued keys as a map: the GGUF counterpart of a safetensors file's __metadata__
  // (the community LTX files carry the original "config" JSON and "model_version" this way).
  std::map<std::string, std::string> string_metadata() const;
  // Every key and its value as one JSON object.
  nlohmann::json metadata_json() const;
  // The string values, each JSON-decoded where it parses (as SafetensorsFile::metadata_json()
  // decodes __metadata__): what the model configs read ("config" as an object).
  nlohmann::json decoded_string_metadata() const;

  size_t size() const { return infos_.size(); }
  // Tensor names in file order (the order of the tensor infos).
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<GgufTensorInfo>& infos() const { return infos_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws naming the file when `name` is absent.
  const GgufTensorInfo& info(const std::string& name) const;
  // Raw bytes of a tensor inside the mapping (read-only).
  const uint8_t* tensor_bytes(const std::string& name) const;
  // A dense tensor (F32, F16, BF16, F64, I8, I32, I64) as a CPU tensor with the logical shape,
  // viewing the mapping (copied only when misaligned for its element size). Throws naming the
  // tensor and its type for the block-quantized types (use ggml_tensor()) and I16.
  Tensor tensor(const std::string& name) const;
  // Any tensor as its GGML storage (type, logical shape, raw bytes), without copying.
  GgmlTensor ggml_tensor(const std::string& name) const;

 private:
  GgufFile() = default;
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> map_;
  uint64_t file_size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultGgufAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufMetadata> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> infos_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, size_t> index_;

  void parse(const uint8_t* bytes);
};

}  // namespace ltx::io
