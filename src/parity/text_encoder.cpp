// `ltx parity text-encoder --weights <text encoder .safetensors | Gemma root folder>
//  [--weights <LTX checkpoint / transformer file> [--weights <text-projection file>]]
//  --inputs text_<case>.io.safetensors` (shared/golden/README-text.md): the pipelines' prompt
// encoding (text::PromptEncoder) step by step.
//
//   * the LTX file (second --weights) is checked against the text encoder first
//     (_check_gemma_version): a mismatch is an error, as in the reference;
//   * `in.input_ids` / `in.attention_mask` are recomputed from the io file's `prompts` metadata
//     with this build's tokenizer (compared with the reference's as outputs of the same name);
//   * out.hidden_states [L+1, B, T, D] from the reference's in.input_ids / in.attention_mask, with
//     inter.layer0.self_attn_out, inter.last_layer_raw (prompt 0) and inter.rope.*_inv_freq;
//   * with an LTX file, from those hidden states: out.features.{video,audio} (prompt 0), the
//     contexts out.video_encoding / out.audio_encoding and out.encoding_mask (per prompt, as the
//     reference's PromptEncoder), and out.f64.* from the same f32 values (no f64 path on the CPU);
//   * with the io file's `enhance` metadata: the chat-template rendering and alignment padding
//     (emitted as in.enhance.input_ids / attention_mask), then greedy generation
//     (out.enhance.greedy.generated_ids and .logits). The sampled ids depend on torch's random
//     stream and are not computed.
#include <cstdio>

#include "io/safetensors.h"
#include "models/text/gemma/compat.h"
#include "models/text/gemma/enhance.h"
#include "models/text/gemma/model.h"
#include "models/text/embeddings_processor.h"
#include "models/text/gemma_tokenizer.h"
#include "models/text/prompt_encoder.h"
#include "ops/shape.h"
#include "parity/parity.h"

