// `ltx generate --device cuda` end to end: the same generation on the CPU and on the GPU, through
// run_generation into a MemorySink (decoded frames + waveform in memory; no FFmpeg, which the GPU
// machine lacks), with the built-in demo bundle (tiny LTX-2.3 layout, random weights) and with the
// demo transformer + the tiny LTX-2.5 diffusion decoder fixture.
//
// Tolerance of the f32 runs (GenerateOptions::dtype = F32: f32 weights and activations on both
// devices, f32 latents between the steps): the devices differ only in summation order (cuBLASLt /
// im2col GEMMs, reductions, attention), ~1e-6 relative per op; the component parity tests hold each
// model on CUDA to rel L2 1e-4 of the reference. Through the whole chain (text encoder, 2 + 2
// denoising steps, upsampler, decoders) we allow rel L2 2e-4 over all pixels / samples, and a
// largest pixel difference below one 8-bit level (1/255, what the MP4 writer would quantise to)
// and a largest audio sample difference of 1e-3 (-60 dB).
//
// Where the work ran: Progress counts the tensor allocations of every stage per device type (every
// op returns a new tensor on its inputs' device, every weight is stored on the model's device). In
// the GPU run each component's stage must have made most of its tensors on the GPU, and fewer
// host tensors than the CPU run's same stage (what stays on the host: building the states from
// the seeded noise, image resizing, small tables uploaded per call, the results coming back).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "generate/generate_test_util.h"
#include "media/image.h"
#include "media/support.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::InMemoryGeneration;

