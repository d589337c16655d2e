#include "models/text/gemma_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "io/gguf.h"
#include "models/text/gguf_tokenizer.h"

namespace ltx::text {

Tokenizer build_gemma_hf_tokenizer(const GemmaAssets& assets) {
  Tokenizer tok = assets.llama_gguf
                      ? tokenizer_from_gguf(io::GgufFile(assets.weight_paths.front()))
                      : Tokenizer::from_json(assets.tokenizer_json,
                                             assets.source + " (tokenizer.json)");
  if (assets.has_sidecar("tokenizer_config.json"))
    tok.apply_hf_config(assets.sidecar_json("tokenizer_config.json"));
  return tok;
}

Tokenizer load_tokenizer(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec) || is_safetensors_file(path) ||
      io::is_gguf_file(path))
    return build_gemma_hf_tokenizer(GemmaAssets::load(path));
  LTX_CHECK(std::filesystem::is_regular_file(path, ec), "tokenizer: ", path,
            " is not a file or folder (expected a tokenizer.json, a text-encoder .safetensors ",
            "or a Gemma root folder)");
  return Tokenizer::from_file(path);
}

Tensor TokenizedBatch::input_ids_tensor() const {
  return Tensor::from_vector(input_ids, Shape{batch, length});
}

Tensor TokenizedBatch::attention_mask_tensor() const {
  return Tensor::from_vector(attention_mask, Shape{batch, length});
}

GemmaPromptTokenizer::GemmaPromptTokenizer(Tokenizer tokenizer, int64_t max_length,
                                           PaddingSide padding_side)
    : tokenizer_(std::move(tokenizer)), max_length_(max_length), padding_side_(padding_side) {
  LTX_CHECK(max_length_ >= 1, "GemmaPromptTokenizer: max_length must be at least 1, got ",
            max_length_);
  auto bos = tokenizer_.bos_id();
  LTX_CHECK(bos.has_value(), "tokenizer ", tokenizer_.source(),
            " has no BOS token; the Gemma encode path needs a leading <bos> (set bos_token in "
            "tokenizer_config.json)");
  bos_ = *bos;
  auto pad = tokenizer_.pad_id();
  if (!pad) pad = tokenizer_.eos_id();
  LTX_CHECK(pad.has_value(), "tokenizer ", tokenizer_.source(),
            " has neither a pad nor an EOS token to pad prompts with");
  pad_ = *pad;
}

TokenizedPrompt GemmaPromptTokenizer::tokenize(std::string_view text) const {
  const std::string stripped = python_strip(text);
  const Encoding enc = tokenizer_.encode(stripped, /*add_special_tokens=*/true,
                                         Truncation{max_length_, tokenizer_.truncate_from_left()});
  std::vector<int64_t> ids(enc.ids.begin(), enc.ids.end());
  if (ids.empty() || ids[0] != bos_) {
    ids.insert(ids.begin(), bos_);
    if (static_cast<int64_t>(ids.size()) > max_length_)
      ids.resize(static_cast<size_t>(max_length_));
  }
  const auto n = static_cast<int64_t>(ids.size());
  const auto pads = static_cast<size_t>(max_length_ - n);
  TokenizedPrompt out;
  out.input_ids.reserve(static_cast<size_t>(max_length_));
  out.attention_mask.reserve(static_cast<size_t>(max_length_));
  if (padding_side_ == PaddingSide::Left) {
    out.input_ids.assign(pads, pad_);
    out.attention_mask.assign(pads, 0);
  }
  out.input_ids.insert(out.input_ids.end(), ids.begin(), ids.end());
  out.attention_mask.insert(out.attention_mask.end(), ids.size(), 1);
  if (padding_side_ == PaddingSide::Right) {
    out.input_ids.insert(out.input_ids.end(), pads, pad_);
    out.attention_mask.insert(out.attention_mask.end(), pads, 0);
  }
  return out;
}

TokenizedBatch GemmaPromptTokenizer::tokenize(const std::vector<std::string>& prompts) const {
  TokenizedBatch b;
  b.batch = static_cast<int64_t>(prompts.size());
  b.length = max_length_;
  b.input_ids.reserve(prompts.size() * static_cast<size_t>(max_length_));
  b.attention_mask.reserve(prompts.size() * static_cast<size_t>(max_length_));
  for (const std::string& p : prompts) {
    TokenizedPrompt t = tokenize(p);
    b.input_ids.insert(b.input_ids.end(), t.input_ids.begin(), t.input_ids.end());
    b.attention_mask.insert(b.attention_mask.end(), t.attention_mask.begin(),
                            t.attention_mask.end());
  }
  return b;
}

}  // namespace ltx::text
