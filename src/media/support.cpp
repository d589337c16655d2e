#include "media/support.h"

#include "core/error.h"

namespace ltx::media {

bool ffmpeg_available() { return LTX_WITH_FFMPEG != 0; }
bool image_io_available() { return LTX_WITH_IMAGE_IO != 0; }
bool openexr_available() { return LTX_WITH_OPENEXR != 0; }

void fail_no_ffmpeg(const std::string& what) {
  fail(what,
       ": this build has no FFmpeg support: rebuild with -DLTX_FFMPEG=ON after installing FFmpeg's "
       "development libraries (scripts/install-deps: libavcodec-dev libavformat-dev libavutil-dev "
       "libswscale-dev libswresample-dev)");
}

void fail_no_image_io(const std::string& what) {
  fail(what,
       ": this build has no image I/O support: rebuild with -DLTX_IMAGE_IO=ON after installing "
       "libpng-dev, libjpeg-dev and liblcms2-dev (scripts/install-deps)");
}

void fail_no_openexr(const std::string& what) {
  fail(what,
       ": this build has no EXR support: rebuild with -DLTX_OPENEXR=ON after installing "
       "libopenexr-dev (scripts/install-deps)");
}

}  // namespace ltx::media
