// tokenizer: a tokenizer.json (text::Tokenizer::from_json: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor, decoder) and a text encoded with it, with and without
// special tokens and truncated, decoded back, and tokenized the way the Gemma prompt path does
// (text::GemmaPromptTokenizer: strip, BOS, truncation, padding).
//
// Input: the tokenizer.json, NUL, the text.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "models/text/gemma_tokenizer.h"
#include "models/text/tokenizer.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ltx::text;
  const std::vector<std::string> parts = ltx::fuzz::split_parts(data, size, 2);
  const std::string& text = parts[1];
  std::optional<Tokenizer> tok;
  try {
    tok.emplace(Tokenizer::from_json(parts[0], "fuzz tokenizer.json"));
  } catch (const ltx::Error&) {
    return 0;
  }
  try {
    const Encoding enc = tok->encode(text, true);
    (void)tok->decode(enc.ids, false);
    (void)tok->decode(enc.ids, true);
    for (const std::string& t : enc.tokens) (void)tok->token_to_id(t);
    (void)tok->encode(text, false, Truncation{8, false});
    (void)tok->encode(text, true, Truncation{3, true});
  } catch (const ltx::Error&) {
  }
  // Ids the text did not produce (past the vocabulary, negative) are skipped by decode.
  (void)tok->decode({-1, 0, 1, 2, static_cast<int32_t>(tok->vocab_size()), INT32_MAX}, false);
  (void)tok->id_to_token(static_cast<int32_t>(text.size()));
  try {
    const GemmaPromptTokenizer prompt(*tok, 16);
    (void)prompt.tokenize(text);
    (void)prompt.tokenize(std::vector<std::string>{text, "a"});
  } catch (const ltx::Error&) {
  }
  return 0;
}
