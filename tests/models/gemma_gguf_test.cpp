// The Gemma 3 text encoder from llama.cpp GGUF files (io/llama_gguf.h, gguf_tokenizer.h): the
// golden tiny Gemma 3 written as llama.cpp would (support/gemma_gguf.h) gives the safetensors
// root's hidden states (F32), its dequantised twin's (Q8_0; a 256-wide model for K-quants and a
// block-quantized embedding), the golden tokenizer's ids from the vocabulary in its metadata,
// greedy prompt enhancement as the reference; bad files give one clear error each.
#include "support/gemma_gguf.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/io_test_util.h"
#include "io/llama_gguf.h"
#include "models/gemma_support.h"
#include "models/text/gemma/enhance.h"
#include "models/text/gemma/model.h"
#include "models/text/gemma_tokenizer.h"
#include "models/text/gguf_tokenizer.h"
#include "quantization/ggml_dequant.h"

namespace ltx {
namespace {

using nlohmann::json;
using test::TempDir;
using text::GemmaAssets;
using text::GemmaTextConfig;
using text::GemmaTextModel;

const std::string& gemma3_root() {
  static const std::string p = test::fixture("text_gemma3_root");
  return p;
}

// The golden root as a GGUF of `type` (projections) in `dir`.
std::string root_gguf(const TempDir& dir, GgmlType type = GgmlType::F32,
                      const test::LlamaGemmaGgufOptions& base = {}) {
  test::LlamaGemmaGgufOptions o = base;
  o.linear = type;
  o.embedding = type;
  const std::string path = dir.file(std::string("gemma-3-tiny-") + ggml_type_name(type) + ".gguf");
  test::write_llama_gemma3_gguf(gemma3_root(), path, o);
  return path;
}

// Ids [1, T] and mask: the last T positions of golden prompt 1 (its tokens and some pads).
std::pair<Tensor, Tensor> some_inputs(int64_t T = 48) {
  const io::SafetensorsFile& io = test::text_io("ltx23");
  return {io.tensor("in.input_ids").narrow(0, 1, 1).narrow(1, 1024 - T, T).contiguous(),
          io.tensor("in.attention_mask").narrow(0, 1, 1).narrow(1, 1024 - T, T).contiguous()};
}

// The GGUF's tensors dequantised to f32 under the model's names: its dense twin.
GemmaTextModel dequantised_twin(const std::string& gguf, const GemmaTextConfig& config) {
  io::WeightMap file({io::GgufFile::open(gguf)}, io::llama_cpp_gemma3_key_map());
  io::WeightMap dense;
  for (const std::string& n : file.names())
    dense.add(n, file.is_quantized(n) ? quantization::dequantize(file.take_ggml(n, file.shape(n)))
                                      : file.take(n, file.shape(n), DType::F32).clone());
  GemmaTextConfig c = config;
  c.norm_stored_plus_one = true;  // the twin holds the file's 1 + w too
  return GemmaTextModel::load(c, dense, {}, "dense twin", gguf);
}

void expect_hidden_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol,
                         const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t l = 0; l < a.size(); ++l)
    EXPECT_LE(test::max_rel_err(a[l], b[l]), tol) << what << " hidden state " << l;
}

TEST(GemmaGguf, F32FileGivesTheSafetensorsRootsHiddenStates) {
  TempDir dir;
  const std::string gguf = root_gguf(dir);
  const GemmaAssets assets = GemmaAssets::load(gguf);
  EXPECT_TRUE(assets.llama_gguf);
  const GemmaTextModel g = GemmaTextModel::load(assets);
  EXPECT_EQ(g.key_layout(), "llama.cpp Gemma 3 GGUF (blk.*, norms stored as 1 + w)");
  const GemmaTextModel st = GemmaTextModel::load(GemmaAssets::load(gemma3_root()));
  const auto [ids, mask] = some_inputs();
  // The same f32 weights (norms: 1 + w computed once in f32 either way); only the metadata's f32
  // epsilon and attention scale differ from the config's doubles.
  expect_hidden_close(g.encode(ids, mask), st.encode(ids, mask), 1e-6, "F32 GGUF vs root");
}

