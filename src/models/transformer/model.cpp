#include "models/transformer/model.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "models/transformer/block_parameters.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "quantization/ggml_dequant.h"

namespace ltx::models::transformer {

io::KeyMap transformer_key_map(LTXModelType type) {
  const std::string prefix = "model.diffusion_model.";
  if (type != LTXModelType::AudioOnly) {
    io::KeyMap k("LTXV_MODEL_COMFY_RENAMING_MAP");
    k.keep(prefix).replace(prefix, "");
    return k;
  }
  io::KeyMap k("LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP");
  for (const char* part : {"audio_attn1", "audio_attn2", "audio_ff", "audio_patchify", "audio_proj_out",
                           "audio_adaln_single", "audio_prompt", "audio_scale_shift_table"})
    k.keep(prefix, "", part);
  k.replace(prefix, "");
  return k;
}

namespace {

// Names of the audio stream and the audio-video coupling, which a video-only model's loader
// (same key map as the AV model, strict=False) silently leaves unused.
bool is_audio_or_av_name(const std::string& name) {
  std::string rest = name;
  if (rest.starts_with("transformer_blocks.")) {
    const size_t dot = rest.find('.', std::string("transformer_blocks.").size());
    rest = dot == std::string::npos ? rest : rest.substr(dot + 1);
  }
  for (const char* p : {"audio_", "av_ca_", "video_to_audio_attn.", "scale_shift_table_a2v_ca_"})
    if (rest.starts_with(p)) return true;
  return false;
}

}  // namespace

bool LTXModel::is_block_parameter(const std::string& name) {
  return name.starts_with("transformer_blocks.");
}

int64_t LTXModel::block_index(const std::string& name) {
  constexpr std::string_view prefix = "transformer_blocks.";
  if (!name.starts_with(prefix)) return -1;
  int64_t i = 0;
  size_t k = prefix.size();
  if (k >= name.size() || !std::isdigit(static_cast<unsigned char>(name[k]))) return -1;
  for (; k < name.size() && std::isdigit(static_cast<unsigned char>(name[k])); ++k)
    i = i * 10 + (name[k] - '0');
  return i;
}

LTXModel LTXModel::load(io::WeightMap& w, const LTXModelConfig& c, const nn::LoadOptions& opt,
                        const BlockStreaming& streaming) {
  LTX_CHECK(!streaming.enabled() || opt.device.is_cuda(),
            "--offload: the transformer's blocks stream to a GPU, but the model is loaded on ",
            opt.device.str(), "; use --offload none on the CPU");
  LTXModel m;
  m.config_ = c;
  const LTXModelType type = c.model_type;
  const bool video = is_video_enabled(type), audio = is_audio_enabled(type);
  const auto adaln = [&](const char* name, int64_t dim, int64_t coefficient) {
    io::WeightMap s = w.scoped(std::string(name) + ".");
    return AdaLayerNormSingle::load(s, dim, coefficient, opt);
  };
  const int64_t coef = adaln_embedding_coefficient(c.cross_attention_adaln);
  const bool prompt_adaln = c.cross_attention_adaln && c.use_prompt_adaln_single;

  if (video) {
    const int64_t d = c.inner_dim();
    m.patchify_proj_ = nn::Linear::load(w, "patchify_proj", c.in_channels, d, true, opt);
    if (c.caption_projection) {
      io::WeightMap s = w.scoped("caption_projection.");
      m.caption_projection_ = PixArtAlphaTextProjection::load(s, c.caption_channels, d, opt);
    }
    if (c.use_keyframes_abs_pos_embedding)
      m.keyframes_abs_pos_embedding_ =
          quantization::take_dense_optional(w, "keyframes_abs_pos_embedding", {1, d}, opt.dtype,
                                            opt.device);
    m.adaln_single_ = adaln("adaln_single", d, coef);
    if (prompt_adaln) m.prompt_adaln_single_ = adaln("prompt_adaln_single", d, 2);
    m.scale_shift_table_ =
        quantization::take_dense(w, "scale_shift_table", {2, d}, opt.dtype, opt.device);
    m.proj_out_ = nn::Linear::load(w, "proj_out", d, c.out_channels, true, opt);
  }
  if (audio) {
    const int64_t a = c.audio_inner_dim();
    m.audio_patchify_proj_ = nn::Linear::load(w, "audio_patchify_proj", c.audio_in_channels, a, true, opt);
    if (c.caption_projection) {
      io::WeightMap s = w.scoped("audio_caption_projection.");
      m.audio_caption_projection_ = PixArtAlphaTextProjection::load(s, c.caption_channels, a, opt);
    }
    m.audio_adaln_single_ = adaln("audio_adaln_single", a, coef);
    if (prompt_adaln) m.audio_prompt_adaln_single_ = adaln("audio_prompt_adaln_single", a, 2);
    m.audio_scale_shift_table_ =
        quantization::take_dense(w, "audio_scale_shift_table", {2, a}, opt.dtype, opt.device);
    m.audio_proj_out_ = nn::Linear::load(w, "audio_proj_out", a, c.audio_out_channels, true, opt);
  }
  if (video && audio) {
    m.av_ca_video_scale_shift_adaln_single_ = adaln("av_ca_video_scale_shift_adaln_single", c.inner_dim(), 4);
    m.av_ca_audio_scale_shift_adaln_single_ =
        adaln("av_ca_audio_scale_shift_adaln_single", c.audio_inner_dim(), 4);
    m.av_ca_a2v_gate_adaln_single_ = adaln("av_ca_a2v_gate_adaln_single", c.inner_dim(), 1);
    m.av_ca_v2a_gate_adaln_single_ = adaln("av_ca_v2a_gate_adaln_single", c.audio_inner_dim(), 1);
  }

  m.dtype_ = (video ? m.patchify_proj_ : m.audio_patchify_proj_).dtype();

  std::optional<TransformerConfig> vcfg, acfg;
  if (video)
    vcfg = TransformerConfig{c.inner_dim(), c.num_attention_heads, c.attention_head_dim,
                             c.cross_attention_dim, c.apply_gated_attention, c.cross_attention_adaln,
                             c.ff_bias};
  if (audio)
    acfg = TransformerConfig{c.audio_inner_dim(), c.audio_num_attention_heads, c.audio_attention_head_dim,
                             c.audio_cross_attention_dim, c.apply_gated_attention,
                             c.cross_attention_adaln, c.audio_ff_bias};
  // Resident blocks first (bound on the device), then the streamed ones (bound on the host in the
  // compute dtype, the --quantization policy's Linears as it stores them, then packed for
  // streaming: the slots carry what a resident block holds).
  LTX_CHECK(streaming.resident >= 0, "transformer: the resident block count must be >= 0, got ",
            streaming.resident);
  if (streaming.streams(c.num_layers - 1))
    m.streamed_ = std::make_shared<StreamedBlocks<BasicAVTransformerBlock>>(
        opt.device, for_each_block_tensor, streaming.from_file);
  const nn::LoadOptions host_opt{opt.dtype, Device::cpu(), opt.quantization};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    io::WeightMap s = w.scoped(str("transformer_blocks.", i, "."));
    const bool streamed = streaming.streams(i);
    BasicAVTransformerBlock b = BasicAVTransformerBlock::load(s, vcfg, acfg, c.rope_type,
                                                              c.norm_eps, streamed ? host_opt : opt);
    if (streamed)
      m.streamed_->add(std::move(b));
    else
      m.transformer_blocks_.push_back(std::move(b));
  }
  m.num_blocks_ = c.num_layers;

