#include "core/cache_dir.h"

#include <filesystem>

#include "core/env_settings.h"

namespace ltx {

std::optional<std::string> user_cache_dir() {
  namespace fs = std::filesystem;
  if (const std::optional<std::string> xdg = env::xdg_cache_home())
    return (fs::path(*xdg) / "ltx").string();
  if (const std::optional<std::string> home = env::home())
    return (fs::path(*home) / ".cache" / "ltx").string();
  return std::nullopt;
}

std::optional<std::string> user_data_dir() {
  namespace fs = std::filesystem;
  if (const std::optional<std::string> xdg = env::xdg_data_home())
    return (fs::path(*xdg) / "ltx").string();
  if (const std::optional<std::string> home = env::home())
    return (fs::path(*home) / ".local" / "share" / "ltx").string();
  return std::nullopt;
}

}  // namespace ltx
