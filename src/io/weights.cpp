#include "io/weights.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/out_of_memory.h"

namespace ltx::io {

// ------------------------------------------------------------------------------------ KeyMap

KeyMap KeyMap::all(std::string name) {
  KeyMap k(std::move(name));
  k.keep("");
  return k;
}

KeyMap KeyMap::strip_prefix(const std::string& prefix) {
  KeyMap k("strip '" + prefix + "'");
  k.keep(prefix);
  k.replace_prefix(prefix, "");
  return k;
}

KeyMap& KeyMap::keep(std::string prefix, std::string suffix, std::string contains) {
  keep_.push_back({std::move(prefix), std::move(suffix), std::move(contains)});
  return *this;
}

KeyMap& KeyMap::drop(std::string prefix, std::string suffix, std::string contains) {
  drop_.push_back({std::move(prefix), std::move(suffix), std::move(contains)});
  return *this;
}

KeyMap& KeyMap::replace(std::string from, std::string to) {
  LTX_CHECK(!from.empty(), "KeyMap '", name_, "': replace() needs a non-empty pattern");
  renames_.push_back({std::move(from), std::move(to), false});
  return *this;
}

KeyMap& KeyMap::replace_prefix(std::string from, std::string to) {
  renames_.push_back({std::move(from), std::move(to), true});
  return *this;
}

bool KeyMap::Matcher::matches(const std::string& key) const {
  return key.size() >= prefix.size() && key.compare(0, prefix.size(), prefix) == 0 &&
         key.size() >= suffix.size() &&
         key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         (contains.empty() || key.find(contains) != std::string::npos);
}

std::optional<std::string> KeyMap::apply(const std::string& key) const {
  bool kept = false;
  for (const Matcher& m : keep_) kept = kept || m.matches(key);
  if (!kept) return std::nullopt;
  for (const Matcher& m : drop_)
    if (m.matches(key)) return std::nullopt;
  std::string out = key;
  for (const Rename& r : renames_) {
    if (r.anchored) {
      if (out.compare(0, r.from.size(), r.from) == 0) out = r.to + out.substr(r.from.size());
      continue;
    }
    // Non-overlapping, left to right, like Python's str.replace.
    std::string next;
    size_t pos = 0;
    for (size_t hit; (hit = out.find(r.from, pos)) != std::string::npos; pos = hit + r.from.size())
      next.append(out, pos, hit - pos).append(r.to);
    next.append(out, pos, std::string::npos);
    out = std::move(next);
  }
  return out;
}

// ------------------------------------------------------------------------------------ WeightMap

namespace {

struct Entry {
  std::shared_ptr<const SafetensorsFile> file;  // both null for tensors added with add()
  std::shared_ptr<const GgufFile> gguf;
  std::string file_key;
  Tensor tensor;
  bool used = false;
  std::optional<GgmlTensor> made_ggml;  // GGML blocks made by a GgmlSynthesizer

  Shape shape() const {
    if (file) return file->info(file_key).shape;
    if (gguf) return gguf->info(file_key).shape;
    if (made_ggml) return made_ggml->shape;
    return tensor.shape();
  }
  std::optional<GgmlType> ggml_type() const {
    if (gguf) return gguf->info(file_key).type;
    if (made_ggml) return made_ggml->type;
    return std::nullopt;
  }
  bool quantized() const {
    const std::optional<GgmlType> t = ggml_type();
    return t && !ggml_dense_dtype(*t);
  }
  // The element type a dense read gives (u8 for block-quantized GGML tensors).
  DType dtype() const {
    if (file) return file->info(file_key).dtype;
    if (gguf) return ggml_dense_dtype(gguf->info(file_key).type).value_or(DType::U8);
    if (made_ggml) return DType::U8;
    return tensor.dtype();
  }
  Tensor read() const {
    if (file) return file->tensor(file_key);
    if (gguf) return gguf->tensor(file_key);
    if (made_ggml) return made_ggml->bytes;
    return tensor;
  }
};

bool shape_matches(const Shape& actual, const Shape& expected) {
  if (actual.size() != expected.size()) return false;
  for (int i = 0; i < actual.size(); ++i)
    if (expected[i] != -1 && expected[i] != actual[i]) return false;
  return true;
}

// "a, b, c and 7 more"
std::string list_names(const std::vector<std::string>& items) {
  std::string s;
  const size_t n = std::min(items.size(), WeightMap::kMaxListed);
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += items[i];
  }
  if (items.size() > n) s += str(" and ", items.size() - n, " more");
  return s;
}

}  // namespace

