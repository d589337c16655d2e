// chat_template: prompt enhancement's template path on a Gemma 3 tokenizer (the test fixture
// tests/fixtures/text_tokenizer_gemma3.json): the assets' tokenizer_config.json applied to the
// tokenizer (as build_gemma_hf_tokenizer does) and its chat_template entry, else the
// chat_template.jinja / chat_template.json sidecar (text::chat_template_of), the template
// recognised (parse_chat_template), the system and user messages rendered (render_gemma_chat),
// the result encoded, and the user text cleaned as a generated answer is (clean_response).
//
// Input: tokenizer_config.json, NUL, chat_template.jinja, NUL, chat_template.json, NUL, the
// system prompt, NUL, the user prompt. An empty part is a missing file.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "models/text/gemma/chat_template.h"
#include "models/text/tokenizer.h"

namespace {

// Parsed once: the target fuzzes what is applied to it, not the 57 KB vocabulary.
const ltx::text::Tokenizer& gemma3_tokenizer() {
  static const ltx::text::Tokenizer tok =
      ltx::text::Tokenizer::from_file(LTX_FUZZ_FIXTURES "/text_tokenizer_gemma3.json");
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  (void)gemma3_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ltx::text;
  const std::vector<std::string> parts = ltx::fuzz::split_parts(data, size, 5);
  GemmaAssets assets;
  assets.source = "fuzz-gemma-root";
  const char* files[3] = {"tokenizer_config.json", "chat_template.jinja", "chat_template.json"};
  for (int i = 0; i < 3; ++i)
    if (!parts[i].empty()) assets.sidecars[files[i]] = parts[i];

  Tokenizer tok = gemma3_tokenizer();
  try {
    if (assets.has_sidecar("tokenizer_config.json"))
      tok.apply_hf_config(assets.sidecar_json("tokenizer_config.json"));
  } catch (const ltx::Error&) {
    return 0;
  }
  try {
    const GemmaChatTemplate tmpl = parse_chat_template(chat_template_of(assets), assets.source);
    const std::optional<int32_t> bos = tok.bos_id();
    const std::string bos_token = bos ? tok.id_to_token(*bos).value_or("") : "";
    const std::vector<ChatMessage> messages = {{"system", parts[3]},
                                               {"user", "user prompt: " + parts[4]}};
    const std::string rendered = render_gemma_chat(tmpl, messages, bos_token);
    (void)tok.encode(rendered, true);
    (void)render_gemma_chat(tmpl, {{"user", parts[4]}, {"assistant", parts[3]}}, bos_token, false);
  } catch (const ltx::Error&) {
  }
  (void)clean_response(parts[4]);
  return 0;
}
