#pragma once
// Prompt enhancement (the reference's LTXGemmaTextEncoder.enhance_t2v + generate_enhanced_prompt):
//
//   1. messages [system: the system prompt, user: "user prompt: {prompt}"];
//   2. the model's chat template (chat_template.jinja / chat_template.json of the assets) rendered
//      with add_generation_prompt, as the reference's apply_chat_template call does (no
//      enable_thinking, so the templates' default: thinking off). Not a Jinja engine: the template
//      is recognised as one of the two Gemma formats and that format is rendered --
//        Gemma 3:
//        {bos}<start_of_turn>user\n{system}\n\n{user|trim}<end_of_turn>\n<start_of_turn>model\n
//        Gemma 4:
//        {bos}<|turn>system\n{system|trim}<turn|>\n<|turn>user\n{user|trim}<turn|>\n<|turn>model\n
//        + <|channel>thought\n<channel|> when the template emits that empty thought channel with
//          thinking off (Google's 12B/26B/31B templates do; the E2B/E4B ones do not)
//      (an unrecognised template is an error);
//   3. the rendered text tokenized with the tokenizer's special tokens (Gemma 3's post-processor
//      adds a second <bos>, as the reference's processor does), left-padded to a multiple of 8 with
//      the pad id (mask 0);
//   4. generate(): Gemma 3 samples (temperature 0.7, top-k 50, 512 new tokens, seed 42 by default;
//      see generate.h: not torch's random stream), dense Gemma 4 decodes greedily with
//      no_repeat_ngram_size 5 and 600 new tokens; gemma4_unified (the LTX-2.5 text encoder) cannot
//      enhance, as in the reference;
//   5. the new tokens decoded without special tokens, then clean_response.
//
// System prompts: the reference ships them as text files (prompts/{gemma3,gemma4}_{t2v,i2v}_
// system_prompt.txt) that this project does not redistribute. Pass the text (or a file) in, or put
// the file of that name in the Gemma root folder (or its prompts/ subfolder, or next to a
// single-file text encoder); without one, enhancement fails with an error naming the file.
//
// Image-aware enhancement (the reference's enhance_i2v, when the pipeline has an --image): Gemma 3
// only (the Gemma 3 vision tower, models/text/gemma/vision.h; any other enhancer is refused naming
// what is supported). The messages are [system: the i2v system prompt, user: [image, text
// "User Raw Input Prompt: {prompt}."]]; the chat template renders the image as <start_of_image>,
// which Gemma3Processor expands to "\n\n<start_of_image>" + image_seq_length x
// <image_soft_token> + "<end_of_image>\n\n" before tokenizing; the picture goes through
// image_processor.h (the reference's 896 long-side resize, then Gemma3ImageProcessor); the
// projected image features replace the soft tokens' embeddings and the soft tokens attend to each
// other in the prefill (GemmaPrefillImages); generation as for text.
//
// CLI: `ltx generate --enhance-prompt` calls enhance_prompt() below (or PromptEncoder::enhance
// when the text encoder itself can enhance); see DEVELOPERS.md.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "models/text/gemma/chat_template.h"
#include "models/text/gemma/generate.h"
#include "models/text/gemma/model.h"
#include "models/text/gemma/image_processor.h"
#include "models/text/gemma/vision.h"
#include "models/text/gemma_assets.h"
#include "models/text/tokenizer.h"
#include "nn/module.h"