struct WeightMap::State {
  std::vector<std::string> paths;  // the files, for messages (the entries keep them alive)
  std::string key_map;
  std::map<std::string, Entry> entries;
  std::set<std::string> missing;
  std::map<std::string, std::string> misshaped;    // name -> "expected [..], file has [..]"
  std::map<std::string, std::string> wrong_dtype;  // name -> "file has u8, model wants f32"
  WeightSynthesizer synthesize;                    // makes absent required tensors, when set
  GgmlSynthesizer synthesize_ggml;                 // ... those it types as GGML blocks
  StoredDtypeRule synthesized_dtype;               // ... the dtypes it stands for
};

WeightMap::WeightMap() : state_(std::make_shared<State>()) {}

WeightMap WeightMap::synthetic(WeightSynthesizer fn, GgmlSynthesizer ggml,
                               StoredDtypeRule stored) {
  LTX_CHECK(static_cast<bool>(fn), "WeightMap::synthetic: no synthesizer function");
  LTX_CHECK(static_cast<bool>(ggml.type) == static_cast<bool>(ggml.make),
            "WeightMap::synthetic: a GGML synthesizer needs both its type and its make function");
  WeightMap w;
  w.state_->key_map = "synthesized in memory";
  w.state_->synthesize = std::move(fn);
  w.state_->synthesize_ggml = std::move(ggml);
  w.state_->synthesized_dtype = std::move(stored);
  return w;
}

void WeightMap::add_file(std::shared_ptr<const SafetensorsFile> st,
                         std::shared_ptr<const GgufFile> gguf, const KeyMap& keys,
                         const std::string& key_prefix) {
  LTX_CHECK((st != nullptr) != (gguf != nullptr), "WeightMap: null file");
  const std::vector<std::string>& names = st ? st->names() : gguf->names();
  for (const std::string& key : names) {
    std::optional<std::string> name = keys.apply(key_prefix + key);
    if (!name) continue;
    Entry& e = state_->entries[*name];  // a later file replaces an earlier one
    e = Entry{st, gguf, key, Tensor(), false};
  }
  state_->paths.push_back(st ? st->path() : gguf->path());
}

WeightMap::WeightMap(std::vector<std::shared_ptr<const SafetensorsFile>> files, const KeyMap& keys)
    : state_(std::make_shared<State>()) {
  state_->key_map = keys.name();
  for (auto& f : files) add_file(std::move(f), nullptr, keys);
}

WeightMap::WeightMap(std::vector<std::shared_ptr<const GgufFile>> files, const KeyMap& keys)
    : state_(std::make_shared<State>()) {
  state_->key_map = keys.name();
  for (auto& f : files) add_file(nullptr, std::move(f), keys);
}

WeightMap WeightMap::open(const std::vector<std::string>& paths, const KeyMap& keys) {
  WeightMap w;
  w.state_->key_map = keys.name();
  for (const auto& p : paths) {
    if (is_gguf_file(p))
      w.add_file(nullptr, GgufFile::open(p), keys);
    else
      w.add_file(SafetensorsFile::open(p), nullptr, keys);
  }
  return w;
}

WeightMap WeightMap::open_checkpoints(const std::vector<std::string>& paths, const KeyMap& keys) {
  WeightMap w;
  w.state_->key_map = keys.name();
  for (const auto& p : paths) {
    if (is_gguf_file(p)) {
      auto f = GgufFile::open(p);
      const std::string prefix = ltx_key_prefix_to_add(*f);
      w.add_file(nullptr, std::move(f), keys, prefix);
    } else {
      w.add_file(SafetensorsFile::open(p), nullptr, keys);
    }
  }
  return w;
}

nlohmann::json checkpoint_metadata_json(const std::string& path) {
  if (is_gguf_file(path)) return GgufFile(path).decoded_string_metadata();
  return SafetensorsFile(path).metadata_json();
}

