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
#include <utility>

#include "core/tensor.h"
#include "media/audio.h"
#include "media/primaries.h"

namespace ltx::media {

// The video stream: the SDR H.264 master, or the HDR HLG master of the reference's
// ltx_core/color/hlg.py (encode_linear_hdr_frames_to_hlg_mp4): libx265 (HEVC Main10, codec tag
// hvc1), yuv420p10le, tagged BT.2020 primaries, ARIB STD-B67 (HLG) transfer, BT.2020
// non-constant-luminance matrix, limited range; frames are scene-linear (hlg_primaries), mapped
// by hlg_signal (media/hdr.h) and rgb_to_yuv420p10_bt2020; frame rate fps as a fraction with a
// denominator up to 1000 (the reference's Fraction(fps).limit_denominator(1000)).
enum class Mp4Video { H264Bt709, HevcHlgBt2020 };

struct Mp4Options {
  Mp4Video video = Mp4Video::H264Bt709;
  int crf = 19;                     // encoder constant rate factor, 0..51
  std::string preset = "veryfast";  // encoder preset
  int threads = 0;                  // encoder threads; 0 = automatic (HLG: min(cores, 16))
  Primaries hlg_primaries = Primaries::Rec709;  // the gamut of HLG input frames
  int audio_sample_rate = 0;        // > 0: add an AAC track at this rate (then call write_audio)
  int audio_channels = 2;           // 1 or 2, must match the waveform given to write_audio
  // The index (moov) before the media data (FFmpeg's "-movflags +faststart"), so a browser can
  // start playing while the file downloads; the muxer rewrites the file once in finish().
  bool faststart = false;
  // H.264: the frame rate as Fraction(fps).limit_denominator(1000), as the reference's HDR preview
  // (encode_exr_sequence_to_mp4) writes it, instead of encode_video's int(fps).
  bool exact_rate = false;
};

// Python's Fraction(x).limit_denominator(max_den): the fraction closest to the double's exact
// value whose denominator is at most max_den (continued fractions; on a tie the one with the
// smaller denominator), as {numerator, denominator}.
std::pair<int64_t, int64_t> limit_denominator(double x, int64_t max_den);

// The reference's HLG master settings: libx265 crf 12, preset ultrafast, +faststart.
Mp4Options hlg_mp4_options();

// Streaming writer: frames arrive in chunks (as the VAE decoder yields them).
class Mp4Writer {
 public:
  Mp4Writer(std::string path, double fps, Mp4Options options = {});
  ~Mp4Writer();
  Mp4Writer(const Mp4Writer&) = delete;
  Mp4Writer& operator=(const Mp4Writer&) = delete;

  // frames: [F, H, W, 3] or [H, W, 3], floating dtype, any device; values in [0, 1] (H.264) or
  // scene-linear (HLG). The first chunk fixes H and W (both even); later chunks must match.
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