namespace ltx::text {

// "gemma3_t2v_system_prompt.txt" etc.: the reference's file name for a family's default prompt.
std::string default_system_prompt_file(GemmaFamily family, bool t2v);
// Reads a system prompt file (UTF-8); throws naming the file when it cannot be read.
std::string read_system_prompt_file(const std::string& path);
// Finds the default system prompt among the model's files (see the header comment); throws an
// error naming the file and the places searched when it is absent.
std::string find_default_system_prompt(const GemmaAssets& assets, GemmaFamily family, bool t2v);

// The reference's decoding defaults per family (GEMMA3_/GEMMA4_ENHANCE_GENERATION_KWARGS), with
// the config's EOS ids. Throws for gemma4_unified.
GenerationConfig default_enhance_generation(const GemmaTextConfig& config);

struct EnhanceOptions {
  std::string system_prompt;       // the text; when empty, system_prompt_file is read, and
  std::string system_prompt_file;  // when that is empty too, find_default_system_prompt
  std::optional<int64_t> max_new_tokens;
  uint64_t seed = 42;  // the pipelines' default (generate_enhanced_prompt); they pass --seed
  bool greedy = false;  // decode greedily instead of the family's sampling default
  // Replaces the family's decoding defaults entirely (EOS ids included) when set.
  std::optional<GenerationConfig> generation;
  bool keep_logits = false;
  // u8 RGB [H, W, 3] (media::read_image): image-aware enhancement with the Gemma 3 vision tower
  // (the i2v system prompt is the default then). Undefined: text-only enhancement.
  Tensor image;
};

struct EnhanceResult {
  std::string rendered;            // the chat-template text
  std::vector<int64_t> input_ids;  // the model input after alignment padding
  std::vector<int64_t> attention_mask;
  std::vector<int64_t> generated_ids;  // new tokens (EOS included when produced)
  std::vector<std::vector<float>> logits;
  std::string decoded;  // generated_ids decoded without special tokens
  std::string text;     // clean_response(decoded)
  // Image-aware enhancement: 1 on the image soft tokens of input_ids, and the model inputs.
  std::vector<uint8_t> image_tokens;
  Tensor pixel_values;    // [1, 3, S, S]
  Tensor image_features;  // [image_seq_length, hidden]
};

class PromptEnhancer {
 public:
  // Builds the tokenizer from `assets` (tokenizer.json + tokenizer_config.json) and checks that
  // the model can enhance (gemma3 or dense gemma4) and that the assets have a Gemma chat template.
  // `assets` and `model` must outlive the enhancer.
  PromptEnhancer(const GemmaAssets& assets, const GemmaTextModel& model);

  // The text-to-video enhancement of `prompt`.
  EnhanceResult enhance_t2v(const std::string& prompt, const EnhanceOptions& options = {}) const;
  // Steps 1-3 only: the rendered text and the padded model input.
  EnhanceResult prepare_t2v(const std::string& prompt, const std::string& system_prompt) const;

  // The image-to-video enhancement of `prompt` with `image` (u8 RGB [H, W, 3]) through `vision`
  // (Gemma 3 only). options.image is ignored.
  EnhanceResult enhance_i2v(const std::string& prompt, const Tensor& image,
                            const GemmaVisionTower& vision, const EnhanceOptions& options = {}) const;
  // The rendered text and padded model input of an i2v enhancement with `image_tokens` soft
  // tokens (the chat template's image expanded as Gemma3Processor does); image_tokens flags them.
  EnhanceResult prepare_i2v(const std::string& prompt, const std::string& system_prompt,
                            const GemmaVisionConfig& vision, int64_t image_tokens) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  GemmaChatFormat chat_format() const { return template_.format; }
  const GemmaChatTemplate& chat_template() const { return template_; }

 private:
  const GemmaAssets* assets_;
  const GemmaTextModel* model_;
  Tokenizer tokenizer_;
  GemmaChatTemplate template_;
};

// `ltx generate --enhance-prompt` in one call (the reference's generate_enhanced_prompt): loads
// the Gemma at `gemma_path` (a root folder or single-file text encoder of a gemma3 or dense gemma4
// model; gemma4_unified cannot enhance), enhances `prompt` (with options.image: image-aware, Gemma
// 3 with its vision tower only), frees the model and returns the cleaned text
// (EnhanceResult::text). Errors (no system prompt, a model that cannot enhance, no vision tower,
// an unknown chat template) throw before any generation.
std::string enhance_prompt(const std::string& gemma_path, const std::string& prompt,
                           const EnhanceOptions& options = {}, const nn::LoadOptions& load = {});

// What image-aware enhancement reads besides the weights, checked before any loading: the
// vision config (a Gemma 3 with a vision tower, else an error naming what is supported) and the
// image processor config (preprocessor_config.json, or processor_config.json's image_processor).
GemmaVisionConfig image_enhancement_vision_config(const GemmaAssets& assets);
GemmaImageProcessorConfig image_processor_config_of(const GemmaAssets& assets);

}  // namespace ltx::text
