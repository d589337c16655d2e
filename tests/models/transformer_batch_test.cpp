// Batch invariance of the transformer on the CPU: a sample run inside a batch of other samples gives
// the same bits as the sample run alone. The server batches queued jobs into one denoising run and
// promises each job the output it would get alone, so no op may let one sample's result depend on
// how many rows sit beside it (GEMM kernels picked by the row count, reductions split by thread).
#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx::transformer_batch_test {
namespace {

namespace tf = models::transformer;

// Elements whose bits differ between a and b (same shape and dtype; both on the CPU).
int64_t differing_bits(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.dtype(), b.dtype());
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return -1;
  const Tensor x = a.contiguous(), y = b.contiguous();
  const int64_t n = x.numel(), size = static_cast<int64_t>(x.element_size());
  const auto* px = static_cast<const unsigned char*>(x.raw_data());
  const auto* py = static_cast<const unsigned char*>(y.raw_data());
  int64_t diff = 0;
  for (int64_t i = 0; i < n; ++i) diff += std::memcmp(px + i * size, py + i * size, static_cast<size_t>(size)) != 0;
  return diff;
}

tf::Modality fixture_modality(const io::SafetensorsFile& io, const std::string& stream) {
  const std::string p = "in." + stream + ".";
  tf::Modality m;
  m.latent = io.tensor(p + "latent").narrow(0, 0, 1).contiguous();
  m.sigma = io.tensor(p + "sigma").narrow(0, 0, 1).contiguous();
  m.timesteps = io.tensor(p + "timesteps").narrow(0, 0, 1).contiguous();
  m.positions = io.tensor(p + "positions").narrow(0, 0, 1).contiguous();
  m.context = io.tensor(p + "context").narrow(0, 0, 1).contiguous();
  return m;
}

// Sample k of four: its own latent, context and sigma (k = 0 is the fixture's sample).
tf::Modality variant(const tf::Modality& m, int k) {
  tf::Modality r = m;
  if (k == 0) return r;
  const float f = 1.f - 0.15f * static_cast<float>(k);
  r.latent = ops::add(ops::mul(m.latent, f), test::random_tensor(m.latent.shape(), 100 + k, -0.2f, 0.2f));
  r.context = ops::add(ops::mul(m.context, 1.f + 0.3f * static_cast<float>(k)),
                       test::random_tensor(m.context.shape(), 200 + k, -0.1f, 0.1f));
  r.sigma = ops::mul(m.sigma, f);
  r.timesteps = ops::mul(m.timesteps, f);
  return r;
}

tf::Modality concat_samples(const std::vector<tf::Modality>& ms) {
  tf::Modality r = ms.front();
  for (Tensor tf::Modality::*field : {&tf::Modality::latent, &tf::Modality::sigma, &tf::Modality::timesteps,
                                      &tf::Modality::positions, &tf::Modality::context}) {
    std::vector<Tensor> parts;
    for (const tf::Modality& m : ms) parts.push_back(m.*field);
    r.*field = ops::concat(parts, 0);
  }
  return r;
}

TEST(TransformerBatch, EachSampleOfABatchOfFourEqualsItsSoloRunBitwise) {
  for (const char* c : {"ltx2", "ltx23", "ltx25"}) {
    SCOPED_TRACE(c);
    const io::SafetensorsFile io(test::fixture(std::string(c) + ".io.safetensors"));
    const auto model = tf::LTXModel::from_files({test::fixture(std::string(c) + ".weights.safetensors")},
                                                tf::LTXModelType::AudioVideo);
    const tf::Modality video = fixture_modality(io, "video"), audio = fixture_modality(io, "audio");
    std::vector<tf::Modality> vs, as;
    for (int k = 0; k < 4; ++k) {
      vs.push_back(variant(video, k));
      as.push_back(variant(audio, k));
    }
    const tf::Modality bv = concat_samples(vs), ba = concat_samples(as);
    const tf::ModelOutputs batched = tf::X0Model{model}(&bv, &ba, nullptr);
    for (int k = 0; k < 4; ++k) {
      const tf::ModelOutputs solo = tf::X0Model{model}(&vs[static_cast<size_t>(k)], &as[static_cast<size_t>(k)], nullptr);
      EXPECT_EQ(differing_bits(batched.video.narrow(0, k, 1), solo.video), 0) << "video sample " << k;
      EXPECT_EQ(differing_bits(batched.audio.narrow(0, k, 1), solo.audio), 0) << "audio sample " << k;
    }
  }
}

}  // namespace
}  // namespace ltx::transformer_batch_test
