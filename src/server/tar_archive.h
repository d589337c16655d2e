#pragma once
// A folder as one POSIX ustar archive (the output of a job that makes several files, e.g.
// hdr-ic-lora's EXR frames and preview: docs/SERVER.md): what `tar -xf` and every archive tool
// unpack. No compression: EXR frames and MP4s are compressed already, and an uncompressed archive
// keeps Range requests cheap.
#include <string>

namespace ltx::server {

// Writes every file and folder under `folder` into a tar at `tar_path`, as <tmp> first (fsync'd,
// then renamed): entries named by their path relative to `folder` ("a/", "a/b.exr"), folders
// before what they hold, names in byte order, mode 0644 (files) / 0755 (folders), owner 0, the
// files' modification times. Throws ltx::Error naming the file at fault, leaving no archive: a
// name longer than ustar holds (100 bytes, or 155 + 100 split at a '/'), a link or special file,
// an unreadable file, a failed write.
void write_tar(const std::string& folder, const std::string& tar_path);

}  // namespace ltx::server
