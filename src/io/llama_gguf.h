#pragma once
// llama.cpp's GGUF layout of a Gemma 3 language model (what convert_hf_to_gguf.py's Gemma3Model
// writes and llama-quantize keeps: `gemma-3-12b-it-Q4_K_M.gguf` and the like), read as the
// Hugging Face model it was converted from. Data, not code paths in the model:
//
//   * names: `token_embd` = embed_tokens, `output_norm` = norm, `blk.N.` = layers.N. with
//     attn_norm = input_layernorm, attn_q / attn_k / attn_v / attn_output =
//     self_attn.{q,k,v,o}_proj, attn_q_norm / attn_k_norm = self_attn.{q,k}_norm,
//     post_attention_norm = post_attention_layernorm, ffn_norm = pre_feedforward_layernorm,
//     post_ffw_norm = post_feedforward_layernorm, ffn_gate / ffn_up / ffn_down =
//     mlp.{gate,up,down}_proj. Q and K are not permuted (Gemma's RoPE is rotate-half, llama.cpp's
//     NEOX mode). An `output.weight` (an untied lm_head; Gemma 3 ties it) is not read.
//   * every RMSNorm weight (the names ending in "norm.weight" in HF's naming, the q/k norms and the
//     final norm included) is stored as 1 + w: Gemma3RMSNorm's multiplier itself.
//   * token_embd has the tokenizer's rows only (the converter drops HF's padding rows past the
//     vocabulary, 262144 of 262208 for the published models).
//   * the vision tower is not in the file (llama.cpp keeps it in a separate mmproj file).
//
// The HF config is rebuilt from the `gemma3.*` metadata with what llama.cpp's loader fixes for this
// architecture where the file says nothing: every 6th layer global (or
// gemma3.attention.sliding_window_pattern), sliding layers' RoPE base 10000 (or
// gemma3.rope.freq_base_swa), query_pre_attn_scalar = key_length (hidden / heads for the 62-layer
// 27B; gemma3.attention.scale when the file has it).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"
#include "io/gguf.h"
#include "io/layouts.h"
#include "io/weights.h"

namespace ltx::io {

// general.architecture of the files this header reads.
inline constexpr const char* kLlamaCppGemma3Arch = "gemma3";

// True when the file's general.architecture is "gemma3".
bool is_llama_cpp_gemma3(const GgufFile& file);
// Throws one ltx::Error naming the file and general.architecture unless it is "gemma3" (what a
// text encoder GGUF must be: a transformer GGUF or another LLM given as the text encoder).
void require_llama_cpp_gemma3(const GgufFile& file);

// The renames llama.cpp name -> language-model name (as GemmaTextModel binds them:
// "embed_tokens.weight", "layers.0.self_attn.q_proj.weight", ...), applied in order, each to every
// occurrence; for the docs and tests. llama_cpp_gemma3_key_map() keeps token_embd., output_norm.
// and blk. and applies them.
const std::vector<KeyRename>& llama_cpp_gemma3_renames();
KeyMap llama_cpp_gemma3_key_map();
// One name through the key map (nullopt for names it does not keep).
std::optional<std::string> llama_cpp_gemma3_model_name(const std::string& gguf_name);
// The same names under the google/gemma-3 checkpoint's prefix ("language_model.model."), for
// classifying the tensors as a Gemma text encoder.
std::optional<std::string> llama_cpp_gemma3_hf_name(const std::string& gguf_name);
// True for a language-model name whose stored value is 1 + w (every RMSNorm weight).
bool llama_cpp_norm_stored_plus_one(const std::string& model_name);

// The HF config (Gemma3Config: model_type "gemma3" with a text_config) of the file, from its
// metadata and token_embd's shape. Throws one ltx::Error naming the file and the key for a missing
// or mistyped key, an unsupported RoPE scaling, or a metadata value that disagrees with a
// tensor's shape (every tensor of the language model is checked: missing ones and misshaped ones
// are listed, with the metadata keys their expected shape comes from).
nlohmann::json llama_cpp_gemma3_config(const GgufFile& file);

// What a tokenizer_config.json would say, from the tokenizer.ggml.* metadata: bos / eos / pad /
// unk tokens (by their ids), add_bos_token (default true, as llama.cpp's SPM vocabulary),
// add_eos_token (default false) and chat_template (tokenizer.chat_template) when present.
// Throws naming the file and the key when an id is out of the vocabulary.
nlohmann::json llama_cpp_tokenizer_config(const GgufFile& file);

// The GGUF's tokenizer.ggml token types (llama.cpp's llama_token_type).
enum class LlamaTokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// The SentencePiece vocabulary of a GGUF file (tokenizer.ggml.model "llama"): tokens, scores and
// types, all the same length. Throws one ltx::Error naming the file and the key when a key is
// missing or mistyped, the lengths differ, or the tokenizer model is not "llama" (SentencePiece).
struct LlamaSpmVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<LlamaTokenType> types;
  bool add_space_prefix = true;  // tokenizer.ggml.add_space_prefix (llama.cpp's default: true)
};
LlamaSpmVocab llama_cpp_spm_vocab(const GgufFile& file);

}  // namespace ltx::io
