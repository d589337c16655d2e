// Tokenizer tests: the 27 golden cases of the Hugging Face `tokenizers` library (both Gemma
// flavours, ids / tokens / offsets / decodes exact), the reference's prompt wrapping
// (LTXGemmaTokenizer: BOS, truncation, padding, mask), loading from text-encoder files and Gemma
// root folders, features the golden files do not exercise, and errors for broken files.
#include "models/text/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/text/gemma_assets.h"
#include "models/text/gemma_tokenizer.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using nlohmann::json;
using test::TempDir;
using text::GemmaAssets;
using text::GemmaPromptTokenizer;
using text::Tokenizer;

const json& tokenizer_cases() {
  static const json c = json::parse(test::read_bytes(test::fixture("text_tokenizer_cases.json")));
  return c;
}

const Tokenizer& golden_tokenizer(const std::string& flavor) {
  static const Tokenizer g3 = Tokenizer::from_file(test::fixture("text_tokenizer_gemma3.json"));
  static const Tokenizer g4 = Tokenizer::from_file(test::fixture("text_tokenizer_gemma4.json"));
  return flavor == "gemma3" ? g3 : g4;
}

std::vector<int32_t> ids_of(const json& j) { return j.get<std::vector<int32_t>>(); }
std::vector<int64_t> ids64_of(const json& j) { return j.get<std::vector<int64_t>>(); }

// A Gemma root folder holding the flavour's tokenizer.json and the tokenizer_config.json the
// golden generator used.
void write_root(const TempDir& dir, const std::string& flavor) {
  std::filesystem::create_directories(dir.file("root"));
  test::write_bytes(dir.file("root/tokenizer.json"),
                    test::read_bytes(test::fixture("text_tokenizer_" + flavor + ".json")));
  test::write_bytes(dir.file("root/tokenizer_config.json"),
                    tokenizer_cases()["flavors"][flavor]["tokenizer_config.json"].dump(2));
}

class GoldenCases : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenCases, IdsTokensAndOffsetsMatchTheLibraryWithoutSpecialTokens) {
  const std::string flavor = GetParam();
  const Tokenizer& tok = golden_tokenizer(flavor);
  ASSERT_EQ(tokenizer_cases()["cases"].size(), 27u);
  for (const json& c : tokenizer_cases()["cases"]) {
    const json& e = c[flavor];
    const text::Encoding enc = tok.encode(c["text"].get<std::string>(), false);
    EXPECT_EQ(enc.ids, ids_of(e["ids_no_special"])) << c["name"];
    EXPECT_EQ(enc.tokens, e["tokens"].get<std::vector<std::string>>()) << c["name"];
    std::vector<std::pair<int64_t, int64_t>> offsets;
    for (const json& o : e["offsets_no_special"])
      offsets.emplace_back(o[0].get<int64_t>(), o[1].get<int64_t>());
    EXPECT_EQ(enc.offsets, offsets) << c["name"];
  }
}

TEST_P(GoldenCases, IdsWithSpecialTokensMatchTheLibrary) {
  const std::string flavor = GetParam();
  const Tokenizer& tok = golden_tokenizer(flavor);
  for (const json& c : tokenizer_cases()["cases"])
    EXPECT_EQ(tok.encode_ids(c["text"].get<std::string>(), true), ids_of(c[flavor]["ids"]))
        << c["name"];
}

TEST_P(GoldenCases, DecodesMatchTheLibrary) {
  const std::string flavor = GetParam();
  const Tokenizer& tok = golden_tokenizer(flavor);
  for (const json& c : tokenizer_cases()["cases"]) {
    const json& e = c[flavor];
    EXPECT_EQ(tok.decode(ids_of(e["ids"]), false), e["decode"].get<std::string>()) << c["name"];
    EXPECT_EQ(tok.decode(ids_of(e["ids"]), true), e["decode_skip_special"].get<std::string>())
        << c["name"];
  }
}

TEST_P(GoldenCases, HfWrapperFromARootFolderMatchesTheReference) {
  const std::string flavor = GetParam();
  TempDir dir;
  write_root(dir, flavor);
  const Tokenizer tok = text::load_tokenizer(dir.file("root"));
  const json& fl = tokenizer_cases()["flavors"][flavor];
  EXPECT_EQ(tok.vocab_size(), fl["vocab_size_with_added"].get<int64_t>());
  EXPECT_EQ(tok.bos_id(), fl["bos_id"].get<int32_t>());
  EXPECT_EQ(tok.eos_id(), fl["eos_id"].get<int32_t>());
  EXPECT_EQ(tok.pad_id(), fl["pad_id"].get<int32_t>());
  EXPECT_EQ(tok.unk_id(), fl["unk_id"].get<int32_t>());
  for (const json& c : tokenizer_cases()["cases"]) {
    const json& e = c[flavor];
    const std::string t = c["text"].get<std::string>();
    EXPECT_EQ(tok.encode_ids(t, true), ids_of(e["hf_ids"])) << c["name"];
    EXPECT_EQ(tok.encode_ids(t, false), ids_of(e["hf_ids_no_special"])) << c["name"];
    EXPECT_EQ(tok.decode(ids_of(e["hf_ids"]), true), e["hf_decode_skip_special"].get<std::string>())
        << c["name"];
  }
}

