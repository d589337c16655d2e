// Step caching on the GPU (models/transformer/step_cache.h): the decision is read back from the
// device and the reused state is the same composition as on the CPU, with the audio half on its
// side line (backend/stream_fork.h).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cuda/cuda_test_util.h"
#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "models/transformer/step_cache.h"
#include "ops/elementwise.h"
#include "support/test_support.h"

namespace ltx::cuda_step_cache_test {
namespace {

namespace mt = models::transformer;
using test::kGpu;

mt::Modality fixture_modality(const io::SafetensorsFile& io, const std::string& stream, Device device, float scale) {
  const std::string p = "in." + stream + ".";
  mt::Modality m;
  m.latent = ops::mul(io.tensor(p + "latent"), scale).to(device);
  m.sigma = ops::mul(io.tensor(p + "sigma"), scale).to(device);
  m.timesteps = ops::mul(io.tensor(p + "timesteps"), scale).to(device);
  m.positions = io.tensor(p + "positions").to(device);
  m.context = io.tensor(p + "context").to(device);
  return m;
}

mt::StepCacheParams fbcache(double threshold) {
  mt::StepCacheParams p;
  p.mode = mt::StepCacheMode::FirstBlock;
  p.threshold = threshold;
  p.warmup_steps = 0;
  return p;
}

TEST(CudaStepCache, ThresholdZeroKeepsTheBitsAndAReusedCallIsTheComposition) {
  LTX_REQUIRE_CUDA();
  const io::SafetensorsFile io(test::fixture("ltx23.io.safetensors"));
  const auto model = mt::LTXModel::from_files({test::fixture("ltx23.weights.safetensors")},
                                              mt::LTXModelType::AudioVideo, {DType::BF16, kGpu});
  const mt::Modality v1 = fixture_modality(io, "video", kGpu, 1.f), a1 = fixture_modality(io, "audio", kGpu, 1.f);
  const mt::Modality v2 = fixture_modality(io, "video", kGpu, 0.95f), a2 = fixture_modality(io, "audio", kGpu, 0.95f);

  // Threshold 0: every call computed, the bits of no cache.
  mt::StepCache never(fbcache(0.0));
  for (const auto* m : {&v1, &v2}) {
    const mt::Modality* a = m == &v1 ? &a1 : &a2;
    never.begin_call(true, "layout");
    const mt::ModelOutputs cached = model.forward(m, a, nullptr, {}, &never);
    const mt::ModelOutputs plain = model.forward(m, a, nullptr);
    EXPECT_TRUE(test::same_bytes(cached.video, plain.video));
    EXPECT_TRUE(test::same_bytes(cached.audio, plain.audio));
  }
  EXPECT_EQ(never.computed(), 2);

  // A huge threshold: the second call reuses, its state the first blocks' plus the kept rest.
  mt::StepCache always(fbcache(1e9));
  std::map<std::string, Tensor> seen;
  const mt::Observer keep = [&](const std::string& name, const Tensor& t) { seen[name] = t.clone(); };
  const std::string last = "block" + std::to_string(model.num_blocks() - 1);
  always.begin_call(true, "layout");
  model.forward(&v1, &a1, nullptr, keep, &always);
  const std::map<std::string, Tensor> first = seen;
  seen.clear();
  always.begin_call(true, "layout");
  model.forward(&v2, &a2, nullptr, keep, &always);
  EXPECT_EQ(always.reused(), 1);
  EXPECT_GE(always.last_distance(), 0.0);
  for (const char* s : {"video_x", "audio_x"}) {
    SCOPED_TRACE(s);
    const Tensor want = ops::add(seen.at(std::string("block0.") + s),
                                 ops::sub(first.at(last + "." + s), first.at(std::string("block0.") + s)));
    EXPECT_TRUE(test::same_bytes(seen.at(std::string("step_cache.") + s), want));
  }
}

}  // namespace
}  // namespace ltx::cuda_step_cache_test
