#pragma once
// Autoregressive decoding with a KV cache, as HF's generate() runs it for one sequence:
//
//   * the prompt (left-padded; mask 0 on pads) is run once, then one token per step against the
//     cache; positions are cumsum(mask) - 1 (HF's generate), pads keep position 0;
//   * logits of the last position (lm_head tied to embed_tokens, final_logit_softcapping);
//   * processors in HF's order: no_repeat_ngram_size (bans every token that would repeat an n-gram
//     of the whole sequence, prompt and pads included), then for sampling temperature, top-k and
//     top-p; greedy picks the first maximal logit (torch.argmax);
//   * stops after max_new_tokens or when an EOS id is produced (it is kept in the output).
//
// Sampling draws from softmax(processed logits) with its own seeded generator: the structure of
// torch's multinomial (argmax of p / q with q ~ Exp(1)) on this project's MT19937 stream. It is
// NOT torch's random stream (torch's CPU exponential_ uses MKL's generator), so sampled tokens are
// reproducible here for a given seed but differ from the reference's; greedy decoding matches it.
#include <cstdint>
#include <vector>

#include "models/text/gemma/model.h"

namespace ltx::text {

struct GenerationConfig {
  int64_t max_new_tokens = 20;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;  // HF's default; 0 disables
  double top_p = 1.0;  // 1 disables
  int64_t no_repeat_ngram_size = 0;
  uint64_t seed = 42;
  std::vector<int64_t> eos_token_ids;  // empty: never stop early
};

struct GenerationResult {
  std::vector<int64_t> tokens;             // the new tokens (the EOS included when produced)
  std::vector<std::vector<float>> logits;  // raw logits per step (when requested)
};

// input_ids / attention_mask: one prompt (mask 1 on tokens, 0 on the left pads). `images`: the
// prompt's image soft tokens and their features (image-aware enhancement; used by the prefill).
GenerationResult generate(const GemmaTextModel& model, const std::vector<int64_t>& input_ids,
                          const std::vector<int64_t>& attention_mask,
                          const GenerationConfig& config, bool keep_logits = false,
                          const GemmaPrefillImages* images = nullptr);

// The processors applied to one step's logits (in place); exposed for tests.
// `sequence`: every token so far (prompt incl. pads, then the generated ones).
void apply_no_repeat_ngram(std::vector<float>& logits, const std::vector<int64_t>& sequence,
                           int64_t n);
// Temperature, top-k, top-p (HF's warpers): filtered entries become -inf.
void apply_sampling_warpers(std::vector<float>& logits, double temperature, int64_t top_k,
                            double top_p);

}  // namespace ltx::text