TEST_P(GoldenCases, PromptWrapperPadsLeftWithBosAndMaskAt1024And32) {
  const std::string flavor = GetParam();
  TempDir dir;
  write_root(dir, flavor);
  const Tokenizer tok = text::load_tokenizer(dir.file("root"));
  const GemmaPromptTokenizer w1024(tok);  // the reference's defaults: 1024, left
  const GemmaPromptTokenizer w32(tok, 32, text::PaddingSide::Left);
  EXPECT_EQ(w1024.max_length(), 1024);
  for (const json& c : tokenizer_cases()["cases"]) {
    const std::string t = c["text"].get<std::string>();
    for (const auto* w : {&w1024, &w32}) {
      const json& e = c[flavor][w == &w1024 ? "ltx_1024" : "ltx_32"];
      const text::TokenizedPrompt p = w->tokenize(t);
      EXPECT_EQ(p.input_ids, ids64_of(e["ids"])) << c["name"] << " max_length " << w->max_length();
      EXPECT_EQ(p.attention_mask, ids64_of(e["mask"]))
          << c["name"] << " max_length " << w->max_length();
    }
  }
}

TEST_P(GoldenCases, EmbeddedTokenizerOfTheTextEncoderFileGivesTheSameIds) {
  const std::string flavor = GetParam();
  const std::string path = test::fixture("text_" + flavor + ".te.safetensors");
  const GemmaAssets assets = GemmaAssets::load(path);
  EXPECT_EQ(assets.tokenizer_json,
            test::read_bytes(test::fixture("text_tokenizer_" + flavor + ".json")));
  EXPECT_TRUE(assets.has_sidecar("tokenizer_config.json"));
  EXPECT_TRUE(assets.has_sidecar("processor_config.json"));
  EXPECT_EQ(assets.config["model_type"], flavor == "gemma3" ? "gemma3" : "gemma4_unified");
  ASSERT_EQ(assets.weight_paths.size(), 1u);
  EXPECT_NO_THROW(assets.require_encoder_assets());

  const Tokenizer tok = text::load_tokenizer(path);
  const GemmaPromptTokenizer w(tok, 32);
  for (const json& c : tokenizer_cases()["cases"]) {
    const std::string t = c["text"].get<std::string>();
    EXPECT_EQ(tok.encode_ids(t, true), ids_of(c[flavor]["hf_ids"])) << c["name"];
    EXPECT_EQ(w.tokenize(t).input_ids, ids64_of(c[flavor]["ltx_32"]["ids"])) << c["name"];
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, GoldenCases, ::testing::Values("gemma3", "gemma4"),
                         [](const auto& info) { return info.param; });

// ------------------------------------------------------------------------------ prompt wrapper

TEST(GemmaPromptTokenizer, BatchRowsEqualSinglePromptsAndTensorsAreI64) {
  const Tokenizer tok = Tokenizer::from_file(test::fixture("text_tokenizer_gemma4.json"));
  const GemmaPromptTokenizer w(tok, 16);
  const std::vector<std::string> prompts = {"A cat on a mat.", "", "  spaces  "};
  const text::TokenizedBatch b = w.tokenize(prompts);
  ASSERT_EQ(b.batch, 3);
  ASSERT_EQ(b.length, 16);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const text::TokenizedPrompt p = w.tokenize(prompts[i]);
    EXPECT_EQ(
        std::vector<int64_t>(b.input_ids.begin() + 16 * i, b.input_ids.begin() + 16 * (i + 1)),
        p.input_ids);
    EXPECT_EQ(std::vector<int64_t>(b.attention_mask.begin() + 16 * i,
                                   b.attention_mask.begin() + 16 * (i + 1)),
              p.attention_mask);
  }
  // The empty prompt is BOS only, at the right end.
  EXPECT_EQ(b.input_ids[2 * 16 - 1], 2);
  EXPECT_EQ(b.attention_mask[2 * 16 - 1], 1);
  EXPECT_EQ(b.attention_mask[2 * 16 - 2], 0);
  const Tensor ids = b.input_ids_tensor(), mask = b.attention_mask_tensor();
  EXPECT_EQ(ids.dtype(), DType::I64);
  EXPECT_EQ(ids.shape(), (Shape{3, 16}));
  EXPECT_EQ(mask.shape(), (Shape{3, 16}));
  EXPECT_EQ(ids.data<int64_t>()[16 + 15], 2);
}

