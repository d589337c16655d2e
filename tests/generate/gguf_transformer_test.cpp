// `ltx generate` with a community-style GGUF transformer (the demo bundle's transformer written as
// GGUF: bare names, Q8_0 Linears, config as a string) in the split layout: the component checks,
// the connectors from their own file, the refusal of --quantization, and a generation (transformer
// and connectors from the GGUF) against the same run with the GGUF's weights dequantised into a
// safetensors file.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "generate/components.h"
#include "generate/generate_test_util.h"
#include "generate/model_paths.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "quantization/file_format.h"
#include "quantization/ggml_dequant.h"
#include "support/gguf_transformer.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using generate::ModelFlags;

// The GGUF file's tensors, the quantized ones dequantised, under the checkpoint's names: the
// dense twin of the GGUF transformer.
void write_dequantised_twin(const std::string& gguf, const std::string& checkpoint,
                            const std::string& out) {
  io::WeightMap w = io::WeightMap::open_checkpoints({gguf});
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : w.names())
    tensors.emplace_back(n, w.is_quantized(n) ? quantization::dequantize(w.take_ggml(n, w.shape(n)))
                                              : w.take(n, w.shape(n), DType::F32).clone());
  std::map<std::string, std::string> meta = io::SafetensorsFile(checkpoint).metadata();
  io::write_safetensors(out, tensors, meta);
}

// The checkpoint's text projection alone (what the transformer file lacks when it holds the
// connectors: the projection is outside the transformer's prefix).
void write_projection(const std::string& checkpoint, const std::string& out) {
  const io::SafetensorsFile f(checkpoint);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : f.names())
    if (n.starts_with("text_embedding_projection.")) tensors.emplace_back(n, f.tensor(n).clone());
  io::write_safetensors(out, tensors, f.metadata());
}

ModelFlags split_flags(const std::string& transformer,
                       const std::string& connectors = test::shared_demo_bundle().checkpoint) {
  const auto& demo = test::shared_demo_bundle();
  ModelFlags f;
  f.transformer_path = transformer;
  f.text_connectors_path = connectors;
  f.video_vae_path = demo.checkpoint;
  f.audio_vae_path = demo.checkpoint;
  f.text_encoder_path = demo.text_encoder;
  return f;
}

TEST(GgufTransformer, SplitFilesWithAGgufTransformerPassTheComponentChecks) {
  const auto& demo = test::shared_demo_bundle();
  test::TempDir dir;
  const std::string gguf = dir.file("transformer.gguf");
  test::write_transformer_gguf(demo.checkpoint, gguf);
  ModelFlags f = split_flags(gguf);
  const generate::ModelPaths p = generate::resolve_model_paths(f);
  EXPECT_EQ(p.embeddings_weight_paths,
            (std::vector<std::string>{gguf, demo.checkpoint, demo.text_encoder}));
  const generate::ComponentNeeds one_stage{"one-stage"};
  EXPECT_EQ(generate::check_components(p, one_stage).model_version, "2.3.0");
  // The transformer-only file needs the connectors' file.
  f.text_connectors_path.clear();
  EXPECT_ERROR_HAS(generate::check_components(generate::resolve_model_paths(f), one_stage),
                   "pass --text-connectors-path");
  // Other components stay safetensors files: a GGUF file given as the VAE says so.
  f = split_flags(gguf);
  f.video_vae_path = gguf;
  test::expect_error_containing(
      [&] { (void)generate::check_components(generate::resolve_model_paths(f), one_stage); },
      {gguf, "this is a GGUF file", "needs a safetensors file"});
  // Its quantized layers are used as stored.
  test::expect_error_containing(
      [&] { quantization::check_mode_fits(gguf, quantization::Mode::Fp8Cast); },
      {gguf, "GGUF", "Q8_0", "--quantization fp8-cast", "--quantization none"});
  quantization::check_mode_fits(gguf, quantization::Mode::None);
}

TEST(GgufTransformer, GeneratesWhatTheDequantisedTransformerGenerates) {
  // A GGUF file that also holds the text connectors (Q8_0 like the blocks): the transformer and
  // the connectors come from it, the text projection from a file of its own.
  const auto& demo = test::shared_demo_bundle();
  test::TempDir dir;
  const std::string gguf = dir.file("transformer.gguf");
  const std::string twin = dir.file("transformer.safetensors");
  const std::string projection = dir.file("projection.safetensors");
  test::write_transformer_gguf(demo.checkpoint, gguf, /*keep_connectors=*/true);
  write_dequantised_twin(gguf, demo.checkpoint, twin);
  write_projection(demo.checkpoint, projection);
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.demo_dir.clear();
  o.num_inference_steps = 1;
  o.models = split_flags(gguf, projection);
  const test::InMemoryGeneration q = test::generate_in_memory(o);
  o.models = split_flags(twin, projection);
  const test::InMemoryGeneration d = test::generate_in_memory(o);
  ASSERT_TRUE(q.media.frames.defined() && d.media.frames.defined());
  // The same products summed in another order (row groups against one GEMM), through the step
  // and the decoders.
  EXPECT_LT(test::max_abs_diff(q.media.frames, d.media.frames), 1e-4);
  EXPECT_LT(test::max_abs_diff(q.media.waveform, d.media.waveform), 1e-4);
}

}  // namespace
}  // namespace ltx
