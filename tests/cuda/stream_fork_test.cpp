// backend::StreamFork: a side line of work beside the current stream (the transformer's audio
// half next to its video half). The results must equal the one-stream run bit for bit, whatever
// the two lines' timing.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/stream.h"
#include "backend/stream_fork.h"
#include "bench/presets.h"
#include "bench/random_weights.h"
#include "cuda/cuda_test_util.h"
#include "io/weights.h"
#include "models/transformer/model.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/shape.h"
#include "pipelines/denoisers.h"
#include "sampling/latent.h"
#include "sampling/noise.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::same_bytes;

// Restores the process-wide switch.
struct SideStreams {
  bool saved = backend::side_streams_enabled();
  explicit SideStreams(bool on) { backend::set_side_streams_enabled(on); }
  ~SideStreams() { backend::set_side_streams_enabled(saved); }
};

// A long main-line chain whose result the side line reads after fork(), and a side result the
// main line reads after join(): equal to the same ops run in order.
TEST(CudaStreamFork, ForkAndJoinOrderTheTwoLines) {
  LTX_REQUIRE_CUDA();
  const Tensor a = test::random_tensor({2048, 2048}, 1).to(kGpu, DType::BF16);
  const Tensor small = test::random_tensor({64, 2048}, 2).to(kGpu, DType::BF16);
  const auto run = [&](bool side) {
    SideStreams s(side);
    backend::StreamFork lines(kGpu);
    EXPECT_EQ(lines.active(), side);
    Tensor x = a;
    for (int i = 0; i < 8; ++i) x = ops::linear(x, a, Tensor());  // slow on the main line
    lines.fork();
    lines.read_on_side(x);
    Tensor y;
    lines.on_side([&] { y = ops::add(ops::linear(small, x, Tensor()), 1.0); });
    lines.join();
    lines.read_on_main(y);
    return ops::mul(y, 2.0);
  };
  const Tensor one = run(false);
  for (int rep = 0; rep < 3; ++rep) EXPECT_TRUE(same_bytes(run(true), one)) << "rep " << rep;
}

// A tensor the main line drops while the side line still reads it keeps its memory until the
// read is done (read_on_side): the main line's next allocation of that size must not land on it.
TEST(CudaStreamFork, ATensorReadOnTheOtherLineOutlivesItsOwnersDrop) {
  LTX_REQUIRE_CUDA();
  SideStreams on(true);
  const Tensor w = test::random_tensor({4096, 4096}, 3).to(kGpu, DType::BF16);
  const Tensor src = test::random_tensor({1024, 4096}, 4).to(kGpu, DType::BF16);
  Tensor want;
  {
    Tensor t = ops::mul(src, 1.0);
    Tensor y = t;
    for (int i = 0; i < 6; ++i) y = ops::linear(y, w, Tensor());
    want = y;
  }
  for (int rep = 0; rep < 3; ++rep) {
    backend::StreamFork lines(kGpu);
    ASSERT_TRUE(lines.active());
    Tensor t = ops::mul(src, 1.0);  // made on the main line
    lines.fork();
    lines.read_on_side(t);
    Tensor y;
    lines.on_side([&] {
      y = t;
      for (int i = 0; i < 6; ++i) y = ops::linear(y, w, Tensor());
    });
    t = Tensor();  // the main line drops it...
    const Tensor scribble = Tensor::full({1024, 4096}, 7.0, DType::BF16, kGpu);  // ...and allocates
    lines.join();
    EXPECT_TRUE(same_bytes(y, want)) << "rep " << rep;
    (void)scribble;
  }
}