TEST(GemmaPromptTokenizer, RightPaddingPutsTheSameTokensFirst) {
  const Tokenizer tok = Tokenizer::from_file(test::fixture("text_tokenizer_gemma3.json"));
  const GemmaPromptTokenizer left(tok, 40), right(tok, 40, text::PaddingSide::Right);
  const auto l = left.tokenize(" A cat sitting on a windowsill. ");
  const auto r = right.tokenize(" A cat sitting on a windowsill. ");
  int64_t n = 0;
  for (int64_t m : l.attention_mask) n += m;
  ASSERT_GT(n, 3);
  ASSERT_LT(n, 40);
  EXPECT_EQ(std::vector<int64_t>(r.input_ids.begin(), r.input_ids.begin() + n),
            std::vector<int64_t>(l.input_ids.end() - n, l.input_ids.end()));
  EXPECT_EQ(r.input_ids[0], 2);
  for (int64_t i = 0; i < 40; ++i) {
    EXPECT_EQ(r.attention_mask[static_cast<size_t>(i)], i < n ? 1 : 0);
    if (i >= n) {
      EXPECT_EQ(r.input_ids[static_cast<size_t>(i)], 0);
    }
  }
}

TEST(GemmaPromptTokenizer, MaxLengthOneKeepsOnlyBosAndEosIsNeverAdded) {
  for (const char* flavor : {"gemma3", "gemma4"}) {
    const Tokenizer tok =
        Tokenizer::from_file(test::fixture(str("text_tokenizer_", flavor, ".json")));
    const GemmaPromptTokenizer w(tok, 1);
    EXPECT_EQ(w.tokenize("hello there").input_ids, std::vector<int64_t>{2}) << flavor;
    const GemmaPromptTokenizer w8(tok, 8);
    for (int64_t id : w8.tokenize("a").input_ids) EXPECT_NE(id, 1) << flavor;
  }
}