std::vector<std::string> checkpoint_keys(const std::string& path) {
  if (!is_gguf_file(path)) return SafetensorsFile(path).names();
  const GgufFile f(path);
  const std::string prefix = ltx_key_prefix_to_add(f);
  std::vector<std::string> out;
  out.reserve(f.names().size());
  for (const std::string& n : f.names()) out.push_back(prefix + n);
  return out;
}

std::vector<StoredTensorInfo> stored_tensor_infos(const std::string& path) {
  std::vector<StoredTensorInfo> out;
  if (is_gguf_file(path)) {
    const GgufFile f(path);
    for (const GgufTensorInfo& ti : f.infos()) {
      const std::optional<DType> dense = ggml_dense_dtype(ti.type);
      out.push_back({ti.name, ti.shape, dense.value_or(DType::U8), static_cast<int64_t>(ti.nbytes),
                     !dense.has_value()});
    }
    return out;
  }
  const SafetensorsFile f(path);
  for (const TensorInfo& ti : f.infos())
    out.push_back({ti.name, ti.shape, ti.dtype, static_cast<int64_t>(ti.nbytes()), false});
  return out;
}

WeightMap WeightMap::scoped(const std::string& prefix) const {
  return WeightMap(state_, prefix_ + prefix);
}

bool WeightMap::contains(const std::string& name) const {
  return state_->entries.count(prefix_ + name) != 0;
}

std::vector<std::string> WeightMap::names() const {
  std::vector<std::string> out;
  for (auto it = state_->entries.lower_bound(prefix_);
       it != state_->entries.end() && it->first.starts_with(prefix_); ++it)
    out.push_back(it->first.substr(prefix_.size()));
  return out;
}

Shape WeightMap::shape(const std::string& name) const {
  auto it = state_->entries.find(prefix_ + name);
  LTX_CHECK(it != state_->entries.end(), "weights: no tensor '", prefix_ + name, "'");
  return it->second.shape();
}

DType WeightMap::dtype(const std::string& name) const {
  auto it = state_->entries.find(prefix_ + name);
  LTX_CHECK(it != state_->entries.end(), "weights: no tensor '", prefix_ + name, "'");
  return it->second.dtype();
}

std::optional<GgmlType> WeightMap::ggml_type(const std::string& name) const {
  auto it = state_->entries.find(prefix_ + name);
  LTX_CHECK(it != state_->entries.end(), "weights: no tensor '", prefix_ + name, "'");
  return it->second.ggml_type();
}

bool WeightMap::is_quantized(const std::string& name) const {
  auto it = state_->entries.find(prefix_ + name);
  LTX_CHECK(it != state_->entries.end(), "weights: no tensor '", prefix_ + name, "'");
  return it->second.quantized();
}

void WeightMap::add(const std::string& name, Tensor tensor) {
  LTX_CHECK(tensor.defined(), "WeightMap::add: tensor '", prefix_ + name, "' is undefined");
  state_->entries[prefix_ + name] = Entry{nullptr, nullptr, "", std::move(tensor), false};
}

