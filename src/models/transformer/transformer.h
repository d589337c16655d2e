#pragma once
// BasicAVTransformerBlock (reference: model/transformer/transformer.py): per stream, AdaLN-
// modulated self-attention, text cross-attention (19B: plain on the normed stream; 2.3 / 2.5:
// query AdaLN rows 6-8 and context modulated by prompt_scale_shift_table + prompt timestep), then
// audio<->video cross-attention on snapshots of both streams, then the AdaLN-modulated FFN.
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

struct BasicAVTransformerBlock {
  // video stream
  std::optional<Attention> attn1, attn2;
  std::optional<FeedForward> ff;
  Tensor scale_shift_table;         // [6|9, D]
  Tensor prompt_scale_shift_table;  // [2, D] with cross_attention_adaln
  // audio stream
  std::optional<Attention> audio_attn1, audio_attn2;
  std::optional<FeedForward> audio_ff;
  Tensor audio_scale_shift_table;         // [6|9, A]
  Tensor audio_prompt_scale_shift_table;  // [2, A]
  // audio <-> video (both streams present)
  std::optional<Attention> audio_to_video_attn;  // Q video, K/V audio
  std::optional<Attention> video_to_audio_attn;  // Q audio, K/V video
  Tensor scale_shift_table_a2v_ca_video;         // [5, D]: a2v scale, shift, v2a scale, shift, gate
  Tensor scale_shift_table_a2v_ca_audio;         // [5, A]
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
