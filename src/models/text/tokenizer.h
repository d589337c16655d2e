#pragma once
// A tokenizer for Hugging Face `tokenizer.json` files (the `tokenizers` library's serialisation),
// producing exactly the ids that library produces for the parts Gemma 3 / Gemma 4 files use:
//
//   added_tokens    matched first on the raw text (normalized=false) and then on the normalised
//                   pieces (normalized=true), leftmost-longest; single_word / lstrip / rstrip /
//                   special flags; ids assigned the way the library assigns them on load
//   normalizer      Sequence, Replace (string pattern), Prepend, Strip
//   pre_tokenizer   Sequence, Split (string pattern, every behaviour, invert), Metaspace
//   model           BPE: vocab, merges (both serialisations), unk_token + fuse_unk, byte_fallback,
//                   ignore_merges, continuing_subword_prefix, end_of_word_suffix
//   post_processor  TemplateProcessing
//   decoder         Sequence, Replace (string pattern), ByteFallback, Fuse, Strip, Metaspace
//
// Anything else in a file (another model type, NFKC, regex patterns, a truncation or padding
// section, BPE dropout, ...) is rejected when the file is loaded with an ltx::Error that names the
// feature: a tokenizer never silently produces different ids from the library.
//
// Strings are UTF-8; offsets are in Unicode code points of the input (what the Python bindings
// report). Loading builds hash maps once (vocab, reverse vocab, merge ranks); encoding runs the
// merge loop with a priority queue, O(n log n) in the length of each piece.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ltx::text {

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;
  // [begin, end) in code points of the input; (0, 0) for tokens the post-processor added.
  std::vector<std::pair<int64_t, int64_t>> offsets;
  // 1 for tokens added by the post-processor, 0 otherwise.
  std::vector<uint8_t> special_tokens_mask;

  size_t size() const { return ids.size(); }
};

// One entry of `added_tokens` (or one added later by apply_hf_config).
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// Truncation as the `tokenizers` library applies it in post-processing: `max_length` counts the
// tokens the post-processor adds (so the text keeps max_length - added tokens).
struct Truncation {
  int64_t max_length = 0;
  bool from_left = false;  // truncation_side "left": keep the last tokens
};

class Tokenizer {
 public:
  // Parses tokenizer.json text; `source` names it in error messages.
  static Tokenizer from_json(std::string_view json_text,
                             const std::string& source = "tokenizer.json");
  static Tokenizer from_file(const std::string& path);
  // A tokenizer.json given as its parts: `config` is the document without model.vocab and
  // model.merges (the model's other fields included), which come as tables (token, id) and
  // (left, right) in rank order, checked as from_json checks them. For vocabularies built in
  // memory (a GGUF file's, models/text/gguf_tokenizer.h) without a JSON round trip.
  static Tokenizer from_parts(const nlohmann::json& config,
                              std::vector<std::pair<std::string, int32_t>> vocab,
                              std::vector<std::pair<std::string, std::string>> merges,
                              const std::string& source);

  Tokenizer(const Tokenizer& other);
  Tokenizer& operator=(const Tokenizer& other);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // `tokenizers.Tokenizer.encode(text, add_special_tokens)`. Throws on invalid UTF-8.
  Encoding encode(std::string_view text, bool add_special_tokens = true,
                  const std::optional<Truncation>& truncation = std::nullopt) const;
  std::vector<int32_t> encode_ids(std::string_view text, bool add_special_tokens = true) const;
  // `tokenizers.Tokenizer.decode(ids, skip_special_tokens)`. Like the library, ids that name no
  // token are skipped.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // Added tokens first, then the model vocabulary (the library's lookup order).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // Number of distinct tokens: the model vocabulary plus added tokens that are not in it.
  int64_t vocab_size(bool with_added_tokens = true) const;
  bool is_special_token(std::string_view content) const;
  // Added tokens ordered by id.
  std::vector<AddedToken> added_tokens() const;
  // Tokens the post-processor adds to a single sequence (0 without a post-processor).
  int64_t num_special_tokens_to_add() const;
  bool has_post_processor() const;

  // Special tokens. Without apply_hf_config these are the Gemma names "<bos>", "<eos>", "<pad>",
  // "<unk>" when the vocabulary has them; after it, the tokens tokenizer_config.json names (a
  // name the config sets to null gives nullopt).
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  std::optional<int32_t> unk_id() const;
  // "right" unless tokenizer_config.json says "truncation_side": "left".
  bool truncate_from_left() const;

  // Applies tokenizer_config.json the way transformers' PreTrainedTokenizerFast (the object the
  // reference builds in build_gemma_hf_tokenizer) does: named special tokens (bos/eos/unk/pad/
  // sep/cls/mask, extra_special_tokens, additional_special_tokens) that are not yet added tokens
  // become special added tokens; when the config sets add_bos_token or add_eos_token, or the file
  // has no post-processor, the post-processor becomes "[bos] $A [eos]" as those flags say
  // (defaults false); split_special_tokens and truncation_side are honoured.
  void apply_hf_config(const nlohmann::json& tokenizer_config);

  const std::string& source() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Helpers shared with the prompt wrapper.
// Python's str.strip(): removes leading/trailing code points for which str.isspace() is true.
std::string python_strip(std::string_view text);
// Throws ltx::Error naming `what` and the byte offset when `text` is not valid UTF-8.
void check_utf8(std::string_view text, const std::string& what);

}  // namespace ltx::text
