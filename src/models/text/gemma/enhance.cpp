#include "models/text/gemma/enhance.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/input_limits.h"
#include "models/text/gemma_tokenizer.h"

namespace ltx::text {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The prompt's ids left-padded to a multiple of 8 with the pad id (mask 0 there), as the
// reference's _pad_inputs_for_attention_alignment.
void left_pad_to_eight(const std::vector<int32_t>& ids, int64_t pad, EnhanceResult& r) {
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t padded = (n + 7) / 8 * 8;
  r.input_ids.assign(static_cast<size_t>(padded - n), pad);
  r.attention_mask.assign(static_cast<size_t>(padded - n), 0);
  for (const int32_t id : ids) {
    r.input_ids.push_back(id);
    r.attention_mask.push_back(1);
  }
}


std::string read_text(const fs::path& p, const char* what) {
  return limits::read_file_within(p.string(), limits::kMaxTextFileBytes, what);
}

}  // namespace

std::string default_system_prompt_file(GemmaFamily family, bool t2v) {
  const char* f = family == GemmaFamily::Gemma3 ? "gemma3" : "gemma4";
  return str(f, t2v ? "_t2v" : "_i2v", "_system_prompt.txt");
}

std::string read_system_prompt_file(const std::string& path) {
  return read_text(path, "system prompt file");
}

std::string find_default_system_prompt(const GemmaAssets& assets, GemmaFamily family, bool t2v) {
  const std::string name = default_system_prompt_file(family, t2v);
  const fs::path src(assets.source);
  const fs::path dir = fs::is_directory(src) ? src : src.parent_path();
  const std::vector<fs::path> places = {dir / name, dir / "prompts" / name};
  for (const auto& p : places)
    if (fs::is_regular_file(p)) return read_system_prompt_file(p.string());
  fail("prompt enhancement needs a system prompt: pass one (text or file), or put the reference's ",
       name, " (packages/ltx-core/src/ltx_core/text_encoders/gemma/encoders/prompts/", name,
       " of LTX-2, not redistributed here) at ", places[0].string(), " or ", places[1].string());
}

GenerationConfig default_enhance_generation(const GemmaTextConfig& config) {
  GenerationConfig g;
  switch (config.family) {
    case GemmaFamily::Gemma3:
      g.do_sample = true;
      g.temperature = 0.7;
      g.max_new_tokens = 512;
      break;
    case GemmaFamily::Gemma4:
      g.do_sample = false;
      g.no_repeat_ngram_size = 5;
      g.max_new_tokens = 600;
      break;
    case GemmaFamily::Gemma4Unified:
      fail("prompt enhancement: ", config.source,
           " is a gemma4_unified text encoder, which cannot enhance prompts (as in the reference); "
           "use a Gemma 3 root or a dense Gemma 4 instruct model as the prompt enhancer");
  }
  g.eos_token_ids = config.eos_token_ids;
  return g;
}

PromptEnhancer::PromptEnhancer(const GemmaAssets& assets, const GemmaTextModel& model)
    : assets_(&assets),
      model_(&model),
      tokenizer_(build_gemma_hf_tokenizer(assets)),
      template_() {
  (void)default_enhance_generation(model.config());  // refuses gemma4_unified
  template_ = parse_chat_template(chat_template_of(assets), assets.source);
  LTX_CHECK(tokenizer_.bos_id().has_value(), "prompt enhancement: the tokenizer of ", assets.source,
            " has no BOS token");
}

EnhanceResult PromptEnhancer::prepare_t2v(const std::string& prompt,
                                          const std::string& system_prompt) const {
  EnhanceResult r;
  const std::vector<ChatMessage> messages = {{"system", system_prompt},
                                             {"user", "user prompt: " + prompt}};
  r.rendered =
      render_gemma_chat(template_, messages, *tokenizer_.id_to_token(*tokenizer_.bos_id()));
  const Encoding enc = tokenizer_.encode(r.rendered, true);
  left_pad_to_eight(enc.ids, tokenizer_.pad_id().value_or(0), r);
  return r;
}

