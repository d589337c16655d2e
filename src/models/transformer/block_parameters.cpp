#include "models/transformer/block_parameters.h"

namespace ltx::models::transformer {

namespace {

void visit_attention(std::optional<Attention>& a, const TensorVisitFn& fn) {
  if (!a) return;
  for (nn::Linear* l : {&a->to_q, &a->to_k, &a->to_v, &a->to_out}) visit_linear(*l, fn);
  fn(a->q_norm);
  fn(a->k_norm);
  if (a->to_gate_logits) visit_linear(*a->to_gate_logits, fn);
}

void visit_ff(std::optional<FeedForward>& f, const TensorVisitFn& fn) {
  if (!f) return;
  visit_linear(f->proj_in, fn);
  visit_linear(f->proj_out, fn);
}

}  // namespace

void for_each_block_tensor(BasicAVTransformerBlock& b, const TensorVisitFn& fn) {
  visit_attention(b.attn1, fn);
  visit_attention(b.attn2, fn);
  visit_ff(b.ff, fn);
  fn(b.scale_shift_table);
  fn(b.prompt_scale_shift_table);
  visit_attention(b.audio_attn1, fn);
  visit_attention(b.audio_attn2, fn);
  visit_ff(b.audio_ff, fn);
  fn(b.audio_scale_shift_table);
  fn(b.audio_prompt_scale_shift_table);
  visit_attention(b.audio_to_video_attn, fn);
  visit_attention(b.video_to_audio_attn, fn);
  fn(b.scale_shift_table_a2v_ca_video);
  fn(b.scale_shift_table_a2v_ca_audio);
}

}  // namespace ltx::models::transformer
