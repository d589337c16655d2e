#pragma once
// ltx's per-user cache folder: $XDG_CACHE_HOME/ltx when XDG_CACHE_HOME is set and not empty, else
// $HOME/.cache/ltx; nullopt when neither is set. Shared by what ltx keeps between runs (the demo
// bundle, the cuDNN tuning cache).
#include <optional>
#include <string>

namespace ltx {

std::optional<std::string> user_cache_dir();
// ltx's per-user data folder (what a user would miss if it went: `ltx serve`'s jobs):
// $XDG_DATA_HOME/ltx, else $HOME/.local/share/ltx; nullopt when neither is set.
std::optional<std::string> user_data_dir();

}  // namespace ltx
