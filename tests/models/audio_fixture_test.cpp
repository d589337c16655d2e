// The audio models against the reference's golden files (tests/fixtures/audio_<case>.*, see
// tests/fixtures/README.md): the `audio` parity component computes every out.* (and stored
// inter.*) tensor; each must be within rel L2 1e-5 of the reference (shared/golden/
// README-audio.md §5). Achieved errors are printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae.h"
#include "ops/shape.h"
#include "parity/parity.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace av = models::audio_vae;

struct Err {
  double rel_l2 = 0, max_rel = 0;
};

Err errors(const Tensor& x, const Tensor& ref) {
  const parity::ErrorStats s = parity::compare(x, ref);
  return {s.rel_l2, s.max_rel};
}

const parity::ComponentInfo& audio_component() {
  for (const auto& c : parity::components())
    if (std::string(c.name) == "audio") return c;
  throw Error("no audio parity component");
}

class AudioFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(AudioFixture, EveryOutputAndIntermediateWithinTolerance) {
  const std::string c = GetParam();
  test::TempDir dir;
  parity::Args args;
  args.weights = {test::fixture("audio_" + c + ".weights.safetensors")};
  args.inputs = test::fixture("audio_" + c + ".io.safetensors");
  args.out = dir.file("out.safetensors");
  {
    parity::Run run(args);
    audio_component().fn(run);
    ASSERT_EQ(run.finish(), 0);
  }
  const io::SafetensorsFile io(args.inputs), out(args.out);
  // Everything the reference computed is produced...
  for (const std::string& n : io.names()) {
    if (n.rfind("out.", 0) == 0 || n.rfind("inter.", 0) == 0) {
      EXPECT_TRUE(out.contains(n)) << n << " was not computed";
    }
  }
  // ... within rel L2 1e-5 (f32 and the widened f32 for the _f64 twins alike).
  double worst = 0;
  std::string worst_name;
  for (const std::string& n : out.names()) {
    ASSERT_TRUE(io.contains(n)) << n;
    const Tensor ref = io.tensor(n), x = out.tensor(n);
    ASSERT_EQ(x.shape(), ref.shape()) << n;
    const Err e = errors(x, ref);
    std::printf("  [%s] %-42s rel_l2 %.3e  max_rel %.3e\n", c.c_str(), n.c_str(), e.rel_l2,
                e.max_rel);
    EXPECT_LE(e.rel_l2, 1e-5) << n;
    if (e.rel_l2 > worst) {
      worst = e.rel_l2;
      worst_name = n;
    }
  }
  std::printf("  [%s] worst rel_l2 %.3e (%s)\n", c.c_str(), worst, worst_name.c_str());
  // The log-mels' absolute check of the README (floor log(1e-5) amplifies tiny energies).
  for (const char* n : {"out.mel_wave16k.mel", "out.mel_wave48k.mel", "out.mel_wave44k.mel"})
    EXPECT_LE(test::max_abs_diff(out.tensor(n), io.tensor(n)), 2e-4) << n;
  EXPECT_EQ(out.tensor("out.pipeline.sampling_rate").to_int_vector(),
            io.tensor("out.pipeline.sampling_rate").to_int_vector());
}

INSTANTIATE_TEST_SUITE_P(Cases, AudioFixture, ::testing::Values("ltx2", "ltx23"),
                         [](const auto& info) { return std::string(info.param); });

// The public API on its own (the parity component is one user of it).
TEST(AudioPipeline, DecodeAudioSqueezesBatchOneAndReportsTheVocoderRate) {
  const auto file = io::SafetensorsFile::open(test::fixture("audio_ltx2.weights.safetensors"));
  const io::SafetensorsFile io(test::fixture("audio_ltx2.io.safetensors"));
  const av::AudioDecoder dec = av::AudioDecoder::from_file(file);
  const av::VocoderModel voc = av::VocoderModel::from_file(file);
  const Tensor latent = io.tensor("inter.pipeline.latent");
  const av::Audio a = av::decode_audio(latent, dec, voc);
  const Tensor ref = io.tensor("out.pipeline.waveform");
  ASSERT_EQ(a.waveform.shape(), ref.shape());
  EXPECT_LE(errors(a.waveform, ref).rel_l2, 1e-5);
  EXPECT_EQ(a.sampling_rate, 24000);
  // Two latents: the batch dim stays, and each element decodes like a batch of one.
  const av::Audio b = av::decode_audio(ops::concat({latent, latent}, 0), dec, voc);
  ASSERT_EQ(b.waveform.dim(), 3);
  EXPECT_EQ(b.waveform.size(0), 2);
  EXPECT_LE(test::max_abs_diff(b.waveform.select(0, 1), a.waveform), 1e-6);
}

}  // namespace
}  // namespace ltx
