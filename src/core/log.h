#pragma once
// Minimal leveled logging to stderr. `--quiet` raises the level to warnings.
#include <string>

#include "core/error.h"

namespace ltx {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, const std::string& message);

template <typename... Args>
void log_info(Args&&... args) {
  if (log_level() <= LogLevel::Info) log_line(LogLevel::Info, str(std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(Args&&... args) {
  if (log_level() <= LogLevel::Warn) log_line(LogLevel::Warn, str(std::forward<Args>(args)...));
}
template <typename... Args>
void log_debug(Args&&... args) {
  if (log_level() <= LogLevel::Debug) log_line(LogLevel::Debug, str(std::forward<Args>(args)...));
}

}  // namespace ltx
