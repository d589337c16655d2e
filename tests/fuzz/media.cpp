// media: a video or audio file as the server receives an upload (server::check_upload_media:
// FFmpeg's probe, the pixel and duration limits, a decode of the first frame or of the whole
// audio), then the readers the pipelines use on such a file (media::decode_video_frames with a
// frame cap, media::read_audio_clip's cut).
//
// File-based on purpose: the media readers take paths (FFmpeg demuxes files, the pipelines and the
// server hand them files), and the server's check writes each upload to a scratch file, so this
// is the path real inputs take. The scratch files go to /dev/shm: nothing touches the disk.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_support.h"
#include "media/video_reader.h"
#include "server/api_error.h"
#include "server/upload_media.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  ltx::fuzz::scratch_in_memory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ltx;
  const std::string bytes(fuzz::as_text(data, size));
  server::MediaLimits limits;
  limits.max_pixels = 1 << 20;
  limits.max_seconds = 30.0;
  try {
    const server::CheckedMedia video =
        server::check_upload_media(bytes, "video_path", server::MediaKind::Video, limits);
    (void)media::decode_video_frames(video.scratch->path(), 4);
  } catch (const server::ApiError&) {
  } catch (const Error&) {
  }
  try {
    const server::CheckedMedia audio =
        server::check_upload_media(bytes, "audio_path", server::MediaKind::Audio, limits);
    (void)media::read_audio_clip(audio.scratch->path(), 0.25, 1.0);
  } catch (const server::ApiError&) {
  } catch (const Error&) {
  }
  return 0;
}
