#include "server/upload_exr_frames.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "media/exr.h"
#include "media/support.h"
#include "server/api_error.h"
#include "server/tar_archive.h"

namespace ltx::server {

namespace {

[[noreturn]] void invalid_frames(const std::string& param, const std::string& message) {
  throw ApiError(400, "invalid_media", message, param);
}

// A scratch file's bytes.
std::string read_frame_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  LTX_CHECK(f.good() || f.eof(), "cannot read '", path, "'");
  return ss.str();
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
  std::vector<std::string> names;
  try {
    names = unpack_exr_tar(bytes, folder->path(), max_frames, limits.max_bytes);
  } catch (const Error& e) {
    invalid_frames(param, str(param, " is not a usable archive of EXR frames: ", e.what()));
  }
  MediaHeader& h = out.header;
  h.ext = "tar";
  for (const std::string& name : names) {
    const std::string path = (std::filesystem::path(folder->path()) / name).string();
    const std::string frame = read_frame_file(path);
    const auto* data = reinterpret_cast<const uint8_t*>(frame.data());
    try {
      const media::ExrImageSize size = media::exr_image_size(data, frame.size(), name);
      if (size.width > limits.max_pixels / size.height)
        invalid_frames(param, str(param, ": frame '", name, "' is ", size.width, "x", size.height,
                           " pixels; this server's limit is ", limits.max_pixels, " pixels"));
      if (h.frames == 0) {
        h.width = size.width;
        h.height = size.height;
      } else if (size.width != h.width || size.height != h.height) {
        invalid_frames(param, str(param, ": frame '", name, "' is ", size.width, "x", size.height,
                           " but the first frame is ", h.width, "x", h.height,
                           "; every frame of a sequence has one size"));
      }
      media::decode_exr(data, frame.size(), name);
    } catch (const Error& e) {
      invalid_frames(param, str(param, ": frame '", name, "' cannot be decoded (", e.what(), ")"));
    }
    ++h.frames;
  }
  out.frames = std::move(folder);
  return out;
}

}  // namespace ltx::server
