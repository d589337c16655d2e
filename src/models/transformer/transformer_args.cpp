#include "models/transformer/transformer_args.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "ops/elementwise.h"
#include "ops/shape.h"

namespace ltx::models::transformer {

void apply_block_perturbations(TransformerArgs& args, const BatchedPerturbationConfig& perturbations,
                               int64_t block, PerturbationType self_type,
                               PerturbationType cross_type) {
  const Device device = args.x.device();
  const bool all_self = perturbations.all_in_batch(self_type, block);
  const bool any_self = perturbations.any_in_batch(self_type, block);
  const bool all_cross = perturbations.all_in_batch(cross_type, block);
  const bool any_cross = perturbations.any_in_batch(cross_type, block);
  args.self_attn_all_perturbed = all_self;
  // Masks in x's dtype (the reference builds them in the model dtype).
  const DType dt = args.x.dtype();
  args.self_attn_perturbation_mask =
      any_self && !all_self ? perturbations.mask(self_type, block, device).to(dt) : Tensor();
  args.cross_attn_skip_all = all_cross;
  args.cross_attn_perturbation_mask =
      any_cross && !all_cross ? perturbations.mask(cross_type, block, device).to(dt) : Tensor();
}

namespace {

// torch.finfo(dt).max for the activation dtypes (bf16's largest finite value is (2 - 2^-7) 2^127).
double dtype_max(DType dt) {
  return dt == DType::BF16 ? 3.3895313892515355e38
                           : static_cast<double>(std::numeric_limits<float>::max());
}

// ln over timesteps [B * n] (sample-major), on the CPU one call per sample: a GEMM's bits may
// depend on its row count (OpenBLAS picks kernels by it), and a sample must get the same values
// whatever batch it runs in (a job batched with others equals its run alone). On a GPU batching
// only needs to be close, so it stays one call (no extra launches per sample).
std::pair<Tensor, Tensor> adaln_per_sample(const AdaLayerNormSingle& ln, const Tensor& timesteps, int64_t batch_size) {
  if (batch_size <= 1 || !timesteps.device().is_cpu()) return ln(timesteps);
  const int64_t n = timesteps.numel() / batch_size;
  std::vector<Tensor> ada, embedded;
  for (int64_t b = 0; b < batch_size; ++b) {
    auto [a, e] = ln(timesteps.narrow(0, b * n, n));
    ada.push_back(std::move(a));
    embedded.push_back(std::move(e));
  }
  return {ops::concat(ada, 0), ops::concat(embedded, 0)};
}

}  // namespace

Tensor self_attention_bias(const Tensor& attention_mask, DType dtype) {
  LTX_CHECK(attention_mask.dim() == 3, "self-attention mask must be [B, T, T] (or broadcastable ",
            "3-D), got ", attention_mask.describe());
  const Tensor m = attention_mask.to(DType::F32);
  const Device d = m.device();
  constexpr float kTiny = std::numeric_limits<float>::min();  // = finfo(bf16).tiny too
  // relu(m) is nonzero exactly where m > 0. The log is taken in f32 and then rounded to `dtype`;
  // the masked value is that dtype's minimum (f32's lowest would round to -inf in bf16).
  const Tensor logv = ops::log(ops::clamp(m, kTiny, std::numeric_limits<double>::infinity()));
  const Tensor lowest = Tensor::full({1}, -dtype_max(dtype), DType::F32, d);
  return ops::where(ops::relu(m), logv, lowest).to(dtype).unsqueeze(1);
}

Tensor context_attention_bias(const Tensor& context_mask, DType dtype) {
  if (dtype_is_floating(context_mask.dtype())) return context_mask;
  LTX_CHECK(context_mask.dim() >= 2, "context mask must be [B, L], got ", context_mask.describe());
  const int64_t b = context_mask.size(0), l = context_mask.size(-1);
  // (mask - 1) in x's dtype times that dtype's max, as the reference.
  const Tensor m = ops::sub(context_mask.to(DType::F32), 1.0).to(dtype).reshape({b, 1, -1, l});
  return ops::mul(m, dtype_max(dtype));
}

std::pair<Tensor, Tensor> TransformerArgsPreprocessor::prepare_timestep(
    const Tensor& timestep, const AdaLayerNormSingle& ln, int64_t batch_size,
    const std::vector<std::vector<int64_t>>& runs, std::vector<int64_t>* run_ends) const {
  const Tensor flat = timestep.to(DType::F32).flatten();
  if (runs.empty()) {
    auto [ada, embedded] = adaln_per_sample(ln, ops::mul(flat, timestep_scale_multiplier), batch_size);
    return {ada.view({batch_size, -1, ada.size(-1)}),
            embedded.view({batch_size, -1, embedded.size(-1)})};
  }
  const int64_t tokens = flat.numel() / batch_size;
  LTX_CHECK(static_cast<int64_t>(runs.size()) == batch_size, "timestep runs: ", runs.size(),
            " samples described for a batch of ", batch_size);
  // Every sample's run boundaries together: within each of these runs each sample has one value.
  std::vector<int64_t> ends;
  for (size_t b = 0; b < runs.size(); ++b) {
    int64_t sum = 0;
    for (const int64_t len : runs[b]) {
      LTX_CHECK(len > 0, "timestep runs: sample ", b, " has a run of length ", len);
      sum += len;
      ends.push_back(sum);
    }
    LTX_CHECK(sum == tokens, "timestep runs: the runs of sample ", b, " cover ", sum, " tokens, the ",
              "timesteps ", timestep.describe(), " have ", tokens);
  }
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  // Each run's first timestep per sample (a device view: nothing is read back), then the AdaLN of
  // those: [B * R, .] in sample-major order.
  std::vector<Tensor> firsts;
  for (int64_t b = 0; b < batch_size; ++b) {
    int64_t start = 0;
    for (const int64_t end : ends) {
      firsts.push_back(flat.narrow(0, b * tokens + start, 1));
      start = end;
    }
  }
  auto [ada, embedded] = adaln_per_sample(ln, ops::mul(ops::concat(firsts, 0), timestep_scale_multiplier), batch_size);
  const int64_t n = static_cast<int64_t>(ends.size());
  const Tensor ada_runs = ada.view({batch_size, n, ada.size(-1)});
  const Tensor embedded_tokens =
      ops::expand_runs(embedded.view({batch_size, n, embedded.size(-1)}), ends);
  if (run_ends != nullptr && ends.size() <= ops::kMaxSummedRuns) {
    *run_ends = ends;
    return {ada_runs, embedded_tokens};
  }
  return {ops::expand_runs(ada_runs, ends), embedded_tokens};
}

RopeTables TransformerArgsPreprocessor::prepare_positional_embeddings(
    const Tensor& positions, int64_t dim, const std::vector<double>& mp) const {
  // Computed in f32 (or f64) and cast to the model dtype, as the reference's out_dtype.
  RopeTables t = precompute_freqs_cis(positions, dim, positional_embedding_theta, mp,
                                      num_attention_heads, rope_type, double_precision_rope);
  return {t.cos.to(dtype), t.sin.to(dtype)};
}

TransformerArgs TransformerArgsPreprocessor::prepare(const Modality& m, const std::string& name,
                                                     const Observer& observer) const {
  const auto observe = [&](const char* what, const Tensor& t) {
    if (observer && t.defined()) observer(name + "." + what, t);
  };
  LTX_CHECK(m.latent.defined() && m.latent.dim() == 3, name, ": latent must be [B, T, C], got ",
            m.latent.defined() ? m.latent.describe() : "nothing");
  const int64_t b = m.latent.size(0);
  LTX_CHECK(m.timesteps.defined() && m.timesteps.numel() % b == 0, name,
            ": timesteps must have B x T (or B) values, got ",
            m.timesteps.defined() ? m.timesteps.describe() : "nothing");
  LTX_CHECK(m.context.defined() && m.context.dim() == 3 && m.context.size(0) == b, name,
            ": context must be [B, L, D] with the latent's batch, got ",
            m.context.defined() ? m.context.describe() : "nothing");
  LTX_CHECK(m.positions.defined() && m.positions.dim() == 4 && m.positions.size(0) == b &&
                m.positions.size(2) == m.latent.size(1),
            name, ": positions must be [B, n, T, 2] matching the latent ", m.latent.describe(),
            ", got ", m.positions.defined() ? m.positions.describe() : "nothing");

  TransformerArgs a;
  a.enabled = m.enabled;
  // The latent enters in the model dtype (the reference runs on latents of the weights' dtype).
  a.x = (*patchify_proj)(m.latent.to(dtype));
  if (keyframes_embedding != nullptr && m.keyframes_mask.defined()) {
    const Device d = a.x.device();
    const Tensor marked = ops::where(ops::relu(m.keyframes_mask.to(DType::F32)),
                                     Tensor::full({1}, 1.0, DType::F32, d),
                                     Tensor::full({1}, 0.0, DType::F32, d))
                              .to(dtype);
    a.x = ops::add(a.x, ops::mul(marked, keyframes_embedding->to(dtype)));
  }
  observe("x_in", a.x);
  std::tie(a.timesteps, a.embedded_timestep) =
      prepare_timestep(m.timesteps, *adaln, b, m.timestep_runs, &a.timestep_run_ends);
  if (observer) observe("adaln_timestep", ops::expand_runs(a.timesteps, a.timestep_run_ends));
  observe("embedded_timestep", a.embedded_timestep);
  if (prompt_adaln != nullptr) {
    LTX_CHECK(m.sigma.defined() && m.sigma.numel() == b, name, ": sigma must have one value per ",
              "sample for the prompt AdaLN, got ", m.sigma.defined() ? m.sigma.describe() : "nothing");
    a.prompt_timestep = prepare_timestep(m.sigma, *prompt_adaln, b).first;
    observe("prompt_timestep", a.prompt_timestep);
  }
  Tensor context = m.context.to(dtype);
  if (caption_projection != nullptr) context = (*caption_projection)(context);
  a.context = context.reshape({b, -1, a.x.size(-1)});
  LTX_CHECK(m.context_groups.empty() || static_cast<int64_t>(m.context_groups.size()) == b, name,
            ": ", m.context_groups.size(), " context groups for a batch of ", b);
  a.context_groups = m.context_groups;
  a.text_kv_cache = m.context_groups.empty() ? nullptr : m.text_kv_cache;
  a.stream = name == "audio" ? 1 : 0;
  observe("context", a.context);
  if (m.context_mask.defined()) {
    a.context_mask = context_attention_bias(m.context_mask, dtype);
    observe("context_mask_additive", a.context_mask);
  }
  a.positional_embeddings = prepare_positional_embeddings(m.positions, inner_dim, max_pos);
  observe("pe_cos", a.positional_embeddings.cos);
  observe("pe_sin", a.positional_embeddings.sin);
  if (m.attention_mask.defined()) {
    a.self_attention_mask = self_attention_bias(m.attention_mask, dtype);
    observe("self_attention_bias", a.self_attention_mask);
  }
  return a;
}

TransformerArgs MultiModalTransformerArgsPreprocessor::prepare(const Modality& m,
                                                               const Modality* cross,
                                                               const std::string& name,
                                                               const Observer& observer) const {
  TransformerArgs a = simple.prepare(m, name, observer);
  if (cross == nullptr) return a;
  const int64_t b = a.x.size(0);
  LTX_CHECK(cross->sigma.defined() && cross->sigma.dim() <= 1 &&
                (cross->sigma.numel() == b || (cross->sigma.numel() == 1 && b == 1)),
            name, ": the other stream's sigma must be [B] (B = ", b, "), got ",
            cross->sigma.defined() ? cross->sigma.describe() : "nothing");
  const auto observe = [&](const char* what, const Tensor& t) {
    if (observer && t.defined()) observer(name + "." + what, t);
  };
  a.cross_positional_embeddings = simple.prepare_positional_embeddings(
      m.positions.narrow(1, 0, 1), audio_cross_attention_dim, {cross_pe_max_pos});
  observe("cross_pe_cos", a.cross_positional_embeddings.cos);
  observe("cross_pe_sin", a.cross_positional_embeddings.sin);
  // Scale/shift from this stream's per-token timesteps; the gate from the OTHER stream's sigma,
  // scaled by tsm * (av_ca_multiplier / tsm) in that order (f32), as the reference.
  const double tsm = simple.timestep_scale_multiplier;
  // With the same runs as the stream's own AdaLN values (one list of run ends for both).
  std::vector<int64_t> cross_ends;
  a.cross_scale_shift_timestep = simple.prepare_timestep(m.timesteps, *cross_scale_shift_adaln, b,
                                                         m.timestep_runs, &cross_ends).first;
  LTX_CHECK(cross_ends == a.timestep_run_ends, name, ": the cross-modal AdaLN runs differ from the ",
            "stream's");
  const Tensor gate_t = ops::mul(ops::mul(cross->sigma.to(DType::F32), tsm),
                                 av_ca_timestep_scale_multiplier / tsm)
                            .flatten();
  const Tensor gate = adaln_per_sample(*cross_gate_adaln, gate_t, b).first;
  a.cross_gate_timestep = gate.view({b, -1, gate.size(-1)});
  if (observer)
    observe("cross_scale_shift_timestep", ops::expand_runs(a.cross_scale_shift_timestep, cross_ends));
  observe("cross_gate_timestep", a.cross_gate_timestep);
  return a;
}

}  // namespace ltx::models::transformer
