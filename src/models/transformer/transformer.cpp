#include "models/transformer/transformer.h"

#include <functional>

#include "ops/elementwise.h"
#include "ops/norm.h"

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
ops::Summed ada_value(const Tensor& table, const TransformerArgs& args, int64_t row) {
  return ada_value(table, args.timesteps, row, args.timestep_run_ends);
}

// get_av_ca_ada_values: rows `first`, `first + 1` of the 4 scale/shift rows (scale, then shift)
// with the per-token cross timestep, and row 4 (the gate) with the gate timestep.
struct AvCaValues {
  ops::Summed scale, shift, gate;
};
AvCaValues av_ca_values(const Tensor& table, const TransformerArgs& args, int64_t first,
                        bool with_gate) {
  const Tensor ss = table.narrow(0, 0, 4);
  AvCaValues v;
  v.scale = ada_value(ss, args.cross_scale_shift_timestep, first, args.timestep_run_ends);
  v.shift = ada_value(ss, args.cross_scale_shift_timestep, first + 1, args.timestep_run_ends);
  if (with_gate) v.gate = ada_value(table.narrow(0, 4, 1), args.cross_gate_timestep, 0, {});
  return v;
}

Tensor rms(const Tensor& x, double eps) { return ops::rms_norm(x, Tensor(), eps); }

// rms_norm(x) * (1 + scale) + shift (the reference's ada_zero function), one fused op; equal bit
// for bit to ops::modulate(rms(x, eps), scale, shift) (tests/ops, tests/cuda).
Tensor ada_zero(const Tensor& x, double eps, const ops::Summed& scale, const ops::Summed& shift) {
  return ops::rms_norm_modulate(x, scale, shift, eps);
}

// x + y * gate [* mask], in the reference's order: (y * gate) * mask, then the residual add.
Tensor gated_residual(const Tensor& x, const Tensor& y, const ops::Summed& gate, const Tensor& mask) {
  if (!mask.defined()) return ops::gated_add(x, y, gate);
  return ops::gated_add(x, ops::mul(y, ops::materialize(gate)), mask);
}

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
    b.scale_shift_table = w.take("scale_shift_table",
                                 {adaln_embedding_coefficient(v.cross_attention_adaln), v.dim},
                                 opt.dtype, opt.device);
  }
  if (audio) {
    const TransformerConfig& a = *audio;
    b.audio_attn1 = attention("audio_attn1", a.dim, 0, a, a.apply_gated_attention);
    b.audio_attn2 = attention("audio_attn2", a.dim, a.context_dim, a, a.apply_gated_attention);
    io::WeightMap f = w.scoped("audio_ff.");
    b.audio_ff = FeedForward::load(f, a.dim, a.dim, a.ff_bias, opt);
    b.audio_scale_shift_table = w.take(
        "audio_scale_shift_table", {adaln_embedding_coefficient(a.cross_attention_adaln), a.dim},
        opt.dtype, opt.device);
  }
  if (video && audio) {
    // Both directions run at the audio width with the audio head layout.
    b.audio_to_video_attn =
        attention("audio_to_video_attn", video->dim, audio->dim, *audio, video->apply_gated_attention);
    b.video_to_audio_attn =
        attention("video_to_audio_attn", audio->dim, video->dim, *audio, audio->apply_gated_attention);
    b.scale_shift_table_a2v_ca_audio =
        w.take("scale_shift_table_a2v_ca_audio", {5, audio->dim}, opt.dtype, opt.device);
    b.scale_shift_table_a2v_ca_video =
        w.take("scale_shift_table_a2v_ca_video", {5, video->dim}, opt.dtype, opt.device);
  }
  b.cross_attention_adaln =
      (video && video->cross_attention_adaln) || (audio && audio->cross_attention_adaln);
  if (b.cross_attention_adaln && video)
    b.prompt_scale_shift_table =
        w.take("prompt_scale_shift_table", {2, video->dim}, opt.dtype, opt.device);
  if (b.cross_attention_adaln && audio)
    b.audio_prompt_scale_shift_table =
        w.take("audio_prompt_scale_shift_table", {2, audio->dim}, opt.dtype, opt.device);
  return b;
}

