#pragma once
// Where model files come from: a Hugging Face hub (the public one, a mirror or a local one named by
// HF_ENDPOINT, as huggingface_hub reads it), the access token for gated repositories, and whether
// the network may be used at all. A file of a repository is a FileRef; its download address is
// the hub's resolve URL, {endpoint}/{repo}/resolve/{revision}/{path} (huggingface_hub's
// HUGGINGFACE_CO_URL_TEMPLATE), which for large files redirects to the CDN.
#include <string>

namespace ltx::hub {

inline constexpr const char* kDefaultEndpoint = "https://huggingface.co";
inline constexpr const char* kDefaultRevision = "main";

struct HubConfig {
  std::string endpoint = kDefaultEndpoint;  // no trailing '/'
  std::string token;                         // empty: anonymous requests
  bool offline = false;                      // only files already on disk

  // From the environment: HF_ENDPOINT, the token (`token_flag` when given, else HF_TOKEN, else the
  // file `hf auth login` writes: $HF_HOME/token), offline when `offline_flag` or HF_HUB_OFFLINE.
  static HubConfig from_environment(const std::string& token_flag = "", bool offline_flag = false);
};

// One file of one repository at one revision (a branch, tag or commit).
struct FileRef {
  std::string repo;                       // "Lightricks/LTX-2.3"
  std::string revision = kDefaultRevision;
  std::string path;                       // "ltx-2.3-22b-dev.safetensors", "vae/x.safetensors"

  std::string str() const;  // "Lightricks/LTX-2.3:vae/x.safetensors" (+ "@rev" when not main)
};

// Throws an ltx::Error naming `what` unless `repo` is "owner/name" of letters, digits, '-', '_'
// and '.' (no "..", as the hub's repo ids); `revision` the same characters without '/'; `path`
// relative, '/'-separated, without empty, "." or ".." parts. Paths also come from the hub's file
// listings, so this is what keeps a file inside the cache.
void check_repo_id(const std::string& repo, const std::string& what);
void check_file_ref(const FileRef& ref, const std::string& what);

// {endpoint}/{repo}/resolve/{revision}/{path}, each path part percent-encoded.
std::string resolve_url(const HubConfig& hub, const FileRef& ref);
// {endpoint}/api/models/{repo}/revision/{revision}: the repository's files (huggingface_hub's
// model_info).
std::string model_info_url(const HubConfig& hub, const std::string& repo,
                           const std::string& revision);

}  // namespace ltx::hub