TEST(GemmaPromptTokenizer, PadsWithEosWhenThereIsNoPadToken) {
  TempDir dir;
  write_root(dir, "gemma4");
  json cfg = tokenizer_cases()["flavors"]["gemma4"]["tokenizer_config.json"];
  cfg.erase("pad_token");
  test::write_bytes(dir.file("root/tokenizer_config.json"), cfg.dump());
  const GemmaPromptTokenizer w(text::load_tokenizer(dir.file("root")), 6);
  const auto p = w.tokenize("x");
  EXPECT_EQ(p.input_ids, (std::vector<int64_t>{1, 1, 1, 1, 2, 327}));
  EXPECT_EQ(p.attention_mask, (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
}

TEST(GemmaPromptTokenizer, RefusesATokenizerWithoutBos) {
  TempDir dir;
  write_root(dir, "gemma4");
  json cfg = tokenizer_cases()["flavors"]["gemma4"]["tokenizer_config.json"];
  cfg.erase("bos_token");
  test::write_bytes(dir.file("root/tokenizer_config.json"), cfg.dump());
  test::expect_error_containing(
      [&] { GemmaPromptTokenizer w(text::load_tokenizer(dir.file("root"))); },
      {"no BOS token", "root"});
  const Tokenizer tok = Tokenizer::from_file(test::fixture("text_tokenizer_gemma4.json"));
  test::expect_error_containing([&] { GemmaPromptTokenizer w(tok, 0); }, {"max_length"});
}

TEST(GemmaPromptTokenizer, HfConfigAddBosTokenInstallsABosTemplate) {
  // transformers replaces the post-processor when the config says add_bos_token: the Gemma-4
  // file (no post-processor) then adds <bos> itself; add_bos_token false removes Gemma 3's.
  TempDir dir;
  write_root(dir, "gemma4");
  json cfg = tokenizer_cases()["flavors"]["gemma4"]["tokenizer_config.json"];
  cfg["add_bos_token"] = true;
  test::write_bytes(dir.file("root/tokenizer_config.json"), cfg.dump());
  const Tokenizer g4 = text::load_tokenizer(dir.file("root"));
  EXPECT_EQ(g4.num_special_tokens_to_add(), 1);
  EXPECT_EQ(g4.encode_ids("x", true), (std::vector<int32_t>{2, 327}));

  write_root(dir, "gemma3");
  cfg = tokenizer_cases()["flavors"]["gemma3"]["tokenizer_config.json"];
  cfg["add_bos_token"] = false;
  test::write_bytes(dir.file("root/tokenizer_config.json"), cfg.dump());
  const Tokenizer g3 = text::load_tokenizer(dir.file("root"));
  EXPECT_EQ(g3.num_special_tokens_to_add(), 0);
  EXPECT_EQ(g3.encode_ids("x", true), (std::vector<int32_t>{327}));
  // The prompt wrapper still starts with exactly one BOS.
  EXPECT_EQ(GemmaPromptTokenizer(g3, 3).tokenize("x").input_ids, (std::vector<int64_t>{0, 2, 327}));
}

TEST(GemmaPromptTokenizer, TruncationSideLeftKeepsTheEnd) {
  TempDir dir;
  write_root(dir, "gemma4");
  json cfg = tokenizer_cases()["flavors"]["gemma4"]["tokenizer_config.json"];
  cfg["truncation_side"] = "left";
  test::write_bytes(dir.file("root/tokenizer_config.json"), cfg.dump());
  const Tokenizer tok = text::load_tokenizer(dir.file("root"));
  const std::vector<int32_t> all = tok.encode_ids("one two three four five", true);
  ASSERT_GT(all.size(), 4u);
  const auto p = GemmaPromptTokenizer(tok, 4).tokenize("one two three four five");
  // The last 4 tokens survive truncation; BOS then pushes the last one out.
  EXPECT_EQ(p.input_ids, (std::vector<int64_t>{2, all[all.size() - 4], all[all.size() - 3],
                                               all[all.size() - 2]}));
}

TEST(GemmaPromptTokenizer, PythonStripRemovesUnicodeWhitespaceOnly) {
  EXPECT_EQ(text::python_strip("\xC2\xA0\xE3\x80\x80 a b\xE2\x80\x83\x1F\n"), "a b");
  // Zero-width space and BOM are not whitespace for Python.
  EXPECT_EQ(text::python_strip("\xE2\x80\x8B"
                               "a\xEF\xBB\xBF"),
            "\xE2\x80\x8B"
            "a\xEF\xBB\xBF");
  EXPECT_EQ(text::python_strip(" \t "), "");
}

// ------------------------------------------------------------------------------ loading

TEST(GemmaAssets, RootFolderCollectsConfigSidecarsAndWeights) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("root/sub"));
  test::write_bytes(dir.file("root/config.json"), R"({"model_type": "gemma3"})");
  test::write_bytes(dir.file("root/sub/tokenizer.json"),
                    test::read_bytes(test::fixture("text_tokenizer_gemma3.json")));
  test::write_bytes(dir.file("root/tokenizer_config.json"), R"({"bos_token": "<bos>"})");
  test::write_bytes(dir.file("root/chat_template.jinja"), "{{ bos_token }}");
  test::write_bytes(dir.file("root/sub/tokenizer_config.json"), R"({"shadowed": true})");
  const GemmaAssets a = GemmaAssets::load(dir.file("root"));
  EXPECT_EQ(a.config["model_type"], "gemma3");
  EXPECT_EQ(a.sidecar("chat_template.jinja"), "{{ bos_token }}");
  // Like the reference (sorted(rglob)), the first file of a name by sorted path wins.
  EXPECT_EQ(a.sidecar_json("tokenizer_config.json")["shadowed"], true);
  EXPECT_FALSE(a.has_sidecar("config.json"));
  EXPECT_FALSE(a.has_sidecar("tokenizer.json"));
  EXPECT_TRUE(a.weight_paths.empty());
  test::expect_error_containing([&] { a.require_encoder_assets(); }, {"processor_config.json"});
  test::expect_error_containing([&] { (void)a.sidecar("generation_config.json"); },
                                {"generation_config.json", "missing"});
}

// Writes a text-encoder file like the reference's packer, with the tokenizer stored as `dtype`
// and tokenizer_config.json either as a tensor or as a metadata string (older packs).
std::string write_te(const TempDir& dir, DType dtype, bool config_in_metadata) {
  const std::string tj = test::read_bytes(test::fixture("text_tokenizer_gemma4.json"));
  const std::string cfg = tokenizer_cases()["flavors"]["gemma4"]["tokenizer_config.json"].dump();
  auto bytes_tensor = [](const std::string& s, DType dt) {
    Tensor t = Tensor::empty(Shape{static_cast<int64_t>(s.size())}, dt);
    for (size_t i = 0; i < s.size(); ++i) {
      if (dt == DType::I8)
        t.data<int8_t>()[i] = static_cast<int8_t>(s[i]);
      else
        t.data<uint8_t>()[i] = static_cast<uint8_t>(s[i]);
    }
    return t;
  };
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"tokenizer_json", bytes_tensor(tj, dtype)}, {"model.norm.weight", Tensor::zeros(Shape{4})}};
  std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"gemma_config", R"({"model_type": "gemma4_unified"})"}};
  if (config_in_metadata)
    meta["tokenizer_config.json"] = cfg;
  else
    tensors.emplace_back("hf_asset__tokenizer_config.json", bytes_tensor(cfg, DType::U8));
  const std::string path = dir.file("te.safetensors");
  io::write_safetensors(path, tensors, meta);
  return path;
}

