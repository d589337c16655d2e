// `ltx tokenize --tokenizer FILE [--no-special-tokens]`: reads UTF-8 text from stdin (all of it,
// byte for byte: a trailing newline is part of the text) and prints its token ids as one JSON
// array. FILE is a tokenizer.json, a text-encoder .safetensors that embeds one, or a Gemma root
// folder (then tokenizer_config.json is applied as the reference's Hugging Face wrapper does).
// The ids are those of `tokenizers.Tokenizer.encode(text, add_special_tokens)`.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "models/text/gemma_tokenizer.h"

namespace ltx::cli {

namespace {

struct TokenizeOptions {
  std::string tokenizer;
  bool no_special_tokens = false;
};

int run_tokenize(const TokenizeOptions& opt) {
  const text::Tokenizer tok = text::load_tokenizer(opt.tokenizer);
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  LTX_CHECK(!std::cin.bad(), "tokenize: error reading standard input");
  text::check_utf8(input, "standard input");
  const std::vector<int32_t> ids = tok.encode_ids(input, !opt.no_special_tokens);
  std::cout << nlohmann::json(ids).dump() << std::endl;
  return 0;
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "tokenize", "Tokenize UTF-8 text from stdin; print the token ids as a JSON array");
  auto opt = std::make_shared<TokenizeOptions>();
  sub->add_option("--tokenizer", opt->tokenizer,
                  "tokenizer.json, a text-encoder .safetensors that embeds one, or a Gemma root "
                  "folder")
      ->required();
  sub->add_flag("--no-special-tokens", opt->no_special_tokens,
                "Do not add the post-processor's special tokens (e.g. Gemma 3's leading <bos>)");
  return {sub, [opt]() -> int { return run_tokenize(*opt); }};
}

}  // namespace ltx::cli
