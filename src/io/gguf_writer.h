#pragma once
// Writing GGUF files (version 3, little-endian), as llama.cpp's gguf-py writer lays them out and
// the community loaders (ComfyUI-GGUF, stable-diffusion.cpp, llama.cpp) read them: the header,
// the metadata in the given order, the tensor infos in the given order, zero padding to the
// alignment, then each tensor's bytes at its offset, every tensor padded to the alignment.
// "general.alignment" (u32) is written only when the alignment is not the default 32.
//
// The tensors are produced one at a time (a quantised checkpoint is larger than memory), so the
// header is written from their specs first. The file is written to `path + ".tmp"` and renamed at
// the end (io/atomic_file.h): a failure, a full disk included, leaves nothing at `path`.
// Everything the reader (io/gguf.h) would reject is rejected here first, naming the key or tensor.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/shape.h"
#include "io/gguf.h"

namespace ltx::io {

// One tensor of a file to write: its name, GGML type and logical (PyTorch order) shape, at most
// 4 dimensions; the innermost size must be a whole number of the type's blocks.
struct GgufTensorSpec {
  std::string name;
  GgmlType type = GgmlType::F32;
  Shape shape;
};

// Metadata values to write (the reader's GgufMetadata: key, type, element type for arrays, value
// as JSON). Helpers for the common kinds:
GgufMetadata gguf_string(std::string key, std::string value);
GgufMetadata gguf_u32(std::string key, uint32_t value);
GgufMetadata gguf_i32_array(std::string key, const std::vector<int32_t>& values);

// Bytes of one tensor of `spec` (ggml_nbytes of its element count); throws naming the tensor
// when its rows are not a whole number of blocks.
uint64_t gguf_tensor_bytes(const GgufTensorSpec& spec);

// The size of the file write_gguf would write, computed from the specs alone (for a free-space
// check before any work).
uint64_t gguf_file_size(const std::vector<GgufMetadata>& metadata,
                        const std::vector<GgufTensorSpec>& tensors,
                        uint32_t alignment = kDefaultGgufAlignment);

// Writes the file. `fill(i, out)` is called once per tensor, in order, and must fill `out`
// (exactly gguf_tensor_bytes(tensors[i]) bytes) with tensor i's GGML data.
void write_gguf(const std::string& path, const std::vector<GgufMetadata>& metadata,
                const std::vector<GgufTensorSpec>& tensors,
                const std::function<void(size_t, std::span<uint8_t>)>& fill,
                uint32_t alignment = kDefaultGgufAlignment);

// A file of `tensors` whose data section is a hole: the header is real, the tensors read as zeros
// and take no disk space. A stand-in whose header gives size planners a model's layout and bytes
// (the pipeline benchmark's random-weight models) without writing the model.
void write_gguf_header_only(const std::string& path, const std::vector<GgufMetadata>& metadata,
                            const std::vector<GgufTensorSpec>& tensors,
                            uint32_t alignment = kDefaultGgufAlignment);

}  // namespace ltx::io
