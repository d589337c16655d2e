#pragma once
// The chat template step of prompt enhancement (enhance.h): the Gemma chat template of a model's
// assets recognised as one of the two Gemma formats and rendered (not a Jinja engine), and the
// clean-up of the generated answer. Kept apart from the model code: it reads user files
// (tokenizer_config.json, chat_template.jinja / .json) and is fuzzed on its own.
#include <string>
#include <string_view>
#include <vector>

#include "models/text/gemma_assets.h"

namespace ltx::text {

enum class GemmaChatFormat { Gemma3, Gemma4 };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// What rendering a recognised template needs.
struct GemmaChatTemplate {
  GemmaChatFormat format = GemmaChatFormat::Gemma3;
  // Gemma 4: the generation prompt closes an empty thought channel (thinking off).
  bool empty_thought_channel = false;
  GemmaChatTemplate(GemmaChatFormat f = GemmaChatFormat::Gemma3, bool thought = false)  // NOLINT
      : format(f), empty_thought_channel(thought) {}
};

// Recognises a Gemma chat template by its turn markers; throws for anything else.
GemmaChatFormat detect_chat_format(const std::string& chat_template, const std::string& source);
// The format and, for Gemma 4, whether the generation prompt carries the empty thought channel
// (the literal '<|channel>thought\n<channel|>' in the template source).
GemmaChatTemplate parse_chat_template(const std::string& chat_template, const std::string& source);
// The chat template of the assets (chat_template.jinja, else chat_template.json's string or
// "chat_template" entry); throws naming the source when there is none.
std::string chat_template_of(const GemmaAssets& assets);
// Renders `messages` in the template's format (the two formats in enhance.h's header comment).
std::string render_gemma_chat(const GemmaChatTemplate& chat_template,
                              const std::vector<ChatMessage>& messages, const std::string& bos_token,
                              bool add_generation_prompt = true);

// clean_response: curly quotes, dashes, NBSP, prime and minus sign to ASCII, then everything
// before the first letter (Python's str.isalpha) removed.
std::string clean_response(std::string_view text);

}  // namespace ltx::text
