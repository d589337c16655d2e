// GGUF files where safetensors checkpoints go: WeightMap binding (dense tensors as today's tensors,
// quantized ones as GGML blocks) and `ltx inspect`'s summary, on a community-style LTX-2.3 file
// (tests/fixtures/gguf/ltx23_tiny.gguf: ltx23.weights.bf16.safetensors converted by gguf-py with
// ComfyUI-GGUF's policy, tools/parity/gen_gguf_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/io_test_util.h"
#include "io/weights.h"
#include "quantization/ggml_dequant.h"
#include "support/test_support.h"

namespace ltx::gguf_weights_test {
namespace {

using test::expect_error_containing;

constexpr const char* kPrefix = "model.diffusion_model.";

std::string gguf_path() { return test::fixture("gguf/ltx23_tiny.gguf"); }
std::string source_path() { return test::fixture("ltx23.weights.bf16.safetensors"); }

TEST(GgufWeights, DenseTensorsLoadAsTheSourceValuesAndQuantizedOnesAsBlocks) {
  const auto source = io::SafetensorsFile::open(source_path());
  io::WeightMap w = io::WeightMap::open({gguf_path()});
  ASSERT_EQ(w.size(), source->size());
  int dense = 0, quantized = 0;
  for (const std::string& full : source->names()) {
    const std::string name = full.substr(std::strlen(kPrefix));
    SCOPED_TRACE(name);
    ASSERT_TRUE(w.contains(name));
    const Tensor ref = source->tensor(full).to(DType::F32);
    EXPECT_EQ(w.shape(name), ref.shape());
    if (!w.is_quantized(name)) {
      // Stored F32 from the bf16 source: exact.
      EXPECT_EQ(w.ggml_type(name), GgmlType::F32);
      const Tensor t = w.take(name, ref.shape(), DType::F32);
      ASSERT_TRUE(t.defined());
      EXPECT_EQ(std::memcmp(t.raw_data(), ref.raw_data(), ref.nbytes()), 0);
      ++dense;
      continue;
    }
    const io::GgmlTensor g = w.take_ggml(name, ref.shape());
    ASSERT_TRUE(g.bytes.defined());
    const GgmlType want = name.starts_with("transformer_blocks.0.") ? GgmlType::Q8_0 : GgmlType::Q4_0;
    EXPECT_EQ(g.type, want);
    EXPECT_EQ(w.dtype(name), DType::U8);
    // Within the format's rounding: half a step of the block's scale (max|x| / 127 or / 8).
    const Tensor deq = quantization::dequantize(g);
    const float* a = deq.data<float>();
    const float* r = ref.data<float>();
    float amax = 0, err = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      amax = std::max(amax, std::fabs(r[i]));
      err = std::max(err, std::fabs(a[i] - r[i]));
    }
    EXPECT_LE(err, amax / (want == GgmlType::Q8_0 ? 127.0f : 7.0f)) << "max error " << err;
    ++quantized;
  }
  EXPECT_GT(dense, 50);
  EXPECT_GT(quantized, 20);
  w.finish("ltx23_tiny.gguf");  // everything taken
}

TEST(GgufWeights, TakingAQuantizedTensorDenselyIsReportedNotConverted) {
  io::WeightMap w = io::WeightMap::open({gguf_path()});
  const std::string name = "transformer_blocks.1.attn1.to_q.weight";
  ASSERT_TRUE(w.is_quantized(name));
  EXPECT_FALSE(w.take(name, w.shape(name), DType::F32).defined());
  for (const std::string& n : w.names())
    if (n != name) w.ignore(n);
  expect_error_containing([&] { w.finish("transformer"); },
                          {"transformer: the weights do not match the model", "ltx23_tiny.gguf",
                           "1 with an unusable dtype", name,
                           "file has GGML Q4_0 blocks, model wants a dense f32 tensor"});
}

TEST(GgufWeights, MixesWithSafetensorsAndKeyMapsApply) {
  // The transformer from the GGUF file, one tensor overridden by a later safetensors file.
  const std::string st = source_path();
  io::WeightMap w = io::WeightMap::open({gguf_path(), st}, io::KeyMap("gguf + override")
                                                               .keep("transformer_blocks.")
                                                               .keep(kPrefix + std::string("transformer_blocks."))
                                                               .replace_prefix(kPrefix, ""));
  const std::string name = "transformer_blocks.0.attn1.to_q.weight";
  EXPECT_FALSE(w.ggml_type(name).has_value());  // the safetensors file came later and wins
  EXPECT_EQ(w.dtype(name), DType::BF16);
  const io::GgmlTensor g = w.take_ggml(name, w.shape(name));
  EXPECT_EQ(g.type, GgmlType::BF16);
  EXPECT_EQ(g.row_elems, w.shape(name)[1]);
  const auto source = io::SafetensorsFile::open(st);
  EXPECT_EQ(std::memcmp(g.bytes.raw_data(), source->tensor_bytes(kPrefix + name),
                        static_cast<size_t>(g.bytes.numel())),
            0);
  EXPECT_FALSE(w.contains("adaln_single.linear.weight"));  // not kept
}

TEST(GgufWeights, TakeGgmlRecordsMissingAndMisshapedNames) {
  io::WeightMap w = io::WeightMap::open({gguf_path()});
  EXPECT_FALSE(w.take_ggml("absent.weight", {4, 4}).bytes.defined());
  EXPECT_FALSE(w.take_ggml("transformer_blocks.1.attn1.to_q.weight", {3, 3}).bytes.defined());
  expect_error_containing([&] { w.finish("t"); },
                          {"1 missing: absent.weight", "1 with the wrong shape",
                           "transformer_blocks.1.attn1.to_q.weight (expected [3, 3]"});
}

TEST(GgufInspect, RecognisesTheCommunityLtxLayoutAndReportsStorage) {
  const io::CheckpointSummary s = io::inspect_checkpoint(gguf_path());
  const io::CheckpointSummary ref = io::inspect_checkpoint(source_path());
  EXPECT_EQ(s.format, "GGUF");
  EXPECT_EQ(s.gguf_version, 3u);
  EXPECT_EQ(s.gguf_alignment, 32u);
  EXPECT_EQ(s.architecture, "ltxv");
  EXPECT_EQ(s.key_prefix_added, kPrefix);
  // The same model as the safetensors file it was made from.
  EXPECT_EQ(s.layout, ref.layout);
  EXPECT_EQ(s.version, "2.3");
  EXPECT_EQ(s.version_name, ref.version_name);
  EXPECT_EQ(s.params, ref.params);
  ASSERT_NE(s.component("transformer"), nullptr);
  EXPECT_EQ(s.component("transformer")->config, ref.component("transformer")->config);
  EXPECT_TRUE(s.warnings.empty()) << (s.warnings.empty() ? "" : s.warnings.front());
  std::map<std::string, int64_t> counts;
  int64_t tensors = 0;
  uint64_t bytes = 0;
  for (const auto& t : s.storage_types) {
    counts[t.type] = t.tensors;
    tensors += t.tensors;
    bytes += t.bytes;
    EXPECT_NEAR(t.bits_per_weight, 8.0 * static_cast<double>(t.bytes) / t.params, 1e-9);
  }
  EXPECT_EQ(tensors, s.tensors);
  std::set<std::string> types;
  for (const auto& t : s.storage_types) types.insert(t.type);
  EXPECT_EQ(types, (std::set<std::string>{"F32", "Q4_0", "Q8_0"}));
  EXPECT_EQ(s.storage_types.size(), 3u);
  EXPECT_NEAR(s.bits_per_weight, 8.0 * static_cast<double>(bytes) / s.params, 1e-9);
  EXPECT_EQ(s.metadata_keys.front(), "general.architecture");

  const std::string text = io::to_text(s);
  for (const char* needle : {"GGUF v3", "arch        ltxv", "ComfyUI-GGUF layout", "Q4_0 ",
                             "storage     F32 ",
                             "bits/weight", "transformer (DiT)", "LTX-2.3"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  const auto j = io::to_json(s);
  EXPECT_EQ(j["format"], "GGUF");
  EXPECT_EQ(j["gguf"]["architecture"], "ltxv");
  EXPECT_EQ(j["gguf"]["types"]["Q8_0"]["tensors"], counts["Q8_0"]);
}

TEST(GgufInspect, ForeignArchitecturesAreNamedNotGuessed) {
  const io::CheckpointSummary s = io::inspect_checkpoint(test::fixture("gguf/blocks.gguf"));
  EXPECT_EQ(s.architecture, "ltx-test");
  EXPECT_TRUE(s.key_prefix_added.empty());
  EXPECT_EQ(s.layout, "unknown");
  ASSERT_FALSE(s.warnings.empty());
  EXPECT_NE(s.warnings.back().find("general.architecture 'ltx-test' is not an LTX model"),
            std::string::npos);
}

}  // namespace
}  // namespace ltx::gguf_weights_test
