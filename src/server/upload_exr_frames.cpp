#include "server/upload_exr_frames.h"

#include "core/error.h"
#include "media/support.h"
#include "server/api_error.h"
#include "server/tar_archive.h"
#include "server/upload_image.h"

namespace ltx::server {

namespace {

[[noreturn]] void invalid_frames(const std::string& param, const std::string& message) {
  throw ApiError(400, "invalid_media", message, param);
}

}  // namespace

CheckedMedia check_upload_exr_frames(const std::string& bytes, const std::string& param,
                                     const MediaLimits& limits, int64_t max_frames) {
  check_upload_bytes(bytes, param, limits.max_bytes);
  if (!media::openexr_available())
    throw ApiError(400, "media_unsupported",
                   str("this server was built without OpenEXR (CMake LTX_OPENEXR): it cannot "
                       "read the EXR frames of ", param),
                   param);
  CheckedMedia out;
  out.scratch = std::make_shared<const ScratchFile>(bytes);
  auto folder = std::make_shared<const ScratchFolder>();
  MediaHeader& h = out.header;
  h.ext = "tar";
  // Each frame as an uploaded EXR still is checked (size from its header, the pixel limit, a
  // decode), in memory before it is written; every frame has the first one's size.
  const auto check_frame = [&](const std::string& name, const std::string& frame) {
    ImageHeader size;
    try {
      size = check_upload_exr(frame, str(param, ": frame '", name, "'"), limits.max_pixels);
    } catch (const ApiError& e) {
      invalid_frames(param, e.what());
    }
    if (h.frames == 0) {
      h.width = size.width;
      h.height = size.height;
    } else if (size.width != h.width || size.height != h.height) {
      invalid_frames(param, str(param, ": frame '", name, "' is ", size.width, "x", size.height,
                                " but the archive's first frame is ", h.width, "x", h.height,
                                "; every frame of a sequence has one size"));
    }
    ++h.frames;
  };
  try {
    unpack_exr_tar(bytes, folder->path(), max_frames, limits.max_bytes, check_frame);
  } catch (const Error& e) {
    invalid_frames(param, str(param, " is not a usable archive of EXR frames: ", e.what()));
  }
  out.frames = std::move(folder);
  return out;
}

}  // namespace ltx::server
