#pragma once
// Binding checkpoint tensors to model parameters.
//
// A KeyMap says which file keys a model reads and under which names (the reference's SDOps:
// matchers, then replacements). A WeightMap holds the renamed tensors of one or more safetensors
// or GGUF files; model code walks it with scoped("transformer_blocks.0.") views and take()s every parameter
// with its expected shape and dtype. take() never throws for a missing or misshaped tensor: it
// records the problem and returns an undefined Tensor, so that finish() can report every missing,
// misshaped and unexpected name of a component in ONE error. Call finish() before using the
// weights.
//
//   auto file = SafetensorsFile::open(path);
//   WeightMap w({file}, KeyMap::strip_prefix("model.diffusion_model."));
//   WeightMap blk = w.scoped("transformer_blocks.0.");
//   Tensor wq = blk.take("attn1.to_q.weight", {4096, 4096}, DType::BF16);  // zero-copy view
//   ...
//   w.finish("transformer");  // throws listing all problems, if any
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/tensor.h"
#include "io/gguf.h"
#include "io/safetensors.h"

namespace ltx::io {

// Key selection and renaming. A key is kept when ANY matcher accepts it (a matcher accepts a key
// that starts with its prefix, ends with its suffix and contains its `contains` text; empty parts
// always hold) and no drop rule matches it. Then every rename applies in order: replace() swaps
// every occurrence of a substring (Python's str.replace, as the reference does), replace_prefix()
// only a leading one. A KeyMap without matchers keeps nothing.
class KeyMap {
 public:
  explicit KeyMap(std::string name = "keys") : name_(std::move(name)) {}
  // Keeps every key unchanged.
  static KeyMap all(std::string name = "all keys");
  // Keeps the keys that start with `prefix` and removes that prefix ("model.diffusion_model.").
  static KeyMap strip_prefix(const std::string& prefix);

  KeyMap& keep(std::string prefix, std::string suffix = "", std::string contains = "");
  // Rejects kept keys that match (same rules as keep), e.g. connectors under the DiT prefix.
  KeyMap& drop(std::string prefix, std::string suffix = "", std::string contains = "");
  KeyMap& replace(std::string from, std::string to);
  KeyMap& replace_prefix(std::string from, std::string to);

  // The model name for a file key, or nullopt when the key is not kept.
  std::optional<std::string> apply(const std::string& key) const;
  const std::string& name() const { return name_; }

