#pragma once
// Output written under a temporary name and renamed onto the final one on success, so that a
// failed or interrupted write never leaves a half-written file (docs/conventions: "Outputs are
// written to a temporary name and renamed on success").
#include <string>

namespace ltx::media {

// Checks, without creating anything, that a TempOutput at `path` could be made: every part of the
// path that exists is a folder (the file itself may exist: it is replaced) and the deepest existing
// folder lets this process create entries. Throws ltx::Error naming `who` and the part at fault:
// callers check before hours of work, not when the output is written.
void check_output_location(const std::string& path, const std::string& who);

class TempOutput {
 public:
  enum class Kind { File, Directory };

  // Creates the missing parent folders of `path` (as the reference's encoder does) and, for a
  // Directory, the temporary folder itself. `who` names the caller in error messages. A Directory
  // may only replace a missing or empty folder; an existing file is replaced.
  TempOutput(std::string path, Kind kind, std::string who);
  ~TempOutput();  // removes the temporary file / folder unless commit() succeeded
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }
  // Renames the temporary onto path(); throws ltx::Error (and keeps nothing) when that fails.
  void commit();
  // Removes the temporary now (idempotent).
  void discard() noexcept;

 private:
  std::string path_;
  std::string temp_;
  Kind kind_;
  std::string who_;
  bool done_ = false;
};

}  // namespace ltx::media
