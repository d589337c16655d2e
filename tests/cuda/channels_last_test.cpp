// Channels-last activations on CUDA: elementwise ops and PixelNorm keep the layout and equal the
// contiguous results bit for bit; cuDNN convs read and write channels-last without copies; the
// replicate-time fold (ops::conv3d_replicate_time) against the pad + conv composition; the conv
// video decoder channels-last against its contiguous path and the CPU.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/cuda/conv_cudnn.h"
#include "backend/cuda/pixel_norm.h"
#include "cuda/cuda_test_util.h"
#include "io/weights.h"
#include "models/video_vae/conv_video_decoder.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/resample.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx::channels_last_test {
namespace {

using test::kGpu;
using test::rel_l2;
using test::same_bytes;

// bf16-representable values as an f32 CPU tensor, and the same on the GPU as bf16.
Tensor bf16_cpu(const Shape& s, uint64_t seed, float scale = 1.f) {
  return test::random_tensor(s, seed, -scale, scale).to(DType::BF16).to(DType::F32);
}
Tensor gpu(const Tensor& t) { return t.to(kGpu, DType::BF16); }

bool keeps_channels_last(const Tensor& t) { return t.is_channels_last() && !t.is_contiguous(); }

TEST(CudaChannelsLast, ElementwiseOpsMatchTheContiguousResultsBitForBit) {
  LTX_REQUIRE_CUDA();
  for (const DType dt : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = test::random_tensor({2, 16, 3, 5, 8}, 1).to(kGpu, dt);
    const Tensor b = test::random_tensor({2, 16, 3, 5, 8}, 2).to(kGpu, dt);
    const Tensor ch = test::random_tensor({1, 16, 1, 1, 1}, 3).to(kGpu, dt);
    const Tensor sc = test::random_tensor({2, 16, 1, 1, 1}, 4).to(kGpu, dt);
    const Tensor al = a.to_channels_last(), bl = b.to_channels_last();
    const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>>
        cases = {
            {"silu", [](const Tensor& x, const Tensor&) { return ops::silu(x); }},
            {"clamp", [](const Tensor& x, const Tensor&) { return ops::clamp(x, -0.5, 0.5); }},
            {"mul scalar", [](const Tensor& x, const Tensor&) { return ops::mul(x, 0.7); }},
            {"add", [](const Tensor& x, const Tensor& y) { return ops::add(x, y); }},
            {"mul channel", [&](const Tensor& x, const Tensor&) { return ops::mul(x, ch); }},
            {"add channel first", [&](const Tensor& x, const Tensor&) { return ops::add(ch, x); }},
            {"modulate", [&](const Tensor& x, const Tensor&) { return ops::modulate(x, sc, ch); }},
            {"gated_add", [&](const Tensor& x, const Tensor& y) { return ops::gated_add(x, y, sc); }},
            {"silu_mul", [](const Tensor& x, const Tensor& y) { return ops::silu_mul(x, y); }},
        };
    for (const auto& [name, fn] : cases) {
      const Tensor got = fn(al, bl), want = fn(a, b);
      EXPECT_TRUE(keeps_channels_last(got)) << name << " strides " << got.strides().str();
      EXPECT_TRUE(same_bytes(got, want)) << name;
    }
    // In place, also with a contiguous source.
    Tensor d = al.clone().to_channels_last(), e = a.clone();
    ops::add_(d, b);
    ops::add_(e, b);
    ops::add_(d, ch);
    ops::add_(e, ch);
    EXPECT_TRUE(keeps_channels_last(d));
    EXPECT_TRUE(same_bytes(d, e)) << "add_";
  }
}

TEST(CudaChannelsLast, RmsNormDimMatchesTheContiguousResultBitForBit) {
  LTX_REQUIRE_CUDA();
  for (const Shape& s : {Shape{1, 128, 3, 4, 5}, Shape{2, 40, 2, 3, 7}, Shape{1, 3, 2, 33, 1}}) {
    SCOPED_TRACE(s.str());
    const Tensor x = gpu(test::random_tensor(s, 5, -2.f, 2.f));
    const Tensor xl = x.to_channels_last();
    ASSERT_TRUE(cuda::rms_norm_dim_rows_layout(xl, 1) || xl.is_contiguous());
    const Tensor got = ops::rms_norm_dim(xl, 1, 1e-8);
    EXPECT_TRUE(got.strides() == xl.strides() || xl.is_contiguous()) << got.strides().str();
    EXPECT_TRUE(same_bytes(got, ops::rms_norm_dim(x, 1, 1e-8)));
    // A frame slice of a channels-last batch (a view with gaps for batch > 1).
    const Tensor part = ops::rms_norm_dim(xl.narrow(2, 1, 1), 1, 1e-8);
    EXPECT_TRUE(same_bytes(part, ops::rms_norm_dim(x.narrow(2, 1, 1), 1, 1e-8)));
  }
  // f32 too.
  const Tensor x = test::random_tensor({2, 24, 3, 5, 3}, 6).to(kGpu);
  EXPECT_TRUE(same_bytes(ops::rms_norm_dim(x.to_channels_last(), 1, 1e-6),
                         ops::rms_norm_dim(x, 1, 1e-6)));
}

TEST(CudaChannelsLast, CudnnConvReadsAndWritesChannelsLast) {
  LTX_REQUIRE_CUDA();
  const Tensor x = bf16_cpu({2, 16, 5, 6, 7}, 7), w = bf16_cpu({24, 16, 3, 3, 3}, 8, 0.2f);
  const Tensor b = bf16_cpu({24}, 9);
  const Tensor want = ops::conv3d(x, w, b, {1, 1, 1}, {1, 1, 1});
  const Tensor xl = gpu(x).to_channels_last(), wl = gpu(w).to_channels_last();
  for (const Tensor& wg : {gpu(w), wl}) {
    const Tensor got = ops::conv3d(xl, wg, gpu(b), {1, 1, 1}, {1, 1, 1});
    EXPECT_TRUE(keeps_channels_last(got)) << got.strides().str();
    EXPECT_LE(rel_l2(got, want), 8e-3);
    // The contiguous input still gives a contiguous result, and the same values.
    const Tensor plain = ops::conv3d(gpu(x), wg, gpu(b), {1, 1, 1}, {1, 1, 1});
    EXPECT_TRUE(plain.is_contiguous());
    EXPECT_TRUE(same_bytes(got, plain));
  }
  // Without a bias, strided, and the frames narrowed out of a batch of 2 (not dense).
  const Tensor nb = ops::conv3d(xl.narrow(2, 1, 3), wl, Tensor(), {1, 2, 1}, {0, 1, 1});
  EXPECT_TRUE(keeps_channels_last(nb));
  EXPECT_LE(rel_l2(nb, ops::conv3d(x.narrow(2, 1, 3), w, Tensor(), {1, 2, 1}, {0, 1, 1})), 8e-3);
}

// ops::conv3d_replicate_time's cuDNN fold against the composition it replaces (pad + conv3d, on
// the GPU and on the CPU). Bound: bf16 rel L2 8e-3 as for the plain cuDNN conv (the boundary
// frames round once more, to bf16, before the bias).
TEST(CudaChannelsLast, ReplicateTimeFoldMatchesPadThenConv) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 20;
  for (const int64_t T : {1, 2, 5}) {
    for (const bool last : {true, false}) {
      SCOPED_TRACE("T " + std::to_string(T) + (last ? " channels-last" : " contiguous"));
      const Tensor x = bf16_cpu({2, 16, T, 6, 5}, ++seed), w = bf16_cpu({24, 16, 3, 3, 3}, ++seed, 0.2f);
      const Tensor b = bf16_cpu({24}, ++seed);
      const Tensor xg = last ? gpu(x).to_channels_last() : gpu(x);
      const Tensor wg = gpu(w).to_channels_last(), bg = gpu(b);
      ops::ConvSpec spec;
      spec.rank = 3;
      spec.padding = {0, 1, 1};
      ASSERT_TRUE(cuda::cudnn_replicate_time_applies(xg, wg, bg, spec, 1, 1));
      const Tensor got = ops::conv3d_replicate_time(xg, wg, bg, {1, 1, 1}, {1, 1}, 1, 1);
      EXPECT_EQ(keeps_channels_last(got), last) << got.strides().str();
      const Tensor composed = ops::conv3d(
          ops::pad(xg, {0, 0, 0, 0, 1, 1}, ops::PadMode::Replicate), wg, bg, {1, 1, 1}, {0, 1, 1});
      const Tensor cpu_ref = ops::conv3d_replicate_time(x, w, b, {1, 1, 1}, {1, 1}, 1, 1);
      ASSERT_EQ(got.shape(), cpu_ref.shape());
      EXPECT_LE(rel_l2(got, composed), 8e-3);
      EXPECT_LE(rel_l2(got, cpu_ref), 8e-3);
      // The boundary frames alone (where the fold adds its taps) are within the bound too.
      EXPECT_LE(rel_l2(got.narrow(2, 0, 1), composed.narrow(2, 0, 1)), 8e-3);
      EXPECT_LE(rel_l2(got.narrow(2, T - 1, 1), composed.narrow(2, T - 1, 1)), 8e-3);
    }
  }
  // k_t = 5 (two summed slices on each side) and a 3x3x1 kernel.
  for (const Shape& ws : {Shape{16, 8, 5, 3, 3}, Shape{8, 8, 3, 3, 1}}) {
    SCOPED_TRACE(ws.str());
    const Tensor x = bf16_cpu({1, 8, 4, 5, 6}, ++seed), w = bf16_cpu(ws, ++seed, 0.2f);
    const int64_t p = ws[2] / 2;
    const ops::ConvArg<2> sp{1, ws[4] / 2};
    const Tensor got = ops::conv3d_replicate_time(gpu(x).to_channels_last(), gpu(w), Tensor(),
                                                  {1, 1, 1}, sp, p, p);
    EXPECT_LE(rel_l2(got, ops::conv3d_replicate_time(x, w, Tensor(), {1, 1, 1}, sp, p, p)), 8e-3);
  }
}

