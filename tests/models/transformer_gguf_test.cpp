// The tiny LTX-2.3 transformer from a community-style GGUF file (tests/fixtures/gguf/ltx23_tiny.gguf:
// the tiny checkpoint converted by gguf-py with ComfyUI-GGUF's policy: bare names, config as a
// string, Q8_0 / Q4_0 Linears, F32 tables and small tensors): its step against the same weights
// dequantised into a dense model, the config from the GGUF metadata, LoRAs as a low-rank term
// beside the blocks against the fused dense model, and the refusal of --quantization modes.
#include <gtest/gtest.h>

#include <string>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/tiny_ltx23.h"
#include "models/transformer/model.h"
#include "parity/parity.h"
#include "quantization/ggml_dequant.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace tf = models::transformer;

std::string gguf_path() { return test::fixture("gguf/ltx23_tiny.gguf"); }

io::WeightMap gguf_weights() {
  return io::WeightMap::open_checkpoints({gguf_path()},
                                         tf::transformer_key_map(tf::LTXModelType::AudioVideo));
}

// The same weights, every block-quantized tensor dequantised to f32 (the dense reference).
io::WeightMap dequantised_weights() {
  io::WeightMap w = gguf_weights();
  for (const std::string& n : w.names())
    if (w.is_quantized(n)) w.add(n, quantization::dequantize(w.take_ggml(n, w.shape(n))));
  return w;
}

tf::LTXModelConfig gguf_config() {
  return tf::LTXModelConfig::from_metadata(io::checkpoint_metadata_json(gguf_path()),
                                           tf::LTXModelType::AudioVideo, gguf_path());
}

void expect_close(const tf::ModelOutputs& got, const tf::ModelOutputs& want, double bound) {
  const parity::ErrorStats video = parity::compare(got.video, want.video);
  const parity::ErrorStats audio = parity::compare(got.audio, want.audio);
  EXPECT_LT(video.rel_l2, bound);
  EXPECT_LT(audio.rel_l2, bound);
}

TEST(TransformerGguf, TheFileHoldsQuantizedLinearsUnderTheCheckpointsNames) {
  io::WeightMap w = gguf_weights();
  EXPECT_TRUE(w.is_quantized("transformer_blocks.0.attn1.to_q.weight"));
  EXPECT_TRUE(w.is_quantized("transformer_blocks.1.ff.net.0.proj.weight"));
  EXPECT_FALSE(w.is_quantized("scale_shift_table"));
  EXPECT_EQ(gguf_config().num_layers, test::tiny_ltx23::config().num_layers);
}

TEST(TransformerGguf, StepEqualsTheDenseStepOfTheDequantisedWeights) {
  io::WeightMap wq = gguf_weights(), wd = dequantised_weights();
  const tf::LTXModel quantized = tf::LTXModel::load(wq, gguf_config());
  const tf::LTXModel dense = tf::LTXModel::load(wd, gguf_config());
  // The same products, summed in another order (row groups against one GEMM).
  expect_close(test::tiny_ltx23::forward(quantized), test::tiny_ltx23::forward(dense), 1e-5);
  // from_files reads the GGUF file (config from its metadata) to the same model.
  const tf::LTXModel from_file =
      tf::LTXModel::from_files({gguf_path()}, tf::LTXModelType::AudioVideo);
  expect_close(test::tiny_ltx23::forward(from_file), test::tiny_ltx23::forward(quantized), 1e-7);
}

TEST(TransformerGguf, LorasApplyAsALowRankTermCloseToTheFusedDenseModel) {
  test::TempDir dir;
  const std::string path = dir.file("lora.safetensors");
  // A Q8_0 attention projection, a Q4_0 feed-forward input (the GELU path) and a dense table-side
  // layer (the audio patchify projection is stored F32 in the file).
  const std::string targets[] = {"transformer_blocks.0.attn1.to_q",
                                 "transformer_blocks.1.ff.net.0.proj", "audio_patchify_proj"};
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint64_t seed = 1;
  io::WeightMap shapes = gguf_weights();
  for (const std::string& t : targets) {
    const Shape s = shapes.shape(t + ".weight");
    tensors.push_back({"diffusion_model." + t + ".lora_A.weight",
                       test::random_tensor({2, s[1]}, seed++, -0.5f, 0.5f).to(DType::BF16)});
    tensors.push_back({"diffusion_model." + t + ".lora_B.weight",
                       test::random_tensor({s[0], 2}, seed++, -0.5f, 0.5f).to(DType::BF16)});
  }
  io::write_safetensors(path, tensors);
  const lora::LoraSet set = {{lora::LoraFile::open(path), 0.8}};

  io::WeightMap wq = gguf_weights(), wd = dequantised_weights();
  lora::Fuser fq(wq, {set}, {}), fd(wd, {set}, {});
  const tf::LTXModel quantized = tf::LTXModel::load(wq, gguf_config());
  const tf::LTXModel dense = tf::LTXModel::load(wd, gguf_config());
  const tf::ModelOutputs base = test::tiny_ltx23::forward(quantized);
  fq.apply(set);
  fd.apply(set);
  const tf::ModelOutputs with_lora = test::tiny_ltx23::forward(quantized);
  // The LoRA moves the outputs far more than the bound below.
  EXPECT_GT(parity::compare(with_lora.video, base.video).rel_l2, 0.05);
  // The fused dense weights are rounded to bf16 (the reference's fusion rule); the low-rank term
  // keeps the blocks as stored.
  expect_close(with_lora, test::tiny_ltx23::forward(dense), 1e-2);
  // Without the set, the quantized model is its base again, bit for bit.
  fq.reset();
  const tf::ModelOutputs again = test::tiny_ltx23::forward(quantized);
  EXPECT_EQ(parity::compare(again.video, base.video).max_abs, 0.0);
  EXPECT_EQ(parity::compare(again.audio, base.audio).max_abs, 0.0);

  // fuse_into (one set, before binding) gives the same low-rank term.
  io::WeightMap wf = gguf_weights();
  lora::fuse_into(wf, set);
  const tf::LTXModel fused_once = tf::LTXModel::load(wf, gguf_config());
  fq.apply(set);
  expect_close(test::tiny_ltx23::forward(fused_once), test::tiny_ltx23::forward(quantized), 1e-6);
}

TEST(TransformerGguf, RefusesQuantizationModesOnTheBlocks) {
  io::WeightMap w = gguf_weights();
  test::expect_error_containing(
      [&] {
        (void)tf::LTXModel::load(w, gguf_config(),
                                 {DType::F32, Device::cpu(), quantization::Mode::Fp8Cast});
      },
      {"GGML", "--quantization fp8-cast", "--quantization none"});
}

}  // namespace
}  // namespace ltx
