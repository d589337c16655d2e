#pragma once
// The tokenizer of a llama.cpp Gemma 3 GGUF file, built from the vocabulary the file carries
// (tokenizer.ggml.model "llama": SentencePiece BPE, tokens + scores + token types, io/llama_gguf.h)
// as the Hugging Face tokenizer.json the Gemma checkpoint ships, which transformers derives from
// the same SentencePiece model:
//
//   model.vocab     every token, by id; a user-defined token gets back the "▁" that
//                   llama.cpp's converter turned into a space ("pre-normalize user-defined spaces")
//   added_tokens    control and unknown tokens (special), user-defined tokens (not special), all
//                   matched on the raw text (normalized false)
//   model.merges    SentencePiece BPE merges the adjacent pair whose concatenation is the
//                   highest-scored normal token; transformers' converter writes that rule as
//                   merges: for each normal token, best score first (ties by id), every split into
//                   two tokens of the vocabulary (ordered by the halves' ids)
//   byte_fallback   <0xXX> tokens; unk_token the unknown-type token
//   normalizer      " " -> "▁" (prefixed by "▁" when tokenizer.ggml.add_space_prefix is true)
//   decoder         "▁" -> " ", byte fallback, fuse (and the prefix space stripped)
//
// The special tokens and the BOS / EOS template come from io::llama_cpp_tokenizer_config(), which
// build_gemma_hf_tokenizer applies as it applies a tokenizer_config.json.
#include "io/gguf.h"
#include "models/text/tokenizer.h"

namespace ltx::text {

// Throws one ltx::Error naming the file and the key when the vocabulary keys are missing,
// mistyped or inconsistent, or the tokenizer is not SentencePiece.
Tokenizer tokenizer_from_gguf(const io::GgufFile& file);

}  // namespace ltx::text
