#pragma once
// A folder as one POSIX ustar archive (the output of a job that makes several files, e.g.
// hdr-ic-lora's EXR frames and preview: docs/SERVER.md): what `tar -xf` and every archive tool
// unpack. No compression: EXR frames and MP4s are compressed already, and an uncompressed archive
// keeps Range requests cheap. And the other way: an uploaded archive of EXR frames (an HDR
// request's frame folder) unpacked under names of its own.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ltx::server {

// Writes every file and folder under `folder` into a tar at `tar_path`, as <tmp> first (fsync'd,
// then renamed): entries named by their path relative to `folder` ("a/", "a/b.exr"), folders
// before what they hold, names in byte order, mode 0644 (files) / 0755 (folders), owner 0, the
// files' modification times. Throws ltx::Error naming the file at fault, leaving no archive: a
// name longer than ustar holds (100 bytes, or 155 + 100 split at a '/'), a link or special file,
// an unreadable file, a failed write.
void write_tar(const std::string& folder, const std::string& tar_path);

// Whether `bytes` look like a tar archive (the ustar magic at offset 257: POSIX, pax and GNU tar
// all write it).
bool is_tar(std::string_view bytes);

// Unpacks the EXR frames of an uploaded tar (plain, uncompressed) into `folder` (existing, empty):
// every regular file whose name ends in ".exr" (any case), at any depth, is written as
// `folder`/<its base name>, so the frames keep the order of their names (the reference sorts a
// folder's frames by name). Folders and hidden files (a base name starting with '.', e.g. macOS's
// "._frame.exr") are skipped. Returns the frame names, sorted. Throws ltx::Error naming the entry:
// a link or special file, another file, a base name that is not [A-Za-z0-9._-] or is given twice,
// more than `max_frames` frames, more than `max_bytes` unpacked, no frame at all, a damaged
// archive. `check_frame`, when given, sees each frame's base name and bytes (in archive order)
// before it is written, and may throw to refuse it.
using ExrFrameCheck = std::function<void(const std::string& name, const std::string& bytes)>;
std::vector<std::string> unpack_exr_tar(const std::string& bytes, const std::string& folder,
                                        int64_t max_frames, int64_t max_bytes,
                                        const ExrFrameCheck& check_frame = {});

}  // namespace ltx::server
