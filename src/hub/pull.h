#pragma once
// What `ltx pull` and the `--model` flags fetch: single files and whole repositories (a folder,
// such as the Gemma 3 text encoder), resolved against the caches before anything is downloaded so
// that a command can say up front what is missing, how large it is, and fail early (offline, a
// gated repository without a token) before a byte is written.
#include <cstdint>
#include <string>
#include <vector>

#include "hub/download.h"
#include "hub/presets.h"

namespace ltx::hub {

struct PullTarget {
  std::string repo;
  std::string revision = kDefaultRevision;
  std::string path;  // empty: every file of the repository

  std::string str() const;  // "owner/name" or "owner/name:path" (+ "@rev")
};

// A command-line argument: "OWNER/NAME[@REV]" (the whole repository) or
// "OWNER/NAME[@REV]:FILE[:FILE...]" (those files). Presets are not parsed here (find_preset).
std::vector<PullTarget> parse_pull_argument(const std::string& arg);
std::vector<PullTarget> preset_targets(const Preset& preset);

struct TargetState {
  PullTarget target;
  std::string local_path;         // the file, or the repository's folder, once complete
  std::vector<FileRef> files;     // what it is made of
  std::vector<FileRef> missing;   // not on disk yet
  std::vector<int64_t> missing_sizes;  // per missing file; -1 unknown (offline)
  int64_t present_bytes = 0;      // of the files already on disk
};

// Which files the target is made of and which are on disk. A whole repository is listed by the
// hub (the list is kept in the cache, so offline mode knows whether the folder is complete);
// offline, the kept list is used. Online, every missing file's size comes from the hub (HEAD),
// which also makes a gated repository fail here, before any download.
TargetState inspect_target(const HubConfig& hub, const ModelCache& cache, const PullTarget& target);

// Downloads the missing files of `state` in order; returns state.local_path.
std::string fetch_target(const HubConfig& hub, const ModelCache& cache, const TargetState& state,
                         const DownloadOptions& options);

// "12.3 GB" (decimal units, as the hub shows sizes); "?" for a negative size.
std::string human_bytes(int64_t bytes);

}  // namespace ltx::hub
