#pragma once
// An HDR request's frame folder, uploaded as a tar of EXR frames, checked before the server keeps
// it (a file of its own so that the parsers' fuzz build, which has no archive library, links
// upload_media without it).
#include <cstdint>
#include <string>

#include "server/upload_media.h"

namespace ltx::server {

// The bytes limit (413 `file_too_large`), then the archive unpacked into a scratch folder
// (server/tar_archive.h, unpack_exr_tar; at most `max_frames` frames), each frame checked as an
// uploaded EXR still is (server/upload_image.h: its data window, the pixel limit, a decode) and
// every frame of the first one's size; 400 `invalid_media` naming `param` otherwise, `media_unsupported` in a build without
// OpenEXR. The header's ext is "tar" (the archive is what the job stores), its size and frame
// count the frames'; it has no duration or frame rate.
CheckedMedia check_upload_exr_frames(const std::string& bytes, const std::string& param,
                                     const MediaLimits& limits, int64_t max_frames);

}  // namespace ltx::server