// The ResNet block's conv2 with its skip: conv3d_replicate_time's residual adds the bias and the
// residual in one pass (add_then_add_), the bits of the conv with its bias and then add_; on a
// channels-last activation and on a contiguous one, and with no bias.
TEST(CudaChannelsLast, ReplicateTimeResidualEqualsConvThenAddBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 60;
  for (const bool last : {true, false}) {
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(std::string(last ? "channels-last" : "contiguous") +
                   (with_bias ? ", bias" : ", no bias"));
      const Tensor x = gpu(bf16_cpu({1, 16, 4, 6, 5}, ++seed));
      const Tensor xg = last ? x.to_channels_last() : x;
      const Tensor wg = gpu(bf16_cpu({16, 16, 3, 3, 3}, ++seed, 0.2f)).to_channels_last();
      const Tensor bg = with_bias ? gpu(bf16_cpu({16}, ++seed)) : Tensor();
      const Tensor res = gpu(bf16_cpu({1, 16, 4, 6, 5}, ++seed));
      const Tensor resg = last ? res.to_channels_last() : res;
      Tensor want = ops::conv3d_replicate_time(xg, wg, bg, {1, 1, 1}, {1, 1}, 1, 1);
      ops::add_(want, resg);
      const Tensor got = ops::conv3d_replicate_time(xg, wg, bg, {1, 1, 1}, {1, 1}, 1, 1, resg);
      EXPECT_EQ(keeps_channels_last(got), last);
      EXPECT_TRUE(same_bytes(got, want));
    }
  }
  // add_then_add_ itself on the GPU: a channels-last dst, a per-channel bias, a contiguous skip.
  const Tensor dst = gpu(bf16_cpu({2, 24, 3, 4, 5}, 70)).to_channels_last();
  const Tensor bias = gpu(bf16_cpu({1, 24, 1, 1, 1}, 71));
  const Tensor skip = gpu(bf16_cpu({2, 24, 3, 4, 5}, 72));
  const Tensor want = dst.clone();
  ops::add_(want, bias);
  ops::add_(want, skip);
  ops::add_then_add_(dst, bias, skip);
  EXPECT_TRUE(same_bytes(dst, want));
}

