#include "core/cache_dir.h"

#include <cstdlib>
#include <filesystem>

namespace ltx {

std::optional<std::string> user_cache_dir() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return (fs::path(xdg) / "ltx").string();
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return (fs::path(home) / ".cache" / "ltx").string();
  return std::nullopt;
}

}  // namespace ltx
