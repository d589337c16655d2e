// The whole LTX transformer forward on CUDA (f32 weights moved to the GPU once, every op on the
// device) against the golden reference outputs of every fixture case, through the `transformer`
// parity component with --device cuda (library call and the `ltx` binary); and the same in bf16
// (--dtype bf16: bf16 weights and activations, as the reference's bf16 builds) against the f32
// reference outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "parity/parity.h"
#include "cuda/cuda_test_util.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx {
namespace {

class CudaTransformerParity : public ::testing::TestWithParam<const char*> {};

// Runs the transformer parity component of fixture case `c` on CUDA in `dtype`; the outputs go to
// the returned args' `out`.
parity::Args run_parity(const std::string& c, DType dtype, const test::TempDir& dir) {
  parity::Args args;
  args.weights = {test::fixture(c + ".weights.safetensors")};
  args.inputs = test::fixture(c + ".io.safetensors");
  args.out = dir.file("out.safetensors");
  args.device = Device::cuda(0);
  args.dtype = dtype;
  const parity::ComponentInfo* info = nullptr;
  for (const auto& ci : parity::components())
    if (std::string(ci.name) == "transformer") info = &ci;
  LTX_CHECK(info != nullptr, "no transformer parity component");
  parity::Run run(args);
  info->fn(run);
  LTX_CHECK(run.finish() == 0, c, ": the parity run failed");
  return args;
}

TEST_P(CudaTransformerParity, EveryF32OutputAndIntermediateMatchesTheReference) {
  LTX_REQUIRE_CUDA();
  const std::string c = GetParam();
  test::TempDir dir;
  const parity::Args args = run_parity(c, DType::F32, dir);
  const io::SafetensorsFile out(args.out), ref(args.inputs);
  int outputs = 0, inters = 0;
  for (const std::string& name : ref.names()) {
    const bool is_out = name.starts_with("out."), is_inter = name.starts_with("inter.");
    if (!is_out && !is_inter) continue;
    // f64 and bf16 compute are not f32 variants.
    if (name.starts_with("out.main_f64.") || name.starts_with("out.bf16.")) continue;
    ASSERT_TRUE(out.contains(name)) << c << ": " << name << " was not computed on CUDA";
    const parity::ErrorStats s = parity::compare(out.tensor(name), ref.tensor(name));
    const bool rope_table = name.find("pe_cos") != std::string::npos ||
                            name.find("pe_sin") != std::string::npos;
    if (rope_table) {
      EXPECT_LE(s.max_abs, 1e-3) << c << ": " << name;
    } else {
      EXPECT_LE(s.rel_l2, 1e-4) << c << ": " << name;
    }
    if (is_out) {
      std::printf("[%s cuda] %-40s rel_l2 %.3e  max_rel %.3e\n", c.c_str(), name.c_str(),
                  s.rel_l2, s.max_rel);
      ++outputs;
    } else {
      ++inters;
    }
  }
  EXPECT_GE(outputs, 20) << c;
  EXPECT_GE(inters, 20) << c;
}

// bf16 weights and activations (rounding of ~4e-3 per op) against the f32 reference: every output
// of every variant within 2e-2 relative L2; the reference's own bf16 run (`out.bf16.*`, ltx23)
// likewise. Intermediates are printed for bisecting, not checked (the RoPE tables and masks are
// bf16-rounded by design).
TEST_P(CudaTransformerParity, EveryOutputInBf16IsWithin2e2OfTheF32Reference) {
  LTX_REQUIRE_CUDA();
  const std::string c = GetParam();
  test::TempDir dir;
  const parity::Args args = run_parity(c, DType::BF16, dir);
  const io::SafetensorsFile out(args.out), ref(args.inputs);
  int outputs = 0;
  double worst = 0;
  for (const std::string& name : ref.names()) {
    const bool is_out = name.starts_with("out."), is_inter = name.starts_with("inter.");
    if (!is_out && !is_inter) continue;
    if (name.starts_with("out.main_f64.")) continue;
    ASSERT_TRUE(out.contains(name)) << c << ": " << name << " was not computed in bf16";
    const parity::ErrorStats s = parity::compare(out.tensor(name), ref.tensor(name));
    std::printf("[%s cuda bf16] %-44s rel_l2 %.3e  max_rel %.3e%s\n", c.c_str(), name.c_str(),
                s.rel_l2, s.max_rel, is_out && s.rel_l2 > 2e-2 ? "  <-- over 2e-2" : "");
    if (!is_out) continue;
    EXPECT_LE(s.rel_l2, 2e-2) << c << ": " << name << " (bf16 vs the f32 reference)";
    worst = std::max(worst, s.rel_l2);
    ++outputs;
  }
  std::printf("[%s cuda bf16] %d outputs, worst rel_l2 %.3e\n", c.c_str(), outputs, worst);
  EXPECT_GE(outputs, 20) << c;
  // A bf16 run that silently stayed f32 would match far better than bf16 rounding allows.
  EXPECT_GT(worst, 1e-4) << c << ": no output shows bf16 rounding; did the model run in f32?";
}

// The guided step's shared text K / V (Modality::context_groups, set by the GuidedDenoiser) on
// the GPU in bf16: against the K / V computed per pass. cuBLASLt may pick another kernel for the
// smaller row count, so the bound is bf16 rounding.
TEST(CudaTransformerParity, ContextGroupsShareTheTextKeysAndValuesInBf16) {
  LTX_REQUIRE_CUDA();
  for (const char* c : {"ltx2", "ltx23"}) {
    SCOPED_TRACE(c);
    const io::SafetensorsFile io(test::fixture(std::string(c) + ".io.safetensors"));
    const auto model = models::transformer::LTXModel::from_files(
        {test::fixture(std::string(c) + ".weights.safetensors")},
        models::transformer::LTXModelType::AudioVideo, {DType::BF16, Device::cuda(0)});
    const auto batch3 = [&](const std::string& stream) {
      const std::string p = "in." + stream + ".";
      models::transformer::Modality m;
      const auto three = [&](const std::string& name, DType dt) {
        const Tensor one = io.tensor(p + name).narrow(0, 0, 1).to(Device::cuda(0), dt);
        return ops::concat({one, one, one}, 0);
      };
      m.latent = three("latent", DType::BF16);
      m.sigma = three("sigma", DType::F32);
      m.timesteps = three("timesteps", DType::F32);
      m.positions = three("positions", DType::F32);
      const Tensor a = io.tensor(p + "context").narrow(0, 0, 1).to(Device::cuda(0), DType::BF16);
      m.context = ops::concat({a, ops::mul(a, 0.5), a}, 0);
      return m;
    };
    models::transformer::Modality video = batch3("video"), audio = batch3("audio");
    const auto plain = models::transformer::X0Model{model}(&video, &audio, nullptr);
    video.context_groups = audio.context_groups = {0, 1, 0};
    const auto shared = models::transformer::X0Model{model}(&video, &audio, nullptr);
    for (const auto& [got, want] : {std::pair{shared.video, plain.video}, std::pair{shared.audio, plain.audio}}) {
      const parity::ErrorStats e = parity::compare(got.to(Device::cpu(), DType::F32), want.to(Device::cpu(), DType::F32));
      EXPECT_LE(e.rel_l2, 1e-2) << "shared vs per-pass K/V";
      const parity::ErrorStats same = parity::compare(got.narrow(0, 0, 1).to(Device::cpu(), DType::F32),
                                                      got.narrow(0, 2, 1).to(Device::cpu(), DType::F32));
      EXPECT_LE(same.rel_l2, 1e-2) << "the two samples of context A";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaTransformerParity,
                         ::testing::Values("ltx2", "ltx23", "ltx25", "ltx25_kvcache"));

TEST(CudaTransformerParityCli, RunsWithDeviceCuda) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const test::CliResult r = test::run_ltx(
      dir, {"parity", "transformer", "--weights", test::fixture("ltx23.weights.safetensors"),
            "--inputs", test::fixture("ltx23.io.safetensors"), "--out", dir.file("out.safetensors"),
            "--device", "cuda"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* v :
       {"out.main.video_velocity", "out.bf16w.audio_velocity", "inter.block1.video_x"})
    EXPECT_NE(r.out.find(v), std::string::npos) << v << "\n" << r.out;
  EXPECT_EQ(r.err.find("variant 'main'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not available on cuda"), std::string::npos) << r.err;
}

TEST(CudaTransformerParityCli, RunsInBf16WithDtypeFlag) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const test::CliResult r = test::run_ltx(
      dir, {"parity", "transformer", "--weights", test::fixture("ltx23.weights.safetensors"),
            "--inputs", test::fixture("ltx23.io.safetensors"), "--out", dir.file("out.safetensors"),
            "--device", "cuda", "--dtype", "bf16"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* v : {"out.main.video_velocity", "out.bf16.video_velocity", "inter.block1.video_x"})
    EXPECT_NE(r.out.find(v), std::string::npos) << v << "\n" << r.out;
  EXPECT_EQ(r.err.find("'bf16' not computed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ltx
