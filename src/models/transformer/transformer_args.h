#pragma once
// Per-stream inputs of the transformer blocks and the preprocessing that makes them (reference:
// model/transformer/transformer_args.py): patchify_proj (+ the 2.5 keyframe embedding), AdaLN of
// the per-token timesteps, the prompt AdaLN of sigma (2.3 / 2.5), the 19B caption projection, text
// and self-attention masks as additive biases, RoPE tables, and, when the other stream is present,
// the cross-modal RoPE and the A/V cross-attention AdaLN inputs.
#include <functional>
#include <string>
#include <vector>

#include "models/transformer/adaln.h"
#include "models/transformer/modality.h"
#include "models/transformer/perturbations.h"
#include "models/transformer/rope.h"
#include "models/transformer/text_kv_cache.h"
#include "models/transformer/text_projection.h"

namespace ltx::models::transformer {

// Receives named intermediates ("video.x_in", "block0.audio_x", ...) for bisecting; may be empty.
using Observer = std::function<void(const std::string& name, const Tensor& value)>;

struct TransformerArgs {
  Tensor x;                  // [B, T, D] residual stream
  Tensor context;            // [B, L, D]
  Tensor context_mask;       // additive text bias ([B, 1, 1, L] from an integer mask) or undefined
  std::vector<int64_t> context_groups;  // Modality::context_groups (empty: all samples distinct)
  TextKvCache* text_kv_cache = nullptr;  // Modality::text_kv_cache
  int64_t block_index = 0;               // the block running (set by the model's block loop)
  int stream = 0;                        // 0 video, 1 audio (the cache's key)
  Tensor timesteps;          // AdaLN values [B, T', k * D] (T' = T for per-token timesteps,
                             // the number of runs with timestep_run_ends)
  // Runs of equal timesteps along the tokens (ops::Summed::run_ends), when timesteps and
  // cross_scale_shift_timestep hold one row per run; empty otherwise.
  std::vector<int64_t> timestep_run_ends;
  Tensor embedded_timestep;  // [B, T', D] (T' = T for per-token timesteps, also with runs)
  RopeTables positional_embeddings;
  RopeTables cross_positional_embeddings;  // undefined unless the other stream is present
  Tensor cross_scale_shift_timestep;       // [B, T', 4 * D] (per run with timestep_run_ends)
  Tensor cross_gate_timestep;              // [B, 1, D]
  bool enabled = true;
  Tensor prompt_timestep;      // [B, 1, 2 * D] or undefined
  Tensor self_attention_mask;  // additive [B, 1, T, T] or undefined

  // This block's perturbation state (BlockPerturbationsProcessor).
  Tensor self_attn_perturbation_mask;  // [B, 1, 1] when only some samples skip self-attention
  bool self_attn_all_perturbed = false;
  // [B, 1, 1] when some (not all) samples skip the A/V cross-attention; undefined when none do
  // (multiplying by ones is exact, so it is left out) or all do (then cross_attn_skip_all).
  Tensor cross_attn_perturbation_mask;
  bool cross_attn_skip_all = false;
};

// Attaches block `block`'s perturbation masks and flags for one stream.
void apply_block_perturbations(TransformerArgs& args, const BatchedPerturbationConfig& perturbations,
                               int64_t block, PerturbationType self_type, PerturbationType cross_type);

// [B, T, T] strengths in [0, 1] -> additive [B, 1, T, T] of `dtype` (f32 or bf16, the model's):
// 1 -> 0, v > 0 -> log v (taken in f32), v <= 0 -> that dtype's minimum.
Tensor self_attention_bias(const Tensor& attention_mask, DType dtype = DType::F32);
// Integer/bool [B, L] (1 = keep) -> additive [B, 1, 1, L] of `dtype` (0 or -max of that dtype);
// float masks are already additive and returned unchanged, as the reference does.
Tensor context_attention_bias(const Tensor& context_mask, DType dtype = DType::F32);

struct TransformerArgsPreprocessor {
  const nn::Linear* patchify_proj = nullptr;
  // The model dtype (the weights'): latents, context, RoPE tables and masks are cast to it, so that
  // with bf16 weights the activations are bf16 where the reference's are; the timestep sinusoid
  // stays f32 until the embedding's first linear (see timestep_embedding.h).
  DType dtype = DType::F32;
  const AdaLayerNormSingle* adaln = nullptr;
  int64_t inner_dim = 0;
  std::vector<double> max_pos;
  int64_t num_attention_heads = 0;
  double timestep_scale_multiplier = 1000;
  bool double_precision_rope = false;
  double positional_embedding_theta = 10000;
  LTXRopeType rope_type = LTXRopeType::Split;
  const PixArtAlphaTextProjection* caption_projection = nullptr;  // 19B
  const AdaLayerNormSingle* prompt_adaln = nullptr;               // 2.3 / 2.5
  const Tensor* keyframes_embedding = nullptr;                    // [1, D] (2.5)

  // `name` ("video"/"audio") prefixes the observer's names.
  TransformerArgs prepare(const Modality& modality, const std::string& name,
                          const Observer& observer) const;
  // AdaLN of timesteps * timestep_scale_multiplier -> {[B, T', k D], [B, T', D]}. With `runs`
  // (Modality::timestep_runs of per-token timesteps): the AdaLN of each run's first timestep,
  // expanded to the run's tokens; with `run_ends` too, the first tensor stays one row per run of
  // the samples' common runs (every sample's run boundaries together, at most
  // ops::kMaxSummedRuns of them) and *run_ends receives their ends (left empty when the runs do
  // not fit: then expanded as without it). The second tensor is always per token.
  std::pair<Tensor, Tensor> prepare_timestep(const Tensor& timestep, const AdaLayerNormSingle& adaln,
                                             int64_t batch_size,
                                             const std::vector<std::vector<int64_t>>& runs = {},
                                             std::vector<int64_t>* run_ends = nullptr) const;
  RopeTables prepare_positional_embeddings(const Tensor& positions, int64_t dim,
                                           const std::vector<double>& max_pos) const;
};

struct MultiModalTransformerArgsPreprocessor {
  TransformerArgsPreprocessor simple;
  const AdaLayerNormSingle* cross_scale_shift_adaln = nullptr;
  const AdaLayerNormSingle* cross_gate_adaln = nullptr;
  double cross_pe_max_pos = 20;
  int64_t audio_cross_attention_dim = 0;
  double av_ca_timestep_scale_multiplier = 1;

  // Without `cross_modality` this is the simple preprocessor.
  TransformerArgs prepare(const Modality& modality, const Modality* cross_modality,
                          const std::string& name, const Observer& observer) const;
};

}  // namespace ltx::models::transformer
