#include "models/text/gemma_assets.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/input_limits.h"
#include "io/gguf.h"
#include "io/llama_gguf.h"
#include "io/safetensors.h"

namespace ltx::text {

namespace fs = std::filesystem;

namespace {

// A text file of the Gemma folder, within its size limit (core/input_limits.h).
std::string read_file_bytes(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == "tokenizer.json"
             ? limits::read_file_within(p.string(), limits::kMaxTokenizerJsonBytes, "tokenizer.json")
             : limits::read_file_within(p.string(), limits::kMaxTextFileBytes, "text file");
}

// Regular files under `root`, breadth first (a folder's own files before its subfolders'), each
// level in sorted order.
std::vector<fs::path> files_breadth_first(const fs::path& root) {
  std::vector<fs::path> out;
  std::deque<fs::path> dirs{root};
  while (!dirs.empty()) {
    const fs::path dir = dirs.front();
    dirs.pop_front();
    std::vector<fs::path> files, subdirs;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_directory())
        subdirs.push_back(e.path());
      else if (e.is_regular_file())
        files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    std::sort(subdirs.begin(), subdirs.end());
    out.insert(out.end(), files.begin(), files.end());
    dirs.insert(dirs.end(), subdirs.begin(), subdirs.end());
  }
  return out;
}

// The bytes of a 1-D integer tensor, converted like numpy's astype(uint8) (int8 reinterpreted).
std::string tensor_as_bytes(const io::SafetensorsFile& f, const std::string& name) {
  const io::TensorInfo& info = f.info(name);
  const uint8_t* p = f.tensor_bytes(name);
  const auto n = static_cast<size_t>(info.numel());
  std::string out(n, '\0');
  switch (info.dtype) {
    case DType::U8:
    case DType::I8:
      std::copy(p, p + n, reinterpret_cast<uint8_t*>(out.data()));
      break;
    case DType::I32:
      for (size_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = static_cast<char>(static_cast<uint8_t>(v));
      }
      break;
    case DType::I64:
      for (size_t i = 0; i < n; ++i) {
        int64_t v;
        std::memcpy(&v, p + 8 * i, 8);
        out[i] = static_cast<char>(static_cast<uint8_t>(v));
      }
      break;
    default:
      fail(f.path(), ": tensor ", name, " holds ", dtype_name(info.dtype),
           " data; embedded assets must be u8 (or integer) byte tensors");
  }
  return out;
}

constexpr const char* kTokenizerTensor = "tokenizer_json";
constexpr const char* kAssetPrefix = "hf_asset__";
constexpr const char* kConfigMetadata = "gemma_config";

}  // namespace

bool is_safetensors_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && fs::path(path).extension() == ".safetensors";
}

GemmaAssets GemmaAssets::load(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return from_root(path);
  if (is_safetensors_file(path)) return from_single_file(path);
  if (io::is_gguf_file(path)) return from_gguf(path);
  fail("Gemma path ", path,
       " is neither a directory, a .safetensors file nor a GGUF file (llama.cpp's Gemma 3)");
}

GemmaAssets GemmaAssets::from_gguf(const std::string& path) {
  const io::GgufFile f(path);
  GemmaAssets a;
  a.source = path;
  a.llama_gguf = true;
  a.config = io::llama_cpp_gemma3_config(f);
  (void)io::llama_cpp_spm_vocab(f);  // the tokenizer keys, checked before any weight is read
  a.sidecars["tokenizer_config.json"] = io::llama_cpp_tokenizer_config(f).dump();
  a.weight_paths = {fs::absolute(path).string()};
  return a;
}

