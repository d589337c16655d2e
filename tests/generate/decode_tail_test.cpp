// The overlapped tail of the decode (generate::TailMode): the same media as the sequential one,
// bit for bit; its encoder's errors and a cancellation end the job with no file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/cancel.h"
#include "generate/decode.h"
#include "generate/generate_test_util.h"
#include "generate/progress.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using generate::TailMode;

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// 4 latent frames -> 25 pixel frames in temporal tiles of 16 (overlap 8): several chunks, each
// handed to the sink while the next one decodes; 1 s of audio.
struct TailCase {
  Tensor video = test::random_tensor({1, 16, 4, 2, 3}, 31);
  Tensor audio = test::random_tensor({1, 2, 25, 16}, 32);
  generate::DecodeOptions options(TailMode mode) const {
    generate::DecodeOptions opt;
    opt.fps = 25.0;
    models::tiling::TileSizeConfig tiles;
    tiles.frames = {16, 8};
    opt.tiling = tiles;
    opt.tail = mode;
    return opt;
  }
};

TEST(DecodeTail, OverlappedMediaAreTheSequentialOnesBitForBit) {
  const auto& b = test::shared_demo_bundle();
  const TailCase c;
  generate::MemorySink seq, over;
  const generate::DecodeResult rs = generate::decode_latents(
      c.video, c.audio, b.checkpoint, b.checkpoint, seq, c.options(TailMode::Sequential));
  const generate::DecodeResult ro = generate::decode_latents(
      c.video, c.audio, b.checkpoint, b.checkpoint, over, c.options(TailMode::Overlapped));
  EXPECT_FALSE(rs.tail.plan.sink_thread);
  EXPECT_TRUE(ro.tail.plan.sink_thread);
  EXPECT_TRUE(ro.tail.plan.audio_beside_video);  // issued by its own thread
  EXPECT_EQ(over.media().frames.shape(), (Shape{25, 64, 96, 3}));
  EXPECT_TRUE(test::same_bits(over.media().frames, seq.media().frames));
  ASSERT_TRUE(over.media().waveform.defined());
  EXPECT_TRUE(test::same_bits(over.media().waveform, seq.media().waveform));
  EXPECT_EQ(ro.audio_samples, rs.audio_samples);
  EXPECT_EQ(ro.audio_sample_rate, rs.audio_sample_rate);
  EXPECT_GT(ro.tail.wall_seconds, 0.0);
  EXPECT_GT(ro.tail.audio_seconds, 0.0);
  EXPECT_GT(ro.tail.video_seconds, 0.0);
}

TEST(DecodeTail, OverlappedMp4IsTheSequentialFileByteForByte) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto& b = test::shared_demo_bundle();
  const TailCase c;
  test::TempDir dir;
  std::string bytes[3];
  const TailMode modes[3] = {TailMode::Sequential, TailMode::Overlapped, TailMode::Auto};
  for (int i = 0; i < 3; ++i) {
    const std::string out = dir.file(std::string(generate::tail_mode_name(modes[i])) + ".mp4");
    generate::Progress progress(nullptr, generate::Progress::Mode::Off);
    const generate::DecodeResult r = generate::decode_to_mp4(
        out, c.video, c.audio, b.checkpoint, b.checkpoint, c.options(modes[i]), &progress);
    EXPECT_EQ(r.frames, 25);
    // The stages the progress sees do not change (on the CPU the audio decodes first).
    ASSERT_EQ(progress.timings().size(), 2u);
    EXPECT_EQ(progress.timings()[0].stage, "audio decode");
    EXPECT_EQ(progress.timings()[1].stage, "video decode");
    EXPECT_GT(r.tail.sink_seconds, 0.0);
    test::expect_mp4(out, 96, 64, 25, "25/1", 48000);
    bytes[i] = file_bytes(out);
  }
  ASSERT_FALSE(bytes[0].empty());
  EXPECT_TRUE(bytes[1] == bytes[0]) << "the overlapped MP4 differs from the sequential one";
  EXPECT_TRUE(bytes[2] == bytes[0]) << "the auto MP4 differs from the sequential one";
}