  // The text connectors share the transformer's prefix; the reference's loader drops them.
  for (const char* p : {"video_embeddings_connector.", "audio_embeddings_connector.",
                        "embeddings_connector."})
    w.ignore(p);
  if (type == LTXModelType::VideoOnly)
    for (const std::string& n : w.names())
      if (is_audio_or_av_name(n)) w.ignore(n);
  w.finish(str("transformer (", model_type_name(type), " model, config from ", c.source, ")"));
  if (m.streamed_) m.streamed_->start(streaming.slots);
  return m;
}

LTXModel LTXModel::from_files(const std::vector<std::string>& paths, LTXModelType type,
                              const nn::LoadOptions& opt, const BlockStreaming& streaming) {
  LTX_CHECK(!paths.empty(), "transformer: no weights file given");
  // Safetensors or GGUF (the community files: bare names, config as a string value).
  io::WeightMap w = io::WeightMap::open_checkpoints(paths, transformer_key_map(type));
  const LTXModelConfig config =
      LTXModelConfig::from_metadata(io::checkpoint_metadata_json(paths.front()), type, paths.front());
  return load(w, config, opt, streaming);
}

MultiModalTransformerArgsPreprocessor LTXModel::preprocessor(bool audio) const {
  const LTXModelConfig& c = config_;
  const auto bound = [](const auto& module) { return module ? &*module : nullptr; };
  MultiModalTransformerArgsPreprocessor p;
  TransformerArgsPreprocessor& s = p.simple;
  s.patchify_proj = audio ? &audio_patchify_proj_ : &patchify_proj_;
  s.dtype = dtype_;
  s.adaln = &*(audio ? audio_adaln_single_ : adaln_single_);
  s.inner_dim = audio ? c.audio_inner_dim() : c.inner_dim();
  s.max_pos = audio ? c.audio_positional_embedding_max_pos : c.positional_embedding_max_pos;
  s.num_attention_heads = audio ? c.audio_num_attention_heads : c.num_attention_heads;
  s.timestep_scale_multiplier = c.timestep_scale_multiplier;
  s.double_precision_rope = c.double_precision_rope;
  s.positional_embedding_theta = c.positional_embedding_theta;
  s.rope_type = c.rope_type;
  s.caption_projection = bound(audio ? audio_caption_projection_ : caption_projection_);
  s.prompt_adaln = bound(audio ? audio_prompt_adaln_single_ : prompt_adaln_single_);
  s.keyframes_embedding = audio ? nullptr : bound(keyframes_abs_pos_embedding_);
  if (model_type() == LTXModelType::AudioVideo) {
    p.cross_scale_shift_adaln =
        &*(audio ? av_ca_audio_scale_shift_adaln_single_ : av_ca_video_scale_shift_adaln_single_);
    p.cross_gate_adaln = &*(audio ? av_ca_v2a_gate_adaln_single_ : av_ca_a2v_gate_adaln_single_);
    p.cross_pe_max_pos =
        std::max(c.positional_embedding_max_pos[0], c.audio_positional_embedding_max_pos[0]);
    p.audio_cross_attention_dim = c.audio_cross_attention_dim;
    p.av_ca_timestep_scale_multiplier = c.av_ca_timestep_scale_multiplier;
  }
  return p;
}

