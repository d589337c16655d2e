// `ltx parity connector`: the text embeddings processor (feature extractor + video/audio
// embeddings connectors) on a golden `<case>.textproc.io.safetensors` file (shared/golden/README.md,
// "Text-embedding connectors").
//
// --weights <case>.weights.safetensors [--weights <text-encoder / text_proj file>]: the files of
// the reference's embeddings_weight_paths; the config comes from the first one, the tensors of all
// are merged.
// Inputs: in.hidden_states [B, T, D, L] (the Gemma tuple stacked on the last dim) and
// in.attention_mask [B, T]. An io file of the text-encoder layout (`text_<case>.io`: Gemma's tuple
// as out.hidden_states [L, B, T, D], features of prompt 0 only) is accepted too.
// The Gemma dims come from the io metadata `gemma_text_config` when present, else from the shape.
// `out.f64.*` (f64 compute) is not computed: the CPU backend computes in f32 only.
#include <cstdio>

#include "models/text/embeddings_processor.h"
#include "parity/parity.h"

namespace ltx::parity {

namespace {

namespace txt = models::text;

// out.* tensors may cover only the first prompts of the batch (the text-encoder io files record
// the features of prompt 0): emit that many.
void emit_batch_prefix(Run& run, const std::string& name, const Tensor& value) {
  Tensor v = value;
  if (run.has(name)) {
    const Shape& ref = run.io().info(name).shape;
    if (ref.size() == v.dim() && ref[0] < v.size(0)) v = v.narrow(0, 0, ref[0]);
  }
  run.emit(name, v);
}

}  // namespace

void run_connector(Run& run) {
  const Args& args = run.args();
  const Device device = args.device;
  const nn::LoadOptions opt{args.dtype, device};  // --dtype bf16: the pipelines' GPU precision

  Tensor hidden;  // [B, T, D, L]
  if (run.has("in.hidden_states")) {
    hidden = run.tensor("in.hidden_states");
    LTX_CHECK(hidden.dim() == 4, "parity connector: in.hidden_states must be [B, T, D, L], got ",
              hidden.describe());
  } else {
    LTX_CHECK(run.has("out.hidden_states"), "parity connector: the io file '", run.io().path(),
              "' has neither in.hidden_states ([B, T, D, L]) nor out.hidden_states ([L, B, T, D])");
    const Tensor layers = run.tensor("out.hidden_states");
    LTX_CHECK(layers.dim() == 4, "parity connector: out.hidden_states must be [L, B, T, D], got ",
              layers.describe());
    hidden = layers.permute({1, 2, 3, 0}).contiguous();
  }
  const Tensor mask = run.tensor("in.attention_mask", DType::I64);

  txt::GemmaTextDims dims{hidden.size(2), hidden.size(3) - 1};
  const nlohmann::json gemma = run.io().metadata_json("gemma_text_config");
  if (gemma.is_object() && gemma.contains("hidden_size") && gemma.contains("num_hidden_layers")) {
    LTX_CHECK(gemma["hidden_size"].is_number_integer() && gemma["num_hidden_layers"].is_number_integer(),
              "parity connector: the io metadata gemma_text_config must hold integers, got ",
              gemma.dump());
    dims.hidden_size = gemma["hidden_size"].get<int64_t>();
    dims.num_hidden_layers = gemma["num_hidden_layers"].get<int64_t>();
  }

  const txt::EmbeddingsProcessor proc = txt::EmbeddingsProcessor::from_files(args.weights, dims, opt);
  const auto& c = proc.config();
  std::printf("connector: feature extractor %s, video connector %lld x %lld (%lld blocks)",
              txt::feature_extractor_version_name(c.feature_extractor.version),
              static_cast<long long>(c.video_connector.num_attention_heads),
              static_cast<long long>(c.video_connector.attention_head_dim),
              static_cast<long long>(c.video_connector.num_layers));
  if (c.audio)
    std::printf(", audio connector %lld x %lld (%lld blocks)\n",
                static_cast<long long>(c.audio_connector.num_attention_heads),
                static_cast<long long>(c.audio_connector.attention_head_dim),
                static_cast<long long>(c.audio_connector.num_layers));
  else
    std::printf(", video-only (no audio connector)\n");

  const Tensor h = hidden.to(device), m = mask.to(device);
  const txt::TextFeatures f = proc.features(h, m);
  emit_batch_prefix(run, "out.features.video", f.video);
  if (f.audio.defined()) emit_batch_prefix(run, "out.features.audio", f.audio);
  const txt::EmbeddingsProcessorOutput o = proc.process_hidden_states(h, m);
  emit_batch_prefix(run, "out.video_encoding", o.video_encoding);
  if (o.audio_encoding.defined()) emit_batch_prefix(run, "out.audio_encoding", o.audio_encoding);
  emit_batch_prefix(run, "out.encoding_mask", o.attention_mask);

  if (!run.names_with_prefix("out.f64.").empty())
    std::fprintf(stderr, "connector: out.f64.* not computed: the CPU backend computes in f32 only\n");
}

}  // namespace ltx::parity
