#pragma once
// Reading media files through FFmpeg's libraries: stream facts (for tests and checks of written
// files, like ffprobe), decoded video frames and audio. Throws ltx::Error in a build without
// FFmpeg (LTX_FFMPEG=OFF).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "media/audio.h"

namespace ltx::media {

struct StreamInfo {
  std::string type;     // "video", "audio", or another media type name
  std::string codec;    // FFmpeg codec name: "h264", "aac", "pcm_s16le", ...
  double duration = 0;  // seconds (0 when the container does not say)
  int64_t frames = 0;   // frames (video) or codec frames (audio) the container lists; 0 unknown
  // video
  int width = 0, height = 0;
  double fps = 0;            // average frame rate
  std::string pixel_format;  // "yuv420p", ...
  std::string color_space;   // "bt709", "unknown", ...
  std::string color_range;   // "tv" (limited), "pc" (full), "unknown"
  std::string color_primaries;  // "bt709", "bt2020", "unknown", ...
  std::string color_transfer;   // "bt709", "arib-std-b67" (HLG), "unknown", ...
  // audio
  int sample_rate = 0;
  int channels = 0;
};

struct MediaInfo {
  std::string format;   // demuxer names, "mov,mp4,m4a,3gp,3g2,mj2" for MP4
  double duration = 0;  // seconds
  std::vector<StreamInfo> streams;
};

MediaInfo probe_media(const std::string& path);

// The first video stream of `info`; throws ltx::Error when there is none or it has no frame rate.
inline const StreamInfo& first_video_stream(const MediaInfo& info) {
  for (const StreamInfo& s : info.streams)
    if (s.type == "video") {
      LTX_CHECK(s.fps > 0, "the video stream has no frame rate");
      return s;
    }
  fail("no video stream");
}
inline bool has_audio_stream(const MediaInfo& info) {
  for (const StreamInfo& s : info.streams)
    if (s.type == "audio") return true;
  return false;
}

// Frames of the first video stream as u8 RGB [F, H, W, 3] (the first max_frames when >= 0). The
// YUV -> RGB conversion (libswscale, bilinear) follows the stream's matrix and range tags, BT.601
// limited when untagged, as PyAV's frame.to_rgb() does.
Tensor decode_video_frames(const std::string& path, int64_t max_frames = -1);

// The first audio stream as f32 [C, N] in [-1, 1] (integer formats divided by 128 / 32768 / 2^31
// as the reference's decoder does; planar and interleaved handled), at its own sample rate.
AudioTrack decode_audio(const std::string& path);

// The reference's decode_audio_from_file(path, start_time, max_duration) (ltx_pipelines
// utils/media_io/decode.py), for --audio-path: the first audio stream decoded at its own rate (the
// audio VAE's AudioProcessor resamples later, as the reference), the samples from
// round((start_time - t0) * rate) on, where t0 is the first decoded frame's time, and at most
// round(max_duration * rate) of them (Python's half-to-even rounding). Errors name `flag` and the
// file: missing or unreadable file, no audio stream, no samples, a start at or past the end, a
// duration that keeps no sample (and a negative start or non-positive duration).
AudioTrack read_audio_clip(const std::string& path, double start_time, std::optional<double> max_duration,
                           const std::string& flag = "--audio-path");

}  // namespace ltx::media
