#pragma once
// MP4 output (H.264 yuv420p + optional AAC) through FFmpeg's libraries, with the reference's
// settings (ltx_pipelines/utils/media_io/encode.py: encode_video):
//   libx264, crf 19, preset veryfast, frame threads; pixels converted by rgb_to_yuv420_bt709
//   (media/yuv.h), the stream tagged BT.709 matrix + limited range; frame rate int(fps) (the
//   reference truncates: 24.9 -> 24); audio clipped to [-1, 1], * 32767, truncated to int16,
//   then encoded as AAC at the waveform's sample rate (after the video, as the reference).
// The file is written under "<path>.tmp" and renamed on finish(); on any error, or when the
// writer is destroyed without finish(), the temporary is removed and no file appears.
// In a build without FFmpeg (LTX_FFMPEG=OFF) the constructor throws ltx::Error saying how to
// rebuild.
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "media/audio.h"

namespace ltx::media {

struct Mp4Options {
  int crf = 19;                     // libx264 constant rate factor, 0..51
  std::string preset = "veryfast";  // libx264 preset
  int threads = 0;                  // libx264 threads; 0 = FFmpeg's automatic choice
  int audio_sample_rate = 0;        // > 0: add an AAC track at this rate (then call write_audio)
  int audio_channels = 2;           // 1 or 2, must match the waveform given to write_audio
  // The index (moov) before the media data (FFmpeg's "-movflags +faststart"), so a browser can
  // start playing while the file downloads; the muxer rewrites the file once in finish().
  bool faststart = false;
};

// Streaming writer: frames arrive in chunks (as the VAE decoder yields them).
class Mp4Writer {
 public:
  Mp4Writer(std::string path, double fps, Mp4Options options = {});
  ~Mp4Writer();
  Mp4Writer(const Mp4Writer&) = delete;
  Mp4Writer& operator=(const Mp4Writer&) = delete;

  // frames: [F, H, W, 3] or [H, W, 3], floating dtype, values in [0, 1], any device. The first
  // chunk fixes H and W (both even); later chunks must match.
  void write_frames(const Tensor& frames);
  // The whole waveform, once, before finish(); only with options.audio_sample_rate > 0.
  // [C, N] or [1, C, N] with C == options.audio_channels.
  void write_audio(const Tensor& waveform);
  // Flushes the encoders, writes the trailer and renames the file into place. Throws when no
  // frame was written, or when an audio track was declared but no audio given.
  void finish();

  int64_t frames_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-shot form: frames [F, H, W, 3] and an optional audio track (its sample rate and channel
// count override those in `options`).
void write_mp4(const std::string& path, const Tensor& frames, double fps,
               const AudioTrack* audio = nullptr, Mp4Options options = {});

}  // namespace ltx::media