namespace {

// norm_out (LayerNorm without affine) modulated by scale_shift_table + embedded timestep (row 0
// shift, row 1 scale), then proj_out.
Tensor process_output(const Tensor& table, const nn::Linear& proj_out, const Tensor& x,
                      const Tensor& embedded_timestep, double eps) {
  const Tensor shift = ops::add(table.select(0, 0), embedded_timestep);
  const Tensor scale = ops::add(table.select(0, 1), embedded_timestep);
  return proj_out(ops::modulate(ops::layer_norm(x, Tensor(), Tensor(), eps), scale, shift));
}

}  // namespace

ModelOutputs LTXModel::forward(const Modality* video, const Modality* audio,
                               const BatchedPerturbationConfig* perturbations,
                               const Observer& observer, StepCache* step_cache) const {
  LTX_CHECK(video != nullptr || audio != nullptr, "transformer: neither video nor audio given");
  LTX_CHECK(video == nullptr || is_video_enabled(model_type()),
            "transformer: video given to an ", model_type_name(model_type()), " model");
  LTX_CHECK(audio == nullptr || is_audio_enabled(model_type()),
            "transformer: audio given to a ", model_type_name(model_type()), " model");
  std::optional<TransformerArgs> v, a;
  if (video != nullptr) v = preprocessor(/*audio=*/false).prepare(*video, audio, "video", observer);
  if (audio != nullptr) a = preprocessor(/*audio=*/true).prepare(*audio, video, "audio", observer);
  const int64_t batch = (v ? v->x : a->x).size(0);
  LTX_CHECK(!(v && a) || a->x.size(0) == batch, "transformer: video batch ", batch,
            " differs from audio batch ", a ? a->x.size(0) : 0);

  std::optional<BatchedPerturbationConfig> none;
  if (perturbations == nullptr) {
    none = BatchedPerturbationConfig::empty(batch, num_blocks());
    perturbations = &*none;
  }
  LTX_CHECK(perturbations->batch_size() == batch && perturbations->num_blocks() == num_blocks(),
            "transformer: the perturbation config covers ", perturbations->batch_size(),
            " samples and ", perturbations->num_blocks(), " blocks, the call has ", batch,
            " samples and the model ", num_blocks(), " blocks");

  // With both streams, each block's audio half runs beside its video half on a GPU.
  std::optional<backend::StreamFork> lines;
  if (v && a) lines.emplace(v->x.device());
  // Streamed blocks: each block's copy is waited for before its compute, which releases its slot.
  StreamedPass<BasicAVTransformerBlock> pass(streamed_.get());
  const auto run_blocks = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (v) v->block_index = i;
      if (a) a->block_index = i;
      if (v)
        apply_block_perturbations(*v, *perturbations, i, PerturbationType::SkipVideoSelfAttn,
                                  PerturbationType::SkipA2VCrossAttn);
      if (a)
        apply_block_perturbations(*a, *perturbations, i, PerturbationType::SkipAudioSelfAttn,
                                  PerturbationType::SkipV2ACrossAttn);
      // The resident blocks come first; streamed block i is the ring's block i - resident.
      const int64_t resident = static_cast<int64_t>(transformer_blocks_.size());
      const bool streamed = i >= resident;
      const BasicAVTransformerBlock& block = streamed ? streamed_->acquire(i - resident)
                                                      : transformer_blocks_[static_cast<size_t>(i)];
      block.forward(v ? &*v : nullptr, a ? &*a : nullptr, lines ? &*lines : nullptr);
      if (streamed) streamed_->release(i - resident);
      if (observer) {
        if (v) observer(str("block", i, ".video_x"), v->x);
        if (a) observer(str("block", i, ".audio_x"), a->x);
      }
    }
  };
  if (step_cache == nullptr) {
    run_blocks(0, num_blocks());
  } else {
    // The block ring prefetches every block of a pass in order; a pass that stops early is not
    // part of its schedule.
    LTX_CHECK(!streams_blocks(), "--cache: the transformer's blocks are streamed (--offload); step "
              "caching needs them resident: use --offload none or --cache none");
    // A stream that runs no block in this call (disabled, or no tokens) gives no signal.
    const bool v_runs = v && v->enabled && v->x.numel() > 0;
    const bool a_runs = a && a->enabled && a->x.numel() > 0;
    const Tensor v_in = v_runs ? v->x : Tensor(), a_in = a_runs ? a->x : Tensor();
    const int64_t first = step_cache->first_blocks(num_blocks());
    run_blocks(0, first);
    const Tensor v_mid = v_runs ? v->x : Tensor(), a_mid = a_runs ? a->x : Tensor();
    const Tensor v_first = v_runs ? ops::sub(v_mid, v_in) : Tensor();
    const Tensor a_first = a_runs ? ops::sub(a_mid, a_in) : Tensor();
    if (step_cache->decide(v_first, a_first)) {
      if (v_runs) v->x = ops::add(v_mid, step_cache->rest_residual(0));
      if (a_runs) a->x = ops::add(a_mid, step_cache->rest_residual(1));
      if (observer) {
        if (v_runs) observer("step_cache.video_x", v->x);
        if (a_runs) observer("step_cache.audio_x", a->x);
      }
    } else {
      run_blocks(first, num_blocks());
      step_cache->store_rest(v_runs ? ops::sub(v->x, v_mid) : Tensor(),
                             a_runs ? ops::sub(a->x, a_mid) : Tensor());
    }
  }

  ModelOutputs out;
  if (v)
    out.video = process_output(scale_shift_table_, proj_out_, v->x, v->embedded_timestep,
                               config_.norm_eps);
  if (a)
    out.audio = process_output(audio_scale_shift_table_, audio_proj_out_, a->x, a->embedded_timestep,
                               config_.norm_eps);
  return out;
}

Tensor to_denoised(const Tensor& sample, const Tensor& velocity, const Tensor& timesteps) {
  return ops::sub(sample.to(DType::F32),
                  ops::mul(velocity.to(DType::F32), timesteps.to(DType::F32)))
      .to(sample.dtype());
}

ModelOutputs X0Model::operator()(const Modality* video, const Modality* audio,
                                 const BatchedPerturbationConfig* perturbations,
                                 const Observer& observer) const {
  ModelOutputs v = velocity_model.forward(video, audio, perturbations, observer, step_cache);
  ModelOutputs out;
  if (v.video.defined()) out.video = to_denoised(video->latent, v.video, video->timesteps);
  if (v.audio.defined()) out.audio = to_denoised(audio->latent, v.audio, audio->timesteps);
  return out;
}

}  // namespace ltx::models::transformer
