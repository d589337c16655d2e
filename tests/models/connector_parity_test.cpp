// The text embeddings processor (feature extractor + video/audio connectors) against the golden
// `<case>.textproc.io` outputs of LTX-2 (V1), LTX-2.3 and LTX-2.5 (V2, split files), through the
// `connector` parity component (the code path of `ltx parity connector`) and through the library
// API with the Gemma tuple as separate tensors.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/text/embeddings_processor.h"
#include "parity/parity.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace txt = models::text;

std::vector<std::string> weights_of(const std::string& c) {
  std::vector<std::string> w = {test::fixture(c + ".weights.safetensors")};
  if (c == "ltx25") w.push_back(test::fixture("ltx25.text_proj.weights.safetensors"));
  return w;
}

const parity::ComponentInfo& connector_component() {
  for (const auto& ci : parity::components())
    if (std::string(ci.name) == "connector") return ci;
  throw Error("no connector component");
}

class ConnectorParity : public ::testing::TestWithParam<const char*> {};

TEST_P(ConnectorParity, EveryOutputMatchesTheReference) {
  const std::string c = GetParam();
  test::TempDir dir;
  parity::Args args;
  args.weights = weights_of(c);
  args.inputs = test::fixture(c + ".textproc.io.safetensors");
  args.out = dir.file("out.safetensors");
  {
    parity::Run run(args);
    connector_component().fn(run);
    ASSERT_EQ(run.finish(), 0);
  }
  const io::SafetensorsFile out(args.out), ref(args.inputs);
  int compared = 0;
  for (const std::string& name : ref.names()) {
    if (!name.starts_with("out.")) continue;
    if (name.starts_with("out.f64.")) {
      EXPECT_FALSE(out.contains(name)) << name << " (f64 compute is not available on the CPU)";
      continue;
    }
    ASSERT_TRUE(out.contains(name)) << c << ": " << name << " was not computed";
    ASSERT_EQ(out.tensor(name).shape(), ref.tensor(name).shape()) << name;
    const parity::ErrorStats s = parity::compare(out.tensor(name), ref.tensor(name));
    std::printf("[%s] %-24s rel_l2 %.3e  max_rel %.3e  max_abs %.3e\n", c.c_str(), name.c_str(),
                s.rel_l2, s.max_rel, s.max_abs);
    if (name == "out.encoding_mask") {
      EXPECT_EQ(out.tensor(name).dtype(), DType::I64);
      EXPECT_EQ(s.max_abs, 0.0) << c << ": " << name;
    } else {
      EXPECT_LE(s.rel_l2, 1e-5) << c << ": " << name;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 5) << c;
}

// The library API with the Gemma tuple as L separate [B, T, D] tensors (what the text encoder
// hands over), non-contiguous, must give the same contexts.
TEST_P(ConnectorParity, ApiWithSeparateLayerTensorsMatchesTheReference) {
  const std::string c = GetParam();
  const io::SafetensorsFile ref(test::fixture(c + ".textproc.io.safetensors"));
  const Tensor stacked = ref.tensor("in.hidden_states");  // [B, T, D, L]
  const Tensor mask = ref.tensor("in.attention_mask");
  std::vector<Tensor> layers;
  for (int64_t l = 0; l < stacked.size(3); ++l)
    layers.push_back(test::non_contiguous_copy(stacked.select(3, l).contiguous()));
  const txt::GemmaTextDims dims{stacked.size(2), stacked.size(3) - 1};
  const auto proc = txt::EmbeddingsProcessor::from_files(weights_of(c), dims);
  EXPECT_EQ(proc.config().feature_extractor.version,
            c == "ltx2" ? txt::FeatureExtractorVersion::V1 : txt::FeatureExtractorVersion::V2);
  const txt::EmbeddingsProcessorOutput o = proc.process_hidden_states(layers, mask);
  const parity::ErrorStats v = parity::compare(o.video_encoding, ref.tensor("out.video_encoding"));
  const parity::ErrorStats a = parity::compare(o.audio_encoding, ref.tensor("out.audio_encoding"));
  EXPECT_LE(v.rel_l2, 1e-5) << c;
  EXPECT_LE(a.rel_l2, 1e-5) << c;
  EXPECT_EQ(test::max_abs_diff(o.attention_mask, ref.tensor("out.encoding_mask")), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Cases, ConnectorParity, ::testing::Values("ltx2", "ltx23", "ltx25"));

}  // namespace
}  // namespace ltx
