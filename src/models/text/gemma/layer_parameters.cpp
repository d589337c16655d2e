#include "models/text/gemma/layer_parameters.h"

namespace ltx::text {

void for_each_layer_tensor(GemmaDecoderLayer& l, const models::TensorVisitFn& fn) {
  for (GemmaRmsNorm* n : {&l.input_layernorm, &l.post_attention_layernorm,
                          &l.pre_feedforward_layernorm, &l.post_feedforward_layernorm,
                          &l.self_attn.q_norm, &l.self_attn.k_norm, &l.self_attn.v_norm,
                          &l.post_per_layer_input_norm})
    fn(n->scale);
  for (nn::Linear* p : {&l.self_attn.q_proj, &l.self_attn.k_proj, &l.self_attn.v_proj,
                        &l.self_attn.o_proj, &l.mlp.gate_proj, &l.mlp.up_proj, &l.mlp.down_proj,
                        &l.per_layer_input_gate, &l.per_layer_projection})
    models::visit_linear(*p, fn);
  fn(l.layer_scalar);
}

}  // namespace ltx::text
