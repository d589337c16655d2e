// Binding the text embeddings processor from checkpoint files: the published key names, split
// packs (config from the first file, tensors merged), and one error naming every missing,
// misshaped and unexpected tensor.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/text/embeddings_processor.h"
#include "support/test_support.h"

namespace ltx::connector_binding_test {
namespace {

namespace txt = models::text;
using json = nlohmann::json;
using Tensors = std::vector<std::pair<std::string, Tensor>>;

const txt::GemmaTextDims kDims{48, 3};

// Writes a copy of fixture `src` to `dst` after `edit` changed its tensors and config.transformer.
void write_variant(const std::string& src, const std::string& dst,
                   const std::function<void(Tensors&, json&)>& edit) {
  const io::SafetensorsFile f(test::fixture(src));
  Tensors tensors;
  for (const auto& n : f.names()) tensors.emplace_back(n, f.tensor(n));
  std::map<std::string, std::string> md = f.metadata();
  json config = json::parse(md.at("config"));
  edit(tensors, config["transformer"]);
  md["config"] = config.dump();
  io::write_safetensors(dst, tensors, md);
}

std::string load_error(const std::vector<std::string>& paths) {
  try {
    (void)txt::EmbeddingsProcessor::from_files(paths, kDims);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_contains(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(ConnectorBinding, MonolithAndSplitPacksLoad) {
  for (const char* c : {"ltx2", "ltx23"})
    EXPECT_NO_THROW(txt::EmbeddingsProcessor::from_files({test::fixture(str(c, ".weights.safetensors"))}, kDims))
        << c;
  EXPECT_NO_THROW(txt::EmbeddingsProcessor::from_files(
      {test::fixture("ltx25.weights.safetensors"), test::fixture("ltx25.text_proj.weights.safetensors")},
      kDims));
}

TEST(ConnectorBinding, SplitTransformerFileAloneReportsEveryMissingTensor) {
  // The 2.5 transformer file holds neither the connectors nor the projection.
  const std::string msg = load_error({test::fixture("ltx25.weights.safetensors")});
  // 2 x 33 connector tensors + 4 projection tensors (the list shows the first ones and a count).
  expect_contains(msg, {"text embeddings processor", "70 missing", "audio_connector.learnable_registers",
                        "ltx25.weights.safetensors", "EMBEDDINGS_PROCESSOR_KEY_OPS"});
}

TEST(ConnectorBinding, ConfigComesFromTheFirstFile) {
  // The text-projection file has no config.transformer: it cannot come first.
  const std::string msg = load_error({test::fixture("ltx25.text_proj.weights.safetensors"),
                                      test::fixture("ltx25.weights.safetensors")});
  expect_contains(msg, {"config.transformer", "ltx25.text_proj.weights.safetensors"});
}

TEST(ConnectorBinding, MisshapedAndUnexpectedTensorsAreReportedTogether) {
  test::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  write_variant("ltx23.weights.safetensors", path, [](Tensors& t, json&) {
    for (auto& [name, value] : t)
      if (name == "model.diffusion_model.audio_embeddings_connector.learnable_registers")
        value = Tensor::zeros({64, 32});  // the code always has 128 registers
    t.emplace_back("model.diffusion_model.video_embeddings_connector.transformer_1d_blocks.2.ff.net.2.bias",
                   Tensor::zeros({64}));  // a third block the config does not have
  });
  expect_contains(load_error({path}),
                  {"wrong shape", "audio_connector.learnable_registers", "unexpected",
                   "video_connector.transformer_1d_blocks.2.ff.net.2.bias"});
}

TEST(ConnectorBinding, V1CheckpointWithAV2ProjectionIsRejected) {
  test::TempDir dir;
  const std::string path = dir.file("mixed.safetensors");
  write_variant("ltx2.weights.safetensors", path, [](Tensors& t, json&) {
    t.emplace_back("text_embedding_projection.video_aggregate_embed.weight", Tensor::zeros({48, 192}));
  });
  expect_contains(load_error({path}), {"unexpected", "feature_extractor.video_aggregate_embed.weight"});
}

TEST(ConnectorBinding, GatedConfigNeedsTheGateWeights) {
  test::TempDir dir;
  const std::string path = dir.file("gated.safetensors");
  write_variant("ltx2.weights.safetensors", path,
                [](Tensors&, json& cfg) { cfg["connector_apply_gated_attention"] = true; });
  expect_contains(load_error({path}),
                  {"missing", "video_connector.transformer_1d_blocks.0.attn1.to_gate_logits.weight",
                   "audio_connector.transformer_1d_blocks.1.attn1.to_gate_logits.bias"});
}

TEST(ConnectorBinding, LaterFileWinsANameBothHave) {
  // A second file overriding the video registers changes the video context (and nothing else).
  test::TempDir dir;
  const std::string over = dir.file("override.safetensors");
  io::write_safetensors(over, {{"model.diffusion_model.video_embeddings_connector.learnable_registers",
                                Tensor::zeros({128, 64})}});
  const std::string base = test::fixture("ltx23.weights.safetensors");
  const auto a = txt::EmbeddingsProcessor::from_files({base}, kDims);
  const auto b = txt::EmbeddingsProcessor::from_files({base, over}, kDims);
  const io::SafetensorsFile io(test::fixture("ltx23.textproc.io.safetensors"));
  const Tensor h = io.tensor("in.hidden_states"), m = io.tensor("in.attention_mask");
  const auto oa = a.process_hidden_states(h, m), ob = b.process_hidden_states(h, m);
  EXPECT_GT(test::max_abs_diff(oa.video_encoding, ob.video_encoding), 1e-3);
  EXPECT_EQ(test::max_abs_diff(oa.audio_encoding, ob.audio_encoding), 0.0);
}

}  // namespace
}  // namespace ltx::connector_binding_test