TEST(GemmaAssets, Int8TokenizerStorageAndMetadataSidecarsAreRead) {
  TempDir dir;
  const std::string path = write_te(dir, DType::I8, /*config_in_metadata=*/true);
  const GemmaAssets a = GemmaAssets::from_single_file(path);
  EXPECT_EQ(a.tokenizer_json, test::read_bytes(test::fixture("text_tokenizer_gemma4.json")));
  EXPECT_EQ(a.sidecar_json("tokenizer_config.json")["pad_token"], "<pad>");
  const Tokenizer tok = text::load_tokenizer(path);
  for (const json& c : tokenizer_cases()["cases"])
    EXPECT_EQ(tok.encode_ids(c["text"].get<std::string>(), true), ids_of(c["gemma4"]["hf_ids"]))
        << c["name"];
}

TEST(GemmaAssets, TextEncoderWithoutTokenizerOrConfigIsAnError) {
  TempDir dir;
  const std::string no_tok = dir.file("no_tok.safetensors");
  io::write_safetensors(no_tok, {{"x", Tensor::zeros(Shape{2})}}, {{"gemma_config", "{}"}});
  test::expect_error_containing([&] { text::load_tokenizer(no_tok); },
                                {"no_tok.safetensors", "tokenizer_json"});
  const std::string no_cfg = dir.file("no_cfg.safetensors");
  io::write_safetensors(no_cfg, {{"tokenizer_json", Tensor::zeros(Shape{2}, DType::U8)}});
  test::expect_error_containing([&] { text::load_tokenizer(no_cfg); },
                                {"no_cfg.safetensors", "gemma_config"});
  const std::string f32 = dir.file("f32.safetensors");
  io::write_safetensors(f32, {{"tokenizer_json", Tensor::zeros(Shape{2})}},
                        {{"gemma_config", "{}"}});
  test::expect_error_containing([&] { text::load_tokenizer(f32); }, {"tokenizer_json", "f32"});
  test::expect_error_containing([&] { text::load_tokenizer(dir.file("absent.json")); },
                                {"absent.json"});
  std::filesystem::create_directories(dir.file("empty_root"));
  test::expect_error_containing([&] { text::load_tokenizer(dir.file("empty_root")); },
                                {"empty_root", "tokenizer.json"});
}

// ------------------------------------------------------------------------------ other features

// A tiny BPE over single characters (plus byte tokens for the bytes listed).
json tiny_tokenizer(const std::vector<std::string>& pieces, const json& merges, const json& added,
                    const json& normalizer, const json& pre_tokenizer, const json& decoder,
                    bool byte_fallback = false) {
  json vocab = json::object();
  int32_t id = 0;
  vocab["<unk>"] = id++;
  for (const std::string& p : pieces) vocab[p] = id++;
  if (byte_fallback)
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      vocab[name] = id++;
    }
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", added},
              {"normalizer", normalizer},
              {"pre_tokenizer", pre_tokenizer},
              {"post_processor", nullptr},
              {"decoder", decoder},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", "<unk>"},
                {"fuse_unk", true},
                {"byte_fallback", byte_fallback},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}}}};
}

json added_token(int id, const std::string& content, bool lstrip, bool rstrip, bool single_word,
                 bool normalized = false, bool special = true) {
  return json{{"id", id},          {"content", content}, {"single_word", single_word},
              {"lstrip", lstrip},  {"rstrip", rstrip},   {"normalized", normalized},
              {"special", special}};
}

std::vector<std::string> letters() {
  std::vector<std::string> v;
  for (char c = 'a'; c <= 'z'; ++c) v.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) v.emplace_back(1, c);
  for (const char* s : {" ", "\t", "<", ">", "\xE2\x80\x80", ",", "-"}) v.emplace_back(s);
  return v;
}

