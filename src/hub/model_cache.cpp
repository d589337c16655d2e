#include "hub/model_cache.h"

#include <filesystem>
#include <fstream>

#include "core/cache_dir.h"
#include "core/env_settings.h"
#include "core/error.h"
#include "hub/digest.h"

namespace ltx::hub {

namespace fs = std::filesystem;

ModelCache::ModelCache(std::string root) : root_(std::move(root)) {
  LTX_CHECK(!root_.empty(), "the model cache folder is empty; pass --cache-dir DIR");
}

std::string ModelCache::default_root() {
  const std::optional<std::string> dir = user_cache_dir();
  LTX_CHECK(dir.has_value(), "no model cache folder: neither XDG_CACHE_HOME nor HOME is set; pass "
                             "--cache-dir DIR");
  return (fs::path(*dir) / "models").string();
}

std::string ModelCache::repo_dir(const std::string& repo, const std::string& revision) const {
  return (fs::path(root_) / repo / revision).string();
}

std::string ModelCache::file_path(const FileRef& ref) const {
  return (fs::path(repo_dir(ref.repo, ref.revision)) / ref.path).string();
}

std::string ModelCache::partial_path(const FileRef& ref) const {
  return (fs::path(root_) / ".downloads" / ref.repo / ref.revision / ref.path).string() + ".part";
}

std::string ModelCache::state_path(const FileRef& ref) const {
  return partial_path(ref) + ".json";
}

std::string ModelCache::lock_path(const FileRef& ref) const {
  const std::string part = partial_path(ref);
  return part.substr(0, part.size() - 5) + ".lock";
}

std::string ModelCache::listing_path(const std::string& repo, const std::string& revision) const {
  return (fs::path(root_) / ".listings" / repo / (revision + ".json")).string();
}

std::optional<std::string> ModelCache::find(const FileRef& ref) const {
  std::error_code ec;
  const std::string ours = file_path(ref);
  if (fs::is_regular_file(ours, ec)) return ours;
  return find_in_hf_cache(ref);
}

std::optional<std::string> hf_hub_cache_dir() {
  if (const auto c = env::hf_hub_cache()) return *c;
  if (const auto h = env::hf_home()) return (fs::path(*h) / "hub").string();
  if (const auto x = env::xdg_cache_home()) return (fs::path(*x) / "huggingface" / "hub").string();
  if (const auto u = env::home()) return (fs::path(*u) / ".cache" / "huggingface" / "hub").string();
  return std::nullopt;
}

std::optional<std::string> find_in_hf_cache(const FileRef& ref) {
  const std::optional<std::string> cache = hf_hub_cache_dir();
  if (!cache) return std::nullopt;
  const size_t slash = ref.repo.find('/');
  const fs::path repo_dir = fs::path(*cache) / ("models--" + ref.repo.substr(0, slash) + "--" +
                                                ref.repo.substr(slash + 1));
  // A branch or tag names its commit in refs/; a commit is its own snapshot.
  std::string commit = ref.revision;
  if (etag_kind(ref.revision) != EtagKind::GitBlobSha1) {
    std::ifstream f(repo_dir / "refs" / ref.revision);
    if (!(f >> commit)) return std::nullopt;
  }
  const fs::path file = repo_dir / "snapshots" / commit / ref.path;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;  // follows the link to the blob
  return file.string();
}

}  // namespace ltx::hub
