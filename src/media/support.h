#pragma once
// What this build of the media layer can do, and the errors for what it cannot. FFmpeg (MP4
// writing, video decoding, the CRF re-encode of conditioning images), image I/O (libpng,
// libjpeg-turbo, lcms2) and EXR (OpenEXR) are optional at build time: see docs/MEDIA.md.
#include <string>

namespace ltx::media {

// True when this build links FFmpeg's libraries (CMake option LTX_FFMPEG).
bool ffmpeg_available();
// True when this build links libpng, libjpeg-turbo and lcms2 (CMake option LTX_IMAGE_IO).
bool image_io_available();
// True when this build links OpenEXR (CMake option LTX_OPENEXR).
bool openexr_available();

// Throw ltx::Error "<what>: this build has no FFmpeg support: rebuild with ...".
[[noreturn]] void fail_no_ffmpeg(const std::string& what);
[[noreturn]] void fail_no_image_io(const std::string& what);
[[noreturn]] void fail_no_openexr(const std::string& what);

}  // namespace ltx::media
