#include "core/input_limits.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace ltx::limits {

std::string bytes_text(int64_t bytes) {
  char buf[64];
  if (bytes >= (int64_t{1} << 30) && bytes % (int64_t{1} << 30) == 0)
    std::snprintf(buf, sizeof buf, "%lld GiB", static_cast<long long>(bytes >> 30));
  else if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0)
    std::snprintf(buf, sizeof buf, "%lld MiB", static_cast<long long>(bytes >> 20));
  else
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  return buf;
}

std::string read_file_within(const std::string& path, int64_t max_bytes, const std::string& what) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail(what, " '", path, "': cannot read it: ", ec.message());
  LTX_CHECK(size <= static_cast<uint64_t>(max_bytes), what, " '", path, "' has ", size,
            " bytes, more than the limit of ", bytes_text(max_bytes), " for a ", what,
            " (not the file it should be, or a corrupt one)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(what, " '", path, "': cannot open it: ", std::strerror(errno));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  LTX_CHECK(!in.bad() && in.gcount() == static_cast<std::streamsize>(size), what, " '", path,
            "': reading it failed");
  return bytes;
}

}  // namespace ltx::limits
