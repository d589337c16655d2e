// The LTX-2.5 diffusion video decoder on CUDA against the golden fixtures (README-ltx25.md §3):
// every stage on the GPU, in f32 (within the CPU's 1e-5 relative L2, plus CUDA's reduction-order
// noise) and in bf16 weights and activations (within 2e-2, the bf16 tolerance the transformer
// parity uses), untiled and tiled.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cuda/cuda_test_util.h"
#include "models/vae_test_util.h"
#include "models/video_vae/diffusion_video_decoder.h"
#include "sampling/noise.h"
#include "support/test_support.h"

namespace ltx::diffusion_decoder_test {
namespace {

using namespace models::video_vae;
using test::kGpu;

struct Fixture {
  std::shared_ptr<const io::SafetensorsFile> io;
  Tensor latent, noise;  // the noise: the reference's one draw of the work canvas (CPU f32)
};

Fixture load_fixture(const std::string& io_name, const Shape& canvas) {
  Fixture f;
  f.io = test::open_fixture(io_name);
  f.latent = test::io_tensor(*f.io, "in.latent");
  sampling::TorchCpuGenerator gen(f.io->metadata_json("notes")["noise"]["seed"].get<int64_t>());
  f.noise = gen.randn(canvas);
  return f;
}

double rel_l2_vs(const Tensor& got, const Tensor& ref) {
  return test::rel_l2(got.to(Device::cpu()).to(DType::F32).contiguous(), ref);
}

TEST(CudaDiffusionDecoder, ShippedConfigMatchesTheReferenceInF32AndBf16) {
  LTX_REQUIRE_CUDA();
  const Fixture f = load_fixture("diffdec_ltx25.test.io.safetensors", {1, 3, 17, 64, 96});
  const Tensor want = test::io_tensor(*f.io, "out.pixels.frames_0_3");
  const Tensor want_tiled = test::io_tensor(*f.io, "out.tiled.pixels.frames_8_11");
  const NoiseFn no_draw = [](const Shape& s) -> Tensor { fail("unexpected noise draw ", s.str()); };
  for (DType dt : {DType::F32, DType::BF16}) {
    const double tol = dt == DType::F32 ? 1e-4 : 2e-2;
    const DiffusionVideoDecoder dec = DiffusionVideoDecoder::from_file(
        test::fixture("diffdec_ltx25.weights.safetensors"), nn::LoadOptions{dt, kGpu});
    DiffusionDecodeOptions o;
    o.initial_noise = f.noise.to(kGpu);
    const Tensor pixels = dec(f.latent.to(kGpu), no_draw, o);
    EXPECT_EQ(pixels.device(), kGpu);
    EXPECT_EQ(pixels.shape(), (Shape{1, 3, 17, 64, 96}));
    const double err = rel_l2_vs(pixels.narrow(2, 0, 3), want);
    EXPECT_LE(err, tol) << dtype_name(dt);
    std::printf("[diffdec_ltx25 cuda %s] out.pixels[0:3] rel_l2 %.3e\n", dtype_name(dt), err);

    // Tiled 2 x 2 over T x W; a 1-step x0 decoder draws per tile: replay the tile's slice of the
    // recorded draw (as tests/models/diffusion_decoder_test.cpp does on the CPU).
    const nlohmann::json tiles = f.io->metadata_json("notes")["tiled"]["tiles"];
    size_t draws = 0;
    const NoiseFn per_tile = [&](const Shape&) {
      const auto& box = tiles.at(draws++)["pixel_out_f_h_w"];
      Tensor slice = f.noise;
      for (int a = 0; a < 3; ++a)
        if (!box[a][0].is_null())
          slice = slice.narrow(2 + a, box[a][0].get<int64_t>(),
                               box[a][1].get<int64_t>() - box[a][0].get<int64_t>());
      return slice.contiguous().to(kGpu);
    };
    models::tiling::TileSizeConfig cfg;
    cfg.frames = {14, 8};
    cfg.width = {64, 32};
    const Tensor tiled = dec.tiled_decode_all(f.latent.to(kGpu), cfg, per_tile, {});
    EXPECT_EQ(draws, 4u);
    const double terr = rel_l2_vs(tiled.narrow(2, 8, 3), want_tiled);
    EXPECT_LE(terr, tol) << dtype_name(dt);
    std::printf("[diffdec_ltx25 cuda %s] out.tiled.pixels[8:11] rel_l2 %.3e\n", dtype_name(dt),
                terr);
    if (dt == DType::BF16) {
      // A bf16 latent, as the GPU pipelines pass it: the blend's f16 buffers hand the frames out
      // in the latent's dtype (the reference's as_fhwc emit).
      draws = 0;
      const Tensor tiled16 = dec.tiled_decode_all(f.latent.to(kGpu, DType::BF16), cfg, per_tile, {});
      EXPECT_EQ(tiled16.dtype(), DType::BF16);
      const double err16 = rel_l2_vs(tiled16.narrow(2, 8, 3), want_tiled);
      EXPECT_LE(err16, tol);
      std::printf("[diffdec_ltx25 cuda bf16, bf16 latent] out.tiled.pixels[8:11] rel_l2 %.3e\n", err16);
    }
  }
}

TEST(CudaDiffusionDecoder, CodeDefaultConfigMatchesTheReferenceInF32AndBf16) {
  LTX_REQUIRE_CUDA();
  // 2 Euler steps, v output, a latent below the size floor.
  const Fixture f = load_fixture("diffdec_legacy.test.io.safetensors", {1, 3, 17, 64, 64});
  const Tensor want = test::io_tensor(*f.io, "out.pixels");
  for (DType dt : {DType::F32, DType::BF16}) {
    const DiffusionVideoDecoder dec = DiffusionVideoDecoder::from_file(
        test::fixture("diffdec_legacy.weights.safetensors"), nn::LoadOptions{dt, kGpu});
    DiffusionDecodeOptions o;
    o.initial_noise = f.noise.to(kGpu);
    const Tensor pixels =
        dec(f.latent.to(kGpu), [](const Shape& s) -> Tensor { fail("no draw ", s.str()); }, o);
    const double err = rel_l2_vs(pixels, want);
    EXPECT_LE(err, dt == DType::F32 ? 1e-4 : 2e-2) << dtype_name(dt);
    std::printf("[diffdec_legacy cuda %s] out.pixels rel_l2 %.3e\n", dtype_name(dt), err);
  }
}

}  // namespace
}  // namespace ltx::diffusion_decoder_test
