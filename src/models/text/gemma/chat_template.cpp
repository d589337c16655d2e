#include "models/text/gemma/chat_template.h"

#include <string_view>

#include "core/error.h"
#include "models/text/gemma/unicode_alpha.h"
#include "models/text/tokenizer.h"

namespace ltx::text {

using json = nlohmann::json;

namespace {

// UTF-8 -> code points; invalid bytes become U+FFFD (decoded text is valid already).
std::u32string utf8_to_u32(std::string_view s) {
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      ok = ok && (d >> 6) == 0x2;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

GemmaChatFormat detect_chat_format(const std::string& chat_template, const std::string& source) {
  if (chat_template.find("<start_of_turn>") != std::string::npos) return GemmaChatFormat::Gemma3;
  if (chat_template.find("<|turn>") != std::string::npos) return GemmaChatFormat::Gemma4;
  fail("the chat template of ", source,
       " is not a Gemma chat template (no <start_of_turn> / <|turn> markers); prompt enhancement "
       "renders only the Gemma 3 and Gemma 4 chat formats");
}

GemmaChatTemplate parse_chat_template(const std::string& chat_template, const std::string& source) {
  const GemmaChatFormat format = detect_chat_format(chat_template, source);
  // In the Jinja source the newline is the escape sequence; a raw newline would do the same.
  const bool thought = format == GemmaChatFormat::Gemma4 &&
                       (chat_template.find("<|channel>thought\\n<channel|>") != std::string::npos ||
                        chat_template.find("<|channel>thought\n<channel|>") != std::string::npos);
  return GemmaChatTemplate(format, thought);
}

std::string chat_template_of(const GemmaAssets& assets) {
  // build_gemma_hf_tokenizer: tokenizer_config.json's chat_template wins, then the sidecars.
  if (assets.has_sidecar("tokenizer_config.json")) {
    const json cfg = assets.sidecar_json("tokenizer_config.json");
    if (cfg.is_object() && cfg.contains("chat_template") && !cfg.at("chat_template").is_null()) {
      const json& t = cfg.at("chat_template");
      if (t.is_string()) return t.get<std::string>();
      if (t.is_array())
        for (const auto& e : t)
          if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
              e.at("template").is_string())
            return e.at("template").get<std::string>();
      fail("the chat_template entry of tokenizer_config.json in ", assets.source,
           " is neither a string nor a list with a 'default' template");
    }
  }
  if (assets.has_sidecar("chat_template.jinja")) return assets.sidecar("chat_template.jinja");
  if (assets.has_sidecar("chat_template.json")) {
    const json t = assets.sidecar_json("chat_template.json");
    if (t.is_string()) return t.get<std::string>();
    if (t.is_object() && t.contains("chat_template") && t.at("chat_template").is_string())
      return t.at("chat_template").get<std::string>();
  }
  fail("the Gemma assets of ", assets.source,
       " have no chat template (chat_template.jinja, chat_template.json or a chat_template entry "
       "in tokenizer_config.json); prompt enhancement needs the model's chat template");
}

std::string render_gemma_chat(const GemmaChatTemplate& chat_template,
                              const std::vector<ChatMessage>& messages, const std::string& bos_token,
                              bool add_generation_prompt) {
  const GemmaChatFormat format = chat_template.format;
  LTX_CHECK(!messages.empty(), "chat template: no messages");
  std::string out = bos_token;
  size_t first = 0;
  std::string system;
  const bool has_system = messages[0].role == "system" ||
                          (format == GemmaChatFormat::Gemma4 && messages[0].role == "developer");
  if (has_system) {
    system = messages[0].content;
    first = 1;
  }
  auto role_of = [](const std::string& r) { return r == "assistant" ? std::string("model") : r; };
  if (format == GemmaChatFormat::Gemma3) {
    // The system text is folded into the first turn (untrimmed, + a blank line).
    const std::string prefix = has_system ? system + "\n\n" : std::string();
    for (size_t i = first; i < messages.size(); ++i) {
      out += "<start_of_turn>" + role_of(messages[i].role) + "\n";
      if (i == first) out += prefix;
      out += python_strip(messages[i].content) + "<end_of_turn>\n";
    }
    if (add_generation_prompt) out += "<start_of_turn>model\n";
  } else {
    if (has_system) out += "<|turn>system\n" + python_strip(system) + "<turn|>\n";
    for (size_t i = first; i < messages.size(); ++i)
      out += "<|turn>" + role_of(messages[i].role) + "\n" + python_strip(messages[i].content) +
             "<turn|>\n";
    if (add_generation_prompt) {
      out += "<|turn>model\n";
      if (chat_template.empty_thought_channel) out += "<|channel>thought\n<channel|>";
    }
  }
  return out;
}

std::string clean_response(std::string_view text) {
  std::u32string cps = utf8_to_u32(text);
  for (char32_t& cp : cps) {
    switch (cp) {
      case 0x2018:
      case 0x2019:
      case 0x2032:
        cp = U'\'';
        break;
      case 0x201C:
      case 0x201D:
        cp = U'"';
        break;
      case 0x2014:
      case 0x2013:
      case 0x2212:
        cp = U'-';
        break;
      case 0x00A0:
        cp = U' ';
        break;
      default:
        break;
    }
  }
  // Drop everything before the first letter; text without a letter is kept whole.
  size_t first = 0;
  while (first < cps.size() && !unicode_is_alpha(cps[first])) ++first;
  if (first == cps.size()) first = 0;
  std::string out;
  for (size_t i = first; i < cps.size(); ++i) append_utf8(out, cps[i]);
  return out;
}

}  // namespace ltx::text
