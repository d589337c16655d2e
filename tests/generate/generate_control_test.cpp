// What a caller that drives generations (a server) needs from the engine: progress events without
// parsing stderr, cancellation and deadlines at step and decode-chunk boundaries, generations
// without audio, images given as bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "core/cancel.h"
#include "generate/generate_test_util.h"
#include "media/image.h"
#include "media/support.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using Kind = generate::ProgressEvent::Kind;

// The events of a run as "stage:done/total" (steps), "+stage" (start) and "-stage" (end).
struct EventLog {
  std::vector<std::string> events;
  generate::ProgressListener listener() {
    return [this](const generate::ProgressEvent& e) {
      if (e.kind == Kind::StageStart) events.push_back("+" + e.stage);
      if (e.kind == Kind::StageEnd) events.push_back("-" + e.stage);
      if (e.kind == Kind::Step)
        events.push_back(e.stage + ":" + std::to_string(e.done) + "/" + std::to_string(e.total));
    };
  }
  bool has(const std::string& event) const {
    return std::find(events.begin(), events.end(), event) != events.end();
  }
};

TEST(ProgressListener, HearsStagesAndStepsWhileOffPrintsNothing) {
  std::FILE* out = std::tmpfile();
  generate::Progress p(out, generate::Progress::Mode::Off);
  EventLog log;
  std::vector<double> stage_seconds;
  p.set_listener([&](const generate::ProgressEvent& e) {
    log.listener()(e);
    if (e.kind == Kind::StageEnd) stage_seconds.push_back(e.stage_seconds);
    EXPECT_GE(e.total_seconds, e.stage_seconds);
  });
  p.stage("stage 1");
  p.step(0, 2);
  p.step(1, 2);
  p.step(2, 2);
  p.stage("decode");
  p.step(1, 1);
  p.end_stage();
  EXPECT_EQ(log.events,
            (std::vector<std::string>{"+stage 1", "stage 1:0/2", "stage 1:1/2", "stage 1:2/2",
                                      "-stage 1", "+decode", "decode:1/1", "-decode"}));
  EXPECT_EQ(stage_seconds.size(), 2u);
  EXPECT_EQ(std::ftell(out), 0) << "Mode::Off wrote to its stream";
  std::fclose(out);
}

TEST(ProgressListener, ADeadlineStopsTheNextBoundaryWithItsOwnError) {
  generate::Progress p(nullptr, generate::Progress::Mode::Off);
  p.set_deadline(Deadline::after(0.05));
  p.stage("stage 1");
  p.step(1, 3);  // before the deadline
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  try {
    p.step(2, 3);
    FAIL() << "the step after the deadline went on";
  } catch (const DeadlineExceeded& e) {
    EXPECT_EQ(std::string(e.what()), "timed out after 0.05 s, during stage 1, step 2/3");
    EXPECT_EQ(e.reason(), DeadlineExceeded::kReason);
  }
  // A cancellation is still a Cancelled that is not a timeout.
  generate::Progress q(nullptr, generate::Progress::Mode::Off);
  CancelToken token;
  token.request(15);
  q.set_cancel_token(&token);
  try {
    q.stage("text encoding");
    FAIL() << "a requested cancellation did not stop the stage";
  } catch (const DeadlineExceeded&) {
    FAIL() << "a cancellation reported as a timeout";
  } catch (const Cancelled& e) {
    EXPECT_EQ(e.reason(), 15);
  }
}

