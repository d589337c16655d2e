#pragma once
// A video or audio file a request uploads (a file part of a multipart body; or, for an HDR
// request, a tar of EXR frames standing for a video), checked before the server keeps it: its byte count, then FFmpeg's probe of the container and a decode of its
// first frame / its audio (media/video_reader.h), so a file the pipeline could not read is refused
// when it is sent, not when the job runs. FFmpeg reads files, so the bytes are written to a scratch
// file under the system's temporary folder for the check; the request holds it (the pipeline's
// own checks read it too) and it is removed with the request. Errors are ApiError naming `param`:
// 413 `file_too_large` over the byte limit; 400 `invalid_media` (unreadable, no stream of the
// wanted kind, no decodable frame or sample, over the pixel or duration limit), `media_unsupported`
// (a build without FFmpeg).
#include <cstdint>
#include <memory>
#include <string>

namespace ltx::server {

enum class MediaKind { Video, Audio };

// A file that is removed when the last holder lets it go.
class ScratchFile {
 public:
  // Writes `bytes` to a new file (mkstemp) in the system's temporary folder.
  explicit ScratchFile(const std::string& bytes);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct MediaHeader {
  std::string ext;  // the stored file's extension from the container: "mp4", "wav", "mkv", ...
  double duration = 0;  // seconds: the wanted stream's (else the container's)
  // video
  int64_t width = 0, height = 0, frames = 0;  // frames: listed, else round(duration * fps)
  double fps = 0;
  // audio
  int64_t sample_rate = 0, channels = 0;
};

// A folder (mkdtemp) in the system's temporary folder, removed with all it holds when the last
// holder lets it go.
class ScratchFolder {
 public:
  ScratchFolder();
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CheckedMedia {
  MediaHeader header;
  std::shared_ptr<const ScratchFile> scratch;  // the bytes as a file, for the request's checks
  // An EXR frame archive's frames, unpacked (check_upload_exr_frames); null for other media.
  std::shared_ptr<const ScratchFolder> frames;
};

// What an upload may be before anything of it is decoded: bytes, a video frame's pixels, the
// duration the container declares (an audio file is decoded whole).
struct MediaLimits {
  int64_t max_bytes = 64 << 20;
  int64_t max_pixels = 16'000'000;
  double max_seconds = 600.0;
};

// 413 `file_too_large` naming `param` when an upload has more than `max_bytes` bytes.
void check_upload_bytes(const std::string& bytes, const std::string& param, int64_t max_bytes);

CheckedMedia check_upload_media(const std::string& bytes, const std::string& param,
                                MediaKind kind, const MediaLimits& limits);

// check_upload_exr_frames (server/upload_exr_frames.h): a tar of EXR frames for an HDR request.

}  // namespace ltx::server
