#include "models/text/gguf_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "core/string_replace.h"
#include "io/llama_gguf.h"

namespace ltx::text {

namespace {

using json = nlohmann::json;
using io::LlamaTokenType;

constexpr const char* kSpmSpaceUtf8 = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Byte offsets of the code-point boundaries strictly inside `s` (assumes valid UTF-8).
std::vector<size_t> utf8_inner_boundaries(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 1; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}

}  // namespace

Tokenizer tokenizer_from_gguf(const io::GgufFile& file) {
  const io::LlamaSpmVocab v = io::llama_cpp_spm_vocab(file);
  const size_t n = v.tokens.size();
  LTX_CHECK(n > 0, "llama.cpp GGUF ", file.path(), ": tokenizer.ggml.tokens is empty");

  // The tokens as tokenizer.json spells them.
  std::vector<std::string> content(n);
  for (size_t i = 0; i < n; ++i) {
    content[i] = v.types[i] == LlamaTokenType::UserDefined
                     ? replace_all(v.tokens[i], " ", kSpmSpaceUtf8)
                     : v.tokens[i];
    check_utf8(content[i], str(file.path(), " tokenizer.ggml.tokens[", i, "]"));
  }
  std::unordered_map<std::string, int32_t> id_of;
  id_of.reserve(n + n / 2);
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    id_of.emplace(content[i], static_cast<int32_t>(i));  // the first id of a repeated token
    vocab.emplace_back(content[i], static_cast<int32_t>(i));
  }

  // Merges: normal tokens of two or more code points, best score first.
  std::vector<int32_t> order;
  for (size_t i = 0; i < n; ++i)
    if (v.types[i] == LlamaTokenType::Normal) order.push_back(static_cast<int32_t>(i));
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return v.scores[static_cast<size_t>(a)] > v.scores[static_cast<size_t>(b)];
  });
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::pair<int32_t, int32_t>> splits;
  for (const int32_t id : order) {
    const std::string& s = content[static_cast<size_t>(id)];
    splits.clear();
    for (const size_t cut : utf8_inner_boundaries(s)) {
      auto l = id_of.find(s.substr(0, cut));
      if (l == id_of.end()) continue;
      auto r = id_of.find(s.substr(cut));
      if (r == id_of.end()) continue;
      splits.emplace_back(l->second, r->second);
    }
    std::sort(splits.begin(), splits.end());
    for (const auto& [l, r] : splits)
      merges.emplace_back(content[static_cast<size_t>(l)], content[static_cast<size_t>(r)]);
  }

  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false}};
  json added = json::array();
  for (size_t i = 0; i < n; ++i) {
    const LlamaTokenType t = v.types[i];
    if (t == LlamaTokenType::Unknown && !model.contains("unk_token"))
      model["unk_token"] = content[i];
    if (t != LlamaTokenType::Control && t != LlamaTokenType::UserDefined &&
        t != LlamaTokenType::Unknown)
      continue;
    added.push_back({{"id", i},
                     {"content", content[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", t != LlamaTokenType::UserDefined}});
  }
  json normalizer = {
      {"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpmSpaceUtf8}};
  json decoder = json::array(
      {{{"type", "Replace"}, {"pattern", {{"String", kSpmSpaceUtf8}}}, {"content", " "}},
       {{"type", "ByteFallback"}},
       {{"type", "Fuse"}}});
  if (v.add_space_prefix) {
    normalizer = {{"type", "Sequence"},
                  {"normalizers",
                   json::array({{{"type", "Prepend"}, {"prepend", kSpmSpaceUtf8}}, normalizer})}};
    decoder.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  }
  const json config = {{"version", "1.0"},
                       {"truncation", nullptr},
                       {"padding", nullptr},
                       {"added_tokens", added},
                       {"normalizer", normalizer},
                       {"pre_tokenizer", nullptr},
                       {"post_processor", nullptr},
                       {"decoder", {{"type", "Sequence"}, {"decoders", decoder}}},
                       {"model", model}};
  return Tokenizer::from_parts(config, std::move(vocab), std::move(merges),
                               file.path() + " (GGUF vocabulary)");
}

}  // namespace ltx::text