TEST(GenerateControl, CancelAtAStepStopsBeforeTheNext) {
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.num_inference_steps = 3;
  generate::MemorySink sink;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  CancelToken token;
  progress.set_cancel_token(&token);
  EventLog log;
  progress.set_listener([&](const generate::ProgressEvent& e) {
    log.listener()(e);
    if (e.kind == Kind::Step && e.stage == "stage 1" && e.done == 1) token.request(2);
  });
  try {
    generate::run_generation(o, progress, sink);
    FAIL() << "the cancelled generation finished";
  } catch (const Cancelled& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1, step 2/3"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(log.has("stage 1:1/3"));
  EXPECT_FALSE(log.has("stage 1:2/3"));
  EXPECT_FALSE(log.has("+video decode"));
}

TEST(GenerateControl, ADeadlineInThePastStopsTheRunAtItsFirstBoundary) {
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  generate::MemorySink sink;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  progress.set_deadline(Deadline::after(0.0));
  EXPECT_THROW(generate::run_generation(o, progress, sink), DeadlineExceeded);
}

// A sink that asks for the cancellation while it takes the first chunk of frames.
class CancellingSink final : public generate::MediaSink {
 public:
  explicit CancellingSink(CancelToken& token) : token_(token) {}
  void begin(const generate::MediaFormat&) override {}
  void write_frames(const Tensor&) override {
    ++chunks;
    token_.request(2);
  }
  void write_audio(const Tensor&) override {}
  void finish() override { finished = true; }
  int chunks = 0;
  bool finished = false;

 private:
  CancelToken& token_;
};

TEST(GenerateControl, CancelDuringTheDecodeStopsAfterTheChunkInFlight) {
  const auto& b = test::shared_demo_bundle();
  // 4 latent frames -> 25 pixel frames, decoded in temporal tiles: several chunks.
  const Tensor video = test::random_tensor({1, 16, 4, 2, 2}, 1);
  generate::DecodeOptions opt;
  models::tiling::TileSizeConfig tiles;
  tiles.frames = {16, 8};
  opt.tiling = tiles;
  // The sink called in line, so the chunk it asks in is the one in flight (on a sink thread the
  // caller may hand over one more first: DecodeTail.CancellingTheOverlappedDecodeLeavesNoFile).
  opt.tail = generate::TailMode::Sequential;
  CancelToken token;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  progress.set_cancel_token(&token);
  int64_t chunks_total = 0;
  progress.set_listener([&](const generate::ProgressEvent& e) {
    if (e.kind == Kind::Step && e.stage == "video decode") chunks_total = e.total;
  });
  CancellingSink sink(token);
  try {
    generate::decode_latents(video, Tensor(), b.checkpoint, b.checkpoint, sink, opt, &progress);
    FAIL() << "the cancelled decode finished";
  } catch (const Cancelled& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled during video decode, step "), std::string::npos)
        << e.what();
  }
  EXPECT_GE(chunks_total, 2);
  EXPECT_EQ(sink.chunks, 1);
  EXPECT_FALSE(sink.finished);
}

TEST(GenerateControl, WithoutAudioTheFramesAreThoseOfARunWithAudio) {
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  const test::InMemoryGeneration with = test::generate_in_memory(o);
  o.audio = false;
  const test::InMemoryGeneration without = test::generate_in_memory(o);
  EXPECT_FALSE(without.media.waveform.defined());
  EXPECT_EQ(without.media.format.audio_sample_rate, 0);
  EXPECT_EQ(without.result.decoded.audio_samples, 0);
  EXPECT_TRUE(test::same_bits(with.media.frames, without.media.frames));
  for (const auto& t : without.timings) EXPECT_NE(t.stage, "audio decode");
  ASSERT_TRUE(with.media.waveform.defined());
}

TEST(GenerateControl, WithoutAudioTheMp4HasNoAudioTrack) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  test::TempDir dir;
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.audio = false;
  o.output_path = dir.file("silent.mp4");
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  const generate::GenerateResult r = generate::run_generation(o, progress);
  test::expect_mp4(o.output_path, 64, 64, 9, "24/1", 0);
  EXPECT_EQ(r.decoded.audio_samples, 0);
}

TEST(GenerateControl, AnImageAsBytesConditionsExactlyAsTheSameFile) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  test::TempDir dir;
  Tensor image = Tensor::empty({48, 80, 3}, DType::U8);
  for (int64_t i = 0; i < image.numel(); ++i)
    image.data<uint8_t>()[i] = static_cast<uint8_t>((i * 37) % 251);
  const std::vector<uint8_t> png = media::encode_png(image);
  const std::string path = dir.file("first.png");
  media::write_png(path, image);

  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.num_inference_steps = 1;
  generate::ImageFlag im;
  im.path = path;
  im.strength = 0.8;
  o.images = {im};
  const test::InMemoryGeneration from_file = test::generate_in_memory(o);
  o.images[0].path.clear();
  o.images[0].bytes = png;
  const test::InMemoryGeneration from_bytes = test::generate_in_memory(o);
  EXPECT_TRUE(test::same_bits(from_file.media.frames, from_bytes.media.frames));
  EXPECT_TRUE(test::same_bits(from_file.media.waveform, from_bytes.media.waveform));

  // Both, or neither, is an error naming the image.
  o.images[0].path = path;
  EXPECT_ERROR_HAS(test::generate_in_memory(o), "as a file or as bytes, not both");
  o.images[0].path.clear();
  o.images[0].bytes.clear();
  EXPECT_ERROR_HAS(test::generate_in_memory(o), "image 1: neither a file nor the image's bytes");
  // Bytes that are no image fail before any model loads, naming the image.
  o.images[0].bytes = {'n', 'o', 'p', 'e'};
  EXPECT_ERROR_HAS(test::generate_in_memory(o), "'image 1': not a PNG or JPEG");
}

}  // namespace
}  // namespace ltx