TEST(Tokenizer, AddedTokenLstripRstripTakeUnicodeSpacesWithoutOverlap) {
  // The library's own expectation: "Hi <mask> there\t<mask>\t<mask>\u2000" splits into
  // "Hi", " <mask> ", "there", "\t<mask>\t", "<mask>\u2000".
  const json t = tiny_tokenizer(letters(), json::array(),
                                json::array({added_token(100, "<mask>", true, true, true)}),
                                nullptr, nullptr, nullptr);
  const Tokenizer tok = Tokenizer::from_json(t.dump());
  const int32_t mask = *tok.token_to_id("<mask>");
  EXPECT_EQ(mask, static_cast<int32_t>(tok.vocab_size(false)));  // a new id after the vocab
  const text::Encoding e = tok.encode("Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80", false);
  std::vector<std::string> mask_tokens;
  for (size_t i = 0; i < e.size(); ++i)
    if (e.ids[i] == mask) mask_tokens.push_back(e.tokens[i]);
  EXPECT_EQ(mask_tokens,
            (std::vector<std::string>{" <mask> ", "\t<mask>\t", "<mask>\xE2\x80\x80"}));
  EXPECT_EQ(e.size(), 2u + 1u + 5u + 1u + 1u);
  EXPECT_EQ(e.offsets[2], (std::pair<int64_t, int64_t>{2, 10}));  // " <mask> " in code points
}

TEST(Tokenizer, SingleWordAddedTokensNeedWordBoundaries) {
  // The library's expectation: "<mask> My name <mask> A<mask> <mask>ony <mask>" matches the
  // first, second and last <mask> only.
  const json t = tiny_tokenizer(letters(), json::array(),
                                json::array({added_token(100, "<mask>", false, false, true)}),
                                nullptr, nullptr, nullptr);
  const Tokenizer tok = Tokenizer::from_json(t.dump());
  const int32_t mask = *tok.token_to_id("<mask>");
  const text::Encoding e = tok.encode("<mask> My name <mask> A<mask> <mask>ony <mask>", false);
  std::vector<int64_t> starts;
  for (size_t i = 0; i < e.size(); ++i)
    if (e.ids[i] == mask) starts.push_back(e.offsets[i].first);
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 15, 40}));
  // Punctuation is not a word character; a non-ASCII neighbour needs tables we do not have.
  EXPECT_EQ(tok.encode("<mask>, <mask>-", false).ids[0], mask);
  // Latin-1 letters are word characters; other non-ASCII neighbours are refused, not guessed.
  for (int32_t id : tok.encode("\xC3\xA9<mask>", false).ids) EXPECT_NE(id, mask);
  EXPECT_EQ(tok.encode("\xC2\xA0<mask>", false).ids.back(), mask);
  test::expect_error_containing([&] { tok.encode("\xD0\xB6<mask>", false); },
                                {"single_word", "U+0436"});
}

TEST(Tokenizer, NormalizedAddedTokensMatchAfterTheNormalizerAndDecodeNormalized) {
  json added =
      json::array({added_token(100, "a b", false, false, false, /*normalized=*/true, false)});
  const json t = tiny_tokenizer(
      {"\xE2\x96\x81", "a", "b", "c"}, json::array(), added,
      json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}},
      nullptr, nullptr);
  const Tokenizer tok = Tokenizer::from_json(t.dump());
  const int32_t ab = *tok.token_to_id("a b");
  const text::Encoding e = tok.encode("c a b c", false);
  EXPECT_EQ(e.ids, (std::vector<int32_t>{4, 1, ab, 1, 4}));
  EXPECT_EQ(e.tokens[2],
            "a\xE2\x96\x81"
            "b");
  EXPECT_EQ(e.offsets[2], (std::pair<int64_t, int64_t>{2, 5}));
  // No decoder: tokens joined with spaces, the added token in its normalised form.
  EXPECT_EQ(tok.decode(e.ids),
            "c \xE2\x96\x81 a\xE2\x96\x81"
            "b \xE2\x96\x81 c");
}

