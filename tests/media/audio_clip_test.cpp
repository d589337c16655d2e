// --audio-path's decoder (media::read_audio_clip) on files written by FFmpeg's own encoders (the
// ffmpeg program: PCM WAV, FLAC, AAC in MP4), the reference's resampler on what it decodes, and
// WAV files written by media::write_wav read back through libav (probe_media / decode_audio).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "media/audio.h"
#include "media/media_test_util.h"
#include "media/video_reader.h"
#include "models/audio_vae/mel.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::TempDir;

// Why files cannot be made with the ffmpeg program here ("" when they can).
std::string ffmpeg_unavailable() {
  if (!media::ffmpeg_available()) return "this build has no FFmpeg (LTX_FFMPEG=OFF)";
  if (std::system("command -v ffmpeg >/dev/null 2>&1") != 0) return "the ffmpeg program is not installed";
  return "";
}

// A stereo file of `seconds` at `rate`: 440 Hz on the left, 660 Hz on the right, amplitude 1/8
// (lavfi's sine source), encoded with `codec` into `path`.
void write_tones(const std::string& path, int rate, double seconds, const std::string& codec) {
  const std::string cmd = "ffmpeg -loglevel error -y -f lavfi -i sine=frequency=440:sample_rate=" + std::to_string(rate) +
                          ":duration=" + std::to_string(seconds) + " -f lavfi -i sine=frequency=660:sample_rate=" +
                          std::to_string(rate) + ":duration=" + std::to_string(seconds) +
                          " -filter_complex '[0][1]amerge=inputs=2' -c:a " + codec + " '" + path + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

double tone(double freq, double t) { return std::sin(2.0 * M_PI * freq * t) / 8.0; }

TEST(AudioClip, DecodesPcmWavAtItsRateAndCutsLikeTheReference) {
  if (const std::string why = ffmpeg_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string wav = dir.file("tones.wav");
  write_tones(wav, 44100, 1.0, "pcm_s16le");
  const media::AudioTrack whole = media::decode_audio(wav);
  ASSERT_EQ(whole.waveform.shape(), (Shape{2, 44100}));
  EXPECT_EQ(whole.sample_rate, 44100);
  // 16-bit samples of the tones: within one quantisation step (plus lavfi's own rounding).
  const std::vector<float> w = whole.waveform.to_float_vector();
  for (int64_t i = 0; i < 44100; i += 97) {
    const double t = static_cast<double>(i) / 44100.0;
    EXPECT_NEAR(w[static_cast<size_t>(i)], tone(440.0, t), 2.0 / 32768.0) << i;
    EXPECT_NEAR(w[static_cast<size_t>(44100 + i)], tone(660.0, t), 2.0 / 32768.0) << i;
  }
  // start 0.25 s, 0.5 s: samples [round(0.25 * 44100), + round(0.5 * 44100)) = [11025, 33075).
  const media::AudioTrack clip = media::read_audio_clip(wav, 0.25, 0.5);
  EXPECT_EQ(clip.sample_rate, 44100);
  ASSERT_EQ(clip.waveform.shape(), (Shape{2, 22050}));
  EXPECT_EQ(test::max_abs_diff(clip.waveform, whole.waveform.narrow(1, 11025, 22050).contiguous()), 0.0);
  // Python's round: 0.5 samples round to even (0.1 s at 44100 Hz is 4410 exactly; 1.5 / 44100 s
  // starts at sample 2, 2.5 / 44100 s at sample 2).
  EXPECT_EQ(media::read_audio_clip(wav, 1.5 / 44100.0, std::nullopt).waveform.size(1), 44100 - 2);
  EXPECT_EQ(media::read_audio_clip(wav, 2.5 / 44100.0, std::nullopt).waveform.size(1), 44100 - 2);
  // No duration: to the end; a duration past the end: what there is.
  EXPECT_EQ(media::read_audio_clip(wav, 0.0, std::nullopt).waveform.size(1), 44100);
  EXPECT_EQ(media::read_audio_clip(wav, 0.75, 10.0).waveform.size(1), 44100 - 33075);
}

TEST(AudioClip, LosslessAndLossyCodecsDecodeToTheSameSound) {
  if (const std::string why = ffmpeg_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_tones(dir.file("tones.wav"), 48000, 0.5, "pcm_s16le");
  write_tones(dir.file("tones.flac"), 48000, 0.5, "flac");
  write_tones(dir.file("tones.m4a"), 48000, 0.5, "aac");
  const media::AudioTrack wav = media::read_audio_clip(dir.file("tones.wav"), 0.1, 0.3);
  const media::AudioTrack flac = media::read_audio_clip(dir.file("tones.flac"), 0.1, 0.3);
  EXPECT_EQ(test::max_abs_diff(wav.waveform, flac.waveform), 0.0);  // lossless
  const media::AudioTrack aac = media::read_audio_clip(dir.file("tones.m4a"), 0.1, 0.3);
  EXPECT_EQ(aac.sample_rate, 48000);
  ASSERT_EQ(aac.waveform.shape(), wav.waveform.shape());
  // AAC is lossy and its priming is trimmed by the decoder's timestamps: the same tones, close.
  EXPECT_LT(test::max_abs_diff(aac.waveform, wav.waveform), 0.02);
}

// The reference resamples in the audio VAE's AudioProcessor (torchaudio.functional.resample to
// 16 kHz); on a decoded 44.1 kHz file it reproduces the tones at 16 kHz away from the edges.
TEST(AudioClip, ResamplingTheDecodedAudioKeepsTheTones) {
  if (const std::string why = ffmpeg_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_tones(dir.file("tones.wav"), 44100, 1.0, "pcm_s16le");
  const media::AudioTrack clip = media::read_audio_clip(dir.file("tones.wav"), 0.0, std::nullopt);
  const Tensor r = models::audio_vae::resample(clip.waveform, 44100, 16000);
  ASSERT_EQ(r.shape(), (Shape{2, 16000}));
  const std::vector<float> v = r.to_float_vector();
  double worst = 0.0;
  for (int64_t i = 200; i < 15800; ++i) {
    const double t = static_cast<double>(i) / 16000.0;
    worst = std::max(worst, std::abs(v[static_cast<size_t>(i)] - tone(440.0, t)));
    worst = std::max(worst, std::abs(v[static_cast<size_t>(16000 + i)] - tone(660.0, t)));
  }
  // The kernel's passband ripple (rolloff 0.99, 6 zero crossings) and the 16-bit quantisation.
  EXPECT_LT(worst, 2e-3);
}

TEST(AudioClip, BadInputIsAnErrorNamingTheFlag) {
  if (const std::string why = ffmpeg_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_tones(dir.file("tones.wav"), 16000, 0.5, "pcm_s16le");
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("nope.wav"), 0.0, std::nullopt), "--audio-path '");
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("nope.wav"), 0.0, std::nullopt), "no such file");
  std::ofstream(dir.file("text.wav")) << "not audio at all";
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("text.wav"), 0.0, std::nullopt), "cannot open");
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i anullsrc=r=16000:cl=stereo -t 0 -c:a pcm_s16le '" +
                         dir.file("empty.wav") + "'")
                            .c_str()),
            0);
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("empty.wav"), 0.0, std::nullopt), "no samples");
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i testsrc=size=32x32:rate=4 -t 1 -an '" +
                         dir.file("silent.mp4") + "'")
                            .c_str()),
            0);
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("silent.mp4"), 0.0, std::nullopt), "has no audio stream");
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("tones.wav"), 0.5, std::nullopt),
                   "--audio-start-time 0.5 s is at or past the end");
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("tones.wav"), 2.0, 1.0), "--audio-start-time 2 s");
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("tones.wav"), 0.0, 1e-5), "--audio-max-duration");
  EXPECT_ERROR_HAS(media::read_audio_clip(dir.file("tones.wav"), -1.0, std::nullopt), "--audio-start-time -1");
}