TEST(CudaChannelsLast, ReplicateTimeFallsBackToTheCompositionElsewhere) {
  LTX_REQUIRE_CUDA();
  const Tensor x = gpu(bf16_cpu({1, 8, 3, 4, 4}, 40)), w = gpu(bf16_cpu({8, 8, 3, 3, 3}, 41, 0.2f));
  ops::ConvSpec spec;
  spec.rank = 3;
  spec.padding = {0, 1, 1};
  EXPECT_FALSE(cuda::cudnn_replicate_time_applies(x, w, Tensor(), spec, 2, 0));  // causal
  EXPECT_FALSE(cuda::cudnn_replicate_time_applies(x.to(DType::F32), w.to(DType::F32), Tensor(),
                                                  spec, 1, 1));
  const Tensor causal = ops::conv3d_replicate_time(x, w, Tensor(), {1, 1, 1}, {1, 1}, 2, 0);
  EXPECT_TRUE(same_bytes(causal, ops::conv3d(ops::pad(x, {0, 0, 0, 0, 2, 0}, ops::PadMode::Replicate),
                                             w, Tensor(), {1, 1, 1}, {0, 1, 1})));
}

TEST(CudaChannelsLast, DepthToSpaceKeepsTheLayoutOnTheGpu) {
  LTX_REQUIRE_CUDA();
  const Tensor x = gpu(test::random_tensor({2, 32, 3, 4, 5}, 50));
  const Tensor got = ops::depth_to_space(x.to_channels_last(), {2, 2, 2}, {0, 1, 2});
  EXPECT_TRUE(keeps_channels_last(got));
  EXPECT_TRUE(same_bytes(got, ops::depth_to_space(x, {2, 2, 2}, {0, 1, 2})));
  // Sub-positions outside the channels: runs of 4 channels move as 8-byte words; the CPU's
  // copy of the same layouts is the reference.
  const Tensor outer =
      ops::depth_to_space(x.to_channels_last(), {2, 2, 2}, {0, 1, 2}, ops::Subpositions::Outer);
  EXPECT_TRUE(keeps_channels_last(outer));
  const Tensor x_cpu = x.to(Device::cpu()).to_channels_last();
  EXPECT_TRUE(same_bytes(outer.to(Device::cpu()),
                         ops::depth_to_space(x_cpu, {2, 2, 2}, {0, 1, 2}, ops::Subpositions::Outer)));
}