TEST(Tokenizer, MetaspacePrependNormalizerAndSplitBehaviours) {
  // Metaspace (prepend "first", split): "hi you" -> "▁hi", "▁you"; merges make whole words.
  const std::string sp = "\xE2\x96\x81";
  json merges =
      json::array({json::array({sp, "h"}), json::array({sp + "h", "i"}), json::array({"y", "o"}),
                   json::array({sp, "yo"}), json::array({sp + "yo", "u"})});
  json pre = {
      {"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "first"}, {"split", true}};
  json dec = {
      {"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "first"}, {"split", true}};
  json t = tiny_tokenizer(
      {sp, "h", "i", "y", "o", "u", sp + "h", sp + "hi", "yo", sp + "yo", sp + "you"}, merges,
      json::array(), nullptr, pre, dec);
  Tokenizer tok = Tokenizer::from_json(t.dump());
  text::Encoding e = tok.encode("hi you", false);
  EXPECT_EQ(e.tokens, (std::vector<std::string>{sp + "hi", sp + "you"}));
  EXPECT_EQ(e.offsets, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 6}}));
  EXPECT_EQ(tok.decode(e.ids), "hi you");

  // Prepend normalizer + Split(" ", Isolated) pre-tokenizer.
  t["normalizer"] = {{"type", "Prepend"}, {"prepend", sp}};
  t["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"String", "i"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  t["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       json::array({{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  tok = Tokenizer::from_json(t.dump());
  e = tok.encode("hih", false);
  // "▁hih" split around "i": "▁h", "i", "h" (no merge across pieces).
  EXPECT_EQ(e.tokens, (std::vector<std::string>{sp + "h", "i", "h"}));
  EXPECT_EQ(e.offsets, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(tok.decode(e.ids), "hih");

  for (const auto& [behavior, expected] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"Removed", {sp + "h", "h"}},
           {"MergedWithPrevious", {sp + "hi", "h"}},
           {"MergedWithNext", {sp + "h", "i", "h"}},
           {"Contiguous", {sp + "h", "i", "h"}}}) {
    t["pre_tokenizer"]["behavior"] = behavior;
    // MergedWithNext joins "i" to the following piece: "▁h", "ih" -> tokens "▁h", "i", "h".
    EXPECT_EQ(Tokenizer::from_json(t.dump()).encode("hih", false).tokens, expected) << behavior;
  }
}

TEST(Tokenizer, UnknownCharactersFuseIntoOneUnkAndByteFallbackCoversThem) {
  json t = tiny_tokenizer({"a", "b"}, json::array(), json::array(), nullptr, nullptr, nullptr);
  Tokenizer tok = Tokenizer::from_json(t.dump());
  EXPECT_EQ(tok.encode_ids("a\xC3\xA9\xC3\xA9"
                           "b",
                           false),
            (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(tok.encode("a\xC3\xA9\xC3\xA9"
                       "b",
                       false)
                .offsets[1],
            (std::pair<int64_t, int64_t>{1, 3}));
  t["model"]["fuse_unk"] = false;
  EXPECT_EQ(Tokenizer::from_json(t.dump()).encode_ids("\xC3\xA9\xC3\xA9", false),
            (std::vector<int32_t>{0, 0}));

  t = tiny_tokenizer(
      {"a"}, json::array(), json::array(), nullptr, nullptr,
      json{{"type", "Sequence"},
           {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}},
      /*byte_fallback=*/true);
  tok = Tokenizer::from_json(t.dump());
  const auto ids = tok.encode_ids("a\xC3\xA9", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(*tok.id_to_token(ids[1]), "<0xC3>");
  EXPECT_EQ(*tok.id_to_token(ids[2]), "<0xA9>");
  EXPECT_EQ(tok.decode(ids), "a\xC3\xA9");
  // An invalid byte run decodes to one U+FFFD per byte.
  EXPECT_EQ(tok.decode({ids[1], ids[0], ids[2]}),
            "\xEF\xBF\xBD"
            "a\xEF\xBF\xBD");
  EXPECT_EQ(tok.decode({ids[2], ids[2]}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // Ids that name no token are skipped.
  EXPECT_EQ(tok.decode({ids[0], 99999}), "a");
}

TEST(Tokenizer, IgnoreMergesTakesWholeWordsAndLegacyMergeStringsLoad) {
  // merges "a b" (legacy string form) then "ab c"; "abc" is also reachable directly.
  json t = tiny_tokenizer({"a", "b", "c", "ab", "abc", "bc"}, json::array({"b c", "a bc"}),
                          json::array(), nullptr, nullptr, nullptr);
  EXPECT_EQ(Tokenizer::from_json(t.dump()).encode("abc", false).tokens,
            (std::vector<std::string>{"abc"}));
  t["model"]["merges"] = json::array({"a b"});
  EXPECT_EQ(Tokenizer::from_json(t.dump()).encode("abc", false).tokens,
            (std::vector<std::string>{"ab", "c"}));
  t["model"]["ignore_merges"] = true;
  EXPECT_EQ(Tokenizer::from_json(t.dump()).encode("abc", false).tokens,
            (std::vector<std::string>{"abc"}));
}

TEST(Tokenizer, MergesApplyByRankThenLeftmost) {
  // "aaa" with the single merge (a, a): the leftmost pair merges first -> "aa", "a".
  json t = tiny_tokenizer({"a", "aa", "b", "ab"}, json::array({json::array({"a", "a"})}),
                          json::array(), nullptr, nullptr, nullptr);
  EXPECT_EQ(Tokenizer::from_json(t.dump()).encode("aaa", false).tokens,
            (std::vector<std::string>{"aa", "a"}));
  // Lower rank wins regardless of position: (a, b) before (a, a) gives "a", "ab".
  t["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"a", "a"})});
  EXPECT_EQ(Tokenizer::from_json(t.dump()).encode("aab", false).tokens,
            (std::vector<std::string>{"a", "ab"}));
  t["model"]["merges"] = json::array({json::array({"a", "a"}), json::array({"a", "b"})});
  EXPECT_EQ(Tokenizer::from_json(t.dump()).encode("aab", false).tokens,
            (std::vector<std::string>{"aa", "b"}));
}

TEST(Tokenizer, SplitSpecialTokensEncodesThemAsText) {
  TempDir dir;
  write_root(dir, "gemma3");
  json cfg = tokenizer_cases()["flavors"]["gemma3"]["tokenizer_config.json"];
  cfg["split_special_tokens"] = true;
  test::write_bytes(dir.file("root/tokenizer_config.json"), cfg.dump());
  const Tokenizer tok = text::load_tokenizer(dir.file("root"));
  const auto ids = tok.encode_ids("<eos>", false);
  EXPECT_GT(ids.size(), 1u);
  for (int32_t id : ids) EXPECT_NE(id, 1);
}

TEST(Tokenizer, InvalidUtf8InputIsAnError) {
  const Tokenizer& tok = golden_tokenizer("gemma3");
  test::expect_error_containing([&] { tok.encode("ab\xC3(", false); }, {"UTF-8", "byte offset 2"});
  test::expect_error_containing([&] { tok.encode("\xED\xA0\x80", false); },
                                {"UTF-8"});  // surrogate
}

// ------------------------------------------------------------------------------ broken files

TEST(Tokenizer, CorruptOrUnsupportedFilesAreNamedErrors) {
  const std::string good = test::read_bytes(test::fixture("text_tokenizer_gemma3.json"));
  test::expect_error_containing(
      [&] { Tokenizer::from_json(good.substr(0, good.size() / 2), "half.json"); },
      {"half.json", "not valid JSON"});
  test::expect_error_containing([&] { Tokenizer::from_json("[1, 2]", "arr.json"); },
                                {"arr.json", "object"});

  const json base = json::parse(good);
  auto expect_bad = [&](const std::function<void(json&)>& edit,
                        std::initializer_list<std::string> needles) {
    json j = base;
    edit(j);
    test::expect_error_containing([&] { Tokenizer::from_json(j.dump(), "t.json"); }, needles);
  };
  expect_bad([](json& j) { j.erase("model"); }, {"t.json", "model"});
  expect_bad([](json& j) { j["model"]["vocab"]["a"] = "x"; }, {"model.vocab", "\"a\""});
  expect_bad(
      [](json& j) {
        j["model"]["merges"].push_back(json::array({"zzz", "a"}));
      },
      {"merges", "zzz"});
  expect_bad([](json& j) { j["model"]["merges"].push_back("a b c"); }, {"merges", "one space"});
  expect_bad(
      [](json& j) {
        j["model"]["merges"].push_back(json::array({"x", "y"}));
      },
      {"merged token", "xy"});
  expect_bad([](json& j) { j["model"]["type"] = "WordPiece"; }, {"WordPiece", "unsupported"});
  expect_bad([](json& j) { j["model"]["dropout"] = 0.1; }, {"dropout", "unsupported"});
  expect_bad([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, {"NFKC", "unsupported"});
  expect_bad(
      [](json& j) {
        j["pre_tokenizer"]["pattern"] = {{"Regex", "\\s+"}};
      },
      {"pre_tokenizer", "Regex", "unsupported"});
  expect_bad(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "ByteLevel"}};
      },
      {"ByteLevel", "unsupported"});
  expect_bad([](json& j) { j["decoder"]["decoders"][0]["type"] = "WordPiece"; },
             {"decoder.decoders[0]", "WordPiece"});
  expect_bad(
      [](json& j) {
        j["post_processor"] = {{"type", "BertProcessing"}};
      },
      {"BertProcessing", "unsupported"});
  expect_bad([](json& j) { j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<cls>"; },
             {"<cls>"});
  expect_bad([](json& j) { j["truncation"] = {{"max_length", 8}}; }, {"truncation", "unsupported"});
  expect_bad([](json& j) { j["added_tokens"][0]["content"] = 5; }, {"added_tokens[0]", "content"});
  expect_bad([](json& j) { j["added_tokens"][0]["special"] = "yes"; },
             {"added_tokens[0]", "special"});
  expect_bad([](json& j) { j["version"] = "2.0"; }, {"version"});
}

}  // namespace
}  // namespace ltx