// A WAV from write_wav as libav reads it: the RIFF header's codec, rate, channels and length, and
// the samples back as written (int16 / 32768).
TEST(AudioClip, WavOutputReadsBackThroughLibav) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "this build has no FFmpeg";
  TempDir dir;
  const int64_t n = 4800;
  std::vector<float> v(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] = static_cast<float>(0.9 * std::sin(0.01 * static_cast<double>(i)));
    v[static_cast<size_t>(n + i)] = static_cast<float>(-0.5 + 1e-4 * static_cast<double>(i));
  }
  const Tensor wave = Tensor::from_vector(v, Shape{2, n});
  const std::string path = dir.file("out.wav");
  media::write_wav(path, wave, 48000);
  const media::MediaInfo info = media::probe_media(path);
  EXPECT_EQ(info.format, "wav");
  ASSERT_EQ(info.streams.size(), 1u);
  EXPECT_EQ(info.streams[0].type, "audio");
  EXPECT_EQ(info.streams[0].codec, "pcm_s16le");
  EXPECT_EQ(info.streams[0].sample_rate, 48000);
  EXPECT_EQ(info.streams[0].channels, 2);
  EXPECT_NEAR(info.duration, 0.1, 1e-6);
  const media::AudioTrack back = media::decode_audio(path);
  ASSERT_EQ(back.waveform.shape(), wave.shape());
  const std::vector<int16_t> pcm = media::waveform_to_int16(wave);  // interleaved
  const std::vector<float> got = back.waveform.to_float_vector();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < 2; ++c)
      ASSERT_EQ(got[static_cast<size_t>(c * n + i)], static_cast<float>(pcm[static_cast<size_t>(2 * i + c)]) / 32768.0f)
          << i << " " << c;
}

}  // namespace
}  // namespace ltx
