#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace ltx {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Info)};
std::mutex g_mutex;
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void log_line(LogLevel level, const std::string& message) {
  static const char* const kPrefix[] = {"debug: ", "", "warning: ", "error: ", ""};
  std::lock_guard<std::mutex> lk(g_mutex);
  std::fprintf(stderr, "%s%s\n", kPrefix[static_cast<int>(level)], message.c_str());
}

}  // namespace ltx
