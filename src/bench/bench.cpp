#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>

#include "backend/device_query.h"
#include "backend/step_graph.h"
#include "backend/stream_fork.h"
#include "bench/random_weights.h"
#include "core/env_settings.h"
#include "core/error.h"
#include "core/log.h"
#include "io/weights.h"
#include "quantization/gguf_policy.h"
#include "models/transformer/model.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/diffusion_tiling.h"
#include "models/video_vae/diffusion_video_decoder.h"
#include "pipelines/denoisers.h"
#include "profiling/op_profiler.h"
#include "sampling/latent.h"
#include "sampling/noise.h"
#include "sampling/params.h"

namespace ltx::bench {

namespace tf = models::transformer;
namespace vae = models::video_vae;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fmt(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

// One decimal from 100 up, else three significant digits (tiny presets give tiny numbers).
std::string num(double v) { return fmt(v >= 100 || v == 0 ? "%.1f" : "%.3g", v); }

// The official script's shapes (bench_official.py): what its numbers can be compared with.
constexpr int64_t kOfficialFrames = 121;
constexpr int64_t kOfficialTextTokens = 1024;
const VideoSize kOfficialVaeSize{1536, 1024};
// The stage-5 mode both the official diffusion benchmark and ours run (the pipelines' default).
constexpr const char* kDiffusionMode = "chunked_eager";
constexpr int64_t kDiffusionWChunks = 4;

int64_t frames_of(const BenchOptions& o, const Preset& p) { return o.frames.value_or(p.frames); }
int64_t text_tokens_of(const BenchOptions& o, const Preset& p) {
  return o.text_tokens.value_or(p.text_tokens);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Times `step` after `warmup` calls; the device is synchronised around every call, so a time
// covers all the work the call queued (and any host gaps inside it), like CUDA events around it.
Timing time_calls(Device device, int64_t warmup, int64_t iters, const std::function<void()>& step) {
  Timing t;
  backend::synchronize(device);
  backend::reset_peak_memory(device);
  for (int64_t i = 0; i < warmup; ++i) step();
  backend::synchronize(device);
  profiling::reset_op_profile();  // LTX_PROFILE_OPS: profile the timed calls only
  // LTX_CUDA_PROFILER_RANGE: the timed calls are the profiler's capture range (bench/README.md).
  const bool range = env::settings().cuda_profiler_range;
  profiling::GpuMonitor monitor(device);  // clock and power during the timed calls
  if (range) backend::profiler_range(device, true);
  for (int64_t i = 0; i < iters; ++i) {
    const Clock::time_point t0 = Clock::now();
    step();
    backend::synchronize(device);
    t.ms.push_back(seconds_since(t0) * 1e3);
  }
  if (range) backend::profiler_range(device, false);
  t.gpu = monitor.finish();
  t.median_ms = median_of(t.ms);
  t.min_ms = *std::min_element(t.ms.begin(), t.ms.end());
  t.max_ms = *std::max_element(t.ms.begin(), t.ms.end());
  const backend::MemoryStats m = backend::memory_stats(device);
  t.peak_bytes = m.peak_bytes;
  t.peak_reserved_bytes = m.peak_reserved_bytes;
  return t;
}

// Builds one model from random weights made on the device (`load` binds it from the synthetic
// map; the weights `ggml` types as GGML blocks, when given), then times every case of `kind` with
// the call that `prepare` returns for it (inputs are made there, untimed). `what` names the model
// in messages.
template <typename Model>
void time_model_cases(BenchReport& r, const char* kind, const std::string& what, InitRule init,
                      const GgmlRule& ggml, const std::function<Model(io::WeightMap&)>& load,
                      const std::function<std::function<void()>(const Model&, const BenchCase&)>& prepare) {
  const BenchOptions& o = r.options;
  std::vector<BenchCase*> cases;
  for (BenchCase& c : r.cases)
    if (c.kind == kind) cases.push_back(&c);
  if (cases.empty()) return;
  backend::release_cached_memory(o.device);
  const Clock::time_point t0 = Clock::now();
  std::optional<Model> model;
  int64_t weights_bytes = 0, ggml_weights = 0;
  try {
    RandomWeights rw(std::move(init), o.seed);
    io::WeightMap w = io::WeightMap::synthetic(
        rw.synthesizer(), ggml ? rw.ggml_synthesizer(ggml) : io::GgmlSynthesizer{});
    model.emplace(load(w));
    w.finish(what);
    weights_bytes = rw.bytes_made();
    ggml_weights = rw.ggml_tensors_made();
    backend::synchronize(o.device);
  } catch (const Error& e) {
    fail("ltx bench: making the ", what, " with random weights on ", o.device.str(), " failed: ", e.what());
  }
  const double setup_s = seconds_since(t0);
  const bool quantized =
      std::string(kind) == "transformer" && o.quantization != quantization::Mode::None;
  log_info("bench: ", what, ": ", num(static_cast<double>(weights_bytes) / kGiB), " GiB of random ",
           dtype_name(o.model_dtype()), " weights",
           quantized ? str(" (--quantization ", quantization::mode_name(o.quantization), ")") : "",
           ggml ? str(", ", ggml_weights, " of them as ", *o.ggml_weights(), " GGML blocks") : "",
           " on ", o.device.str(), " in ", num(setup_s), " s");
  for (BenchCase* c : cases) {
    try {
      const std::function<void()> step = prepare(*model, *c);
      log_info("bench: ", c->label, ": ", o.warmup, " warm-up + ", o.iters, " timed calls");
      Timing t = time_calls(o.device, o.warmup, o.iters, step);
      t.weights_bytes = weights_bytes;
      t.ggml_weights = ggml_weights;
      t.setup_s = setup_s;
      c->ours = t;
      log_info("bench: ", c->label, ": median ", num(t.median_ms), " ms, peak ",
               num(static_cast<double>(t.peak_bytes) / kGiB), " GiB");
    } catch (const Error& e) {
      fail("ltx bench: ", c->label, " on ", o.device.str(), " failed: ", e.what());
    }
  }
}

// ------------------------------------------------------------------------------- transformer

struct TransformerInputs {
  tf::Modality video, audio;
};

Tensor to_device(const Tensor& t, Device device, DType dtype) {
  return t.defined() ? t.to(device, dtype) : t;
}

tf::Modality modality_on(const tf::Modality& m, Device device, DType model_dtype) {
  tf::Modality out = m;
  out.latent = to_device(m.latent, device, model_dtype);
  out.context = to_device(m.context, device, model_dtype);
  out.sigma = to_device(m.sigma, device, DType::F32);
  out.timesteps = to_device(m.timesteps, device, DType::F32);
  out.positions = to_device(m.positions, device, DType::F32);
  out.keyframes_mask = to_device(m.keyframes_mask, device, DType::F32);
  return out;
}

sampling::VideoPixelShape pixel_shape(const BenchCase& c, const Preset& p) {
  sampling::VideoPixelShape s;
  s.frames = c.frames;
  s.height = c.size.height;
  s.width = c.size.width;
  s.fps = p.fps;
  return s;
}

// The pure-noise states of a case (on the CPU, f32, each drawn from `gen` when asked for) and the
// widths of its text contexts (the connectors' output, or the 19B caption projection's input).
struct CaseShapes {
  const BenchCase& c;
  const Preset& p;
  const tf::LTXModelConfig& cfg;

  int64_t video_context_dim() const {
    return cfg.caption_projection ? cfg.caption_channels : cfg.cross_attention_dim;
  }
  int64_t audio_context_dim() const {
    return cfg.caption_projection ? cfg.caption_channels : cfg.audio_cross_attention_dim;
  }
  sampling::LatentState video_state(sampling::TorchCpuGenerator& gen, bool image_conditioned) const {
    sampling::VideoLatentTools tools;
    tools.target = sampling::VideoLatentShape::from_pixel_shape(pixel_shape(c, p), cfg.in_channels);
    tools.fps = p.fps;
    sampling::LatentState s = tools.create_initial_state(DType::F32, gen.randn(tools.target.shape()));
    if (image_conditioned) {
      // Tokens run frame by frame: the first latent frame's height x width tokens keep their
      // clean values (mask 0), as an image condition at frame 0 leaves them.
      std::vector<float> mask = s.denoise_mask.to_float_vector();
      const int64_t per_frame = tools.target.height * tools.target.width, tokens = s.denoise_mask.size(1);
      for (int64_t b = 0; b < s.batch(); ++b)
        std::fill_n(mask.begin() + b * tokens, std::min(per_frame, tokens), 0.f);
      s.denoise_mask = Tensor::from_vector(mask, s.denoise_mask.shape());
    }
    return s;
  }
  sampling::LatentState audio_state(sampling::TorchCpuGenerator& gen) const {
    sampling::AudioLatentTools tools;
    tools.target =
        sampling::AudioLatentShape::from_video_pixel_shape(pixel_shape(c, p), cfg.audio_in_channels / 16);
    return tools.create_initial_state(DType::F32, gen.randn(tools.target.shape()));
  }
};

pipelines::TimestepForm timestep_form(const BenchOptions& o) {
  return o.per_token_timesteps ? pipelines::TimestepForm::PerToken : pipelines::TimestepForm::PerSampleWhenUniform;
}

// What the distilled pipeline's stage hands the transformer for pure noise (no conditioning):
// noised latents, positions, timesteps sigma * 1 (one per sample, or per token with
// --per-token-timesteps), and unit-variance text contexts of
// the full length without a mask (the connectors' output stand-in).
TransformerInputs transformer_inputs(const BenchCase& c, const Preset& p, const tf::LTXModelConfig& cfg,
                                     const BenchOptions& o) {
  sampling::TorchCpuGenerator gen(static_cast<int64_t>(o.seed) + 10);
  const CaseShapes shapes{c, p, cfg};
  TransformerInputs in;
  const auto modality = [&](const sampling::LatentState& s, int64_t tokens, int64_t dim) {
    const Tensor ctx = gen.randn({1, tokens, dim});
    return modality_on(pipelines::modality_from_state(s, ctx, o.sigma, true, timestep_form(o)), o.device,
                       o.model_dtype());
  };
  const sampling::LatentState v = shapes.video_state(gen, o.image_conditioned);
  in.video = modality(v, c.tokens.video_text, shapes.video_context_dim());
  if (c.tokens.audio > 0) {
    const sampling::LatentState a = shapes.audio_state(gen);
    in.audio = modality(a, c.tokens.audio_text, shapes.audio_context_dim());
  }
  return in;
}

// --guided: the default guidance of the preset's generation (LTX_2_PARAMS for the 19B, 2.3's for
// 2.3 and the tiny preset, 2.4's for 2.5), its STG block moved into a smaller preset's range.
sampling::PipelineParams guided_params(const Preset& p, int64_t num_blocks) {
  sampling::PipelineParams q = sampling::detect_params(p.model_version);
  for (sampling::GuiderParams* g : {&q.video_guider, &q.audio_guider})
    for (int& b : g->stg_blocks) b = std::min<int>(b, static_cast<int>(num_blocks) - 1);
  return q;
}

int64_t guided_pass_count(const Preset& p, bool audio) {
  const sampling::PipelineParams& q = sampling::detect_params(p.model_version);
  const sampling::GuidancePlan plan = sampling::plan_guidance(
      sampling::MultiModalGuider(q.video_guider), sampling::MultiModalGuider(q.audio_guider), true, audio, 0);
  return static_cast<int64_t>(plan.passes.size());
}

// What one guided step reads: the states (as transformer_inputs makes them) and a positive and a
// negative context per stream.
struct GuidedInputs {
  sampling::LatentState video, audio;
  bool has_audio = false;
  pipelines::ModalityContext video_context, audio_context;
  std::vector<double> sigmas;
};

GuidedInputs guided_inputs(const BenchCase& c, const Preset& p, const tf::LTXModelConfig& cfg,
                           const BenchOptions& o) {
  sampling::TorchCpuGenerator gen(static_cast<int64_t>(o.seed) + 10);
  const CaseShapes shapes{c, p, cfg};
  GuidedInputs in;
  const auto context = [&](int64_t tokens, int64_t dim) {
    return gen.randn({1, tokens, dim}).to(o.device, o.model_dtype());
  };
  in.video = shapes.video_state(gen, o.image_conditioned).to(o.device);
  const int64_t vd = shapes.video_context_dim();
  in.video_context = {context(c.tokens.video_text, vd), context(c.tokens.video_text, vd)};
  if (c.tokens.audio > 0) {
    in.audio = shapes.audio_state(gen).to(o.device);
    const int64_t ad = shapes.audio_context_dim();
    in.audio_context = {context(c.tokens.audio_text, ad), context(c.tokens.audio_text, ad)};
    in.has_audio = true;
  }
  in.sigmas = {o.sigma, 0.0};
  return in;
}

// ||a - b|| / ||b|| over two tensors of one shape, summed in double on the host.
double rel_l2(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_float_vector(), y = b.to_float_vector();
  LTX_CHECK(x.size() == y.size(), "bench: outputs of different sizes");
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - y[i];
    num += d * d;
    den += static_cast<double>(y[i]) * y[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The quality of --quantization (or a quantized --weights-format) at full size: every transformer
// case's velocity under the mode against one step of the unquantized model, both from the same
// random weights (the synthesizer draws by name and seed) on the same inputs; one model on the
// device at a time. GGML weights are compared with the bf16 values their blocks were quantised
// from (RandomWeights::make_ggml_source), in the weights that the GGML run made as blocks.
void measure_quantization_error(BenchReport& r, const Preset& p, const tf::LTXModelConfig& cfg) {
  const BenchOptions& o = r.options;
  std::vector<BenchCase*> cases;
  for (BenchCase& c : r.cases)
    if (c.kind == "transformer" && c.ours) cases.push_back(&c);
  const std::optional<std::string> ggml = o.ggml_weights();
  if (cases.empty() || (o.quantization == quantization::Mode::None && !ggml) || o.guided) return;
  const GgmlRule rule = ggml ? transformer_gguf_rule(*ggml) : GgmlRule();
  auto made_as_blocks = std::make_shared<std::set<std::string>>();
  const GgmlRule twin_rule = [rule, made_as_blocks](const std::string& name, const Shape& shape) {
    return made_as_blocks->count(name) != 0 ? rule(name, shape) : std::nullopt;
  };
  // quantized: the mode, or the GGML blocks; otherwise the reference.
  const auto outputs = [&](bool quantized) {
    const quantization::Mode mode = quantized ? o.quantization : quantization::Mode::None;
    backend::release_cached_memory(o.device);
    RandomWeights rw(transformer_init, o.seed);
    io::GgmlSynthesizer blocks;
    if (ggml && quantized) {
      blocks = rw.ggml_synthesizer(rule);
      blocks.make = [&rw, made_as_blocks](const std::string& name, const Shape& shape, GgmlType type,
                                          Device device) {
        made_as_blocks->insert(name);
        return rw.make_ggml(name, shape, type, device);
      };
    }
    io::WeightMap w = io::WeightMap::synthetic(
        ggml && !quantized ? rw.ggml_source_synthesizer(twin_rule) : rw.synthesizer(), blocks);
    const tf::LTXModel model =
        tf::LTXModel::load(w, cfg, {o.model_dtype(), o.device, mode},
                           models::BlockStreaming{o.offload_slots, o.offload_from_file});
    std::vector<tf::ModelOutputs> out;
    for (BenchCase* c : cases) {
      const TransformerInputs in = transformer_inputs(*c, p, cfg, o);
      const bool audio = in.audio.latent.defined();
      // The velocity (the transformer's own output): the denoised x0 is mostly the input latent.
      tf::ModelOutputs y = model.forward(&in.video, audio ? &in.audio : nullptr, nullptr);
      if (y.video.defined()) y.video = y.video.to(Device::cpu(), DType::F32);
      if (y.audio.defined()) y.audio = y.audio.to(Device::cpu(), DType::F32);
      out.push_back(std::move(y));
    }
    return out;
  };
  const std::string what = ggml ? str("--weights-format ", *ggml)
                                : str("--quantization ", quantization::mode_name(o.quantization));
  log_info("bench: rel L2 of ", what, " vs one unquantized ", dtype_name(o.model_dtype()),
           " step (same random weights and inputs)");
  try {
    const std::vector<tf::ModelOutputs> q = outputs(true);
    const std::vector<tf::ModelOutputs> d = outputs(false);
    for (size_t i = 0; i < cases.size(); ++i) {
      BenchCase& c = *cases[i];
      c.quant_rel_l2_video = rel_l2(q[i].video, d[i].video);
      if (q[i].audio.defined() && d[i].audio.defined())
        c.quant_rel_l2_audio = rel_l2(q[i].audio, d[i].audio);
      log_info("bench: ", c.label, ": rel L2 vs unquantized: video ", fmt("%.3e", *c.quant_rel_l2_video),
               c.quant_rel_l2_audio ? str(", audio ", fmt("%.3e", *c.quant_rel_l2_audio)) : "");
    }
  } catch (const Error& e) {
    fail("ltx bench: the rel L2 of ", what, " against the unquantized step failed: ", e.what());
  }
}

void run_transformer_cases(BenchReport& r, const Preset& p) {
  const tf::LTXModelConfig cfg = p.transformer_config();
  const BenchOptions& o = r.options;
  time_model_cases<tf::LTXModel>(
      r, "transformer", p.name + " transformer", transformer_init,
      o.ggml_weights() ? transformer_gguf_rule(*o.ggml_weights()) : GgmlRule(),
      [&](io::WeightMap& w) {
        return tf::LTXModel::load(w, cfg, {o.model_dtype(), o.device, o.quantization},
                                  models::BlockStreaming{o.offload_slots, o.offload_from_file});
      },
      [&](const tf::LTXModel& model, const BenchCase& c) -> std::function<void()> {
        if (o.guided) {
          auto in = std::make_shared<GuidedInputs>(guided_inputs(c, p, cfg, o));
          const sampling::PipelineParams q = guided_params(p, model.num_blocks());
          auto denoiser = std::make_shared<pipelines::GuidedDenoiser>(
              model, in->video_context, in->audio_context, q.video_guider, q.audio_guider);
          denoiser->set_share_text_kv(o.share_text_kv);
          denoiser->set_timestep_form(timestep_form(o));
          log_info("bench: ", c.label, ": one guided step, ", c.passes, " passes batched (",
                   o.share_text_kv ? "text K/V shared by the positive passes" : "text K/V per pass", ")");
          return [in, denoiser] {
            (void)(*denoiser)(&in->video, in->has_audio ? &in->audio : nullptr, in->sigmas, 0);
          };
        }
        auto in = std::make_shared<const TransformerInputs>(transformer_inputs(c, p, cfg, o));
        log_info("bench: ", c.label, ": ", c.tokens.video, " video + ", c.tokens.audio, " audio tokens, ",
                 c.tokens.video_text, " text tokens");
        auto step = [&model, in] {
          const bool audio = in->audio.latent.defined();
          const tf::ModelOutputs out = tf::X0Model{model}(&in->video, audio ? &in->audio : nullptr, nullptr);
          (void)out;
        };
        if (!o.cuda_graph) return step;
        // Recorded here, untimed: one eager run, then the recording (and its launch).
        auto graph = std::make_shared<backend::StepGraph>(o.device);
        graph->run(step);
        graph->run(step);
        backend::synchronize(o.device);
        log_info("bench: ", c.label, ": step recorded as a CUDA graph");
        return [graph, step] { graph->run(step); };
      });
  measure_quantization_error(r, p, cfg);
}

// ------------------------------------------------------------------------------- VAE

std::optional<models::tiling::TilingConfig> vae_tiling(const BenchCase& c, const BenchOptions& o) {
  if (!o.vae_tiling) return std::nullopt;
  return models::tiling::auto_tiling_config(c.size.height, c.size.width);
}

void run_vae_cases(BenchReport& r, const Preset& p) {
  if (!p.has_conv_vae()) return;  // plan() made no VAE case
  const vae::DecoderConfig cfg = p.decoder_config();
  const BenchOptions& o = r.options;
  time_model_cases<vae::ConvVideoDecoder>(
      r, "vae_decode", p.name + " video VAE decoder", vae_init, GgmlRule(),
      [&](io::WeightMap& w) { return vae::ConvVideoDecoder::load(w, cfg, {o.model_dtype(), o.device}); },
      [&](const vae::ConvVideoDecoder& decoder, const BenchCase& c) -> std::function<void()> {
        auto gen = std::make_shared<sampling::TorchCpuGenerator>(static_cast<int64_t>(o.seed) + 1);
        const Tensor latent = gen->randn(c.latent).to(o.device, o.model_dtype());
        const auto tiling = vae_tiling(c, o);
        // Drawn only by timestep-conditioned decoders (not the 2.3 one).
        const Device device = o.device;
        const vae::NoiseFn noise = [gen, device](const Shape& s) { return gen->randn(s).to(device); };
        log_info("bench: ", c.label, ": latent ", c.latent.str(), ", ", c.tiles, " tile(s)");
        return [&decoder, latent, tiling, noise, frames = c.frames] {
          int64_t made = 0;
          decoder.decode_video(latent, tiling, noise, [&](const Tensor& chunk) { made += chunk.size(0); });
          LTX_CHECK(made == frames, "the decode produced ", made, " frames, expected ", frames);
        };
      });
}

// ------------------------------------------------------------------------------- diffusion decoder

void run_diffusion_cases(BenchReport& r, const Preset& p) {
  if (!p.has_diffusion_decoder()) return;
  const vae::DiffusionDecoderConfig cfg = p.diffusion_decoder_config();
  const BenchOptions& o = r.options;
  time_model_cases<vae::DiffusionVideoDecoder>(
      r, "diffusion_decode", p.name + " diffusion video decoder", diffusion_vae_init, GgmlRule(),
      [&](io::WeightMap& w) { return vae::DiffusionVideoDecoder::load(w, cfg, {o.model_dtype(), o.device}); },
      [&](const vae::DiffusionVideoDecoder& decoder, const BenchCase& c) -> std::function<void()> {
        sampling::TorchCpuGenerator gen(static_cast<int64_t>(o.seed) + 2);
        const Tensor latent = gen.randn(c.latent).to(o.device, o.model_dtype());
        // The decoder's noise (drawn per tile, of the tile's stage-5 canvas, by the 1-step x0
        // decoder) is made on the device from a seeded N(0, 1) pool like the random weights: the
        // host generator would add seconds per 121x1024x1536 canvas to the timed call (the official
        // script draws it with a CUDA generator).
        auto pool = std::make_shared<RandomWeights>([](const std::string&, const Shape&) { return Init::normal(1.0); },
                                                    o.seed + 2);
        const Device device = o.device;
        const DType dtype = o.model_dtype();
        const vae::NoiseFn noise = [pool, device, dtype](const Shape& s) {
          return pool->make("decoder noise", s, dtype, device);
        };
        log_info("bench: ", c.label, ": latent ", c.latent.str(), ", ",
                 c.decode_tiling ? models::tiling::describe(*c.decode_tiling) : std::string("one tile"));
        return [&decoder, latent, tiling = c.decode_tiling, noise, frames = c.frames] {
          int64_t made = 0;
          decoder.decode_video(latent, tiling, noise, [&](const Tensor& chunk) { made += chunk.size(0); });
          LTX_CHECK(made == frames, "the decode produced ", made, " frames, expected ", frames);
        };
      });
}

// ------------------------------------------------------------------------------- official

const char* short_section(const std::string& title) {
  if (title == "LTX-2.3 eager") return "eager";
  if (title == "LTX-2.3 compiled") return "compiled";
  if (title == "LTX-2.3 compiled+capture") return "capture";
  if (title == "LTX-2.5 eager") return "eager";
  if (title == "VAE decode") return "eager";
  if (title.starts_with("diffusion decoder")) return "eager";  // no torch.compile in its mode
  return "?";
}

std::optional<double> number_at(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return std::nullopt;
  return obj[key].get<double>();
}

// The token count at inputs[key][1] (a [B, T, C] shape), when recorded.
std::optional<int64_t> recorded_tokens(const nlohmann::json& r, const char* key) {
  if (!r.contains("inputs") || !r["inputs"].is_object()) return std::nullopt;
  const nlohmann::json& s = r["inputs"].value(key, nlohmann::json());
  if (!s.is_array() || s.size() < 2 || !s[1].is_number_integer()) return std::nullopt;
  return s[1].get<int64_t>();
}

OfficialValue official_value(const std::string& section, const nlohmann::json& r) {
  OfficialValue v;
  v.section = section;
  v.median_ms = *number_at(r, "median_ms");
  v.min_ms = number_at(r, "min_ms").value_or(v.median_ms);
  v.peak_gib = number_at(r, "peak_allocated_GiB");
  if (r.contains("analytic")) v.analytic_flops = number_at(r["analytic"], "total_flops");
  return v;
}

}  // namespace

// ------------------------------------------------------------------------------- options

DType BenchOptions::model_dtype() const {
  return dtype.value_or(device.is_cuda() ? DType::BF16 : DType::F32);
}


std::optional<std::string> BenchOptions::ggml_weights() const {
  return weights_format_ggml_type(weights_format);
}

void BenchOptions::validate() const {
  (void)bench::preset(preset);  // throws for an unknown name
  check_weights_format(weights_format, model_dtype(), quantization);
  LTX_CHECK(warmup >= 0, "--warmup: must be >= 0, got ", warmup);
  LTX_CHECK(iters >= 1, "--iters: must be >= 1, got ", iters);
  if (frames)
    LTX_CHECK(*frames >= 1 && (*frames - 1) % 8 == 0, "--frames: ", *frames,
              " is not 8k + 1 (the VAE's temporal factor is 8: 9, 17, ..., 121)");
  if (text_tokens) LTX_CHECK(*text_tokens >= 1, "--text-tokens: must be >= 1, got ", *text_tokens);
  const DType dt = model_dtype();
  LTX_CHECK(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16, "--dtype: ", dtype_name(dt),
            " is not a model dtype; use f32 or bf16");
  LTX_CHECK(!device.is_cpu() || dt == DType::F32, "--dtype ", dtype_name(dt),
            ": the CPU backend computes in f32; use --dtype f32 with --device cpu");
  LTX_CHECK(ceilings.gemm_tflops > 0 && ceilings.attention_tflops > 0,
            "--gemm-tflops / --attention-tflops: must be positive, got ", ceilings.gemm_tflops, " / ",
            ceilings.attention_tflops);
  LTX_CHECK(sigma >= 0 && sigma <= 1, "sigma: must be in [0, 1], got ", sigma);
  LTX_CHECK(!cuda_graph || device.is_cuda(),
            "--cuda-graph: CUDA graphs need --device cuda (the CPU runs every step as it comes)");
  LTX_CHECK(offload_slots == 0 || device.is_cuda(),
            "--offload streams the transformer's blocks to a GPU; use --device cuda");
  // The streamed pass forks a copy stream per call; it is timed as the pipelines run it, eagerly.
  LTX_CHECK(offload_slots == 0 || !cuda_graph,
            "--cuda-graph with --offload: streamed blocks are timed eagerly; drop one of the two");
  LTX_CHECK(!(cuda_graph && guided), "--cuda-graph with --guided: the guided step is timed eagerly, "
            "as the pipelines run it; drop one of the two");
  LTX_CHECK(guided || share_text_kv, "--no-text-kv-share applies to --guided only");
  if (decode_free_bytes)
    LTX_CHECK(*decode_free_bytes > 0, "--decode-free-gib: must be positive, got ", *decode_free_bytes, " bytes");
}

std::optional<double> BenchCase::ratio() const {
  if (!ours || !official_choice) return std::nullopt;
  return ours->median_ms / official[*official_choice].median_ms;
}

std::optional<double> BenchCase::percent_of_floor() const {
  if (!ours || ours->median_ms <= 0) return std::nullopt;
  return 100.0 * floor_ms / ours->median_ms;
}

// ------------------------------------------------------------------------------- plan / run

namespace {

// The diffusion decode of the preset's decoder at --vae-size x --frames, tiled as the pipelines
// do by default (the reference's AUTO_TILING: recommended_decode_tiling from the free memory and
// the decoder's weight bytes, as generate's decode does), in the CHUNKED_EAGER layout.
BenchCase diffusion_case(const BenchOptions& o, const Preset& p, int64_t frames) {
  const vae::DiffusionDecoderConfig cfg = p.diffusion_decoder_config();  // throws without one
  BenchCase c;
  c.kind = "diffusion_decode";
  c.size = o.vae_size.value_or(p.vae_size);  // a multiple of 32 (parse_video_size)
  c.frames = frames;                         // 8k + 1 (validate)
  c.mode = kDiffusionMode;
  c.latent = {1, cfg.in_channels, (frames - 1) / 8 + 1, c.size.height / 32, c.size.width / 32};
  if (o.vae_tiling) {
    vae::DiffusionTilingBudget budget;  // the CHUNKED_EAGER memory model
    if (o.decode_free_bytes) {
      budget.free_bytes = *o.decode_free_bytes;
    } else {
      try {
        budget.free_bytes = backend::free_memory_bytes(o.device);
      } catch (const Error& e) {
        fail("diffusion decode: its automatic tiling needs the free memory of ", o.device.str(), ": ", e.what(),
             "; give the budget with --decode-free-gib G to plan without the device");
      }
    }
    budget.element_size = static_cast<int64_t>(dtype_size(o.model_dtype()));
    // The official script's model_bytes: every decoder parameter at the activation width.
    budget.model_bytes = count_parameters([&](io::WeightMap& w) {
                           (void)vae::DiffusionVideoDecoder::load(w, cfg);
                         }) * budget.element_size;
    c.decode_free_bytes = budget.free_bytes;
    try {
      c.decode_tiling = vae::recommended_decode_tiling(vae::diffusion_tiling_geometry(cfg), c.size.height,
                                                       c.size.width, frames, budget);
    } catch (const Error& e) {
      fail("diffusion decode ", c.size.str(), "x", frames, ": ", e.what(), " (",
           num(static_cast<double>(budget.free_bytes) / kGiB), " GiB free",
           o.decode_free_bytes ? ", from --decode-free-gib" : str(" on ", o.device.str()),
           "; give another budget with --decode-free-gib or decode in one tile with --no-tiling)");
    }
  }
  c.flops = diffusion_decoder_flops(cfg, c.latent, c.decode_tiling, vae::Stage5Attention::WChunked,
                                    kDiffusionWChunks, &c.tiles);
  c.label = str("diffusion decode ", c.size.str(), "x", frames, " (",
                o.vae_tiling ? str(c.tiles, c.tiles == 1 ? " tile" : " tiles") : std::string("untiled"),
                ", ", c.mode, ")");
  c.floor_ms = floor_ms(c.flops, o.ceilings);
  return c;
}

}  // namespace

BenchReport plan(const BenchOptions& o, BenchTarget target) {
  o.validate();
  const Preset p = preset(o.preset);
  BenchReport r;
  r.options = o;
  r.preset_description = p.description;
  r.device_description = o.device.str();
  const int64_t frames = frames_of(o, p);
  if (target == BenchTarget::All || target == BenchTarget::Transformer) {
    const tf::LTXModelConfig cfg = p.transformer_config();
    const std::vector<VideoSize> sizes = o.sizes.empty() ? p.transformer_sizes : o.sizes;
    for (const VideoSize& size : sizes) {
      BenchCase c;
      c.kind = "transformer";
      c.size = size;
      c.frames = frames;
      const sampling::VideoPixelShape pixels = pixel_shape(c, p);
      const sampling::VideoLatentShape vl =
          sampling::VideoLatentShape::from_pixel_shape(pixels, cfg.in_channels);
      c.tokens.video = vl.token_count();
      c.tokens.video_text = text_tokens_of(o, p);
      if (o.audio) {
        c.tokens.audio =
            sampling::AudioLatentShape::from_video_pixel_shape(pixels, cfg.audio_in_channels / 16).token_count();
        c.tokens.audio_text = c.tokens.video_text;
      }
      c.label = str("transformer ", size.str(), "x", frames, o.audio ? " +audio" : "",
                    o.cuda_graph ? " graph" : "", o.offload_slots == 0 ? "" : o.offload_from_file ? " offload-disk" : " offload-cpu",
                    o.image_conditioned ? " image-cond" : "",
                    o.per_token_timesteps ? " per-token-ts" : "");
      c.flops = transformer_flops(cfg, c.tokens);
      if (o.guided) {
        c.passes = guided_pass_count(p, o.audio);
        FlopCount all;
        all.add(c.flops, c.passes);
        c.flops = all;
        c.label += str(" guided x", c.passes, o.share_text_kv ? "" : " kv-per-pass");
      }
      c.floor_ms = floor_ms(c.flops, o.ceilings);
      r.cases.push_back(std::move(c));
    }
  }
  if (target == BenchTarget::Vae || (target == BenchTarget::All && p.has_conv_vae())) {
    const vae::DecoderConfig cfg = p.decoder_config();  // throws without one
    BenchCase c;
    c.kind = "vae_decode";
    c.size = o.vae_size.value_or(p.vae_size);
    c.frames = frames;
    const models::tiling::ScaleFactors s = cfg.scale_factors();
    LTX_CHECK(c.size.height % s.height == 0 && c.size.width % s.width == 0 && (frames - 1) % s.time == 0,
              "--vae-size / --frames: ", c.size.str(), "x", frames, " does not fit the VAE's ", s.time,
              "x", s.height, "x", s.width, " grid");
    c.latent = {1, cfg.latent_channels, (frames - 1) / s.time + 1, c.size.height / s.height,
                c.size.width / s.width};
    const auto tiling = vae_tiling(c, o);
    c.tiles = static_cast<int64_t>(
        vae::prepare_tiles_for_decoding(
            c.latent, {1, cfg.out_channels, frames, c.size.height, c.size.width}, s, tiling)
            .size());
    c.label = str("vae decode ", c.size.str(), "x", frames, o.vae_tiling ? "" : " untiled");
    c.flops = tiled_decoder_flops(cfg, c.latent, tiling);
    // Convolutions are implicit GEMMs: all of it at the GEMM ceiling.
    c.floor_ms = floor_ms(c.flops, o.ceilings);
    r.cases.push_back(std::move(c));
  }
  const bool diffusion = target == BenchTarget::DiffusionDecoder ||
                         (target == BenchTarget::All && p.has_diffusion_decoder());
  if (diffusion) r.cases.push_back(diffusion_case(o, p, frames));
  return r;
}

void run(BenchReport& r) {
  const BenchOptions& o = r.options;
  o.validate();
  backend::check_device(o.device);
  r.device_description = str(o.device.str(), " ", backend::device_description(o.device));
  const Preset p = preset(o.preset);
  run_transformer_cases(r, p);
  backend::release_cached_memory(o.device);
  run_vae_cases(r, p);
  backend::release_cached_memory(o.device);
  run_diffusion_cases(r, p);
}

OfficialChoice parse_official_choice(const std::string& text) {
  if (text == "best") return OfficialChoice::Best;
  if (text == "eager") return OfficialChoice::Eager;
  if (text == "compiled") return OfficialChoice::Compiled;
  if (text == "capture") return OfficialChoice::Capture;
  fail("--official-section: unknown value '", text, "'; choose best, eager, compiled or capture");
}

void attach_official(BenchReport& r, const std::string& path, OfficialChoice choice) {
  std::ifstream f(path);
  LTX_CHECK(f.good(), "--official ", path, ": cannot open the file; pass the JSON that ",
            "tools/bench/bench_official.py or bench_official_diffdec.py wrote ($OUT/bench_official.json, ",
            "$OUT/bench_official_diffdec.json)");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail("--official ", path, ": not valid JSON (", e.what(), ")");
  }
  attach_official(r, doc, path, choice);
}

namespace {

bool is_sections_result(const nlohmann::json& doc) {
  return doc.is_object() && doc.contains("sections") && doc["sections"].is_object();
}
bool is_diffdec_result(const nlohmann::json& doc) {
  return doc.is_object() && doc.contains("runs") && doc["runs"].is_array();
}

// bench_official.py: the transformer sections of the preset's model and the conv VAE decode.
void attach_sections(BenchReport& r, const nlohmann::json& sections) {
  const BenchOptions& o = r.options;
  std::vector<const char*> titles;
  if (o.preset == "ltx23-22b") titles = {"LTX-2.3 eager", "LTX-2.3 compiled", "LTX-2.3 compiled+capture"};
  if (o.preset == "ltx25-22b") titles = {"LTX-2.5 eager"};
  const bool official_vae = !titles.empty();  // 2.3 and 2.5 share the conv VAE config
  for (BenchCase& c : r.cases) {
    if (c.kind != "transformer" && c.kind != "vae_decode") continue;
    c.official.clear();
    c.official_choice.reset();
    if (c.frames != kOfficialFrames) continue;
    if (c.kind == "transformer") {
      if (c.tokens.audio == 0 || c.tokens.video_text != kOfficialTextTokens) continue;
      for (const char* title : titles) {
        if (!sections.contains(title) || !sections[title].is_object()) continue;
        for (const auto& [key, res] : sections[title].items()) {
          if (!res.is_object() || !number_at(res, "median_ms") || !key.ends_with(" " + c.size.str()))
            continue;
          const auto v = recorded_tokens(res, "video_tokens"), a = recorded_tokens(res, "audio_tokens");
          if ((v && *v != c.tokens.video) || (a && *a != c.tokens.audio)) continue;
          c.official.push_back(official_value(title, res));
        }
      }
    } else if (official_vae && c.size == kOfficialVaeSize && o.vae_tiling) {
      const nlohmann::json& s = sections.value("VAE decode", nlohmann::json());
      if (number_at(s, "median_ms")) c.official.push_back(official_value("VAE decode", s));
    }
  }
}

// bench_official_diffdec.py: the warm runs of the diffusion decode of our latent.
void attach_diffdec(BenchReport& r, const nlohmann::json& doc) {
  const BenchOptions& o = r.options;
  const nlohmann::json& mode = doc.value("mode", nlohmann::json());
  const std::string their_mode = mode.is_object() ? mode.value("mode", kDiffusionMode) : kDiffusionMode;
  const std::optional<double> their_free = number_at(doc, "free_bytes");
  for (BenchCase& c : r.cases) {
    if (c.kind != "diffusion_decode") continue;
    c.official.clear();
    c.official_choice.reset();
    if (o.preset != "ltx25-22b" || !o.vae_tiling || their_mode != c.mode) continue;
    std::vector<const nlohmann::json*> runs;
    for (const nlohmann::json& run : doc["runs"]) {
      if (!run.is_object() || !number_at(run, "wall_s") || run.value("latent", nlohmann::json()) != c.latent.vec())
        continue;
      // The calibration run absorbs the Triton JIT compile: not a warm decode.
      const nlohmann::json& label = run.value("label", nlohmann::json());
      if (label.is_string() && label.get<std::string>().starts_with("calibration")) continue;
      runs.push_back(&run);
    }
    if (runs.empty()) continue;
    // The script's rule: the first full run is warm-up when there are several.
    std::vector<double> warm;
    for (size_t i = runs.size() > 1 ? 1 : 0; i < runs.size(); ++i) warm.push_back(*number_at(*runs[i], "wall_s") * 1e3);
    OfficialValue v;
    v.section = str("diffusion decoder (", their_mode, ")");
    v.median_ms = median_of(warm);
    v.min_ms = *std::min_element(warm.begin(), warm.end());
    for (const nlohmann::json* run : runs)
      if (const auto peak = number_at(*run, "peak_allocated_GiB")) v.peak_gib = std::max(v.peak_gib.value_or(0), *peak);
    const nlohmann::json& last = *runs.back();
    if (last.contains("n_tiles") && last["n_tiles"].is_number_integer()) v.tiles = last["n_tiles"].get<int64_t>();
    if (last.contains("tiling") && last["tiling"].is_string()) v.tiling = last["tiling"].get<std::string>();
    if (v.tiles && *v.tiles != c.tiles)
      log_warn("bench: ", c.label, ": the official decode ran ", *v.tiles, " tile(s) (", v.tiling, ", chosen for ",
               their_free ? num(*their_free / kGiB) : std::string("?"), " GiB free), ours ", c.tiles,
               " (for ", c.decode_free_bytes ? num(static_cast<double>(*c.decode_free_bytes) / kGiB) : std::string("?"),
               " GiB free): the times are not comparable; plan with its budget: --decode-free-gib ",
               their_free ? fmt("%.6g", *their_free / kGiB) : std::string("G"));
    c.official.push_back(std::move(v));
  }
}

}  // namespace

void attach_official(BenchReport& r, const nlohmann::json& doc, const std::string& source,
                     OfficialChoice choice) {
  const bool sections = is_sections_result(doc), diffdec = is_diffdec_result(doc);
  LTX_CHECK(sections || diffdec, "--official ", source, ": neither a \"sections\" object (bench_official.py) ",
            "nor a \"runs\" list (bench_official_diffdec.py); this is not an official benchmark result");
  const nlohmann::json env = doc.value("env", nlohmann::json());
  const auto known = std::find(r.official_files.begin(), r.official_files.end(), source);
  if (known == r.official_files.end()) {
    r.official_files.push_back(source);
    r.official_envs.push_back(env);
  } else {
    r.official_envs[static_cast<size_t>(known - r.official_files.begin())] = env;
  }
  if (sections) attach_sections(r, doc["sections"]);
  if (diffdec) attach_diffdec(r, doc);
  for (BenchCase& c : r.cases) {
    const bool filled = c.kind == "diffusion_decode" ? diffdec : sections;
    if (!filled) continue;
    for (const OfficialValue& v : c.official) {
      const double ours = static_cast<double>(c.flops.total());
      if (v.analytic_flops && std::abs(ours - *v.analytic_flops) > 0.02 * *v.analytic_flops)
        log_warn("bench: ", c.label, ": our FLOP model gives ", ours / 1e12, " TFLOP, the official "
                 "script's ", *v.analytic_flops / 1e12, " TFLOP (", v.section, "); check the shapes");
    }
    for (size_t i = 0; i < c.official.size(); ++i) {
      const std::string which = short_section(c.official[i].section);
      const bool wanted = choice == OfficialChoice::Best
                              ? !c.official_choice || c.official[i].median_ms < c.official[*c.official_choice].median_ms
                              : (choice == OfficialChoice::Eager && which == "eager") ||
                                    (choice == OfficialChoice::Compiled && which == "compiled") ||
                                    (choice == OfficialChoice::Capture && which == "capture");
      if (wanted) c.official_choice = i;
    }
  }
}

// ------------------------------------------------------------------------------- output

namespace {

std::string pad(const std::string& s, size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

nlohmann::ordered_json flops_json(const FlopCount& f) {
  nlohmann::ordered_json j;
  j["gemm"] = f.gemm();
  j["attention"] = f.attention();
  j["total"] = f.total();
  nlohmann::ordered_json terms = nlohmann::ordered_json::object();
  for (const FlopTerm& t : f.terms) terms[t.name] = {{"gemm", t.gemm}, {"attention", t.attention}};
  j["terms"] = terms;
  return j;
}

}  // namespace

std::string format_table(const BenchReport& r) {
  const BenchOptions& o = r.options;
  std::ostringstream os;
  const bool timed = std::any_of(r.cases.begin(), r.cases.end(), [](const BenchCase& c) { return c.ours.has_value(); });
  os << "ltx bench: preset " << o.preset << ", ";
  if (timed)
    os << r.device_description << ", " << dtype_name(o.model_dtype())
       << (o.quantization == quantization::Mode::None
               ? std::string()
               : std::string(" (transformer --quantization ") +
                     quantization::mode_name(o.quantization) + ")")
       << (o.ggml_weights() ? " (transformer --weights-format " + *o.ggml_weights() + ")" : std::string())
       << ", " << o.warmup << " warm-up + "
       << o.iters << " timed iterations\n";
  else
    os << "FLOP model only (nothing timed)\n";
  for (size_t i = 0; i < r.official_files.size(); ++i) {
    const nlohmann::json& env = r.official_envs[i];
    os << "official: " << r.official_files[i];
    if (env.is_object()) os << " (torch " << env.value("torch", "?") << ", " << env.value("gpu", "?") << ")";
    os << "\n";
  }
  std::vector<size_t> w = {4, 8, 9, 9, 9, 9, 19, 9, 8, 8};
  for (const BenchCase& c : r.cases) w[0] = std::max(w[0], c.label.size());
  const std::vector<std::string> head = {"case", "TFLOP", "floor ms", "ours ms", "min ms", "peak GiB",
                                         "official ms", "off. GiB", "ours/off", "% floor"};
  for (size_t i = 0; i < head.size(); ++i) os << (i ? " " : "") << pad(head[i], w[i], i == 0);
  os << "\n";
  const std::string none = "-";
  for (const BenchCase& c : r.cases) {
    std::vector<std::string> cells(head.size(), none);
    cells[0] = c.label;
    cells[1] = num(static_cast<double>(c.flops.total()) / 1e12);
    cells[2] = num(c.floor_ms);
    if (c.ours) {
      cells[3] = num(c.ours->median_ms);
      cells[4] = num(c.ours->min_ms);
      cells[5] = num(static_cast<double>(c.ours->peak_bytes) / kGiB);
    }
    if (c.official_choice) {
      const OfficialValue& v = c.official[*c.official_choice];
      cells[6] = num(v.median_ms) + " (" + short_section(v.section) + ")";
      if (v.peak_gib) cells[7] = num(*v.peak_gib);
    }
    if (const auto x = c.ratio()) cells[8] = fmt("%.2f", *x);
    if (const auto x = c.percent_of_floor()) cells[9] = num(*x);
    for (size_t i = 0; i < cells.size(); ++i) os << (i ? " " : "") << pad(cells[i], w[i], i == 0);
    os << "\n";
  }
  os << "floor: GEMM/conv FLOPs at " << fmt("%g", o.ceilings.gemm_tflops) << " TFLOP/s + attention FLOPs at "
     << fmt("%g", o.ceilings.attention_tflops) << " TFLOP/s; ours/off < 1: faster than the official stack\n";
  // The clock the times were made at (a GPU at its power limit runs below its maximum clock).
  for (const BenchCase& c : r.cases)
    if (c.ours && c.ours->gpu) os << "GPU during " << c.label << ": " << profiling::describe(*c.ours->gpu) << "\n";
  for (const BenchCase& c : r.cases)
    if (c.ours && c.kind == "transformer" && o.ggml_weights())
      os << c.label << ": weights " << num(static_cast<double>(c.ours->weights_bytes) / kGiB)
         << " GiB, " << c.ours->ggml_weights << " linear weights as " << *o.ggml_weights()
         << " GGML blocks, the rest " << dtype_name(o.model_dtype()) << "\n";
  for (const BenchCase& c : r.cases)
    if (c.quant_rel_l2_video)
      os << c.label << ": "
         << (o.ggml_weights() ? "--weights-format " + *o.ggml_weights() +
                                    " vs one step on the bf16 values the blocks were quantised from"
                              : "--quantization " + std::string(quantization::mode_name(o.quantization)) +
                                    " vs one unquantized step")
         << " (same random weights and inputs): rel L2 video "
         << fmt("%.3e", *c.quant_rel_l2_video)
         << (c.quant_rel_l2_audio ? ", audio " + fmt("%.3e", *c.quant_rel_l2_audio) : std::string())
         << "\n";
  return os.str();
}

nlohmann::ordered_json to_json(const BenchReport& r) {
  const BenchOptions& o = r.options;
  nlohmann::ordered_json j;
  j["tool"] = "ltx bench";
  j["preset"] = o.preset;
  j["preset_description"] = r.preset_description;
  j["device"] = o.device.str();
  j["device_description"] = r.device_description;
  j["dtype"] = dtype_name(o.model_dtype());
  j["quantization"] = quantization::mode_name(o.quantization);
  // The transformer's linear weights: "dense" (in "dtype") or the GGML block type.
  j["weights_format"] = o.ggml_weights().value_or("dense");
  j["warmup"] = o.warmup;
  j["cuda_graph"] = o.cuda_graph;
  j["offload_slots"] = o.offload_slots;
  j["offload_from_file"] = o.offload_from_file;
  // The transformer's audio half on a side stream (LTX_SIDE_STREAMS=0 turns it off; CUDA only).
  j["side_streams"] = o.device.is_cuda() && backend::side_streams_enabled();
  j["guided"] = o.guided;
  if (o.guided) j["share_text_kv"] = o.share_text_kv;
  j["per_token_timesteps"] = o.per_token_timesteps;
  j["image_conditioned"] = o.image_conditioned;
  j["iters"] = o.iters;
  j["seed"] = o.seed;
  j["sigma"] = o.sigma;
  j["ceilings_tflops"] = {{"gemm", o.ceilings.gemm_tflops}, {"attention", o.ceilings.attention_tflops}};
  if (!r.official_files.empty()) {
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (size_t i = 0; i < r.official_files.size(); ++i)
      files.push_back({{"file", r.official_files[i]}, {"env", r.official_envs[i]}});
    j["official_files"] = files;
  }
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const BenchCase& c : r.cases) {
    nlohmann::ordered_json e;
    e["kind"] = c.kind;
    e["label"] = c.label;
    e["width"] = c.size.width;
    e["height"] = c.size.height;
    e["frames"] = c.frames;
    if (c.kind == "transformer") {
      e["tokens"] = {{"video", c.tokens.video},
                     {"audio", c.tokens.audio},
                     {"video_text", c.tokens.video_text},
                     {"audio_text", c.tokens.audio_text}};
      if (c.passes > 1) e["passes"] = c.passes;
    } else {
      e["latent"] = c.latent.vec();
      e["tiles"] = c.tiles;
      if (c.kind == "diffusion_decode") {
        e["mode"] = c.mode;
        e["tiling"] = c.decode_tiling ? nlohmann::ordered_json(models::tiling::describe(*c.decode_tiling))
                                      : nlohmann::ordered_json();
        e["decode_free_bytes"] =
            c.decode_free_bytes ? nlohmann::ordered_json(*c.decode_free_bytes) : nlohmann::ordered_json();
      }
    }
    e["flops"] = flops_json(c.flops);
    e["floor_ms"] = c.floor_ms;
    if (c.ours) {
      const Timing& t = *c.ours;
      e["ours"] = {{"median_ms", t.median_ms},
                   {"min_ms", t.min_ms},
                   {"max_ms", t.max_ms},
                   {"all_ms", t.ms},
                   {"peak_bytes", t.peak_bytes},
                   {"peak_gib", static_cast<double>(t.peak_bytes) / kGiB},
                   {"peak_reserved_gib", static_cast<double>(t.peak_reserved_bytes) / kGiB},
                   {"weights_gib", static_cast<double>(t.weights_bytes) / kGiB},
                   {"weights_bytes", t.weights_bytes},
                   {"ggml_weights", t.ggml_weights},
                   {"setup_s", t.setup_s},
                   {"achieved_tflops", static_cast<double>(c.flops.total()) / (t.median_ms * 1e9)}};
      if (t.gpu) {
        const profiling::GpuStateSummary& g = *t.gpu;
        e["ours"]["gpu"] = {{"samples", g.samples},
                            {"mean_sm_mhz", g.mean_sm_mhz},
                            {"min_sm_mhz", g.min_sm_mhz},
                            {"max_sm_mhz", g.max_sm_mhz},
                            {"mean_power_w", g.mean_power_w},
                            {"power_limit_w", g.power_limit_w},
                            {"power_capped_fraction", g.power_capped_fraction}};
      } else {
        e["ours"]["gpu"] = nullptr;
      }
    } else {
      e["ours"] = nullptr;
    }
    if (c.quant_rel_l2_video)
      e["quantization_rel_l2"] = {
          {"video", *c.quant_rel_l2_video},
          {"audio", c.quant_rel_l2_audio ? nlohmann::ordered_json(*c.quant_rel_l2_audio)
                                         : nlohmann::ordered_json()},
          {"against", o.ggml_weights() ? "one step on the bf16 values the GGML blocks were quantised "
                                         "from, same random weights and inputs"
                                       : "one unquantized step, same random weights and inputs"}};
    nlohmann::ordered_json off = nlohmann::ordered_json::array();
    for (const OfficialValue& v : c.official) {
      nlohmann::ordered_json x = {{"section", v.section}, {"median_ms", v.median_ms}, {"min_ms", v.min_ms}};
      x["peak_gib"] = v.peak_gib ? nlohmann::ordered_json(*v.peak_gib) : nlohmann::ordered_json();
      x["analytic_flops"] = v.analytic_flops ? nlohmann::ordered_json(*v.analytic_flops) : nlohmann::ordered_json();
      if (v.tiles) {
        x["tiles"] = *v.tiles;
        x["tiling"] = v.tiling;
      }
      off.push_back(x);
    }
    e["official"] = off;
    e["official_shown"] = c.official_choice ? nlohmann::ordered_json(c.official[*c.official_choice].section)
                                            : nlohmann::ordered_json();
    const auto ratio = c.ratio();
    const auto pct = c.percent_of_floor();
    e["ours_over_official"] = ratio ? nlohmann::ordered_json(*ratio) : nlohmann::ordered_json();
    e["percent_of_floor"] = pct ? nlohmann::ordered_json(*pct) : nlohmann::ordered_json();
    cases.push_back(e);
  }
  j["cases"] = cases;
  return j;
}

}  // namespace ltx::bench