bool all_finite(const Tensor& t) {
  for (const double v : t.to_double_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

struct Tolerance {
  double rel_l2;
  double max_abs_pixel;
  double max_abs_audio;
};
constexpr Tolerance kF32{2e-4, 1.0 / 255.0, 1e-3};

// The GPU run's frames and waveform against the CPU run's.
void expect_same_media(const InMemoryGeneration& gpu, const InMemoryGeneration& cpu,
                       const Tolerance& tol, const std::string& what) {
  const generate::DecodedMedia &g = gpu.media, &c = cpu.media;
  // One stream (video frames or waveform): same shape, finite, within the tolerance.
  const auto expect_close = [&](const char* kind, const Tensor& got, const Tensor& want,
                                double max_abs) {
    ASSERT_EQ(got.shape(), want.shape()) << what << ": " << kind;
    EXPECT_TRUE(all_finite(got)) << what << ": " << kind;
    const double rel = test::rel_l2(got, want), abs = test::max_abs_diff(got, want);
    std::printf("[%s] %s %s: rel_l2 %.3e max_abs %.3e\n", what.c_str(), kind,
                got.shape().str().c_str(), rel, abs);
    EXPECT_LE(rel, tol.rel_l2) << what << ": " << kind;
    EXPECT_LE(abs, max_abs) << what << ": " << kind;
  };
  ASSERT_TRUE(g.frames.defined() && c.frames.defined()) << what;
  EXPECT_EQ(g.format.fps, c.format.fps) << what;
  expect_close("video", g.frames, c.frames, tol.max_abs_pixel);
  ASSERT_EQ(g.waveform.defined(), c.waveform.defined()) << what;
  if (!c.waveform.defined()) return;
  EXPECT_EQ(g.format.audio_sample_rate, c.format.audio_sample_rate) << what;
  expect_close("audio", g.waveform, c.waveform, tol.max_abs_audio);
}

// Each named stage of the GPU run made its tensors on the GPU (see the file comment). The counts
// are process-wide: on the GPU the audio decode runs on a thread of its own while the video
// decode runs (generate::TailPlan), so its tensors are counted in the video decode's stage. The
// two decodes are therefore checked as one, "tail".
AllocationCounts stage_allocations(const InMemoryGeneration& run, const std::string& stage) {
  if (stage != "tail") return run.stage(stage).allocations;
  const AllocationCounts a = run.stage("audio decode").allocations,
                         v = run.stage("video decode").allocations;
  return {a.host + v.host, a.cuda + v.cuda};
}

void expect_ran_on_gpu(const InMemoryGeneration& gpu, const InMemoryGeneration& cpu,
                       const std::vector<std::string>& stages) {
  for (const std::string& s : stages) {
    const AllocationCounts on_gpu = stage_allocations(gpu, s), on_cpu = stage_allocations(cpu, s);
    std::printf("  stage %-18s cpu run: %6lld host | gpu run: %6lld host, %6lld cuda\n", s.c_str(),
                static_cast<long long>(on_cpu.host), static_cast<long long>(on_gpu.host),
                static_cast<long long>(on_gpu.cuda));
    EXPECT_EQ(on_cpu.cuda, 0) << s;
    EXPECT_GT(on_gpu.cuda, on_gpu.host)
        << s << ": the GPU run made " << on_gpu.cuda << " tensors on the GPU and " << on_gpu.host
        << " on the host: the stage's work did not run on the GPU";
    EXPECT_LT(on_gpu.host, on_cpu.host)
        << s << ": the GPU run made " << on_gpu.host << " host tensors, the CPU run "
        << on_cpu.host;
  }
}

// The GPU run's denoising steps read nothing back from the device (the sampling loops keep their
// maths there): no device -> host copy between a stage's first and last completed step.
void expect_no_read_backs_in_steps(const InMemoryGeneration& gpu, const std::vector<std::string>& stages) {
  for (const std::string& s : stages)
    EXPECT_EQ(gpu.stage(s).step_read_backs, 0)
        << s << ": the GPU run's denoising steps copied " << gpu.stage(s).step_read_backs
        << " tensors back to the host";
}

struct Pair {
  InMemoryGeneration cpu, gpu;
};

Pair run_on_both(generate::GenerateOptions o) {
  Pair p;
  o.device = Device::cpu();
  p.cpu = test::generate_in_memory(o);
  o.device = test::kGpu;
  p.gpu = test::generate_in_memory(o);
  return p;
}

TEST(GenerateOnCuda, DemoTwoStageMatchesTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  // Guided stage 1 (negative prompt), the spatial upsampler with the video encoder's statistics,
  // stage 2 with the distilled LoRA fused, the conv video decoder, the audio decoder + vocoder.
  generate::GenerateOptions o = test::small_demo_options("two-stage", 64, 128);
  o.dtype = DType::F32;
  const Pair p = run_on_both(o);
  expect_same_media(p.gpu, p.cpu, kF32, "two-stage f32");
  expect_ran_on_gpu(p.gpu, p.cpu,
                    {"text encoding", "stage 1", "upsample", "stage 2", "tail"});
  expect_no_read_backs_in_steps(p.gpu, {"stage 1", "stage 2"});
}

TEST(GenerateOnCuda, HqRes2sMatchesTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  // The res_2s sampler in both stages (float64 maths as device ops), three steps in stage 1.
  generate::GenerateOptions o = test::small_demo_options("two-stage-hq", 64, 128);
  o.num_inference_steps = 3;
  o.dtype = DType::F32;
  const Pair p = run_on_both(o);
  expect_same_media(p.gpu, p.cpu, kF32, "two-stage-hq f32");
  expect_ran_on_gpu(p.gpu, p.cpu, {"text encoding", "stage 1", "upsample", "stage 2"});
  expect_no_read_backs_in_steps(p.gpu, {"stage 1", "stage 2"});
}

TEST(GenerateOnCuda, ImageConditionedDistilledMatchesTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  if (!media::image_io_available()) GTEST_SKIP() << "this build cannot read images (LTX_IMAGE_IO=OFF)";
  test::TempDir dir;
  // Frame 0 replaces the first latent frame, frame 8 adds keyframe tokens; CRF 0 skips the H.264
  // round trip (FFmpeg).
  const std::string first = dir.file("first.png"), last = dir.file("last.png");
  media::write_png(first, test::random_tensor({80, 120, 3}, 21, 0.f, 255.f).to(DType::U8));
  media::write_png(last, test::random_tensor({70, 150, 3}, 22, 0.f, 255.f).to(DType::U8));
  generate::GenerateOptions o = test::small_demo_options("distilled", 64, 128);
  o.dtype = DType::F32;
  o.images = {{first, 0, 1.0, 0}, {last, 8, 0.7, 0}};
  const Pair p = run_on_both(o);
  expect_same_media(p.gpu, p.cpu, kF32, "distilled + images f32");
  expect_ran_on_gpu(p.gpu, p.cpu,
                    {"text encoding", "image conditioning", "stage 1", "upsample", "stage 2",
                     "tail"});
  expect_no_read_backs_in_steps(p.gpu, {"stage 1", "stage 2"});
}

TEST(GenerateOnCuda, DfrWithATemporalRoundMatchesTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  // Keyframe slots, the detailing pass and one temporal x2 round (the temporal upsampler).
  generate::GenerateOptions o = test::small_demo_options("dfr", 64, 128);
  o.dtype = DType::F32;
  o.temporal_upsample_rounds = 1;
  const Pair p = run_on_both(o);
  EXPECT_EQ(p.gpu.media.frames.size(0), 17);
  expect_same_media(p.gpu, p.cpu, kF32, "dfr + temporal round f32");
  expect_ran_on_gpu(p.gpu, p.cpu,
                    {"text encoding", "stage 1", "upsample", "stage 2", "temporal upsample",
                     "tail"});
  expect_no_read_backs_in_steps(p.gpu, {"stage 1", "stage 2"});
}

TEST(GenerateOnCuda, DiffusionDecoderBundleMatchesTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  // The demo transformer with LTX-2.5's tiny diffusion video decoder (16-channel latents like
  // it); the one-stage pipeline needs no video encoder, which the decoder file lacks. The decode
  // tiling is planned from the GPU's free memory.
  const auto& demo = test::shared_demo_bundle();
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 96);
  o.models.checkpoint_path = demo.checkpoint;
  o.models.text_encoder_path = demo.text_encoder;
  o.models.video_vae_path = test::fixture("diffdec_ltx25.weights.safetensors");
  o.dtype = DType::F32;
  const Pair p = run_on_both(o);
  EXPECT_FALSE(p.gpu.result.demo);
  EXPECT_EQ(p.gpu.media.frames.shape(), (Shape{9, 64, 96, 3}));
  expect_same_media(p.gpu, p.cpu, kF32, "diffusion decoder f32");
  expect_ran_on_gpu(p.gpu, p.cpu, {"text encoding", "stage 1", "tail"});
  expect_no_read_backs_in_steps(p.gpu, {"stage 1"});
}

TEST(GenerateOnCuda, DefaultPrecisionRunsEveryComponentOnTheGpu) {
  LTX_REQUIRE_CUDA();
  // The CLI's run: bf16 models on the GPU (the vocoder f32), bf16 latents between the steps on
  // both devices; the CPU computes in f32. bf16 activations move the result by about a percent,
  // so the comparison is a sanity bound (a wrong op gives rel L2 ~1), not parity.
  const generate::GenerateOptions o = test::small_demo_options("two-stage", 64, 128);
  const Pair p = run_on_both(o);
  const Tensor& frames = p.gpu.media.frames;
  ASSERT_EQ(frames.shape(), p.cpu.media.frames.shape());
  EXPECT_TRUE(all_finite(frames));
  EXPECT_TRUE(all_finite(p.gpu.media.waveform));
  const std::vector<double> px = frames.to_double_vector();
  EXPECT_GE(*std::min_element(px.begin(), px.end()), 0.0);
  EXPECT_LE(*std::max_element(px.begin(), px.end()), 1.0);
  const double v_rel = test::rel_l2(frames, p.cpu.media.frames);
  const double a_rel = test::rel_l2(p.gpu.media.waveform, p.cpu.media.waveform);
  std::printf("[two-stage bf16 vs cpu f32] video rel_l2 %.3e, audio rel_l2 %.3e\n", v_rel, a_rel);
  EXPECT_LT(v_rel, 0.25);
  EXPECT_LT(a_rel, 0.25);
  expect_ran_on_gpu(p.gpu, p.cpu,
                    {"text encoding", "stage 1", "upsample", "stage 2", "tail"});
}

}  // namespace
}  // namespace ltx