namespace {

// The decoding of an enhancement: the family's defaults (seed and greedy from the options) or the
// options' own, then max_new_tokens.
GenerationConfig enhance_generation(const GemmaTextConfig& config, const EnhanceOptions& options) {
  GenerationConfig g;
  if (options.generation) {
    g = *options.generation;
  } else {
    g = default_enhance_generation(config);
    g.seed = options.seed;
    if (options.greedy) g.do_sample = false;
  }
  if (options.max_new_tokens) g.max_new_tokens = *options.max_new_tokens;
  return g;
}

std::string system_prompt_of(const EnhanceOptions& options, const GemmaAssets& assets,
                             GemmaFamily family, bool t2v) {
  return !options.system_prompt.empty()        ? options.system_prompt
         : !options.system_prompt_file.empty() ? read_system_prompt_file(options.system_prompt_file)
                                               : find_default_system_prompt(assets, family, t2v);
}

// Gemma3Processor's image_seq_length (processor_config.json), else the model's
// mm_tokens_per_image.
int64_t image_seq_length_of(const GemmaAssets& assets, const GemmaVisionConfig& vision) {
  if (assets.has_sidecar("processor_config.json")) {
    const nlohmann::json j = assets.sidecar_json("processor_config.json");
    if (j.is_object() && j.contains("image_seq_length") && j.at("image_seq_length").is_number_integer())
      return j.at("image_seq_length").get<int64_t>();
  }
  return vision.mm_tokens_per_image;
}

size_t count_occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size()))
    ++n;
  return n;
}

}  // namespace

EnhanceResult PromptEnhancer::enhance_t2v(const std::string& prompt,
                                          const EnhanceOptions& options) const {
  const std::string system = system_prompt_of(options, *assets_, model_->config().family, true);
  EnhanceResult r = prepare_t2v(prompt, system);
  const GenerationConfig g = enhance_generation(model_->config(), options);
  GenerationResult out = generate(*model_, r.input_ids, r.attention_mask, g, options.keep_logits);
  r.generated_ids = out.tokens;
  r.logits = std::move(out.logits);
  std::vector<int32_t> ids(r.generated_ids.begin(), r.generated_ids.end());
  r.decoded = tokenizer_.decode(ids, true);
  r.text = clean_response(r.decoded);
  return r;
}

EnhanceResult PromptEnhancer::prepare_i2v(const std::string& prompt,
                                          const std::string& system_prompt,
                                          const GemmaVisionConfig& vision,
                                          int64_t image_tokens) const {
  LTX_CHECK(template_.format == GemmaChatFormat::Gemma3,
            "image-aware prompt enhancement: ", assets_->source,
            " does not have a Gemma 3 chat template; only Gemma 3 enhances with an image");
  LTX_CHECK(image_tokens > 0, "image-aware prompt enhancement: no image tokens");
  auto token = [&](int64_t id, const char* what) {
    const auto t = id >= 0 && id <= INT32_MAX ? tokenizer_.id_to_token(static_cast<int32_t>(id))
                                              : std::nullopt;
    LTX_CHECK(t.has_value(), "image-aware prompt enhancement: the tokenizer of ", assets_->source,
              " has no ", what, " token (id ", id, " in the config)");
    return *t;
  };
  const std::string boi = token(vision.boi_token_id, "start-of-image");
  const std::string eoi = token(vision.eoi_token_id, "end-of-image");
  const std::string soft = token(vision.image_token_id, "image soft");
  EnhanceResult r;
  const std::vector<ChatMessage> messages = {
      {"system", system_prompt}, {"user", boi + "User Raw Input Prompt: " + prompt + "."}};
  r.rendered =
      render_gemma_chat(template_, messages, *tokenizer_.id_to_token(*tokenizer_.bos_id()));
  const size_t images = count_occurrences(r.rendered, boi);
  LTX_CHECK(images == 1, "image-aware prompt enhancement: the prompt text holds ", images,
            " image markers (", boi, ") for 1 image; remove ", boi,
            " from the prompt and the system prompt");
  std::string sequence = "\n\n" + boi;
  for (int64_t i = 0; i < image_tokens; ++i) sequence += soft;
  sequence += eoi + "\n\n";
  std::string expanded = r.rendered;
  expanded.replace(expanded.find(boi), boi.size(), sequence);

  const Encoding enc = tokenizer_.encode(expanded, true);
  left_pad_to_eight(enc.ids, tokenizer_.pad_id().value_or(0), r);
  int64_t found = 0;
  r.image_tokens.resize(r.input_ids.size());
  for (size_t i = 0; i < r.input_ids.size(); ++i) {
    r.image_tokens[i] = r.attention_mask[i] != 0 && r.input_ids[i] == vision.image_token_id;
    found += r.image_tokens[i];
  }
  LTX_CHECK(found == image_tokens, "image-aware prompt enhancement: the tokenizer of ",
            assets_->source, " produced ", found, " image soft tokens for ", image_tokens,
            " (is ", soft, " a special token of tokenizer.json?)");
  return r;
}

