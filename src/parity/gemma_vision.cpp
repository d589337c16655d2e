// `ltx parity gemma-vision`: the recording of tools/parity/gen_gemma_vision.py (the reference's
// enhance_i2v on a Gemma 3 with its vision tower, greedy). Weights: the Gemma root folder (or
// single-file text encoder) the recording used. From `in.image_u8` and the metadata's prompt and
// system prompt it computes, under the recording's names:
//   in.image_resized_u8  the 896 long-side resize (torch's uint8 bilinear);
//   pixel_values         Gemma3ImageProcessor;
//   vision_out, projector_out   the vision tower and the multi-modal projector;
//   input_ids, attention_mask, token_type_ids   the enhancer's model input;
//   inputs_embeds, prefill_logits_tokens   the prefill with the image features (the logits
//                        of the real tokens; the left pads' rows are left out);
//   generated_ids        greedy decoding of the metadata's max_new_tokens.
// --device cuda loads the models there (f32).
#include "models/text/gemma/enhance.h"
#include "models/text/gemma/image_processor.h"
#include "models/text/gemma/vision.h"
#include "parity/parity.h"

namespace ltx::parity {

void run_gemma_vision(Run& run) {
  const Args& args = run.args();
  LTX_CHECK(args.weights.size() == 1,
            "parity gemma-vision: pass the Gemma 3 root folder (or text-encoder file) as --weights");
  const auto meta = [&](const std::string& key) {
    const auto& m = run.io().metadata();
    const auto it = m.find(key);
    LTX_CHECK(it != m.end(), "parity gemma-vision: ", args.inputs, " has no '", key, "' metadata");
    return it->second;
  };
  const text::GemmaAssets assets = text::GemmaAssets::load(args.weights.front());
  const nn::LoadOptions load{DType::F32, args.device};
  const text::GemmaTextModel model = text::GemmaTextModel::load(assets, load);
  const text::GemmaVisionTower vision = text::GemmaVisionTower::load(assets, load);

  const Tensor image = run.io().tensor("in.image_u8");
  const Tensor resized = text::resize_aspect_ratio_preserving_u8(image, text::kEnhanceImageLongSide);
  run.emit("in.image_resized_u8", resized);
  const Tensor pixels = text::gemma3_pixel_values(resized, text::image_processor_config_of(assets));
  run.emit("pixel_values", pixels);
  const Tensor vision_out = vision.vision(pixels);
  run.emit("vision_out", vision_out);
  const Tensor features = vision.project(vision_out);
  run.emit("projector_out", features);

  const text::PromptEnhancer enhancer(assets, model);
  const text::EnhanceResult r = enhancer.prepare_i2v(meta("prompt"), meta("system_prompt"),
                                                     vision.config(), features.size(1));
  const auto T = static_cast<int64_t>(r.input_ids.size());
  std::vector<int64_t> types(r.image_tokens.begin(), r.image_tokens.end()), pos(r.input_ids.size());
  run.emit("input_ids", Tensor::from_vector(r.input_ids, {1, T}));
  run.emit("attention_mask", Tensor::from_vector(r.attention_mask, {1, T}));
  run.emit("token_type_ids", Tensor::from_vector(types, {1, T}));
  int64_t valid = 0;
  for (size_t i = 0; i < pos.size(); ++i) {
    valid += r.attention_mask[i] != 0;
    pos[i] = std::max<int64_t>(valid - 1, 0);
  }
  text::GemmaKvCache cache = model.make_cache(1, T);
  const text::GemmaPrefillImages images{r.image_tokens, features.select(0, 0)};
  std::vector<Tensor> hidden;
  const Tensor last = model.forward(Tensor::from_vector(r.input_ids, {1, T}),
                                    Tensor::from_vector(pos, {1, T}),
                                    Tensor::from_vector(r.attention_mask, {1, T}), cache, &hidden,
                                    nullptr, &images);
  run.emit("inputs_embeds", hidden.front());
  // Without the left pads' rows: fully masked queries, whose output each implementation defines.
  const int64_t first = T - valid;
  run.emit("prefill_logits_tokens", model.logits(last.narrow(1, first, T - first)));

  text::EnhanceOptions o;
  o.system_prompt = meta("system_prompt");
  o.greedy = true;
  o.max_new_tokens = std::stoll(meta("max_new_tokens"));
  const text::EnhanceResult g = enhancer.enhance_i2v(meta("prompt"), image, vision, o);
  run.emit("generated_ids",
           Tensor::from_vector(g.generated_ids, {static_cast<int64_t>(g.generated_ids.size())}));
}

}  // namespace ltx::parity
