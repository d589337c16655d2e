#pragma once
// PromptEncoder: the text-encoding step of every pipeline (the reference's
// ltx_pipelines.utils.blocks.PromptEncoder), prompts -> the diffusion transformer's contexts.
//
//   prompts --GemmaPromptTokenizer: strip, BOS, left pad to 1024--> ids, mask [N, 1024]
//           --Gemma, one batched forward--> every hidden state (L + 1 of [N, 1024, D])
//           --EmbeddingsProcessor, per prompt--> video context [1, 1024, Wv], audio context
//
//   ltx::text::PromptEncoder enc("gemma-3-12b-it/", {"ltx-2.3-22b-dev.safetensors"});
//   std::vector<ltx::text::PromptContext> ctx = enc.encode({prompt, negative_prompt});
//   // ctx[0].video -> the transformer's video context, ctx[0].audio -> its audio context
//
// Files, as the reference's ModelPaths names them:
//   * text_encoder: a single-file text encoder (.safetensors with the embedded tokenizer and
//     configs) or a Gemma root folder;
//   * embeddings: the reference's embeddings_weight_paths, i.e. the monolithic LTX checkpoint
//     (LTX-2 19B, 2.3), or for split packs the transformer file and the file holding
//     text_embedding_projection.* (the 2.5 text encoder, or a separate text-projection file).
//     The config and the version stamps come from the first file; tensors of all files are
//     merged. When no given file holds text_embedding_projection.* and the text encoder is a
//     single file, it is appended (ModelPaths.from_split always passes it).
// Construction reads configs only (cheap) and runs the reference's checks: the text encoder /
// checkpoint version check (_check_gemma_version; a mismatch throws naming both files) and the
// strict embeddings-processor config. Weights are loaded when encode() needs them.
//
// Lifecycle (memory): by default encode() does what the reference does -- load Gemma, run it,
// free it, then load, run and free the feature extractor + connectors -- so at most one of them
// is resident. With keep_loaded both stay resident across encode() calls until release().
// Streamed Gemma layers (options.streaming) are page-locked when Gemma stays loaded (keep_loaded,
// or enhance() before encode()); for the one forward of a default encode() they are read from
// where they were bound instead (BlockStreaming::from_file).
// Checkpoints without an audio connector (video-only) give no audio context.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/block_streaming.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma/enhance.h"
#include "models/text/gemma_tokenizer.h"
#include "nn/module.h"

namespace ltx::models::text {
class EmbeddingsProcessor;
struct EmbeddingsProcessorConfig;
}

namespace ltx::text {


struct PromptEncoderOptions {
  nn::LoadOptions load;                  // device and weight dtype of every text-path model
  int64_t max_length = kGemmaMaxLength;  // tokens per prompt (the reference's 1024)
  bool keep_loaded = false;              // see the header comment
  models::BlockStreaming streaming;      // Gemma's layers streamed from host memory (--offload)
};

// Where the models of a PromptEncoder built from memory get their weights: each a fresh map per
// load, named as the model names its parameters (Gemma's language model: "embed_tokens.weight",
// "layers.0. ..."; the processor: "feature_extractor. ...", "video_connector. ...",
// "audio_connector. ...").
struct PromptEncoderWeights {
  std::function<io::WeightMap()> text_encoder;
  std::function<io::WeightMap()> embeddings_processor;
};

// What the transformer consumes for one prompt.
struct PromptContext {
  Tensor video;  // [1, T, video width]: the video context
  Tensor audio;  // [1, T, audio width]; undefined for video-only checkpoints
  // [1, T] I64, all ones: the registers replaced the pads. The reference's pipelines give the
  // transformer no context mask; kept for callers that want one.
  Tensor mask;
};

class PromptEncoder {
 public:
  // `embeddings` may be empty: then only tokenize() / hidden_states() work (no version check).
  PromptEncoder(const std::string& text_encoder, std::vector<std::string> embeddings,
                PromptEncoderOptions options = {});
  // The same encoder over weight maps given by the caller instead of the files (benchmarks with
  // random weights: io::WeightMap::synthetic): `assets` gives the tokenizer and the Gemma config
  // (its weight files are not read), `processor` the feature extractor's and connectors' config.
  // No version check runs: there is no checkpoint to compare.
  PromptEncoder(GemmaAssets assets, const models::text::EmbeddingsProcessorConfig& processor,
                PromptEncoderWeights weights, PromptEncoderOptions options = {});
  ~PromptEncoder();
  PromptEncoder(PromptEncoder&&) noexcept;
  PromptEncoder& operator=(PromptEncoder&&) noexcept;

  // The contexts of every prompt, in order (what the reference's PromptEncoder returns).
  std::vector<PromptContext> encode(const std::vector<std::string>& prompts);

  // Prompt enhancement with this text encoder (the reference's enhance_first_prompt when the
  // encoder can generate: gemma3; gemma4_unified throws -- use enhance_prompt() with a separate
  // enhancer). Returns the cleaned text. Gemma stays loaded for the encode() that follows. With
  // options.image, the Gemma 3 vision tower loads for this call only (image-aware enhancement).
  std::string enhance(const std::string& prompt, const EnhanceOptions& options = {});

  // The steps of encode(), for tools and tests.
  TokenizedBatch tokenize(const std::vector<std::string>& prompts) const;
  // Gemma's hidden states (L + 1 tensors [B, T, D]) of ids / mask [B, T] (I64).
  std::vector<Tensor> hidden_states(const Tensor& input_ids, const Tensor& attention_mask);
  // The contexts of batch item `index` of hidden states as hidden_states() returns them.
  PromptContext contexts(const std::vector<Tensor>& hidden_states, const Tensor& attention_mask,
                         int64_t index = 0);

  // The loaded models (loaded on first use; release() frees them).
  const GemmaTextModel& text_encoder();
  const models::text::EmbeddingsProcessor& embeddings_processor();
  void release_text_encoder();
  void release_embeddings_processor();
  void release() {
    release_text_encoder();
    release_embeddings_processor();
  }
  bool text_encoder_loaded() const;
  bool embeddings_processor_loaded() const;

  bool has_audio() const;  // the checkpoint has an audio connector
  const GemmaAssets& assets() const;
  const GemmaTextConfig& gemma_config() const;
  const std::string& text_encoder_path() const;
  const std::vector<std::string>& embeddings_paths() const;  // after the TE-file rule above
  const std::vector<std::string>& warnings() const;          // version check skipped, and why

 private:
  const GemmaTextModel& load_text_encoder(const models::BlockStreaming& streaming);

  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ltx::text
