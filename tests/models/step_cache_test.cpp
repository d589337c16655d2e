// Step caching in the transformer (models/transformer/step_cache.h): what fbcache computes, when
// it reuses, and that a cache that never reuses leaves the model's bits alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "models/transformer/step_cache.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx::step_cache_test {
namespace {

namespace tf = models::transformer;

using test::same_bits;

tf::Modality fixture_modality(const io::SafetensorsFile& io, const std::string& stream) {
  const std::string p = "in." + stream + ".";
  tf::Modality m;
  m.latent = io.tensor(p + "latent").contiguous();
  m.sigma = io.tensor(p + "sigma").contiguous();
  m.timesteps = io.tensor(p + "timesteps").contiguous();
  m.positions = io.tensor(p + "positions").contiguous();
  m.context = io.tensor(p + "context").contiguous();
  return m;
}

// The next step's inputs: the latent moved a little, sigma and timesteps lowered.
tf::Modality next_step(const tf::Modality& m, int k) {
  tf::Modality r = m;
  r.latent = ops::add(ops::mul(m.latent, 0.97f), test::random_tensor(m.latent.shape(), 300 + k, -0.02f, 0.02f));
  r.sigma = ops::mul(m.sigma, 0.95f);
  r.timesteps = ops::mul(m.timesteps, 0.95f);
  return r;
}

struct Fixture {
  io::SafetensorsFile io{test::fixture("ltx23.io.safetensors")};
  tf::LTXModel model =
      tf::LTXModel::from_files({test::fixture("ltx23.weights.safetensors")}, tf::LTXModelType::AudioVideo);
  tf::Modality video = fixture_modality(io, "video"), audio = fixture_modality(io, "audio");
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

tf::StepCacheParams fbcache(double threshold, int64_t first_blocks = 1) {
  tf::StepCacheParams p;
  p.mode = tf::StepCacheMode::FirstBlock;
  p.threshold = threshold;
  p.warmup_steps = 0;
  p.first_blocks = first_blocks;
  return p;
}

TEST(StepCache, ThresholdZeroComputesEveryCallWithTheBitsOfNoCache) {
  const Fixture& f = fixture();
  tf::StepCache cache(fbcache(0.0));
  tf::Modality v = f.video, a = f.audio;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    cache.begin_call(true, "layout");
    const tf::ModelOutputs cached = f.model.forward(&v, &a, nullptr, {}, &cache);
    const tf::ModelOutputs plain = f.model.forward(&v, &a, nullptr);
    EXPECT_TRUE(same_bits(cached.video, plain.video));
    EXPECT_TRUE(same_bits(cached.audio, plain.audio));
    v = next_step(v, step);
    a = next_step(a, step);
  }
  EXPECT_EQ(cache.computed(), 3);
  EXPECT_EQ(cache.reused(), 0);
}

TEST(StepCache, AReusedCallAddsTheLastComputedResidualOfTheRemainingBlocks) {
  const Fixture& f = fixture();
  ASSERT_GE(f.model.num_blocks(), 2);
  const int64_t last = f.model.num_blocks() - 1;
  tf::StepCache cache(fbcache(1e9));
  std::map<std::string, Tensor> seen;
  const tf::Observer keep = [&](const std::string& name, const Tensor& t) { seen[name] = t.clone(); };

  cache.begin_call(true, "layout");
  f.model.forward(&f.video, &f.audio, nullptr, keep, &cache);  // nothing kept yet: computed
  std::map<std::string, Tensor> first = seen;
  ASSERT_TRUE(first.count("block0.video_x") && first.count("block" + std::to_string(last) + ".audio_x"));
  EXPECT_EQ(first.count("step_cache.video_x"), 0u);

  seen.clear();
  const tf::Modality v2 = next_step(f.video, 0), a2 = next_step(f.audio, 0);
  cache.begin_call(true, "layout");
  const tf::ModelOutputs reused = f.model.forward(&v2, &a2, nullptr, keep, &cache);
  EXPECT_EQ(cache.computed(), 1);
  EXPECT_EQ(cache.reused(), 1);
  EXPECT_EQ(seen.count("block1.video_x"), 0u);  // the remaining blocks did not run
  for (const char* s : {"video", "audio"}) {
    SCOPED_TRACE(s);
    const std::string x = std::string(s) + "_x";
    const Tensor expected = ops::add(seen.at("block0." + x), ops::sub(first.at("block" + std::to_string(last) + "." + x),
                                                                      first.at("block0." + x)));
    EXPECT_TRUE(same_bits(seen.at("step_cache." + x), expected));
  }
  // And the output differs from computing the call in full (the cache did change something).
  const tf::ModelOutputs full = f.model.forward(&v2, &a2, nullptr);
  EXPECT_FALSE(same_bits(reused.video, full.video));
}

TEST(StepCache, WarmUpLastStepAndANewLayoutComputeInFull) {
  const Fixture& f = fixture();
  tf::StepCache cache(fbcache(1e9));
  cache.begin_call(true, "cond+uncond");
  f.model.forward(&f.video, &f.audio, nullptr, {}, &cache);
  cache.begin_call(false, "cond+uncond");  // the denoiser's warm-up or last step
  f.model.forward(&f.video, &f.audio, nullptr, {}, &cache);
  cache.begin_call(true, "cond+uncond+stg");  // another pass set: other rows
  f.model.forward(&f.video, &f.audio, nullptr, {}, &cache);
  EXPECT_EQ(cache.computed(), 3);
  cache.begin_call(true, "cond+uncond+stg");
  f.model.forward(&f.video, &f.audio, nullptr, {}, &cache);
  EXPECT_EQ(cache.reused(), 1);
  EXPECT_EQ(cache.last_distance(), 0.0);  // the same inputs: the same first-block residual
}

TEST(StepCache, FirstBlocksCoveringTheWholeModelLeaveItsOutputAlone) {
  const Fixture& f = fixture();
  tf::StepCache cache(fbcache(1e9, /*first_blocks=*/100));
  for (int i = 0; i < 2; ++i) {
    cache.begin_call(true, "layout");
    const tf::ModelOutputs out = f.model.forward(&f.video, &f.audio, nullptr, {}, &cache);
    EXPECT_TRUE(same_bits(out.video, f.model.forward(&f.video, &f.audio, nullptr).video));
  }
  EXPECT_EQ(cache.reused(), 1);  // the second call adds the empty rest's zero residual
}

TEST(StepCache, RelativeL1IsPerSample) {
  const Tensor b = Tensor::from_vector(std::vector<float>{1, -2, 3, 4, 0.5f, -0.5f}, {2, 3, 1});
  const Tensor a = Tensor::from_vector(std::vector<float>{1.5f, -2, 2, 4, 0.5f, 0.5f}, {2, 3, 1});
  const std::vector<float> d = tf::relative_l1_per_sample(a, b).to_float_vector();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FLOAT_EQ(d[0], 1.5f / 6.f);
  EXPECT_FLOAT_EQ(d[1], 1.f / 5.f);
}

TEST(StepCache, BadValuesNameTheirFlag) {
  EXPECT_THROW(
      {
        try {
          tf::parse_step_cache_mode("teacache2");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("--cache teacache2"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_EQ(tf::parse_step_cache_mode("fbcache"), tf::StepCacheMode::FirstBlock);
  EXPECT_EQ(tf::parse_step_cache_mode("none"), tf::StepCacheMode::None);
  const auto message = [](tf::StepCacheParams p) {
    try {
      p.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  tf::StepCacheParams p = fbcache(-1);
  EXPECT_NE(message(p).find("--cache-threshold -1"), std::string::npos);
  p = fbcache(0.1);
  p.threshold = NAN;
  EXPECT_NE(message(p).find("--cache-threshold"), std::string::npos);
  p = fbcache(0.1);
  p.warmup_steps = -2;
  EXPECT_NE(message(p).find("--cache-warmup-steps -2"), std::string::npos);
  p = fbcache(0.1, 0);
  EXPECT_NE(message(p).find("--cache-first-blocks 0"), std::string::npos);
  EXPECT_EQ(message(fbcache(0.1)), "");
}

}  // namespace
}  // namespace ltx::step_cache_test
