#include "models/transformer/transformer.h"

#include <functional>
#include <utility>

#include "ops/elementwise.h"
#include "ops/norm.h"
#include "quantization/ggml_dequant.h"

namespace ltx::models::transformer {

namespace {

// Row `row` of an AdaLN table [K, D] plus the matching slice of the timestep values [B, T, K*D]
// (get_ada_values): [B, T, D]. Lazy: the consuming op (rms_norm_modulate, modulate, gated_add)
// forms the sum per element, bit-identical to materialising it with ops::add. With `run_ends`
// (TransformerArgs::timestep_run_ends) the timestep values hold one row per run of tokens.
ops::Summed ada_value(const Tensor& table, const Tensor& timestep, int64_t row,
                      const std::vector<int64_t>& run_ends) {
  const int64_t k = table.size(0);
  const Tensor ts = timestep.view({timestep.size(0), timestep.size(1), k, -1});
  return {table.select(0, row), ts.select(2, row), run_ends};
}

// The scale and shift of one AdaLN input, ada_zero(x) = rms_norm(x) * (1 + scale) + shift.
struct AdaNorm {
  ops::Summed scale, shift;
};

// ada_zero as one fused op; equal bit for bit to ops::modulate(rms_norm(x), scale, shift)
// (tests/ops, tests/cuda).
Tensor ada_zero(const Tensor& x, const AdaNorm& n, double eps) {
  return ops::rms_norm_modulate(x, n.scale, n.shift, eps);
}

// The end of a step, x + y * gate [* mask] (the reference's post_sa_function and the residual
// adds after it), with the AdaLN inputs that the next step reads of the new x: `norm` / `norm2`
// (null: not wanted) give `h` / `h2`. Without a mask the norms come out of the residual's own
// pass (the fused ops, each bit for bit the residual followed by ada_zero); with one, the
// reference's order: (y * gate) * mask, the residual add, then the norms.
struct Residual {
  Tensor x;
  Tensor h, h2;  // ada_zero(x) with `norm`, `norm2`
};
Residual gated_residual(const Tensor& x, const Tensor& y, const ops::Summed& gate, const Tensor& mask,
                        double eps, const AdaNorm* norm = nullptr, const AdaNorm* norm2 = nullptr) {
  Residual r;
  if (mask.defined()) {
    r.x = ops::gated_add(x, ops::mul(y, ops::materialize(gate)), mask);
    if (norm != nullptr) r.h = ada_zero(r.x, *norm, eps);
    if (norm2 != nullptr) r.h2 = ada_zero(r.x, *norm2, eps);
  } else if (norm != nullptr && norm2 != nullptr) {
    ops::ResidualNorm2 f = ops::gated_add_rms_norm_modulate2(x, y, gate, norm->scale, norm->shift,
                                                             norm2->scale, norm2->shift, eps);
    r = {std::move(f.x), std::move(f.h), std::move(f.h2)};
  } else if (norm != nullptr || norm2 != nullptr) {
    const AdaNorm& n = norm != nullptr ? *norm : *norm2;
    ops::ResidualNorm f = ops::gated_add_rms_norm_modulate(x, y, gate, n.scale, n.shift, eps);
    r.x = std::move(f.x);
    (norm != nullptr ? r.h : r.h2) = std::move(f.h);
  } else {
    r.x = ops::gated_add(x, y, gate);
  }
  return r;
}

Tensor rms(const Tensor& x, double eps) { return ops::rms_norm(x, Tensor(), eps); }

}  // namespace

BasicAVTransformerBlock BasicAVTransformerBlock::load(io::WeightMap& w,
                                                      const std::optional<TransformerConfig>& video,
                                                      const std::optional<TransformerConfig>& audio,
                                                      LTXRopeType rope_type, double norm_eps,
                                                      const nn::LoadOptions& opt) {
  LTX_CHECK(video || audio, "transformer block: at least one stream is required");
  BasicAVTransformerBlock b;
  b.norm_eps = norm_eps;
  const auto attention = [&](const char* name, int64_t query_dim, int64_t context_dim,
                             const TransformerConfig& c, bool gated) {
    io::WeightMap s = w.scoped(std::string(name) + ".");
    return Attention::load(s, query_dim, context_dim, c.heads, c.d_head, norm_eps, rope_type, gated,
                           opt);
  };
  if (video) {
    const TransformerConfig& v = *video;
    b.attn1 = attention("attn1", v.dim, 0, v, v.apply_gated_attention);
    b.attn2 = attention("attn2", v.dim, v.context_dim, v, v.apply_gated_attention);
    io::WeightMap f = w.scoped("ff.");
    b.ff = FeedForward::load(f, v.dim, v.dim, v.ff_bias, opt);
    // Tables as dense values, also where a GGUF file stores them in blocks.
    b.scale_shift_table = quantization::take_dense(
        w, "scale_shift_table", {adaln_embedding_coefficient(v.cross_attention_adaln), v.dim},
        opt.dtype, opt.device);
  }
  if (audio) {
    const TransformerConfig& a = *audio;
    b.audio_attn1 = attention("audio_attn1", a.dim, 0, a, a.apply_gated_attention);
    b.audio_attn2 = attention("audio_attn2", a.dim, a.context_dim, a, a.apply_gated_attention);
    io::WeightMap f = w.scoped("audio_ff.");
    b.audio_ff = FeedForward::load(f, a.dim, a.dim, a.ff_bias, opt);
    b.audio_scale_shift_table = quantization::take_dense(
        w, "audio_scale_shift_table", {adaln_embedding_coefficient(a.cross_attention_adaln), a.dim},
        opt.dtype, opt.device);
  }
  if (video && audio) {
    // Both directions run at the audio width with the audio head layout.
    b.audio_to_video_attn =
        attention("audio_to_video_attn", video->dim, audio->dim, *audio, video->apply_gated_attention);
    b.video_to_audio_attn =
        attention("video_to_audio_attn", audio->dim, video->dim, *audio, audio->apply_gated_attention);
    b.scale_shift_table_a2v_ca_audio =
        quantization::take_dense(w, "scale_shift_table_a2v_ca_audio", {5, audio->dim}, opt.dtype,
                                 opt.device);
    b.scale_shift_table_a2v_ca_video =
        quantization::take_dense(w, "scale_shift_table_a2v_ca_video", {5, video->dim}, opt.dtype,
                                 opt.device);
  }
  b.cross_attention_adaln =
      (video && video->cross_attention_adaln) || (audio && audio->cross_attention_adaln);
  if (b.cross_attention_adaln && video)
    b.prompt_scale_shift_table =
        quantization::take_dense(w, "prompt_scale_shift_table", {2, video->dim}, opt.dtype,
                                 opt.device);
  if (b.cross_attention_adaln && audio)
    b.audio_prompt_scale_shift_table =
        quantization::take_dense(w, "audio_prompt_scale_shift_table", {2, audio->dim}, opt.dtype,
                                 opt.device);
  return b;
}

namespace {

// One stream of the block (video or audio): its modules, its AdaLN tables and its arguments.
struct Stream {
  const Attention& attn1;      // self-attention
  const Attention& attn2;      // text cross-attention
  const FeedForward& ff;
  const Tensor& table;         // scale_shift_table, rows AdaRow
  const Tensor& prompt_table;  // prompt_scale_shift_table, rows PromptRow (2.3 / 2.5)
  const Tensor& av_ca_table;   // scale_shift_table_a2v_ca_*, rows AvCaRow (both streams)
  const TransformerArgs& args;

