#pragma once
// Prompt tokenization as the reference does it for the Gemma text encoders (LTXGemmaTokenizer in
// ltx_core/text_encoders/gemma/tokenizer.py, built by build_gemma_tokenizer):
//
//   1. text.strip() (Python's Unicode whitespace);
//   2. encode with the tokenizer's special tokens (Gemma 3's post-processor adds <bos>, Gemma 4's
//      file has none), truncated to max_length counting those special tokens;
//   3. when the first id is not BOS (or there is none), prepend BOS and cut back to max_length;
//      EOS is never added;
//   4. pad to exactly max_length (left by default) with the pad id (the EOS id when the tokenizer
//      names no pad token); the attention mask is 1 on real tokens.
//
// Loading follows the places the reference reads a tokenizer from: a tokenizer.json file, a
// single-file text encoder (.safetensors with the embedded tokenizer_json + sidecars), a Gemma
// root folder, or a llama.cpp Gemma 3 GGUF (the vocabulary in its metadata); with
// tokenizer_config.json present it is applied as transformers does (Tokenizer::apply_hf_config).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "models/text/gemma_assets.h"
#include "models/text/tokenizer.h"

namespace ltx::text {

// TOKENIZER_MAX_LENGTH of the reference.
inline constexpr int64_t kGemmaMaxLength = 1024;

enum class PaddingSide { Left, Right };

// The tokenizer the reference builds from assets (build_gemma_hf_tokenizer): tokenizer.json with
// tokenizer_config.json applied when the assets have it.
Tokenizer build_gemma_hf_tokenizer(const GemmaAssets& assets);
// `path`: a directory (Gemma root), a .safetensors text encoder, a llama.cpp Gemma 3 GGUF (its
// vocabulary: gguf_tokenizer.h), or a tokenizer.json file.
Tokenizer load_tokenizer(const std::string& path);

struct TokenizedPrompt {
  std::vector<int64_t> input_ids;       // max_length ids
  std::vector<int64_t> attention_mask;  // 1 on real tokens, 0 on padding
};

struct TokenizedBatch {
  int64_t batch = 0;
  int64_t length = 0;
  std::vector<int64_t> input_ids;       // [batch, length] row-major
  std::vector<int64_t> attention_mask;  // [batch, length]
  // The same as i64 CPU tensors of shape [batch, length].
  Tensor input_ids_tensor() const;
  Tensor attention_mask_tensor() const;
};

class GemmaPromptTokenizer {
 public:
  // Throws when the tokenizer has no BOS id (the reference refuses such a tokenizer too, at the
  // first prompt) or max_length < 1.
  explicit GemmaPromptTokenizer(Tokenizer tokenizer, int64_t max_length = kGemmaMaxLength,
                                PaddingSide padding_side = PaddingSide::Left);

  TokenizedPrompt tokenize(std::string_view text) const;
  TokenizedBatch tokenize(const std::vector<std::string>& prompts) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  int64_t max_length() const { return max_length_; }
  PaddingSide padding_side() const { return padding_side_; }
  int32_t bos_id() const { return bos_; }
  int32_t pad_id() const { return pad_; }

 private:
  Tokenizer tokenizer_;
  int64_t max_length_;
  PaddingSide padding_side_;
  int32_t bos_ = 0;
  int32_t pad_ = 0;
};

}  // namespace ltx::text