// A small LTX-2.3-like decoder (PixelNorm, zeros padding, non-causal, no timestep conditioning;
// channel counts multiples of 8 so that cuDNN takes the convs, except conv_out's 12 outputs).
models::video_vae::ConvVideoDecoder small_decoder(DType dt, Device dev) {
  using namespace models::video_vae;
  const nlohmann::json vae = nlohmann::json::parse(R"({
    "latent_channels": 16, "out_channels": 3, "patch_size": 2, "norm_layer": "pixel_norm",
    "decoder_base_channels": 8, "spatial_padding_mode": "zeros", "causal_decoder": false,
    "timestep_conditioning": false,
    "decoder_blocks": [["res_x", {"num_layers": 1}], ["compress_all", {"multiplier": 2}],
                       ["res_x", {"num_layers": 1}], ["compress_space", {"multiplier": 2}],
                       ["res_x", {"num_layers": 1}]]})");
  const DecoderConfig cfg = decoder_config_from_json(vae, "channels-last test");
  io::WeightMap w = io::WeightMap::synthetic(
      [](const std::string& name, const Shape& shape, DType dtype, Device device) {
        const uint64_t seed = std::hash<std::string>{}(name);
        const bool std_like = name.find("std-of-means") != std::string::npos;
        Tensor t = std_like ? Tensor::full(shape, 1.0) : bf16_cpu(shape, seed, 0.15f);
        return t.to(device, dtype);
      });
  nn::LoadOptions opt;
  opt.dtype = dt;
  opt.device = dev;
  return ConvVideoDecoder::load(w, cfg, opt);
}

TEST(CudaChannelsLast, ConvVideoDecoderMatchesItsContiguousPathAndTheCpu) {
  LTX_REQUIRE_CUDA();
  models::video_vae::ConvVideoDecoder gpu_dec = small_decoder(DType::BF16, kGpu);
  const models::video_vae::ConvVideoDecoder cpu_dec = small_decoder(DType::F32, Device::cpu());
  for (const int64_t batch : {1, 2}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const Tensor latent = bf16_cpu({batch, 16, 3, 4, 5}, 60 + static_cast<uint64_t>(batch));
    gpu_dec.set_cuda_channels_last(true);
    const Tensor got = gpu_dec(latent.to(kGpu, DType::BF16));
    EXPECT_TRUE(got.is_contiguous());
    gpu_dec.set_cuda_channels_last(false);
    const Tensor plain = gpu_dec(latent.to(kGpu, DType::BF16));
    // Same cuDNN calls on the same channels-last operands, the same per-element math.
    EXPECT_TRUE(same_bytes(got, plain));
    const Tensor want = cpu_dec(latent);
    ASSERT_EQ(got.shape(), want.shape());
    // bf16 activations through 8 convs against the f32 CPU decoder.
    EXPECT_LE(rel_l2(got, want), 3e-2);
  }
}

}  // namespace
}  // namespace ltx::channels_last_test
