#pragma once
// Where downloaded model files live (docs/MODELS.md "Cache"): one folder per repository and
// revision, the repository's own paths below it, so a whole repository (a Gemma folder) is a
// folder the model flags take as is:
//
//   <root>/<owner>/<name>/<revision>/<path>          complete, verified files only
//   <root>/.downloads/<owner>/<name>/<revision>/<path>.part       the bytes so far
//                                                     .part.json  what they are: ETag, size and
//                                                                 the byte ranges done
//                                                     .lock       held while a process downloads
//   <root>/.listings/<owner>/<name>/<revision>.json  a whole repository's file list (what
//                                                     offline mode checks the folder against)
//
// <root> is $XDG_CACHE_HOME/ltx/models (else ~/.cache/ltx/models) or --cache-dir. A file is
// renamed into place only after its size and digest matched the hub's, so a file at its final
// name is complete. Files that huggingface_hub already downloaded are used where they are: its
// cache ($HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub) keeps models--<owner>--<name>/refs/<revision> (the commit) and
// snapshots/<commit>/<path> (a link to the blob, made once the blob is complete).
#include <optional>
#include <string>

#include "hub/hub_config.h"

namespace ltx::hub {

class ModelCache {
 public:
  explicit ModelCache(std::string root);
  // $XDG_CACHE_HOME/ltx/models, else $HOME/.cache/ltx/models; throws when neither is set.
  static std::string default_root();

  const std::string& root() const { return root_; }
  std::string repo_dir(const std::string& repo, const std::string& revision) const;
  std::string file_path(const FileRef& ref) const;
  std::string partial_path(const FileRef& ref) const;  // .part
  std::string state_path(const FileRef& ref) const;    // .part.json
  std::string lock_path(const FileRef& ref) const;     // .lock
  std::string listing_path(const std::string& repo, const std::string& revision) const;

  // The complete file: in this cache, else in Hugging Face's hub cache; nullopt when neither
  // has it.
  std::optional<std::string> find(const FileRef& ref) const;

 private:
  std::string root_;
};

// Hugging Face's hub cache folder (nullopt when no variable names a home).
std::optional<std::string> hf_hub_cache_dir();
// The file in Hugging Face's hub cache, when it is there complete.
std::optional<std::string> find_in_hf_cache(const FileRef& ref);

}  // namespace ltx::hub