EnhanceResult PromptEnhancer::enhance_i2v(const std::string& prompt, const Tensor& image,
                                          const GemmaVisionTower& vision,
                                          const EnhanceOptions& options) const {
  const GemmaVisionConfig& vc = vision.config();
  const std::string system = system_prompt_of(options, *assets_, model_->config().family, false);
  const GemmaImageProcessorConfig pc = image_processor_config_of(*assets_);
  LTX_CHECK(!pc.do_resize || (pc.height == vc.image_size && pc.width == vc.image_size),
            "image-aware prompt enhancement: the image processor of ", assets_->source,
            " resizes to ", pc.width, "x", pc.height, " but the vision tower takes ",
            vc.image_size, "x", vc.image_size);
  const int64_t seq = image_seq_length_of(*assets_, vc);
  LTX_CHECK(seq == vc.mm_tokens_per_image, "image-aware prompt enhancement: ", assets_->source,
            ": processor image_seq_length ", seq, " != the model's mm_tokens_per_image ",
            vc.mm_tokens_per_image);
  const Tensor pixels =
      gemma3_pixel_values(resize_aspect_ratio_preserving_u8(image, kEnhanceImageLongSide), pc);
  const Tensor features = vision.encode(pixels).select(0, 0);  // [tokens, hidden]
  EnhanceResult r = prepare_i2v(prompt, system, vc, features.size(0));
  r.pixel_values = pixels;
  r.image_features = features;
  const GemmaPrefillImages prefill{r.image_tokens, features};
  const GenerationConfig g = enhance_generation(model_->config(), options);
  GenerationResult out =
      generate(*model_, r.input_ids, r.attention_mask, g, options.keep_logits, &prefill);
  r.generated_ids = out.tokens;
  r.logits = std::move(out.logits);
  std::vector<int32_t> ids(r.generated_ids.begin(), r.generated_ids.end());
  r.decoded = tokenizer_.decode(ids, true);
  r.text = clean_response(r.decoded);
  return r;
}

GemmaVisionConfig image_enhancement_vision_config(const GemmaAssets& assets) {
  LTX_CHECK(!assets.llama_gguf, "--enhance-prompt with an image (image-aware prompt enhancement): ",
            assets.source, " is a llama.cpp Gemma 3 GGUF, which holds the language model only "
            "(llama.cpp keeps the vision tower in a separate mmproj file, which ltx does not "
            "read); pass a Gemma 3 root folder or single-file text encoder as "
            "--prompt-enhancer-gemma-root, or drop --enhance-prompt");
  return GemmaVisionConfig::from_json(assets.config, assets.source);
}

GemmaImageProcessorConfig image_processor_config_of(const GemmaAssets& assets) {
  if (assets.has_sidecar("preprocessor_config.json"))
    return GemmaImageProcessorConfig::from_json(assets.sidecar_json("preprocessor_config.json"),
                                                assets.source + " preprocessor_config.json");
  if (assets.has_sidecar("processor_config.json")) {
    const nlohmann::json j = assets.sidecar_json("processor_config.json");
    if (j.is_object() && j.contains("image_processor") && j.at("image_processor").is_object())
      return GemmaImageProcessorConfig::from_json(j.at("image_processor"),
                                                  assets.source + " processor_config.json");
  }
  fail("image-aware prompt enhancement: ", assets.source,
       " has no image processor config (preprocessor_config.json, or an image_processor entry in "
       "processor_config.json); copy the Gemma 3 checkpoint's preprocessor_config.json next to "
       "its config.json");
}

std::string enhance_prompt(const std::string& gemma_path, const std::string& prompt,
                           const EnhanceOptions& options, const nn::LoadOptions& load) {
  const GemmaAssets assets = GemmaAssets::load(gemma_path);
  const GemmaTextConfig config = GemmaTextConfig::from_json(assets.config, gemma_path);
  (void)default_enhance_generation(config);  // refuses gemma4_unified before loading weights
  (void)parse_chat_template(chat_template_of(assets), assets.source);
  const bool with_image = options.image.defined();
  std::optional<GemmaVisionConfig> vision_config;
  if (with_image) {
    vision_config = image_enhancement_vision_config(assets);
    (void)image_processor_config_of(assets);
  }
  EnhanceOptions o = options;
  if (o.system_prompt.empty())
    o.system_prompt = !o.system_prompt_file.empty()
                          ? read_system_prompt_file(o.system_prompt_file)
                          : find_default_system_prompt(assets, config.family, !with_image);
  if (with_image) {
    const GemmaVisionTower vision = GemmaVisionTower::load(*vision_config, assets.weight_paths, load);
    const GemmaTextModel model = GemmaTextModel::load(assets, load);
    return PromptEnhancer(assets, model).enhance_i2v(prompt, o.image, vision, o).text;
  }
  const GemmaTextModel model = GemmaTextModel::load(assets, load);
  return PromptEnhancer(assets, model).enhance_t2v(prompt, o).text;
}

}  // namespace ltx::text