  ops::Summed ada(AdaRow row) const {
    return ada_value(table, args.timesteps, static_cast<int64_t>(row), args.timestep_run_ends);
  }
  AdaNorm ada_norm(AdaRow scale, AdaRow shift) const { return {ada(scale), ada(shift)}; }
  // The text context's modulation: the prompt table, plus the prompt timestep when there is one.
  ops::Summed prompt(PromptRow row) const {
    const auto r = static_cast<int64_t>(row);
    return args.prompt_timestep.defined() ? ada_value(prompt_table, args.prompt_timestep, r, {})
                                          : ops::Summed(prompt_table.select(0, r));
  }
  // This stream's input to one cross-modal direction (the first four rows, cross scale/shift
  // timestep), and the gate of the direction it queries (the last row, cross gate timestep).
  AdaNorm av_ca_norm(AvCaRow scale, AvCaRow shift) const {
    const Tensor scale_shift = av_ca_table.narrow(0, 0, 4);
    return {ada_value(scale_shift, args.cross_scale_shift_timestep, static_cast<int64_t>(scale),
                      args.timestep_run_ends),
            ada_value(scale_shift, args.cross_scale_shift_timestep, static_cast<int64_t>(shift),
                      args.timestep_run_ends)};
  }
  ops::Summed av_ca_gate() const {
    return ada_value(av_ca_table.narrow(0, static_cast<int64_t>(AvCaRow::Gate), 1),
                     args.cross_gate_timestep, 0, {});
  }
};

// attn2 on `query` and `context`. The text K / V once per group of samples that share the prompt
// (the guidance passes), and once per loop where no prompt timestep modulates them (the cache).
Tensor text_attention(const Stream& s, const Tensor& query, const Tensor& context) {
  const TransformerArgs& a = s.args;
  if (a.context_groups.empty()) return s.attn2(query, {.context = context, .mask = a.context_mask});
  const bool steady = a.text_kv_cache != nullptr && !a.prompt_timestep.defined();
  const AttentionKv kv =
      steady ? a.text_kv_cache->key_values(s.attn2, context, a.context_groups, a.block_index, a.stream)
             : s.attn2.key_values(context, a.context_groups);
  return s.attn2(query, {.context = context, .mask = a.context_mask, .kv = &kv});
}

// Steps 1 (self-attention) and 2 (text cross-attention) of one stream. `for_a2v`, `for_v2a`: this
// stream's AdaLN inputs to step 3 (null: not wanted), formed in step 2's residual pass where that
// residual is gated (2.3 / 2.5; then returned as h / h2), else left to step 3.
Residual self_and_text_attention(const Stream& s, const Tensor& x, bool cross_attention_adaln,
                                 double eps, const AdaNorm* for_a2v, const AdaNorm* for_v2a) {
  const TransformerArgs& a = s.args;
  // 1. x + attn1(ada_zero(x; shift_msa, scale_msa)) * gate_msa
  const Tensor sa = s.attn1(ada_zero(x, s.ada_norm(AdaRow::ScaleMsa, AdaRow::ShiftMsa), eps),
                            {.mask = a.self_attention_mask,
                             .pe = &a.positional_embeddings,
                             .perturbation_mask = a.self_attn_perturbation_mask,
                             .all_perturbed = a.self_attn_all_perturbed});
  if (!cross_attention_adaln) {
    // 2 (19B). x + attn2(rms_norm(x), context)
    const Tensor x1 = ops::gated_add(x, sa, s.ada(AdaRow::GateMsa));
    return {.x = ops::add(x1, text_attention(s, rms(x1, eps), a.context))};
  }
  // 2 (2.3 / 2.5). x + attn2(ada_zero(x; shift_q, scale_q), context * (1 + scale_kv) + shift_kv)
  // * gate_q, the query's AdaLN formed in step 1's residual pass.
  const AdaNorm query = s.ada_norm(AdaRow::ScaleQ, AdaRow::ShiftQ);
  const Residual r = gated_residual(x, sa, s.ada(AdaRow::GateMsa), Tensor(), eps, &query);
  const Tensor context =
      ops::modulate(a.context, s.prompt(PromptRow::ScaleKv), s.prompt(PromptRow::ShiftKv));
  return gated_residual(r.x, text_attention(s, r.h, context), s.ada(AdaRow::GateQ), Tensor(), eps,
                        for_a2v, for_v2a);
}

// Step 4 of one stream: x + ff(ada_zero(x; shift_mlp, scale_mlp)) * gate_mlp; `input`: that
// AdaLN input when step 3's residual formed it, else undefined.
Tensor feed_forward(const Stream& s, const Tensor& x, const Tensor& input, double eps) {
  const Tensor h =
      input.defined() ? input : ada_zero(x, s.ada_norm(AdaRow::ScaleMlp, AdaRow::ShiftMlp), eps);
  return gated_residual(x, s.ff(h), s.ada(AdaRow::GateMlp), Tensor(), eps).x;
}

// Step 3's AdaLN values of one direction (get_av_ca_ada_values): the query stream's input and
// gate, the context stream's input.
struct CrossValues {
  AdaNorm query, context;
  ops::Summed gate;
};

// One direction of step 3 on the query stream `q` (state x) with the context stream `c`:
// x + attn(query, context) * gate [* perturbation mask]; the residual pass also forms q's step-4
// input (Residual::h). `query`, `context`: the AdaLN inputs, released once the attention has read
// them.
Residual cross_attention(const Attention& attn, const Stream& q, const Stream& c, const Tensor& x,
                         Tensor query, Tensor context, const ops::Summed& gate, double eps) {
  const Tensor out = attn(query, {.context = context,
                                  .pe = &q.args.cross_positional_embeddings,
                                  .k_pe = &c.args.cross_positional_embeddings});
  query = Tensor();
  context = Tensor();
  const AdaNorm ff_input = q.ada_norm(AdaRow::ScaleMlp, AdaRow::ShiftMlp);
  return gated_residual(x, out, gate, q.args.cross_attn_perturbation_mask, eps, &ff_input);
}

}  // namespace

void BasicAVTransformerBlock::forward(TransformerArgs* video, TransformerArgs* audio,
                                      backend::StreamFork* lines) const {
  LTX_CHECK(video != nullptr || audio != nullptr,
            "transformer block: at least one of video or audio must be provided");
  const bool run_vx = video != nullptr && video->enabled && video->x.numel() > 0;
  const bool run_ax = audio != nullptr && audio->enabled && audio->x.numel() > 0;
  const bool run_a2v = run_vx && audio != nullptr && audio->x.numel() > 0;
  const bool run_v2a = run_ax && video != nullptr && video->x.numel() > 0;
  LTX_CHECK(!run_vx || attn1, "transformer block: this model has no video stream");
  LTX_CHECK(!run_ax || audio_attn1, "transformer block: this model has no audio stream");
  std::optional<Stream> vs, as;
  if (video != nullptr && attn1)
    vs.emplace(Stream{*attn1, *attn2, *ff, scale_shift_table, prompt_scale_shift_table,
                      scale_shift_table_a2v_ca_video, *video});
  if (audio != nullptr && audio_attn1)
    as.emplace(Stream{*audio_attn1, *audio_attn2, *audio_ff, audio_scale_shift_table,
                      audio_prompt_scale_shift_table, scale_shift_table_a2v_ca_audio, *audio});

  // The audio half on the side line (when given): it reads only the audio state and the block's
  // arguments, which the main line made before the fork.
  const auto audio_line = [lines](const std::function<void()>& f) {
    if (lines != nullptr) {
      lines->on_side(f);
    } else {
      f();
    }
  };
  if (lines != nullptr) lines->fork();

  // Step 3's AdaLN values, known up front: step 2's residual pass forms the inputs that step 3
  // reads of its stream where it can.
  const bool cross = (run_a2v || run_v2a) && audio_to_video_attn;
  const bool a2v_on = cross && run_a2v && !video->cross_attn_skip_all;
  const bool v2a_on = cross && run_v2a && !audio->cross_attn_skip_all;
  CrossValues a2v, v2a;
  if (a2v_on)
    a2v = {vs->av_ca_norm(AvCaRow::ScaleA2v, AvCaRow::ShiftA2v),
           as->av_ca_norm(AvCaRow::ScaleA2v, AvCaRow::ShiftA2v), vs->av_ca_gate()};
  if (v2a_on)
    v2a = {as->av_ca_norm(AvCaRow::ScaleV2a, AvCaRow::ShiftV2a),
           vs->av_ca_norm(AvCaRow::ScaleV2a, AvCaRow::ShiftV2a), as->av_ca_gate()};

  // 1-2. Self-attention and text cross-attention of each stream; then each state with its
  // inputs to step 3 where step 2 formed them (h: for audio-to-video, h2: for video-to-audio).
  Residual v{.x = video != nullptr ? video->x : Tensor()};
  Residual a{.x = audio != nullptr ? audio->x : Tensor()};
  if (run_vx)
    v = self_and_text_attention(*vs, v.x, cross_attention_adaln, norm_eps,
                                a2v_on ? &a2v.query : nullptr, v2a_on ? &v2a.context : nullptr);
  if (run_ax)
    audio_line([&] {
      a = self_and_text_attention(*as, a.x, cross_attention_adaln, norm_eps,
                                  a2v_on ? &a2v.context : nullptr, v2a_on ? &v2a.query : nullptr);
    });

  // 3. Audio <-> video cross-attention: both directions read the states after step 2; each
  // residual pass also forms its stream's step-4 input where no mask applies.
  Tensor vx = std::move(v.x), ax = std::move(a.x);
  Tensor vx_ff_in, ax_ff_in;
  if (cross) {
    // Each line waits for the other's step 2 and keeps what the other made alive until its
    // reads are done.
    const Tensor vx0 = vx, ax0 = ax;
    if (lines != nullptr) {
      lines->fork();
      lines->join();
      lines->read_on_side(vx0);
      lines->read_on_main(ax0);
      if (v.h2.defined()) lines->read_on_side(v.h2);
      if (a.h.defined()) lines->read_on_main(a.h);
    }
    // An input formed in step 2's residual pass (taken from it), else its own pass now.
    const auto input = [&](Tensor& formed, const Tensor& x0, const AdaNorm& n) {
      return formed.defined() ? std::exchange(formed, Tensor()) : ada_zero(x0, n, norm_eps);
    };
    if (a2v_on) {
      Residual r = cross_attention(*audio_to_video_attn, *vs, *as, vx, input(v.h, vx0, a2v.query),
                                   input(a.h, ax0, a2v.context), a2v.gate, norm_eps);
      vx = std::move(r.x);
      vx_ff_in = std::move(r.h);
    }
    if (v2a_on)
      audio_line([&] {
        Residual r = cross_attention(*video_to_audio_attn, *as, *vs, ax, input(a.h2, ax0, v2a.query),
                                     input(v.h2, vx0, v2a.context), v2a.gate, norm_eps);
        ax = std::move(r.x);
        ax_ff_in = std::move(r.h);
      });
  }

  // 4. Feed-forward of each stream.
  if (run_vx) vx = feed_forward(*vs, vx, vx_ff_in, norm_eps);
  if (run_ax) audio_line([&] { ax = feed_forward(*as, ax, ax_ff_in, norm_eps); });
  // Before the old states are dropped: the main line's next allocations wait for the side's reads.
  if (lines != nullptr) lines->join();
  if (video != nullptr) video->x = vx;
  if (audio != nullptr) audio->x = ax;
}

}  // namespace ltx::models::transformer