TEST(GemmaGguf, Q8_0FileMatchesItsDequantisedTwinAndStaysCloseToTheRoot) {
  TempDir dir;
  // The tiny model's 24-wide rows are not whole Q8_0 blocks: o_proj and down_proj (64 wide) are
  // Q8_0, the rest F32, as llama-quantize falls back.
  const std::string gguf = root_gguf(dir, GgmlType::Q8_0);
  const io::CheckpointSummary s = io::inspect_checkpoint(gguf);
  ASSERT_EQ(s.storage_types.size(), 2u);
  const GemmaAssets assets = GemmaAssets::load(gguf);
  const GemmaTextModel g = GemmaTextModel::load(assets);
  const auto [ids, mask] = some_inputs();
  const std::vector<Tensor> hs = g.encode(ids, mask);
  expect_hidden_close(hs, dequantised_twin(gguf, g.config()).encode(ids, mask), 1e-5,
                      "Q8_0 vs twin");
  const GemmaTextModel st = GemmaTextModel::load(GemmaAssets::load(gemma3_root()));
  expect_hidden_close(hs, st.encode(ids, mask), 5e-2, "Q8_0 vs root");
}

// A 256-wide Gemma 3 (rows of whole K-quant blocks) with random weights and the golden
// vocabulary: K-quant projections and a block-quantized embedding table, looked up row by row
// and used as lm_head by its blocks.
TEST(GemmaGguf, KQuantsAndABlockQuantizedEmbeddingMatchTheDequantisedTwin) {
  TempDir dir;
  for (const auto& [linear, embedding] :
       {std::pair{GgmlType::Q4_K, GgmlType::Q6_K}, std::pair{GgmlType::Q8_0, GgmlType::Q8_0}}) {
    const std::string gguf = dir.file(std::string("k-") + ggml_type_name(linear) + ".gguf");
    test::write_wide_gemma3_gguf(gguf, linear, embedding);
    const GemmaTextModel g = GemmaTextModel::load(GemmaAssets::load(gguf));
    const GemmaTextModel twin = dequantised_twin(gguf, g.config());
    const auto [ids, mask] = test::wide_gemma3_inputs();
    const std::vector<Tensor> hs = g.encode(ids, mask);
    expect_hidden_close(hs, twin.encode(ids, mask), 1e-5, ggml_type_name(linear));
    // lm_head tied to the table: the blocks against the dense table.
    EXPECT_LE(test::max_rel_err(g.logits(hs.back()), twin.logits(hs.back())), 1e-5);
  }
}

const json& cases() {
  static const json c = json::parse(test::read_bytes(test::fixture("text_tokenizer_cases.json")));
  return c;
}

TEST(GemmaGguf, TheVocabularyInTheMetadataGivesTheGoldenTokenizersIds) {
  TempDir dir;
  const std::string gguf = root_gguf(dir);
  const GemmaAssets assets = GemmaAssets::load(gguf);
  const text::Tokenizer tok = text::build_gemma_hf_tokenizer(assets);
  const text::Tokenizer raw = text::tokenizer_from_gguf(io::GgufFile(gguf));
  const text::GemmaPromptTokenizer w32(tok, 32, text::PaddingSide::Left);
  ASSERT_EQ(cases()["cases"].size(), 27u);
  for (const json& c : cases()["cases"]) {
    const std::string t = c["text"].get<std::string>();
    const json& e = c["gemma3"];
    EXPECT_EQ(raw.encode_ids(t, false), e["ids_no_special"].get<std::vector<int32_t>>())
        << c["name"];
    EXPECT_EQ(raw.encode(t, false).tokens, e["tokens"].get<std::vector<std::string>>())
        << c["name"];
    EXPECT_EQ(tok.encode_ids(t, true), e["hf_ids"].get<std::vector<int32_t>>()) << c["name"];
    EXPECT_EQ(tok.decode(e["hf_ids"].get<std::vector<int32_t>>(), true),
              e["hf_decode_skip_special"].get<std::string>())
        << c["name"];
    EXPECT_EQ(tok.decode(e["ids"].get<std::vector<int32_t>>(), false),
              e["decode"].get<std::string>())
        << c["name"];
    EXPECT_EQ(w32.tokenize(t).input_ids, e["ltx_32"]["ids"].get<std::vector<int64_t>>())
        << c["name"];
  }
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.pad_id(), 0);
  // Through the path the tokenize command takes too.
  EXPECT_EQ(text::load_tokenizer(gguf).encode_ids("A cat", true), tok.encode_ids("A cat", true));
}

