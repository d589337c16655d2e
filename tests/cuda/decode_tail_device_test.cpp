// The decode's overlapped tail on a GPU (generate::TailMode): the audio decoder + vocoder issued on
// the side stream before the video decode and read back after it, the sink on its own thread. The
// media must be the sequential tail's bit for bit: the same kernels run, only on another stream and
// at another time. The sequential run goes first in each case, so the cuDNN engines (chosen by
// timing, once per geometry and process) are the same for both.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/device_query.h"
#include "core/tensor.h"
#include "cuda/cuda_test_util.h"
#include "generate/decode.h"
#include "generate/generate_test_util.h"
#include "generate/progress.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using generate::TailMode;

struct Decoded {
  generate::DecodeResult result;
  generate::DecodedMedia media;
  std::vector<generate::Progress::Timing> timings;
};

Decoded decode_on_gpu(const std::string& video_vae, TailMode mode, DType dtype,
                      const Tensor& video, const Tensor& audio) {
  const auto& b = test::shared_demo_bundle();
  generate::DecodeOptions opt;
  opt.fps = 25.0;
  opt.device = test::kGpu;
  opt.dtype = dtype;
  opt.tail = mode;
  models::tiling::TileSizeConfig tiles;
  tiles.frames = {16, 8};  // several chunks: each handed to the sink thread as the next decodes
  if (video_vae == b.checkpoint) opt.tiling = tiles;
  generate::MemorySink sink;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  Decoded d;
  d.result = generate::decode_latents(video, audio, video_vae, b.checkpoint, sink, opt, &progress);
  d.media = sink.media();
  d.timings = progress.timings();
  return d;
}

void expect_same_tail(const std::string& video_vae, DType dtype, const std::string& what) {
  const Tensor video = test::random_tensor({1, 16, 4, 2, 3}, 41);
  const Tensor audio = test::random_tensor({1, 2, 50, 16}, 42);  // 2 s
  const Decoded seq = decode_on_gpu(video_vae, TailMode::Sequential, dtype, video, audio);
  EXPECT_FALSE(seq.result.tail.plan.audio_beside_video) << what;
  for (const TailMode mode : {TailMode::Overlapped, TailMode::Auto}) {
    const Decoded over = decode_on_gpu(video_vae, mode, dtype, video, audio);
    const std::string label = what + " " + generate::tail_mode_name(mode);
    EXPECT_TRUE(over.result.tail.plan.sink_thread) << label;
    EXPECT_TRUE(over.result.tail.plan.audio_beside_video) << label;
    ASSERT_TRUE(over.media.frames.defined() && over.media.waveform.defined()) << label;
    EXPECT_TRUE(test::same_bits(over.media.frames, seq.media.frames)) << label << ": video";
    EXPECT_TRUE(test::same_bits(over.media.waveform, seq.media.waveform)) << label << ": audio";
    EXPECT_EQ(over.result.audio_samples, seq.result.audio_samples) << label;
    // The progress sees the same stages; "audio decode" made the audio's tensors on the GPU.
    ASSERT_EQ(over.timings.size(), 2u) << label;
    EXPECT_EQ(over.timings[0].stage, "audio decode") << label;
    EXPECT_GT(over.timings[0].allocations.cuda, 0) << label;
    EXPECT_EQ(over.timings[1].stage, "video decode") << label;
    const generate::TailTiming& t = over.result.tail;
    std::printf("[%s] tail wall %.4f s: video %.4f, audio %.4f (its stream), sink %.4f, waited %.4f\n",
                label.c_str(), t.wall_seconds, t.video_seconds, t.audio_seconds, t.sink_seconds,
                t.sink_wait_seconds);
    EXPECT_GT(t.audio_seconds, 0.0) << label;
  }
}

TEST(DecodeTailOnCuda, ConvVaeOverlappedTailIsTheSequentialOneBitForBit) {
  LTX_REQUIRE_CUDA();
  expect_same_tail(test::shared_demo_bundle().checkpoint, DType::BF16, "conv vae bf16");
  expect_same_tail(test::shared_demo_bundle().checkpoint, DType::F32, "conv vae f32");
}

TEST(DecodeTailOnCuda, DiffusionDecoderOverlappedTailIsTheSequentialOneBitForBit) {
  LTX_REQUIRE_CUDA();
  expect_same_tail(test::fixture("diffdec_ltx25.weights.safetensors"), DType::BF16,
                   "diffusion decoder bf16");
}

TEST(DecodeTailOnCuda, UnderAMemoryLimitAutoDecodesTheAudioFirst) {
  LTX_REQUIRE_CUDA();
  struct NoLimitAfter {
    ~NoLimitAfter() { backend::set_memory_limit(test::kGpu, 0); }
  } reset;
  backend::set_memory_limit(test::kGpu, int64_t{8} << 30);
  const Tensor video = test::random_tensor({1, 16, 2, 2, 3}, 43);
  const Tensor audio = test::random_tensor({1, 2, 25, 16}, 44);
  const Decoded d = decode_on_gpu(test::shared_demo_bundle().checkpoint, TailMode::Auto,
                                  DType::BF16, video, audio);
  EXPECT_TRUE(d.result.tail.plan.sink_thread);
  EXPECT_FALSE(d.result.tail.plan.audio_beside_video);
  EXPECT_TRUE(d.media.waveform.defined());
}

// A sink that fails on its first chunk, while the audio decode is still in flight on its stream.
class FailingSink final : public generate::MediaSink {
 public:
  void begin(const generate::MediaFormat&) override {}
  void write_frames(const Tensor&) override { fail("test sink: the disk is full"); }
  void write_audio(const Tensor&) override {}
  void finish() override {}
};

TEST(DecodeTailOnCuda, AFailedTailWaitsForItsAudioAndLeavesTheDeviceUsable) {
  LTX_REQUIRE_CUDA();
  const auto& b = test::shared_demo_bundle();
  const Tensor video = test::random_tensor({1, 16, 4, 2, 3}, 45);
  const Tensor audio = test::random_tensor({1, 2, 50, 16}, 46);
  // First a whole decode, which makes the process-wide constants the decoders keep on the device.
  const Decoded seq = decode_on_gpu(b.checkpoint, TailMode::Sequential, DType::BF16, video, audio);
  backend::synchronize(test::kGpu);
  const int64_t live = backend::memory_stats(test::kGpu).live_bytes;
  generate::DecodeOptions opt;
  opt.device = test::kGpu;
  opt.tail = TailMode::Overlapped;
  FailingSink bad;
  EXPECT_ERROR_HAS(generate::decode_latents(video, audio, b.checkpoint, b.checkpoint, bad, opt),
                   "the disk is full");
  // The abandoned audio decode holds no memory any more, and the next decode is exact.
  backend::synchronize(test::kGpu);
  EXPECT_EQ(backend::memory_stats(test::kGpu).live_bytes, live);
  const Decoded again = decode_on_gpu(b.checkpoint, TailMode::Overlapped, DType::BF16, video, audio);
  EXPECT_TRUE(test::same_bits(again.media.waveform, seq.media.waveform));
  EXPECT_TRUE(test::same_bits(again.media.frames, seq.media.frames));
}

}  // namespace
}  // namespace ltx