TEST(DecodeTail, AnEncoderErrorOnTheSinkThreadIsTheDecodesErrorWithNoFile) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "this build has no FFmpeg (LTX_FFMPEG=OFF)";
  const auto& b = test::shared_demo_bundle();
  const TailCase c;
  test::TempDir dir;
  const std::string out = dir.file("bad.mp4");
  generate::DecodeOptions opt = c.options(TailMode::Overlapped);
  opt.mp4.preset = "no-such-preset";  // libx264 refuses it when the first chunk opens the encoder
  EXPECT_ERROR_HAS(generate::decode_to_mp4(out, c.video, c.audio, b.checkpoint, b.checkpoint, opt),
                   "no-such-preset");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

TEST(DecodeTail, AnAudioDecodeErrorOnItsOwnThreadIsTheDecodesErrorWithNoFile) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "this build has no FFmpeg (LTX_FFMPEG=OFF)";
  const auto& b = test::shared_demo_bundle();
  TailCase c;
  // The audio VAE decoder refuses a latent whose mel axis is not its own, once it runs: on the
  // audio's thread, while the video decodes.
  c.audio = test::random_tensor({1, 2, 25, 15}, 32);
  test::TempDir dir;
  std::string messages[2];
  const TailMode modes[2] = {TailMode::Sequential, TailMode::Overlapped};
  for (int i = 0; i < 2; ++i) {
    const std::string out = dir.file(std::string(generate::tail_mode_name(modes[i])) + ".mp4");
    try {
      generate::decode_to_mp4(out, c.video, c.audio, b.checkpoint, b.checkpoint,
                              c.options(modes[i]));
      ADD_FAILURE() << "the " << generate::tail_mode_name(modes[i])
                    << " decode took a latent of 15 mel bins";
    } catch (const Error& e) {
      messages[i] = e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  }
  EXPECT_FALSE(messages[0].empty());
  EXPECT_EQ(messages[1], messages[0]);
}

TEST(DecodeTail, CancellingTheOverlappedDecodeLeavesNoFile) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "this build has no FFmpeg (LTX_FFMPEG=OFF)";
  const auto& b = test::shared_demo_bundle();
  const TailCase c;
  test::TempDir dir;
  const std::string out = dir.file("cancelled.mp4");
  CancelToken token;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  progress.set_cancel_token(&token);
  int64_t total = 0;
  progress.set_listener([&](const generate::ProgressEvent& e) {
    if (e.kind != generate::ProgressEvent::Kind::Step || e.stage != "video decode") return;
    total = e.total;
    if (e.done == 1) token.request(15);  // the server's cancel, after the first chunk
  });
  try {
    generate::decode_to_mp4(out, c.video, c.audio, b.checkpoint, b.checkpoint,
                            c.options(TailMode::Overlapped), &progress);
    FAIL() << "the cancelled decode finished";
  } catch (const Cancelled& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled during video decode, step 2/"), std::string::npos)
        << e.what();
  }
  EXPECT_GE(total, 3);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

TEST(DecodeTail, PlanFollowsTheModeTheDeviceAndTheMemoryLimit) {
  using generate::TailMode;
  const Device cpu = Device::cpu(), gpu = Device::cuda(0);
  for (const bool limited : {false, true}) {
    for (const Device d : {cpu, gpu}) {
      const generate::TailPlan seq = generate::plan_tail(TailMode::Sequential, d, limited);
      EXPECT_FALSE(seq.sink_thread);
      EXPECT_FALSE(seq.audio_beside_video);
      const generate::TailPlan over = generate::plan_tail(TailMode::Overlapped, d, limited);
      EXPECT_TRUE(over.sink_thread);
      EXPECT_TRUE(over.audio_beside_video);
      const generate::TailPlan aut = generate::plan_tail(TailMode::Auto, d, limited);
      EXPECT_TRUE(aut.sink_thread);
      // Under a memory limit the audio's activations would share the video decode's budget.
      EXPECT_EQ(aut.audio_beside_video, d.is_cuda() && !limited);
    }
  }
  EXPECT_STREQ(generate::tail_mode_name(TailMode::Overlapped), "overlapped");
}

}  // namespace
}  // namespace ltx
