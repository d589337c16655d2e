#include "server/upload_media.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "media/support.h"
#include "media/video_reader.h"
#include "server/api_error.h"

namespace ltx::server {

namespace {

[[noreturn]] void invalid(const std::string& param, const std::string& message) {
  throw ApiError(400, "invalid_media", message, param);
}

// The stored file's extension for FFmpeg's demuxer names ("mov,mp4,m4a,3gp,3g2,mj2" -> "mp4");
// FFmpeg reads the stored file by its content, so the extension only helps people.
std::string extension_of(const std::string& demuxers) {
  static const std::map<std::string, std::string> known = {
      {"mov", "mp4"},  {"matroska", "mkv"}, {"webm", "webm"}, {"avi", "avi"}, {"wav", "wav"},
      {"mp3", "mp3"},  {"flac", "flac"},    {"ogg", "ogg"},   {"aac", "aac"}, {"mpegts", "ts"},
      {"gif", "gif"},  {"mpeg", "mpg"}};
  const std::string first = demuxers.substr(0, demuxers.find(','));
  const auto it = known.find(first);
  return it == known.end() ? "bin" : it->second;
}

}  // namespace

ScratchFile::ScratchFile(const std::string& bytes) {
  std::error_code ec;
  std::string pattern = (std::filesystem::temp_directory_path(ec) / "ltx-upload-XXXXXX").string();
  if (ec) pattern = "/tmp/ltx-upload-XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) fail("cannot create a scratch file '", pattern, "': ", std::strerror(errno));
  path_ = pattern;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(path_.c_str());
      fail("cannot write the scratch file '", path_, "': ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

ScratchFile::~ScratchFile() { ::unlink(path_.c_str()); }

ScratchFolder::ScratchFolder() {
  std::error_code ec;
  std::string pattern = (std::filesystem::temp_directory_path(ec) / "ltx-frames-XXXXXX").string();
  if (ec) pattern = "/tmp/ltx-frames-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    fail("cannot create a scratch folder '", pattern, "': ", std::strerror(errno));
  path_ = pattern;
}

ScratchFolder::~ScratchFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void check_upload_bytes(const std::string& bytes, const std::string& param, int64_t max_bytes) {
  if (static_cast<int64_t>(bytes.size()) > max_bytes)
    throw ApiError(413, "file_too_large",
                   str(param, " has ", bytes.size(), " bytes; this server's limit is ", max_bytes,
                       " (max_media_bytes in GET /v1/models)"),
                   param);
}

CheckedMedia check_upload_media(const std::string& bytes, const std::string& param,
                                MediaKind kind, const MediaLimits& limits) {
  const char* what = kind == MediaKind::Video ? "video" : "audio";
  check_upload_bytes(bytes, param, limits.max_bytes);
  if (bytes.empty()) invalid(param, str(param, " is empty; send a ", what, " file"));
  if (!media::ffmpeg_available())
    throw ApiError(400, "media_unsupported",
                   str("this server was built without FFmpeg (CMake LTX_FFMPEG): it cannot read ",
                       param),
                   param);
  CheckedMedia out;
  out.scratch = std::make_shared<const ScratchFile>(bytes);
  const std::string& path = out.scratch->path();
  media::MediaInfo info;
  try {
    info = media::probe_media(path);
  } catch (const Error& e) {
    invalid(param, str(param, " cannot be read as a ", what, " file (", e.what(),
                       "); send a file FFmpeg decodes, e.g. an H.264 MP4 or a WAV"));
  }
  const media::StreamInfo* stream = nullptr;
  for (const media::StreamInfo& s : info.streams)
    if (s.type == what) {
      stream = &s;
      break;
    }
  if (!stream)
    invalid(param, str(param, " has no ", what, " stream (a ", info.format, " file with ",
                       info.streams.size(), " other streams); send a ", what, " file"));
  MediaHeader& h = out.header;
  h.ext = extension_of(info.format);
  h.duration = stream->duration > 0 ? stream->duration : info.duration;
  if (h.duration > limits.max_seconds)
    invalid(param, str(param, " lasts ", h.duration, " s; this server takes at most ",
                       limits.max_seconds, " s (max_media_seconds in GET /v1/models)"));
  // w > max / h is w * h > max without the product
  if (kind == MediaKind::Video && stream->height > 0 &&
      stream->width > limits.max_pixels / stream->height)
    invalid(param, str(param, " is ", stream->width, "x", stream->height,
                       " pixels a frame; this server's limit is ", limits.max_pixels, " pixels"));
  try {
    if (kind == MediaKind::Video) {
      if (stream->fps <= 0) invalid(param, str(param, ": its video stream has no frame rate"));
      h.width = stream->width;
      h.height = stream->height;
      h.fps = stream->fps;
      // A frame decodes: the codec is one this build reads.
      const Tensor first = media::decode_video_frames(path, 1);
      if (first.dim() != 4 || first.size(0) < 1)
        invalid(param, str(param, ": no video frame could be decoded"));
      h.frames = stream->frames > 0 ? stream->frames
                                    : static_cast<int64_t>(std::llround(h.duration * h.fps));
    } else {
      const media::AudioTrack track = media::decode_audio(path);
      if (track.waveform.dim() != 2 || track.waveform.size(1) == 0)
        invalid(param, str(param, ": the audio stream holds no samples"));
      h.sample_rate = track.sample_rate;
      h.channels = track.waveform.size(0);
      // The decoded length is exact; a container's duration may be missing or rounded.
      h.duration = static_cast<double>(track.waveform.size(1)) / static_cast<double>(track.sample_rate);
    }
  } catch (const Error& e) {
    invalid(param, str(param, ": its ", what, " cannot be decoded (", e.what(),
                       "); send a file FFmpeg decodes, e.g. an H.264 MP4 or a WAV"));
  }
  return out;
}

}  // namespace ltx::server