GemmaAssets GemmaAssets::from_root(const std::string& dir) {
  std::error_code ec;
  const fs::path diffusers_te = fs::path(dir) / "text_encoder";
  const bool diffusers = fs::is_regular_file(fs::path(dir) / "model_index.json", ec);
  LTX_CHECK(!diffusers || fs::is_directory(diffusers_te, ec), "Diffusers folder ", dir,
            " has no text_encoder/ folder (the Gemma text encoder): download it with the "
            "pipeline, or pass --gemma-root / --text-encoder-path");
  if (diffusers) {
    // A Diffusers pipeline: the Gemma weights and config in text_encoder/, the tokenizer files in
    // tokenizer/ (and processor/ when the pipeline has one) beside it.
    GemmaAssets a = from_root(diffusers_te.string());
    for (const char* side : {"tokenizer", "processor"}) {
      const fs::path sub = fs::path(dir) / side;
      if (!fs::is_directory(sub, ec)) continue;
      const GemmaAssets extra = from_root(sub.string());
      if (a.tokenizer_json.empty()) a.tokenizer_json = extra.tokenizer_json;
      for (const auto& [name, bytes] : extra.sidecars) a.sidecars.emplace(name, bytes);
    }
    LTX_CHECK(!a.tokenizer_json.empty(), "Diffusers folder ", dir,
              " has no tokenizer.json in text_encoder/ or tokenizer/; download the tokenizer "
              "folder of the pipeline too");
    a.source = dir;
    return a;
  }
  GemmaAssets a;
  a.source = dir;
  const std::vector<fs::path> files = files_breadth_first(dir);
  auto first_named = [&](const std::string& name) -> const fs::path* {
    for (const fs::path& p : files)
      if (p.filename() == name) return &p;
    return nullptr;
  };
  const fs::path* tok = first_named("tokenizer.json");
  const bool diffusers_part = fs::is_regular_file(fs::path(dir).parent_path() / "model_index.json", ec);
  LTX_CHECK(tok || diffusers_part, "Gemma root ", dir,
            " has no tokenizer.json (searched the folder and its subfolders)");
  if (tok) a.tokenizer_json = read_file_bytes(*tok);
  if (const fs::path* cfg = first_named("config.json")) {
    try {
      a.config = nlohmann::json::parse(read_file_bytes(*cfg));
    } catch (const nlohmann::json::exception& e) {
      fail(cfg->string(), ": not valid JSON (", e.what(), ")");
    }
  }
  // Sidecars: by sorted full path, first file of a name wins.
  std::vector<fs::path> sorted = files;
  std::sort(sorted.begin(), sorted.end());
  for (const fs::path& p : sorted) {
    const std::string name = p.filename().string();
    if (name == "config.json" || name == "tokenizer.json") continue;
    if (!name.ends_with(".json") && !name.ends_with(".jinja")) continue;
    if (!a.sidecars.count(name)) a.sidecars[name] = read_file_bytes(p);
  }
  // Weights: every .safetensors in the folder of the first model*.safetensors, recursively.
  for (const fs::path& p : files) {
    const std::string name = p.filename().string();
    if (name.rfind("model", 0) == 0 && name.ends_with(".safetensors")) {
      std::vector<std::string> weights;
      for (const auto& e : fs::recursive_directory_iterator(p.parent_path()))
        if (e.is_regular_file() && e.path().extension() == ".safetensors")
          weights.push_back(e.path().string());
      std::sort(weights.begin(), weights.end());
      a.weight_paths = std::move(weights);
      break;
    }
  }
  if (a.weight_paths.empty()) {
    // A weights file under another name (a ComfyUI text encoder put beside Gemma's config and
    // tokenizer): the .safetensors files of the folder itself.
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".safetensors")
        a.weight_paths.push_back(e.path().string());
    std::sort(a.weight_paths.begin(), a.weight_paths.end());
  }
  return a;
}

GemmaAssets GemmaAssets::from_single_file(const std::string& path) {
  GemmaAssets a;
  a.source = path;
  io::SafetensorsFile f(path);
  const auto& meta = f.metadata();
  auto it = meta.find(kConfigMetadata);
  LTX_CHECK(it != meta.end(), "text-encoder file ", path, " is missing the metadata key \"",
            kConfigMetadata, "\" (the JSON-encoded Hugging Face config)");
  try {
    a.config = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    fail("text-encoder file ", path, ": metadata \"", kConfigMetadata, "\" is not valid JSON (",
         e.what(), ")");
  }
  LTX_CHECK(f.contains(kTokenizerTensor), "text-encoder file ", path, " is missing the tensor \"",
            kTokenizerTensor, "\" (the embedded tokenizer.json)");
  a.tokenizer_json = tensor_as_bytes(f, kTokenizerTensor);
  const std::string prefix = kAssetPrefix;
  for (const std::string& name : f.names())
    if (name.rfind(prefix, 0) == 0)
      a.sidecars[name.substr(prefix.size())] = tensor_as_bytes(f, name);
  for (const char* name : {"tokenizer_config.json", "processor_config.json", "chat_template.jinja",
                           "generation_config.json"}) {
    if (a.sidecars.count(name)) continue;
    if (auto m = meta.find(name); m != meta.end()) a.sidecars[name] = m->second;
  }
  a.weight_paths = {fs::absolute(path).string()};
  return a;
}

const std::string& GemmaAssets::sidecar(const std::string& name) const {
  auto it = sidecars.find(name);
  LTX_CHECK(it != sidecars.end(), "Gemma assets from ", source, " are missing the sidecar ", name);
  return it->second;
}

nlohmann::json GemmaAssets::sidecar_json(const std::string& name) const {
  const std::string& bytes = sidecar(name);
  try {
    return nlohmann::json::parse(bytes);
  } catch (const nlohmann::json::exception& e) {
    fail("Gemma assets from ", source, ": ", name, " is not valid JSON (", e.what(), ")");
  }
}

void GemmaAssets::require_encoder_assets() const {
  std::vector<std::string> missing;
  for (const char* name : {"tokenizer_config.json", "processor_config.json"})
    if (!sidecars.count(name) && !(llama_gguf && std::string(name) == "processor_config.json"))
      missing.emplace_back(name);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    fail("Gemma assets from ", source, " are missing required sidecar(s): ", list,
         ". Embed them as hf_asset__<name> tensors (or metadata for small JSON)");
  }
  LTX_CHECK(config.is_object(), "Gemma assets from ", source, " have no config (config.json / ",
            "metadata \"gemma_config\")");
  LTX_CHECK(config.contains("model_type") && config["model_type"].is_string() &&
                !config["model_type"].get<std::string>().empty(),
            "Gemma config from ", source, " is missing model_type");
  LTX_CHECK(!weight_paths.empty(), "Gemma root ", source,
            " has no model*.safetensors weight files");
}

}  // namespace ltx::text