std::optional<Tensor> WeightMap::take_impl(const std::string& name, const Shape* expected,
                                           DType target, Device device, bool required) {
  const std::string full = prefix_ + name;
  auto it = state_->entries.find(full);
  if (it == state_->entries.end() && required && expected != nullptr &&
      std::none_of(expected->begin(), expected->end(), [](int64_t d) { return d < 0; })) {
    // Absent weights may be made up: by this map's synthesizer (made on the target device and
    // dtype) or by an active WeightSynthesis scope (recorded, converted like a file tensor).
    Tensor made;
    const char* who = nullptr;
    if (state_->synthesize) {
      made = state_->synthesize(full, *expected, target, device);
      who = "weights: the synthesizer";
    } else if (WeightSynthesis* synth = WeightSynthesis::active()) {
      made = synth->make_(full, *expected);
      who = "WeightSynthesis: the maker";
      if (made.defined()) synth->created_.emplace_back(full, made);
    }
    if (who != nullptr) {
      LTX_CHECK(made.defined() && made.shape() == *expected, who, " returned ",
                made.defined() ? made.describe() : "nothing", " for '", full, "', expected ",
                expected->str());
      it = state_->entries.emplace(full, Entry{nullptr, nullptr, "", std::move(made), false}).first;
    }
  }
  if (it == state_->entries.end()) {
    if (required) state_->missing.insert(full);
    return std::nullopt;
  }
  Entry& e = it->second;
  e.used = true;
  const Shape actual = e.shape();
  const DType stored = e.dtype();
  if (expected != nullptr && !shape_matches(actual, *expected)) {
    state_->misshaped[full] = str("expected ", expected->str(), ", file has ", actual.str());
    return std::nullopt;
  }
  if (e.quantized()) {
    state_->wrong_dtype[full] = str("file has GGML ", ggml_type_name(*e.ggml_type()),
                                    " blocks, model wants a dense ", dtype_name(target),
                                    " tensor (quantized weights bind with take_ggml)");
    return std::nullopt;
  }
  if (stored != target && !(dtype_is_floating(stored) && dtype_is_floating(target))) {
    state_->wrong_dtype[full] =
        str("file has ", dtype_name(stored), ", model wants ", dtype_name(target));
    return std::nullopt;
  }
  Tensor raw = e.read();
  if (!device.is_cuda()) return raw.to(device, target);  // no copy when the dtype is already the target
  const MemoryScope scope(str("weight '", full, "'"));  // named by an out-of-memory error
  return raw.to(device, target);
}

Tensor WeightMap::take(const std::string& name, const Shape& expected, DType target,
                       Device device) {
  std::optional<Tensor> t = take_impl(name, &expected, target, device, true);
  return t ? *t : Tensor();
}

std::optional<Tensor> WeightMap::take_optional(const std::string& name, const Shape& expected,
                                               DType target, Device device) {
  return take_impl(name, &expected, target, device, false);
}

Tensor WeightMap::take_any_shape(const std::string& name, DType target, Device device) {
  std::optional<Tensor> t = take_impl(name, nullptr, target, device, true);
  return t ? *t : Tensor();
}

std::optional<GgmlType> WeightMap::synthesized_ggml_type(const std::string& name,
                                                         const Shape& shape) const {
  const std::string full = prefix_ + name;
  if (!state_->synthesize_ggml.type || state_->entries.count(full) != 0) return std::nullopt;
  return state_->synthesize_ggml.type(full, shape);
}

std::optional<DType> WeightMap::synthesized_dtype(const std::string& name,
                                                 const Shape& shape) const {
  const std::string full = prefix_ + name;
  if (!state_->synthesized_dtype || state_->entries.count(full) != 0) return std::nullopt;
  return state_->synthesized_dtype(full, shape);
}

std::optional<DType> WeightMap::stored_dtype(const std::string& name, const Shape& shape) const {
  if (contains(name)) return dtype(name);
  return synthesized_dtype(name, shape);
}

GgmlTensor WeightMap::take_ggml(const std::string& name, const Shape& expected, Device device) {
  const std::string full = prefix_ + name;
  GgmlTensor out;
  out.name = full;
  auto it = state_->entries.find(full);
  if (it == state_->entries.end()) {
    if (const std::optional<GgmlType> type = synthesized_ggml_type(name, expected)) {
      const MemoryScope scope(str("weight '", full, "'"));  // named by an out-of-memory error
      GgmlTensor made = state_->synthesize_ggml.make(full, expected, *type, device);
      const std::optional<uint64_t> nbytes = ggml_nbytes(*type, static_cast<uint64_t>(expected.numel()));
      LTX_CHECK(made.type == *type && made.shape == expected && made.bytes.defined() && nbytes &&
                    made.bytes.dtype() == DType::U8 && made.bytes.nbytes() == *nbytes,
                "weights: the GGML synthesizer returned ", ggml_type_name(made.type), " ",
                made.shape.str(), " (", made.bytes.defined() ? made.bytes.describe() : "no bytes",
                ") for '", full, "', expected ", ggml_type_name(*type), " ", expected.str());
      made.name = full;
      it = state_->entries.emplace(full, Entry{nullptr, nullptr, "", Tensor(), false, std::move(made)}).first;
    }
  }
  if (it == state_->entries.end()) {
    state_->missing.insert(full);
    return out;
  }
  Entry& e = it->second;
  e.used = true;
  const Shape actual = e.shape();
  if (!shape_matches(actual, expected)) {
    state_->misshaped[full] = str("expected ", expected.str(), ", file has ", actual.str());
    return out;
  }
  if (e.gguf) {
    out = e.gguf->ggml_tensor(e.file_key);
    out.name = full;
    return out;
  }
  if (e.made_ggml) return *e.made_ggml;
  const Tensor t = e.read();
  const DType dt = t.dtype();
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16) {
    state_->wrong_dtype[full] =
        str("file has ", dtype_name(dt), ", a GGML weight needs f32, f16, bf16 or GGUF blocks");
    return out;
  }
  // The dense data as F32 / F16 / BF16 rows of the last dimension (kept alive by the view).
  auto host = std::make_shared<Tensor>(t.to(Device::cpu()).contiguous());
  out.type = *ggml_type_of(dt);
  out.shape = host->shape();
  out.row_elems = host->dim() == 0 ? 1 : host->shape()[host->dim() - 1];
  void* data = host->raw_data();
  out.bytes = Tensor::from_blob(data, Shape{static_cast<int64_t>(host->nbytes())}, DType::U8,
                                Device::cpu(), std::shared_ptr<void>(host, data));
  return out;
}