 private:
  struct Matcher {
    std::string prefix, suffix, contains;
    bool matches(const std::string& key) const;
  };
  struct Rename {
    std::string from, to;
    bool anchored;
  };
  std::string name_;
  std::vector<Matcher> keep_;
  std::vector<Matcher> drop_;
  std::vector<Rename> renames_;
};

// Makes a tensor for a name a WeightMap does not hold: `name` (full, after renaming) with the shape,
// dtype and device the model asks for. Used to build models with made-up weights in memory, e.g.
// random weights for benchmarks (bench/random_weights.h), without any file.
using WeightSynthesizer =
    std::function<Tensor(const std::string& name, const Shape& shape, DType dtype, Device device)>;

// GGML-block weights for a synthetic WeightMap (e.g. quantized random weights for benchmarks):
// `type` says which names (full, with the shape the model binds) are made as blocks of which type
// (nullopt: dense, by the WeightSynthesizer); `make` makes one, its bytes on `device`.
struct GgmlSynthesizer {
  std::function<std::optional<GgmlType>(const std::string& name, const Shape& shape)> type;
  std::function<GgmlTensor(const std::string& name, const Shape& shape, GgmlType type, Device device)>
      make;
};

// The dtype a synthetic WeightMap's tensor `name` (full, with the shape the model binds) stands
// for, as a file would store it (e.g. float8_e4m3fn for an FP8 checkpoint's Linear weights and
// f32 for their scales); nullopt: whatever dtype the loader asks for. A loader that binds a
// tensor as stored asks synthesized_dtype() where it would ask a file's dtype().
using StoredDtypeRule =
    std::function<std::optional<DType>(const std::string& name, const Shape& shape)>;

class WeightMap {
 public:
  // An empty map (tensors can be add()ed).
  WeightMap();
  // An empty map whose take() makes every required tensor with `fn` (once; later takes of the same
  // name return it). Optional names (take_optional) stay absent, and a name whose shape the model
  // does not fix (take_any_shape, -1 in the shape) is reported missing by finish(). With `ggml`,
  // the names it types are made as GGML blocks instead, for take_ggml (see synthesized_ggml_type).
  // With `stored`, the map answers synthesized_dtype() as a file of those dtypes would.
  static WeightMap synthetic(WeightSynthesizer fn, GgmlSynthesizer ggml = {},
                             StoredDtypeRule stored = {});
  // The tensors of `files` that `keys` keeps, under their new names. When two files yield the same
  // name the later file wins, as when the reference merges state dicts. The files stay alive as
  // long as the map or any tensor taken from it.
  explicit WeightMap(std::vector<std::shared_ptr<const SafetensorsFile>> files,
                     const KeyMap& keys = KeyMap::all());
  // The same over GGUF files: dense tensors (F32, F16, BF16, ...) take() like safetensors ones;
  // block-quantized ones (Q8_0, Q4_K, ...) are bound with take_ggml().
  explicit WeightMap(std::vector<std::shared_ptr<const GgufFile>> files,
                     const KeyMap& keys = KeyMap::all());
  // Opens each path as GGUF when it starts with the GGUF magic, as safetensors otherwise.
  static WeightMap open(const std::vector<std::string>& paths, const KeyMap& keys = KeyMap::all());
  // As open(), for model checkpoints: a GGUF file whose names are an LTX transformer's without
  // "model.diffusion_model." (the community files; io::ltx_key_prefix_to_add) is read with that
  // prefix put back first, so the checkpoint key maps apply to it as to the safetensors file it
  // was converted from.
  static WeightMap open_checkpoints(const std::vector<std::string>& paths,
                                    const KeyMap& keys = KeyMap::all());

  // A view of the names under `prefix` (relative to this view), sharing the record of which names
  // were used: scoped("transformer_blocks.0.").take("attn1.to_q.weight", ...).
  WeightMap scoped(const std::string& prefix) const;
  // The full-name prefix of this view ("" for the root).
  const std::string& prefix() const { return prefix_; }

  // Names relative to this view.
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  size_t size() const { return names().size(); }
  // Stored (logical) shape / dtype; throw when the name is absent. A tensor stored in GGML blocks
  // of a quantized type reports u8 (its raw bytes): ask ggml_type().
  Shape shape(const std::string& name) const;
  DType dtype(const std::string& name) const;
  // The GGML type of a tensor that comes from a GGUF file; nullopt for any other tensor.
  // Throws when the name is absent.
  std::optional<GgmlType> ggml_type(const std::string& name) const;
  // True when the tensor is stored in blocks of a quantized GGML type (take() refuses it).
  bool is_quantized(const std::string& name) const;
  // The GGML type a synthetic map's GgmlSynthesizer gives `name` of `shape`, which the map does
  // not hold yet (bind it with take_ggml); nullopt for held names and names it makes dense.
  std::optional<GgmlType> synthesized_ggml_type(const std::string& name, const Shape& shape) const;
  // The stored dtype a synthetic map's StoredDtypeRule gives `name` of `shape`, which the map does
  // not hold yet (take() makes it); nullopt for held names and names the rule leaves open.
  std::optional<DType> synthesized_dtype(const std::string& name, const Shape& shape) const;
  // The dtype `name` is stored in: a held tensor's dtype(), else synthesized_dtype(); nullopt
  // when the map neither holds nor stands in for it.
  std::optional<DType> stored_dtype(const std::string& name, const Shape& shape) const;

  // Adds (or replaces) a tensor, e.g. one derived at load time from a fused file tensor.
  void add(const std::string& name, Tensor tensor);

