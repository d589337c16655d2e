#pragma once
// BasicAVTransformerBlock (reference: model/transformer/transformer.py): per stream, 1. AdaLN-
// modulated self-attention, 2. text cross-attention (19B: plain on the normed stream; 2.3 / 2.5:
// the query modulated by rows shift_q / scale_q / gate_q and the context by
// prompt_scale_shift_table + prompt timestep), 3. audio<->video cross-attention on snapshots of
// both streams, 4. the AdaLN-modulated FFN.
#include <optional>

#include "backend/stream_fork.h"
#include "models/transformer/attention.h"
#include "models/transformer/feed_forward.h"
#include "models/transformer/transformer_args.h"

namespace ltx::models::transformer {

// One stream's block sizes (TransformerConfig in the reference).
struct TransformerConfig {
  int64_t dim = 0;
  int64_t heads = 0;
  int64_t d_head = 0;
  int64_t context_dim = 0;
  bool apply_gated_attention = false;
  bool cross_attention_adaln = false;
  bool ff_bias = true;
};

// Rows of a stream's scale_shift_table [6|9, D] and of its AdaLN timestep values, named and
// ordered as the reference's get_ada_values slices: 0-2 self-attention, 3-5 FFN, 6-8 the text
// cross-attention query (2.3 / 2.5).
enum class AdaRow : int64_t {
  ShiftMsa, ScaleMsa, GateMsa,
  ShiftMlp, ScaleMlp, GateMlp,
  ShiftQ, ScaleQ, GateQ,
};

// Rows of scale_shift_table_a2v_ca_{video,audio} [5, D] (get_av_ca_ada_values): the scale and
// shift of this stream's input to audio-to-video and to video-to-audio (with the cross
// scale/shift timestep), then the gate of the direction whose query is this stream (with the
// cross gate timestep).
enum class AvCaRow : int64_t { ScaleA2v, ShiftA2v, ScaleV2a, ShiftV2a, Gate };

// Rows of {audio_,}prompt_scale_shift_table [2, D] (apply_cross_attention_adaln): the text
// context's shift and scale, the prompt timestep added when there is one.
enum class PromptRow : int64_t { ShiftKv, ScaleKv };

struct BasicAVTransformerBlock {
  // video stream
  std::optional<Attention> attn1, attn2;
  std::optional<FeedForward> ff;
  Tensor scale_shift_table;         // [6|9, D], rows AdaRow
  Tensor prompt_scale_shift_table;  // [2, D] with cross_attention_adaln, rows PromptRow
  // audio stream
  std::optional<Attention> audio_attn1, audio_attn2;
  std::optional<FeedForward> audio_ff;
  Tensor audio_scale_shift_table;         // [6|9, A]
  Tensor audio_prompt_scale_shift_table;  // [2, A]
  // audio <-> video (both streams present)
  std::optional<Attention> audio_to_video_attn;  // Q video, K/V audio
  std::optional<Attention> video_to_audio_attn;  // Q audio, K/V video
  Tensor scale_shift_table_a2v_ca_video;         // [5, D], rows AvCaRow
  Tensor scale_shift_table_a2v_ca_audio;         // [5, A], rows AvCaRow
  bool cross_attention_adaln = false;
  double norm_eps = 1e-6;

  // Binds the block's weights from `w` (scoped to "transformer_blocks.<i>.").
  static BasicAVTransformerBlock load(io::WeightMap& w, const std::optional<TransformerConfig>& video,
                                      const std::optional<TransformerConfig>& audio,
                                      LTXRopeType rope_type, double norm_eps,
                                      const nn::LoadOptions& opt);

  // Updates video->x / audio->x (either may be null, not both). With `lines` (both streams
  // present), the audio half runs on its side line next to the video half (backend/stream_fork.h);
  // the block forks at its start and joins before it returns.
  void forward(TransformerArgs* video, TransformerArgs* audio,
               backend::StreamFork* lines = nullptr) const;
};

}  // namespace ltx::models::transformer
