#include "models/lora/lora.h"

#include <set>
#include <sstream>

#include "core/log.h"
#include "io/weights.h"

namespace ltx::lora {

namespace {

constexpr const char* kSuffixA = ".lora_A.weight";
constexpr const char* kSuffixB = ".lora_B.weight";
constexpr const char* kSuffixAlpha = ".alpha";

std::string strip(const std::string& s, const std::string& suffix) {
  return s.substr(0, s.size() - suffix.size());
}

// LTXV_LORA_COMFY_RENAMING_MAP: keeps every name, removes every "diffusion_model.".
const io::KeyMap& lora_key_map() {
  static const io::KeyMap k = [] {
    io::KeyMap m("LTXV_LORA_COMFY_RENAMING_MAP");
    m.keep("").replace("diffusion_model.", "");
    return m;
  }();
  return k;
}

}  // namespace

std::shared_ptr<const LoraFile> LoraFile::open(const std::string& path, const OpenOptions& opt) {
  return from_file(io::SafetensorsFile::open(path), opt);
}

std::shared_ptr<const LoraFile> LoraFile::from_file(std::shared_ptr<const io::SafetensorsFile> file,
                                                    const OpenOptions& opt) {
  LTX_CHECK(file != nullptr, "LoraFile::from_file: no file");
  auto lf = std::make_shared<LoraFile>();
  lf->file_ = std::move(file);
  lf->strict_ = opt.strict;
  const io::SafetensorsFile& f = *lf->file_;
  const std::string& path = f.path();

  // File names per renamed name, to report collisions.
  std::map<std::string, std::string> file_key;
  std::map<std::string, std::string> a_keys, b_keys, alpha_keys;  // target -> file name
  std::vector<std::string> unknown, duplicates, problems;
  for (const std::string& name : f.names()) {
    const std::string renamed = *lora_key_map().apply(name);
    if (auto [it, fresh] = file_key.emplace(renamed, name); !fresh) {
      duplicates.push_back(str("'", it->second, "' and '", name, "' are both '", renamed, "'"));
      continue;
    }
    if (renamed.ends_with(kSuffixA))
      a_keys[strip(renamed, kSuffixA) + ".weight"] = name;
    else if (renamed.ends_with(kSuffixB))
      b_keys[strip(renamed, kSuffixB) + ".weight"] = name;
    else if (renamed.ends_with(kSuffixAlpha))
      alpha_keys[strip(renamed, kSuffixAlpha) + ".weight"] = name;
    else
      unknown.push_back(name);
  }

  std::vector<std::string> half_pairs;
  for (const auto& [target, a_name] : a_keys)
    if (!b_keys.count(target))
      half_pairs.push_back(str("'", a_name, "' has no ", kSuffixB, " partner"));
  for (const auto& [target, b_name] : b_keys)
    if (!a_keys.count(target))
      half_pairs.push_back(str("'", b_name, "' has no ", kSuffixA, " partner"));
  for (const auto& [target, alpha_name] : alpha_keys)
    if (!a_keys.count(target) || !b_keys.count(target)) unknown.push_back(alpha_name);

  size_t alpha_not_rank = 0;
  std::string alpha_example;
  for (const auto& [target, a_name] : a_keys) {
    auto b_it = b_keys.find(target);
    if (b_it == b_keys.end()) continue;
    const io::TensorInfo& a = f.info(a_name);
    const io::TensorInfo& b = f.info(b_it->second);
    if (!dtype_is_floating(a.dtype) || !dtype_is_floating(b.dtype)) {
      problems.push_back(str("'", target, "': factors must be floating point, file has ",
                             dtype_name(a.dtype), " and ", dtype_name(b.dtype)));
      continue;
    }
    if (a.shape.size() != 2 || b.shape.size() != 2) {
      problems.push_back(str("'", target, "': factors must be 2-D, lora_A is ", a.shape.str(),
                             " and lora_B ", b.shape.str()));
      continue;
    }
    if (a.shape[0] != b.shape[1]) {
      problems.push_back(str("'", target, "': rank mismatch, lora_A ", a.shape.str(), " has rank ",
                             a.shape[0], " but lora_B ", b.shape.str(), " has rank ", b.shape[1]));
      continue;
    }
    if (auto al = alpha_keys.find(target); al != alpha_keys.end()) {
      const io::TensorInfo& ai = f.info(al->second);
      if (ai.numel() != 1 || !dtype_is_floating(ai.dtype)) {
        problems.push_back(str("'", al->second,
                               "': alpha must be one floating-point value, file has ",
                               dtype_name(ai.dtype), ai.shape.str()));
        continue;
      }
      if (f.tensor(al->second).item() != static_cast<double>(a.shape[0])) {
        ++alpha_not_rank;
        alpha_example =
            str(al->second, " = ", f.tensor(al->second).item(), " at rank ", a.shape[0]);
      }
    }
    lf->targets_.emplace(target, Pair{f.tensor(a_name), f.tensor(b_it->second)});
  }

  // Always errors: the reference could not use these either (it fails or would misread them).
  std::vector<std::string> errors = problems;
  if (!duplicates.empty())
    errors.push_back(str(duplicates.size(), " names collide once 'diffusion_model.' is removed: ",
                         detail::list_some(duplicates)));
  // Errors when strict; the reference skips them silently.
  std::vector<std::string> skipped;
  if (!half_pairs.empty())
    skipped.push_back(str(half_pairs.size(), " incomplete pairs: ", detail::list_some(half_pairs)));
  if (!unknown.empty())
    skipped.push_back(str(unknown.size(), " names that are not '<target>", kSuffixA, "', '<target>",
                          kSuffixB, "' or a paired '<target>", kSuffixAlpha,
                          "': ", detail::list_some(unknown),
                          " (only the PEFT/ComfyUI lora_A/lora_B layout is supported)"));
  if (opt.strict) errors.insert(errors.end(), skipped.begin(), skipped.end());
  if (!errors.empty()) {
    std::ostringstream os;
    os << "LoRA file '" << path << "': ";
    for (size_t i = 0; i < errors.size(); ++i) os << (i ? "; " : "") << errors[i];
    os << ".";
    if (opt.strict && !skipped.empty())
      os << " (The reference skips such names silently; open the LoRA non-strict to do the same.)";
    throw Error(os.str());
  }
  for (const std::string& s : skipped) log_warn("LoRA file '", path, "': skipping ", s);
  if (lf->targets_.empty()) {
    LTX_CHECK(!opt.strict, "LoRA file '", path, "' has no factor pairs ('<target>", kSuffixA,
              "' with '<target>", kSuffixB, "'); it holds ", f.size(),
              " tensors. Is it a LoRA in the PEFT/ComfyUI layout?");
    log_warn("LoRA file '", path, "' has no factor pairs; it changes nothing");
  }
  if (alpha_not_rank > 0)
    log_warn("LoRA file '", path, "': ", alpha_not_rank,
             " alpha values differ from the rank (e.g. ", alpha_example,
             "); like the reference, ltx applies no alpha/rank scaling");
  return lf;
}

LoraSet open_set(const std::vector<LoraSpec>& specs, const OpenOptions& opt) {
  std::map<std::string, std::shared_ptr<const LoraFile>> opened;
  LoraSet set;
  for (const LoraSpec& s : specs) {
    auto& f = opened[s.path];
    if (!f) f = LoraFile::open(s.path, opt);
    set.push_back({f, s.strength});
  }
  return set;
}

bool is_identity(const LoraSet& set) {
  for (const WeightedLora& l : set)
    if (l.strength != 0.0) return false;
  return true;
}

std::string detail::list_some(const std::vector<std::string>& items, size_t max_items) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > max_items) s += str(" and ", items.size() - max_items, " more");
  return s;
}

std::string describe(const LoraSet& set) {
  if (set.empty()) return "no LoRA";
  std::ostringstream os;
  for (size_t i = 0; i < set.size(); ++i)
    os << (i ? ", " : "") << set[i].lora->path() << " (" << set[i].strength << ")";
  return os.str();
}

}  // namespace ltx::lora