namespace ltx::parity {

using json = nlohmann::json;

namespace {

Tensor i64_tensor(const std::vector<int64_t>& v, const Shape& shape) {
  return Tensor::from_vector(v, shape);
}

// Emits `value` under `name` (cut to the reference's leading batch items) and its out.f64 twin
// from the same values.
void emit_with_twin(Run& run, const std::string& name, const Tensor& value) {
  const auto cut = [&](const std::string& n) {
    const Shape& ref = run.io().info(n).shape;
    return !ref.empty() && value.dim() == ref.size() && ref[0] < value.size(0)
               ? value.narrow(0, 0, ref[0])
               : value;
  };
  if (run.has(name)) run.emit(name, cut(name));
  const std::string twin = "out.f64." + name.substr(4);
  if (run.has(twin)) run.emit(twin, cut(twin).to(DType::F64));
}

// The features of prompt 0 and every prompt's contexts, as the reference's PromptEncoder makes
// them from the hidden states (one prompt at a time).
void emit_contexts(Run& run, text::PromptEncoder& enc, const std::vector<Tensor>& hidden,
                   const Tensor& mask) {
  const auto& proc = enc.embeddings_processor();
  std::vector<Tensor> first;
  for (const Tensor& h : hidden) first.push_back(h.narrow(0, 0, 1));
  const models::text::TextFeatures f = proc.features(first, mask.narrow(0, 0, 1).to(first[0].device()));
  emit_with_twin(run, "out.features.video", f.video);
  if (f.audio.defined()) emit_with_twin(run, "out.features.audio", f.audio);
  std::vector<Tensor> video, audio, masks;
  for (int64_t i = 0; i < mask.size(0); ++i) {
    const text::PromptContext c = enc.contexts(hidden, mask, i);
    video.push_back(c.video);
    if (c.audio.defined()) audio.push_back(c.audio);
    masks.push_back(c.mask);
  }
  emit_with_twin(run, "out.video_encoding", ops::concat(video, 0));
  if (!audio.empty()) emit_with_twin(run, "out.audio_encoding", ops::concat(audio, 0));
  emit_with_twin(run, "out.encoding_mask", ops::concat(masks, 0));
}

}  // namespace

void run_text_encoder(Run& run) {
  const Args& args = run.args();
  const std::string& gemma_path = args.weights[0];
  const std::vector<std::string> ltx(args.weights.begin() + 1, args.weights.end());
  text::PromptEncoderOptions po;
  po.load = nn::LoadOptions{args.dtype, args.device};  // --dtype bf16: the pipelines' GPU precision
  po.keep_loaded = true;
  if (run.has("in.input_ids")) po.max_length = run.io().info("in.input_ids").shape[1];
  text::PromptEncoder enc(gemma_path, ltx, po);  // the version check runs here
  for (const auto& w : enc.warnings()) std::printf("warning: %s\n", w.c_str());
  if (ltx.empty())
    std::printf("note: no LTX checkpoint given (second --weights): version check and contexts "
                "skipped\n");
  const text::GemmaTextConfig& config = enc.gemma_config();
  const text::GemmaAssets& assets = enc.assets();
  const text::GemmaTextModel& model = enc.text_encoder();
  std::printf("text encoder: %s, %lld layers, keys %s\n", config.model_type.c_str(),
              static_cast<long long>(config.num_layers), model.key_layout().c_str());

  // Tokenization of the io file's prompts.
  const json meta = run.io().metadata_json();
  if (meta.contains("prompts") && meta.at("prompts").is_array() && run.has("in.input_ids")) {
    std::vector<std::string> prompts;
    for (const auto& p : meta.at("prompts")) prompts.push_back(p.get<std::string>());
    const text::TokenizedBatch batch = enc.tokenize(prompts);
    run.emit("in.input_ids", batch.input_ids_tensor());
    run.emit("in.attention_mask", batch.attention_mask_tensor());
  }

  // Hidden states, then the contexts from them.
  if (run.has("in.input_ids") && run.has("in.attention_mask")) {
    const Tensor ids = run.tensor("in.input_ids", DType::I64);
    const Tensor mask = run.tensor("in.attention_mask", DType::I64);
    text::GemmaTrace trace;
    const std::vector<Tensor> hidden = model.encode(ids, mask, &trace);
    run.emit("out.hidden_states", ops::stack(hidden, 0));
    if (run.has("inter.layer0.self_attn_out"))
      run.emit("inter.layer0.self_attn_out", trace.layer0_attn_out.narrow(0, 0, 1));
    if (run.has("inter.last_layer_raw"))
      run.emit("inter.last_layer_raw", trace.last_layer_raw.narrow(0, 0, 1));
    if (!ltx.empty()) emit_contexts(run, enc, hidden, mask);
  }
  for (const auto type : {text::GemmaLayerType::Sliding, text::GemmaLayerType::Full}) {
    const std::vector<float> inv = model.rope_inv_freq(type);
    const std::string name =
        std::string("inter.rope.") + text::gemma_layer_type_name(type) + "_inv_freq";
    if (!inv.empty() && run.has(name))
      run.emit(name, Tensor::from_vector(inv, {static_cast<int64_t>(inv.size())}));
  }

  // Greedy prompt enhancement.
  if (meta.contains("enhance") && meta.at("enhance").is_object() &&
      run.has("out.enhance.greedy.generated_ids")) {
    const json& e = meta.at("enhance");
    const text::PromptEnhancer enhancer(assets, model);
    const text::EnhanceResult prepared = enhancer.prepare_t2v(
        e.value("user_prompt", std::string()), e.value("system_prompt", std::string()));
    const auto n = static_cast<int64_t>(prepared.input_ids.size());
    run.emit("in.enhance.input_ids", i64_tensor(prepared.input_ids, {1, n}));
    run.emit("in.enhance.attention_mask", i64_tensor(prepared.attention_mask, {1, n}));

    text::EnhanceOptions o;
    o.system_prompt = e.value("system_prompt", std::string());
    o.keep_logits = true;
    text::GenerationConfig g = text::default_enhance_generation(config);
    g.do_sample = false;  // the fixture's greedy switch; everything else as the reference
    g.max_new_tokens = run.io().info("out.enhance.greedy.generated_ids").shape[0];
    if (e.contains("greedy_gen_kwargs") && e.at("greedy_gen_kwargs").contains("max_new_tokens"))
      g.max_new_tokens = e.at("greedy_gen_kwargs").at("max_new_tokens").get<int64_t>();
    o.generation = g;
    const text::EnhanceResult r = enhancer.enhance_t2v(e.value("user_prompt", std::string()), o);
    const auto steps = static_cast<int64_t>(r.generated_ids.size());
    run.emit("out.enhance.greedy.generated_ids", i64_tensor(r.generated_ids, {steps}));
    std::vector<float> flat;
    for (const auto& l : r.logits) flat.insert(flat.end(), l.begin(), l.end());
    run.emit("out.enhance.greedy.logits",
             Tensor::from_vector(flat, {steps, static_cast<int64_t>(r.logits.front().size())}));
    std::printf("enhance (greedy): \"%s\" -> clean_response \"%s\"\n", r.decoded.c_str(),
                r.text.c_str());
    if (e.contains("decoded_greedy") && e.at("decoded_greedy").is_string())
      std::printf("enhance reference:  \"%s\"\n",
                  e.at("decoded_greedy").get<std::string>().c_str());
  }
}

}  // namespace ltx::parity