TEST(CudaStreamFork, InactiveOnTheCpuWhenDisabledAndWhileCapturing) {
  LTX_REQUIRE_CUDA();
  {
    backend::StreamFork cpu(Device::cpu());
    EXPECT_FALSE(cpu.active());
    int ran = 0;
    cpu.on_side([&] { ++ran; });
    EXPECT_EQ(ran, 1);
  }
  {
    SideStreams off(false);
    EXPECT_FALSE(backend::StreamFork(kGpu).active());
  }
  SideStreams on(true);
  EXPECT_TRUE(backend::StreamFork(kGpu).active());
  cuda::OwnedStream capture(0);
  cuda::StreamGuard guard(capture.get());
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(capture.get().handle(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const bool active_in_capture = backend::StreamFork(kGpu).active();
  ASSERT_EQ(cudaStreamEndCapture(capture.get().handle(), &graph), cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  EXPECT_FALSE(active_in_capture);
}

// The LTX-2.3 block at full width (3 blocks, random bf16 weights) on 768x512x121 + audio, two
// samples with different perturbations per block (masks made on the main line each block, read
// by the side line) and shared text groups: the audio half beside the video half gives the same
// bytes as the one-stream run, over repeated calls.
TEST(CudaStreamFork, TransformerAudioBesideVideoEqualsOneStreamBitForBit) {
  LTX_REQUIRE_CUDA();
  bench::Preset p = bench::preset("ltx23-22b");
  p.transformer["num_layers"] = 3;
  const auto cfg = p.transformer_config();
  bench::RandomWeights rw(bench::transformer_init, 5);
  io::WeightMap w = io::WeightMap::synthetic(rw.synthesizer());
  const auto model = models::transformer::LTXModel::load(w, cfg, {DType::BF16, kGpu});

  sampling::TorchCpuGenerator gen(11);
  sampling::VideoPixelShape px;  // 121 x 512 x 768
  sampling::VideoLatentTools vt;
  vt.target = sampling::VideoLatentShape::from_pixel_shape(px, cfg.in_channels);
  sampling::AudioLatentTools at;
  at.target = sampling::AudioLatentShape::from_video_pixel_shape(px, cfg.audio_in_channels / 16);
  const auto two = [&](const sampling::LatentState& s, int64_t dim) {
    const Tensor ctx = gen.randn({1, 1024, dim});
    models::transformer::Modality m = pipelines::modality_from_state(s, ctx, 0.725);
    const auto pair = [&](const Tensor& t, DType dt, double second) {
      const Tensor one = t.to(kGpu, dt);
      return ops::concat({one, second == 1.0 ? one : ops::mul(one, second)}, 0);
    };
    m.latent = pair(m.latent, DType::BF16, 0.5);
    m.context = pair(m.context, DType::BF16, 1.0);
    m.sigma = pair(m.sigma, DType::F32, 1.0);
    m.timesteps = pair(m.timesteps, DType::F32, 1.0);
    m.positions = pair(m.positions, DType::F32, 1.0);
    m.context_groups = {0, 0};
    return m;
  };
  models::transformer::Modality video =
      two(vt.create_initial_state(DType::F32, gen.randn(vt.target.shape())), cfg.cross_attention_dim);
  models::transformer::Modality audio =
      two(at.create_initial_state(DType::F32, gen.randn(at.target.shape())), cfg.audio_cross_attention_dim);
  using models::transformer::Perturbation;
  using models::transformer::PerturbationType;
  models::transformer::PerturbationConfig second;
  second.perturbations = {Perturbation{PerturbationType::SkipVideoSelfAttn, std::vector<int64_t>{1}},
                          Perturbation{PerturbationType::SkipAudioSelfAttn, std::vector<int64_t>{1}},
                          Perturbation{PerturbationType::SkipV2ACrossAttn, std::vector<int64_t>{2}}};
  const models::transformer::BatchedPerturbationConfig perturbations({{}, second}, 3);

  const auto run = [&](bool side) {
    SideStreams s(side);
    return models::transformer::X0Model{model}(&video, &audio, &perturbations);
  };
  const auto one = run(false);
  for (int rep = 0; rep < 3; ++rep) {
    const auto got = run(true);
    EXPECT_TRUE(same_bytes(got.video, one.video)) << "rep " << rep;
    EXPECT_TRUE(same_bytes(got.audio, one.audio)) << "rep " << rep;
  }
}

}  // namespace
}  // namespace ltx
