#pragma once
// What the end-to-end parity tests of every layer share (pipelines, cli, cuda): the tiny model set's
// files (tests/fixtures/e2e/, tools/parity/gen_e2e.py), a recording's tensors, and the measures
// the recordings are checked with (relative L2 of latents, PSNR of decoded frames on the [0, 1]
// scale). tests/pipelines/e2e_fixture.h adds the models and requests of the pipelines' tests.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "models/video_vae/video_decoder.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx::e2e_fixture {

// Issue 6: decoded frames within PSNR 40 dB of the reference's (on the [0, 1] scale).
constexpr double kFramesMinPsnrDb = 40.0;

// A file of the tiny model set.
inline std::string e2e(const std::string& name) { return test::fixture("e2e/" + name); }

// ||a - b|| / ||b|| in f64.
inline double rel_l2(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_double_vector(), y = b.to_double_vector();
  EXPECT_EQ(x.size(), y.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / den);
}

// PSNR in dB of values on the [0, 1] scale (200 for identical tensors).
inline double psnr_db(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_double_vector(), y = b.to_double_vector();
  EXPECT_EQ(x.size(), y.size());
  double se = 0.0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) se += (x[i] - y[i]) * (x[i] - y[i]);
  const double mse = se / static_cast<double>(x.size());
  return mse == 0.0 ? 200.0 : 10.0 * std::log10(1.0 / mse);
}

// A recording (an io file of tests/fixtures) and its tensors, contiguous.
struct Reference {
  std::shared_ptr<const io::SafetensorsFile> f;
  explicit Reference(const std::string& name) : f(io::SafetensorsFile::open(test::fixture(name))) {}
  Tensor t(const std::string& n) const { return f->tensor(n).contiguous(); }
};

// A final video latent through the tiny checkpoint's video decoder, as the pipelines decode it
// (one tile at these sizes, as the reference's AUTO_TILING resolves): [f, H, W, 3] in [0, 1].
inline Tensor decode_frames(const Tensor& video_latent) {
  static const models::video_vae::VideoDecoder decoder =
      models::video_vae::load_video_decoder(e2e("ltx23_tiny.safetensors"));
  std::vector<Tensor> chunks;
  models::video_vae::decode_video(decoder, video_latent.to(DType::F32), std::nullopt, {},
                                  [&](const Tensor& chunk) { chunks.push_back(chunk.contiguous()); });
  return ops::concat(chunks, 0);
}

}  // namespace ltx::e2e_fixture
