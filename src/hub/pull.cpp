#include "hub/pull.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace ltx::hub {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::optional<std::vector<RepoFile>> load_listing(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  try {
    std::vector<RepoFile> files;
    const json listing = json::parse(f);
    for (const json& e : listing.at("files"))
      files.push_back({e.at("path").get<std::string>(), e.at("size").get<int64_t>()});
    return files;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void save_listing(const std::string& path, const std::vector<RepoFile>& files) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  json list = json::array();
  for (const RepoFile& f : files) list.push_back({{"path", f.path}, {"size", f.size}});
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"files", list}}.dump(1);
    if (!out) return;  // without the list, offline mode cannot vouch for the folder
  }
  fs::rename(tmp, path, ec);
}

// Hugging Face's snapshot folder of a repository, when it holds every file of `files`.
std::optional<std::string> complete_hf_snapshot(const std::string& repo, const std::string& revision,
                                                const std::vector<RepoFile>& files) {
  if (files.empty()) return std::nullopt;
  std::optional<std::string> dir;
  for (const RepoFile& f : files) {
    const auto p = find_in_hf_cache({repo, revision, f.path});
    if (!p) return std::nullopt;
    if (!dir) {
      // The snapshot folder: the file's path minus the repository path.
      std::string s = *p;
      dir = s.substr(0, s.size() - f.path.size() - 1);
    }
  }
  return dir;
}

}  // namespace

std::string PullTarget::str() const {
  return repo + (revision == kDefaultRevision ? "" : "@" + revision) +
         (path.empty() ? "" : ":" + path);
}

std::vector<PullTarget> parse_pull_argument(const std::string& arg) {
  std::vector<std::string> parts;
  std::istringstream in(arg);
  std::string part;
  while (std::getline(in, part, ':')) parts.push_back(part);
  LTX_CHECK(!parts.empty(), "ltx pull: an empty argument; give a preset, OWNER/NAME or OWNER/NAME:FILE");
  PullTarget base;
  base.repo = parts[0];
  if (const size_t at = base.repo.find('@'); at != std::string::npos) {
    base.revision = base.repo.substr(at + 1);
    base.repo.resize(at);
  }
  check_repo_id(base.repo, "ltx pull " + arg);
  std::vector<PullTarget> out;
  if (parts.size() == 1) {
    check_file_ref({base.repo, base.revision, "x"}, "ltx pull " + arg);
    return {base};
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    PullTarget t = base;
    t.path = parts[i];
    check_file_ref({t.repo, t.revision, t.path}, "ltx pull " + arg);
    out.push_back(t);
  }
  return out;
}

std::vector<PullTarget> preset_targets(const Preset& preset) {
  std::vector<PullTarget> out;
  for (const PresetFile& f : preset.files)
    out.push_back({std::string(f.repo), kDefaultRevision, std::string(f.path)});
  return out;
}

TargetState inspect_target(const HubConfig& hub, const ModelCache& cache, const PullTarget& t) {
  TargetState s;
  s.target = t;
  std::error_code ec;
  if (!t.path.empty()) {
    const FileRef ref{t.repo, t.revision, t.path};
    check_file_ref(ref, "the file to pull");
    s.files = {ref};
    if (const auto p = cache.find(ref)) {
      s.local_path = *p;
      s.present_bytes = static_cast<int64_t>(fs::file_size(*p, ec));
    } else {
      s.local_path = cache.file_path(ref);
      s.missing = {ref};
      s.missing_sizes = {hub.offline ? -1 : fetch_metadata(hub, ref).size};
    }
    return s;
  }

  check_repo_id(t.repo, "the repository to pull");
  const std::string listing = cache.listing_path(t.repo, t.revision);
  std::optional<std::vector<RepoFile>> files = load_listing(listing);
  const std::string ours = cache.repo_dir(t.repo, t.revision);
  s.local_path = ours;
  if (!files && hub.offline) {
    // Never listed here: a folder huggingface_hub downloaded is taken as it is.
    const auto hf = find_in_hf_cache({t.repo, t.revision, "config.json"});
    if (hf) {
      s.local_path = fs::path(*hf).parent_path().string();
      return s;
    }
    s.missing = {FileRef{t.repo, t.revision, "(the repository's file list)"}};
    s.missing_sizes = {-1};
    return s;
  }
  // Online, the list is fetched anew unless our folder is complete by the kept one.
  bool complete = files.has_value();
  if (complete)
    for (const RepoFile& f : *files) complete = complete && fs::is_regular_file(fs::path(ours) / f.path, ec);
  if (!complete && !hub.offline) {
    files = list_repo_files(hub, t.repo, t.revision);
    save_listing(listing, *files);
  }
  if (const auto hf = complete_hf_snapshot(t.repo, t.revision, *files); hf && !complete) {
    s.local_path = *hf;
    for (const RepoFile& f : *files) s.files.push_back({t.repo, t.revision, f.path});
    return s;
  }
  for (const RepoFile& f : *files) {
    const FileRef ref{t.repo, t.revision, f.path};
    s.files.push_back(ref);
    const fs::path p = fs::path(ours) / f.path;
    if (fs::is_regular_file(p, ec)) {
      s.present_bytes += static_cast<int64_t>(fs::file_size(p, ec));
    } else {
      s.missing.push_back(ref);
      s.missing_sizes.push_back(f.size);
    }
  }
  return s;
}

std::string fetch_target(const HubConfig& hub, const ModelCache& cache, const TargetState& s,
                         const DownloadOptions& options) {
  if (!s.target.path.empty()) {
    for (const FileRef& ref : s.missing) return fetch_file(hub, cache, ref, options).path;
    return s.local_path;
  }
  // A folder's files all go to our cache, never taken one by one from Hugging Face's, so that
  // they sit together in one folder.
  DownloadOptions ours = options;
  ours.hf_cache = false;
  for (const FileRef& ref : s.missing) fetch_file(hub, cache, ref, ours);
  return s.local_path;
}

std::string human_bytes(int64_t bytes) {
  if (bytes < 0) return "?";
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace ltx::hub
