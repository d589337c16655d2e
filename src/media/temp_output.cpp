#include "media/temp_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace fs = std::filesystem;

namespace ltx::media {

void check_output_location(const std::string& path, const std::string& who) {
  LTX_CHECK(!path.empty(), who, ": the output path is empty");
  std::error_code ec;
  // The deepest part of the folder path that exists: it must be a folder we may write into (the
  // missing ones below it are created there when the output is written). A relative path whose
  // first part is missing lands in the working folder.
  fs::path existing = fs::path(path).parent_path();
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path())
    existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  LTX_CHECK(fs::is_directory(existing, ec), who, ": cannot write '", path, "': '", existing.string(),
            "' is a file, not a folder; choose another path");
  LTX_CHECK(access(existing.c_str(), W_OK | X_OK) == 0, who, ": cannot write '", path,
            "': no permission to create files in '", existing.string(), "' (", std::strerror(errno),
            "); choose a writable folder");
}

TempOutput::TempOutput(std::string path, Kind kind, std::string who)
    : path_(std::move(path)), kind_(kind), who_(std::move(who)) {
  LTX_CHECK(!path_.empty(), who_, ": the output path is empty");
  const fs::path p(path_);
  LTX_CHECK(p.has_filename(), who_, ": output path '", path_, "' names a folder, not a file");
  std::error_code ec;
  const fs::path parent = p.parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec)
      fail(who_, ": cannot create the folder '", parent.string(), "' for '", path_,
           "': ", ec.message());
  }
  const fs::file_status st = fs::status(p, ec);
  if (kind_ == Kind::File) {
    LTX_CHECK(!fs::is_directory(st), who_, ": output path '", path_,
              "' is an existing folder; give a file name");
  } else {
    LTX_CHECK(!fs::exists(st) || (fs::is_directory(st) && fs::is_empty(p, ec)), who_,
              ": output folder '", path_,
              "' already exists and is not an empty folder; remove it or choose another path");
  }
  temp_ = path_ + ".tmp";
  fs::remove_all(temp_, ec);  // a leftover of an interrupted run
  if (kind_ == Kind::Directory) {
    fs::create_directory(temp_, ec);
    if (ec) fail(who_, ": cannot create the folder '", temp_, "': ", ec.message());
  }
}

TempOutput::~TempOutput() { discard(); }

void TempOutput::discard() noexcept {
  if (done_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
  done_ = true;
}

void TempOutput::commit() {
  LTX_CHECK(!done_, who_, ": output '", path_, "' was already finished or abandoned");
  std::error_code ec;
  fs::rename(temp_, path_, ec);
  if (ec) {
    discard();
    fail(who_, ": cannot rename '", temp_, "' to '", path_, "': ", ec.message());
  }
  done_ = true;
}

}  // namespace ltx::media