TEST(GemmaGguf, ConfigAndAssetsComeFromTheMetadata) {
  TempDir dir;
  const std::string gguf = root_gguf(dir);
  const GemmaAssets a = GemmaAssets::load(gguf);
  a.require_encoder_assets();  // no processor_config.json needed
  const GemmaTextConfig c = GemmaTextConfig::from_json(a.config, gguf);
  const GemmaTextConfig r =
      GemmaTextConfig::from_json(GemmaAssets::load(gemma3_root()).config, gemma3_root());
  EXPECT_EQ(c.family, text::GemmaFamily::Gemma3);
  EXPECT_EQ(c.vocab_size, 1088);
  EXPECT_EQ(c.hidden_size, r.hidden_size);
  EXPECT_EQ(c.num_layers, r.num_layers);
  EXPECT_EQ(c.sliding_window, r.sliding_window);
  EXPECT_NEAR(c.attention_scale, r.attention_scale, 1e-7);
  EXPECT_EQ(c.rope_full.rope_type, "linear");
  EXPECT_EQ(c.rope_full.factor, 8.0);
  EXPECT_EQ(c.rope_full.theta, r.rope_full.theta);
  EXPECT_EQ(c.rope_sliding.theta, r.rope_sliding.theta);
  ASSERT_EQ(c.layers.size(), r.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) EXPECT_EQ(c.layers[i].type, r.layers[i].type);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 9}));  // <eos>, <end_of_turn>
  const json tc = a.sidecar_json("tokenizer_config.json");
  EXPECT_EQ(tc["bos_token"], "<bos>");
  EXPECT_EQ(tc["add_bos_token"], true);
  EXPECT_EQ(text::chat_template_of(a),
            GemmaAssets::load(gemma3_root()).sidecar("chat_template.jinja"));
}

TEST(GemmaGguf, GreedyEnhancementMatchesTheReference) {
  TempDir dir;
  const std::string gguf = root_gguf(dir);
  const GemmaAssets assets = GemmaAssets::load(gguf);
  const GemmaTextModel model = GemmaTextModel::load(assets);
  const json meta = test::text_io("ltx23").metadata_json("enhance");
  text::EnhanceOptions o;
  o.system_prompt = meta["system_prompt"].get<std::string>();
  text::GenerationConfig gen = text::default_enhance_generation(model.config());
  gen.do_sample = false;
  gen.max_new_tokens = 8;
  o.generation = gen;
  const text::EnhanceResult r =
      text::PromptEnhancer(assets, model).enhance_t2v(meta["user_prompt"].get<std::string>(), o);
  EXPECT_EQ(r.rendered, meta["rendered_text"].get<std::string>());
  EXPECT_EQ(r.generated_ids,
            test::text_io("ltx23").tensor("out.enhance.greedy.generated_ids").to_int_vector());
  EXPECT_EQ(r.text, meta["clean_response"]["greedy"].get<std::string>());
  // Image-aware enhancement needs the vision tower, which the GGUF does not hold.
  test::expect_error_containing([&] { (void)text::image_enhancement_vision_config(assets); },
                                {gguf, "--enhance-prompt", "mmproj"});
}