  // The tensor `name` converted to `target` on `device`, and marks the name used. A CPU tensor
  // that already has the target dtype is returned as a zero-copy view of the file mapping; other
  // float dtypes are converted (a copy). `expected` may use -1 for "any size" in a dimension.
  // When the name is missing, the shape differs, or the conversion is not float <-> float, the
  // problem is recorded for finish() and an undefined Tensor is returned.
  Tensor take(const std::string& name, const Shape& expected, DType target,
              Device device = Device::cpu());
  // As take(), but an absent name is not a problem: returns nullopt. A present but misshaped
  // tensor is still recorded (and nullopt returned).
  std::optional<Tensor> take_optional(const std::string& name, const Shape& expected, DType target,
                                      Device device = Device::cpu());
  // As take() without a shape check (scalars, buffers whose shape the caller inspects itself).
  Tensor take_any_shape(const std::string& name, DType target, Device device = Device::cpu());
  // The tensor as GGML storage, without converting or copying: a GGUF tensor of any type as
  // stored, or a dense f32 / f16 / bf16 tensor of another source as F32 / F16 / BF16 rows (its last
  // dimension). What a quantized weight binds to. Missing and misshaped names are recorded as for
  // take() and give a GgmlTensor whose `bytes` is undefined. A name the map's GgmlSynthesizer
  // makes is made here with its bytes on `device`; every other tensor's bytes stay on the CPU.
  GgmlTensor take_ggml(const std::string& name, const Shape& expected, Device device = Device::cpu());
  // Marks names as deliberately unused so finish() does not report them: the exact name, or every
  // name under it when it ends with '.'. Absent names are fine.
  void ignore(const std::string& name_or_prefix);

  // Names under this view that were neither taken nor ignored (full names, sorted).
  std::vector<std::string> unused() const;
  // Throws ONE ltx::Error, headed by `what`, listing every missing, misshaped and wrongly typed
  // name recorded under this view and every unused one (at most kMaxListed of each, plus a count).
  void finish(const std::string& what) const;

  static constexpr size_t kMaxListed = 10;

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::string prefix_;

  WeightMap(std::shared_ptr<State> state, std::string prefix)
      : state_(std::move(state)), prefix_(std::move(prefix)) {}
  std::optional<Tensor> take_impl(const std::string& name, const Shape* expected, DType target,
                                  Device device, bool required);
  // Adds the kept tensors of one file (exactly one of the two set), each key read as
  // key_prefix + key; a later file wins.
  void add_file(std::shared_ptr<const SafetensorsFile> st, std::shared_ptr<const GgufFile> gguf,
                const KeyMap& keys, const std::string& key_prefix = "");
};

// A checkpoint file of either format (GGUF when it starts with the GGUF magic): its metadata
// decoded as SafetensorsFile::metadata_json() decodes __metadata__ (a GGUF file's string values),
// and its tensor names as WeightMap::open_checkpoints reads them (LTX prefix put back).
nlohmann::json checkpoint_metadata_json(const std::string& path);
std::vector<std::string> checkpoint_keys(const std::string& path);

// A tensor of a checkpoint file as stored (for size estimates before loading).
struct StoredTensorInfo {
  std::string name;    // as the file names it (a GGUF file's without a prefix put back)
  Shape shape;         // logical shape
  DType dtype;         // u8 for GGML blocks
  int64_t nbytes = 0;  // bytes in the file
  bool ggml_blocks = false;  // block-quantized (GGUF): bound as stored
};
std::vector<StoredTensorInfo> stored_tensor_infos(const std::string& path);

// Writing a model file from nothing (the built-in demo bundle, tests): while a WeightSynthesis lives
// on a thread, every WeightMap::take() there of a name that no file provides creates the tensor
// with `make(full name, shape)` instead of recording it missing, as long as the expected shape is
// fully known (no -1). The model's own loader thereby says which tensors it needs; created() lists
// them under their model names, in creation order. Optional names (take_optional) and
// take_any_shape() are never created. Scopes do not nest.
class WeightSynthesis {
 public:
  using Maker = std::function<Tensor(const std::string& name, const Shape& shape)>;
  explicit WeightSynthesis(Maker make);
  ~WeightSynthesis();
  WeightSynthesis(const WeightSynthesis&) = delete;
  WeightSynthesis& operator=(const WeightSynthesis&) = delete;

  const std::vector<std::pair<std::string, Tensor>>& created() const { return created_; }

 private:
  friend class WeightMap;
  static WeightSynthesis* active();
  Maker make_;
  std::vector<std::pair<std::string, Tensor>> created_;
};

}  // namespace ltx::io