void WeightMap::ignore(const std::string& name_or_prefix) {
  const std::string full = prefix_ + name_or_prefix;
  if (!full.empty() && full.back() == '.') {
    for (auto it = state_->entries.lower_bound(full);
         it != state_->entries.end() && it->first.starts_with(full); ++it)
      it->second.used = true;
  } else if (auto it = state_->entries.find(full); it != state_->entries.end()) {
    it->second.used = true;
  }
}

std::vector<std::string> WeightMap::unused() const {
  std::vector<std::string> out;
  for (auto it = state_->entries.lower_bound(prefix_);
       it != state_->entries.end() && it->first.starts_with(prefix_); ++it)
    if (!it->second.used) out.push_back(it->first);
  return out;
}

void WeightMap::finish(const std::string& what) const {
  std::vector<std::string> missing, misshaped, wrong, unexpected = unused();
  for (const auto& n : state_->missing)
    if (n.starts_with(prefix_)) missing.push_back(n);
  for (const auto& [n, why] : state_->misshaped)
    if (n.starts_with(prefix_)) misshaped.push_back(n + " (" + why + ")");
  for (const auto& [n, why] : state_->wrong_dtype)
    if (n.starts_with(prefix_)) wrong.push_back(n + " (" + why + ")");
  if (missing.empty() && misshaped.empty() && wrong.empty() && unexpected.empty()) return;

  std::ostringstream os;
  os << what << ": the weights do not match the model (";
  if (state_->paths.empty()) {
    os << "no files";
  } else {
    os << "from ";
    for (size_t i = 0; i < state_->paths.size(); ++i)
      os << (i ? ", '" : "'") << state_->paths[i] << "'";
  }
  if (!state_->key_map.empty()) os << ", keys " << state_->key_map;
  if (!prefix_.empty()) os << ", under '" << prefix_ << "'";
  os << "):";
  const char* sep = " ";
  auto section = [&](const std::vector<std::string>& items, const char* label) {
    if (items.empty()) return;
    os << sep << items.size() << " " << label << ": " << list_names(items);
    sep = "; ";
  };
  section(missing, "missing");
  section(misshaped, "with the wrong shape");
  section(wrong, "with an unusable dtype");
  section(unexpected, "unexpected");
  os << ". Check that the checkpoint is the right component and version for this model.";
  throw Error(os.str());
}

// ------------------------------------------------------------------------------ WeightSynthesis

namespace {
thread_local WeightSynthesis* g_active_synthesis = nullptr;
}  // namespace

WeightSynthesis::WeightSynthesis(Maker make) : make_(std::move(make)) {
  LTX_CHECK(make_ != nullptr, "WeightSynthesis: no maker");
  LTX_CHECK(g_active_synthesis == nullptr, "WeightSynthesis: scopes do not nest");
  g_active_synthesis = this;
}

WeightSynthesis::~WeightSynthesis() { g_active_synthesis = nullptr; }

WeightSynthesis* WeightSynthesis::active() { return g_active_synthesis; }

}  // namespace ltx::io