TEST(GemmaGguf, InspectNamesTheLlamaCppLayoutAndItsTypes) {
  TempDir dir;
  const std::string gguf = root_gguf(dir, GgmlType::Q8_0);
  const io::CheckpointSummary s = io::inspect_checkpoint(gguf);
  EXPECT_EQ(s.architecture, "gemma3");
  EXPECT_EQ(s.gguf_layout, "llama.cpp Gemma 3");
  EXPECT_EQ(s.layout, "text encoder");
  EXPECT_EQ(s.family, "Gemma");
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
  ASSERT_NE(s.component("gemma"), nullptr);
  EXPECT_EQ(s.component("gemma")->config["num_hidden_layers"], 6);
  const std::string text = io::to_text(s);
  for (const char* needle : {"llama.cpp Gemma 3 names", "Q8_0", "F32", "text encoder"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  EXPECT_EQ(io::to_json(s)["gguf"]["layout"], "llama.cpp Gemma 3");
}

TEST(GemmaGguf, BadFilesGiveOneClearErrorEach) {
  TempDir dir;
  auto with = [&](const std::string& name, test::LlamaGemmaGgufOptions o) {
    const std::string p = dir.file(name + ".gguf");
    o.linear = o.embedding = GgmlType::F32;
    test::write_llama_gemma3_gguf(gemma3_root(), p, o);
    return p;
  };
  auto set_meta = [](const std::string& key, io::GgufMetadata v) {
    return [key, v](std::vector<io::GgufMetadata>& m) {
      for (auto& e : m)
        if (e.key == key) e = v;
    };
  };
  auto drop_meta = [](const std::string& key) {
    return [key](std::vector<io::GgufMetadata>& m) {
      std::erase_if(m, [&](const io::GgufMetadata& e) { return e.key == key; });
    };
  };
  test::LlamaGemmaGgufOptions o;
  o.edit_metadata =
      set_meta("general.architecture", io::gguf_string("general.architecture", "llama"));
  const std::string llama = with("llama", o);
  test::expect_error_containing([&] { (void)GemmaAssets::load(llama); },
                                {llama, "general.architecture", "'llama'", "gemma3"});

  o = {};
  o.keep_tensor = [](const std::string& n) { return n != "blk.1.ffn_up.weight"; };
  const std::string missing = with("missing", o);
  EXPECT_ERROR_HAS(GemmaAssets::load(missing), "tensor 'blk.1.ffn_up.weight' is missing");

  o = {};
  o.edit_metadata =
      set_meta("gemma3.feed_forward_length", io::gguf_u32("gemma3.feed_forward_length", 60));
  const std::string misshaped = with("misshaped", o);
  EXPECT_ERROR_HAS(GemmaAssets::load(misshaped),
                   "tensor 'blk.0.ffn_gate.weight' is [64, 24], expected [60, 24] from "
                   "gemma3.feed_forward_length");

  o = {};
  o.edit_metadata = drop_meta("tokenizer.ggml.tokens");
  const std::string no_vocab = with("no-vocab", o);
  test::expect_error_containing([&] { (void)GemmaAssets::load(no_vocab); },
                                {no_vocab, "tokenizer.ggml.tokens", "is missing"});

  o = {};
  o.edit_metadata =
      set_meta("tokenizer.ggml.model", io::gguf_string("tokenizer.ggml.model", "gpt2"));
  const std::string gpt2 = with("gpt2", o);
  test::expect_error_containing([&] { (void)GemmaAssets::load(gpt2); },
                                {gpt2, "tokenizer.ggml.model", "'gpt2'", "SentencePiece"});

  o = {};
  o.edit_metadata = drop_meta("gemma3.attention.layer_norm_rms_epsilon");
  const std::string no_eps = with("no-eps", o);
  test::expect_error_containing([&] { (void)GemmaAssets::load(no_eps); },
                                {no_eps, "gemma3.attention.layer_norm_rms_epsilon", "missing"});

  // A transformer GGUF given as the text encoder.
  const std::string ltxv = dir.file("ltxv.gguf");
  io::write_gguf(ltxv, {io::gguf_string("general.architecture", "ltxv")},
                 {{"transformer_blocks.0.attn1.to_q.weight", GgmlType::F32, {32, 32}}},
                 [](size_t, std::span<uint8_t> b) { std::fill(b.begin(), b.end(), 0); });
  test::expect_error_containing([&] { (void)GemmaAssets::load(ltxv); },
                                {ltxv, "'ltxv'", "--transformer-path"});
}

}  // namespace
}  // namespace ltx