namespace {

// An AdaLN input to form of a stream's state: rms_norm_modulate(x, scale, shift) into *out.
struct AdaLnWant {
  ops::Summed scale, shift;
  Tensor* out = nullptr;
};

// Self-attention, then text cross-attention, of one stream (steps 1-2 of the block). `wants` (at
// most two: the cross-modal attentions' inputs of this state): formed in the text attention's
// gated residual pass where the block has one (2.3 / 2.5), else left undefined for the caller.
Tensor self_and_text_attention(const Tensor& x_in, const TransformerArgs& args, const Attention& self_attn,
                               const Attention& text_attn, const Tensor& table,
                               const Tensor& prompt_table, bool cross_attention_adaln, double eps,
                               const std::vector<AdaLnWant>& wants) {
  const Tensor norm_x = ada_zero(x_in, eps, ada_value(table, args, 1), ada_value(table, args, 0));
  const Tensor sa = self_attn(norm_x, Tensor(), args.self_attention_mask, &args.positional_embeddings,
                              nullptr, args.self_attn_perturbation_mask, args.self_attn_all_perturbed);
  // The text K / V once per group of samples that share the prompt (the guidance passes), and
  // once per loop where no prompt timestep modulates them (the cache).
  const auto text = [&](const Tensor& q_in, const Tensor& ctx) {
    if (args.context_groups.empty()) return text_attn(q_in, ctx, args.context_mask);
    const bool steady = args.text_kv_cache != nullptr && !args.prompt_timestep.defined();
    const AttentionKv kv =
        steady ? args.text_kv_cache->key_values(text_attn, ctx, args.context_groups, args.block_index,
                                                args.stream)
               : text_attn.key_values(ctx, args.context_groups);
    return text_attn(q_in, ctx, args.context_mask, nullptr, nullptr, Tensor(), false, &kv);
  };
  if (!cross_attention_adaln) {
    const Tensor x = ops::gated_add(x_in, sa, ada_value(table, args, 2));
    return ops::add(x, text(rms(x, eps), args.context));
  }

  // 2.3 / 2.5: query AdaLN from rows 6-8 (modulate(rms(x)) fused with the gated residual before
  // it); K/V modulation from the prompt table (+ prompt timestep).
  const auto kv_value = [&](int64_t row) {  // row 0: shift, 1: scale
    return args.prompt_timestep.defined() ? ada_value(prompt_table, args.prompt_timestep, row, {})
                                          : ops::Summed(prompt_table.select(0, row));
  };
  const auto [x, q_in] = ops::gated_add_rms_norm_modulate(
      x_in, sa, ada_value(table, args, 2), ada_value(table, args, 7), ada_value(table, args, 6),
      eps);
  const Tensor ctx = ops::modulate(args.context, kv_value(1), kv_value(0));
  const Tensor y = text(q_in, ctx);
  const ops::Summed gate = ada_value(table, args, 8);
  if (wants.size() == 2) {
    ops::ResidualNorm2 r = ops::gated_add_rms_norm_modulate2(
        x, y, gate, wants[0].scale, wants[0].shift, wants[1].scale, wants[1].shift, eps);
    *wants[0].out = std::move(r.h);
    *wants[1].out = std::move(r.h2);
    return std::move(r.x);
  }
  if (wants.size() == 1) {
    ops::ResidualNorm r = ops::gated_add_rms_norm_modulate(x, y, gate, wants[0].scale, wants[0].shift, eps);
    *wants[0].out = std::move(r.h);
    return std::move(r.x);
  }
  return ops::gated_add(x, y, gate);
}

// The FFN input AdaLN of one stream (rows 3-4).
ops::Summed ff_scale(const TransformerArgs& args, const Tensor& table) {
  return ada_value(table, args, 4);
}
ops::Summed ff_shift(const TransformerArgs& args, const Tensor& table) {
  return ada_value(table, args, 3);
}

// FFN step of one stream; h: its AdaLN input when already formed (fused with the residual before
// it), else undefined.
Tensor feed_forward_step(const Tensor& x, const Tensor& h_in, const TransformerArgs& args,
                         const FeedForward& ff, const Tensor& table, double eps) {
  const Tensor h = h_in.defined() ? h_in : ada_zero(x, eps, ff_scale(args, table), ff_shift(args, table));
  return ops::gated_add(x, ff(h), ada_value(table, args, 5));
}

// The cross-modal attention's gated residual; when no mask applies and the stream's FFN runs next,
// fused with that FFN's AdaLN input (returned in *ff_h).
Tensor cross_residual(const Tensor& x, const Tensor& out, const ops::Summed& gate, const Tensor& mask,
                      bool ff_next, const TransformerArgs& args, const Tensor& table, double eps,
                      Tensor* ff_h) {
  if (mask.defined() || !ff_next) return gated_residual(x, out, gate, mask);
  ops::ResidualNorm r =
      ops::gated_add_rms_norm_modulate(x, out, gate, ff_scale(args, table), ff_shift(args, table), eps);
  *ff_h = std::move(r.h);
  return std::move(r.x);
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

  // The cross-modal attentions and their AdaLN values (rows 0-1 of each stream's table for
  // audio-to-video, 2-3 for video-to-audio), known before the streams' text attentions, which form
  // these inputs in their residual pass where they can.
  const bool cross = (run_a2v || run_v2a) && audio_to_video_attn;
  const bool a2v_on = cross && run_a2v && !video->cross_attn_skip_all;
  const bool v2a_on = cross && run_v2a && !audio->cross_attn_skip_all;
  AvCaValues v_a2v, a_a2v, a_v2a, v_v2a;
  if (a2v_on) {
    v_a2v = av_ca_values(scale_shift_table_a2v_ca_video, *video, 0, true);
    a_a2v = av_ca_values(scale_shift_table_a2v_ca_audio, *audio, 0, false);
  }
  if (v2a_on) {
    a_v2a = av_ca_values(scale_shift_table_a2v_ca_audio, *audio, 2, true);
    v_v2a = av_ca_values(scale_shift_table_a2v_ca_video, *video, 2, false);
  }
  // The four inputs (video / audio state, for a2v / v2a); undefined until formed.
  Tensor vh_a2v, vh_v2a, ah_a2v, ah_v2a;
  const auto wants = [](const AvCaValues* for_a2v, Tensor* a2v, const AvCaValues* for_v2a, Tensor* v2a) {
    std::vector<AdaLnWant> w;
    if (for_a2v != nullptr) w.push_back({for_a2v->scale, for_a2v->shift, a2v});
    if (for_v2a != nullptr) w.push_back({for_v2a->scale, for_v2a->shift, v2a});
    return w;
  };

  Tensor vx = video != nullptr ? video->x : Tensor();
  Tensor ax = audio != nullptr ? audio->x : Tensor();
  if (run_vx)
    vx = self_and_text_attention(vx, *video, *attn1, *attn2, scale_shift_table,
                                 prompt_scale_shift_table, cross_attention_adaln, norm_eps,
                                 wants(a2v_on ? &v_a2v : nullptr, &vh_a2v, v2a_on ? &v_v2a : nullptr, &vh_v2a));
  if (run_ax)
    audio_line([&] {
      ax = self_and_text_attention(ax, *audio, *audio_attn1, *audio_attn2, audio_scale_shift_table,
                                   audio_prompt_scale_shift_table, cross_attention_adaln, norm_eps,
                                   wants(a2v_on ? &a_a2v : nullptr, &ah_a2v, v2a_on ? &a_v2a : nullptr, &ah_v2a));
    });

  Tensor vx_ff_h, ax_ff_h;  // the FFN inputs when formed with the cross-modal residual
  if (cross) {
    // Both directions read the snapshots taken after self- and text attention (and the inputs
    // formed from them): each line waits for the other's, and keeps what the other made alive
    // until its reads are done.
    const Tensor vx0 = vx, ax0 = ax;
    if (lines != nullptr) {
      lines->fork();
      lines->join();
      lines->read_on_side(vx0);
      lines->read_on_main(ax0);
      if (vh_v2a.defined()) lines->read_on_side(vh_v2a);
      if (ah_a2v.defined()) lines->read_on_main(ah_a2v);
    }
    // An input formed with the text attention's residual, else its own pass now.
    const auto input = [&](const Tensor& formed, const Tensor& x0, const AvCaValues& v) {
      return formed.defined() ? formed : ada_zero(x0, norm_eps, v.scale, v.shift);
    };
    if (a2v_on) {
      const Tensor out = (*audio_to_video_attn)(
          input(vh_a2v, vx0, v_a2v), input(ah_a2v, ax0, a_a2v), Tensor(),
          &video->cross_positional_embeddings, &audio->cross_positional_embeddings);
      vh_a2v = Tensor();
      ah_a2v = Tensor();
      vx = cross_residual(vx, out, v_a2v.gate, video->cross_attn_perturbation_mask, run_vx, *video,
                          scale_shift_table, norm_eps, &vx_ff_h);
    }
    if (v2a_on) audio_line([&] {
      const Tensor out = (*video_to_audio_attn)(
          input(ah_v2a, ax0, a_v2a), input(vh_v2a, vx0, v_v2a), Tensor(),
          &audio->cross_positional_embeddings, &video->cross_positional_embeddings);
      ah_v2a = Tensor();
      vh_v2a = Tensor();
      ax = cross_residual(ax, out, a_v2a.gate, audio->cross_attn_perturbation_mask, run_ax, *audio,
                          audio_scale_shift_table, norm_eps, &ax_ff_h);
    });
  }

  if (run_vx) vx = feed_forward_step(vx, vx_ff_h, *video, *ff, scale_shift_table, norm_eps);
  if (run_ax)
    audio_line([&] {
      ax = feed_forward_step(ax, ax_ff_h, *audio, *audio_ff, audio_scale_shift_table, norm_eps);
    });
  // Before the old states are dropped: the main line's next allocations wait for the side's reads.
  if (lines != nullptr) lines->join();
  if (video != nullptr) video->x = vx;
  if (audio != nullptr) audio->x = ax;
}

}  // namespace ltx::models::transformer
