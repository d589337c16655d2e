#include "hub/hub_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/env_settings.h"
#include "core/error.h"

namespace ltx::hub {

namespace {

bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

bool valid_name(const std::string& s) {
  if (s.empty() || s == "." || s.find("..") != std::string::npos) return false;
  for (char c : s)
    if (!id_char(c)) return false;
  return true;
}

std::string percent_encode(const std::string& part) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : part) {
    if (id_char(static_cast<char>(c)) || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token.
std::string token_file_contents() {
  namespace fs = std::filesystem;
  fs::path home;
  if (const auto h = env::hf_home())
    home = *h;
  else if (const auto x = env::xdg_cache_home())
    home = fs::path(*x) / "huggingface";
  else if (const auto u = env::home())
    home = fs::path(*u) / ".cache" / "huggingface";
  else
    return "";
  std::ifstream f(home / "token");
  std::string token;
  if (f) std::getline(f, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

}  // namespace

HubConfig HubConfig::from_environment(const std::string& token_flag, bool offline_flag) {
  HubConfig c;
  if (const auto e = env::hf_endpoint()) {
    c.endpoint = *e;
    while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
    LTX_CHECK(c.endpoint.rfind("http://", 0) == 0 || c.endpoint.rfind("https://", 0) == 0,
              "HF_ENDPOINT=", *e, " is not an http:// or https:// URL (unset it for ",
              kDefaultEndpoint, ")");
  }
  if (!token_flag.empty())
    c.token = token_flag;
  else if (const auto t = env::hf_token())
    c.token = *t;
  else
    c.token = token_file_contents();
  c.offline = offline_flag || env::hf_hub_offline();
  return c;
}

std::string FileRef::str() const {
  return repo + ":" + path + (revision == kDefaultRevision ? "" : "@" + revision);
}

void check_repo_id(const std::string& repo, const std::string& what) {
  const size_t slash = repo.find('/');
  LTX_CHECK(slash != std::string::npos && valid_name(repo.substr(0, slash)) &&
                valid_name(repo.substr(slash + 1)),
            what, ": '", repo,
            "' is not a Hugging Face repository id (OWNER/NAME of letters, digits, '-', '_' and "
            "'.', e.g. Lightricks/LTX-2.3)");
}

void check_file_ref(const FileRef& ref, const std::string& what) {
  check_repo_id(ref.repo, what);
  LTX_CHECK(valid_name(ref.revision), what, ": revision '", ref.revision,
            "' must be a branch, tag or commit of letters, digits, '-', '_' and '.'");
  std::istringstream parts(ref.path);
  std::string part;
  bool any = false;
  bool ok = !ref.path.empty() && ref.path.front() != '/' && ref.path.back() != '/';
  while (ok && std::getline(parts, part, '/')) {
    any = true;
    ok = !part.empty() && part != "." && part != ".." && part.find('\\') == std::string::npos &&
         part.find('\0') == std::string::npos;
  }
  LTX_CHECK(ok && any, what, ": '", ref.path, "' in ", ref.repo,
            " is not a relative file path inside the repository (parts separated by '/', no "
            "empty, '.' or '..' parts)");
}

std::string resolve_url(const HubConfig& hub, const FileRef& ref) {
  std::string path;
  std::istringstream parts(ref.path);
  std::string part;
  while (std::getline(parts, part, '/')) path += (path.empty() ? "" : "/") + percent_encode(part);
  return hub.endpoint + "/" + ref.repo + "/resolve/" + percent_encode(ref.revision) + "/" + path;
}

std::string model_info_url(const HubConfig& hub, const std::string& repo,
                           const std::string& revision) {
  return hub.endpoint + "/api/models/" + repo + "/revision/" + percent_encode(revision);
}

}  // namespace ltx::hub
