#include "bench/pipeline_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "backend/device_query.h"
#include "bench/presets.h"
#include "bench/random_weights.h"
#include "core/error.h"
#include "core/log.h"
#include "generate/decode.h"
#include "generate/demo_assets.h"
#include "generate/generate.h"
#include "generate/memory_budget.h"
#include "generate/offload_plan.h"
#include "generate/model_provider.h"
#include "generate/placement.h"
#include "generate/progress.h"
#include "io/gguf_writer.h"
#include "media/support.h"
#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/config.h"
#include "models/audio_vae/vocoder.h"
#include "models/text/embeddings_processor.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma/model.h"
#include "models/text/gemma_assets.h"
#include "models/text/prompt_encoder.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/upsampler/model_configurator.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/model_configurator.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/pipeline.h"

namespace ltx::bench {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace vae = models::video_vae;
namespace avae = models::audio_vae;
namespace mt = models::text;

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

double wall_seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median_or_zero(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// What the synthesis of the weights cost: it runs inside the stages that load models and is
// taken out of the end-to-end number.
struct SynthesisMeter {
  Device device;
  double seconds = 0;
  int64_t elements = 0, bytes = 0;
};

// The text encoder's assets without a file: the demo bundle's tokenizer and sidecars (compiled
// into the binary) under the preset's Gemma config.
text::GemmaAssets tokenizer_assets(const Preset& p) {
  text::GemmaAssets a;
  a.source = "bench preset '" + p.name + "' (Gemma config) with the demo bundle's tokenizer";
  a.config = p.gemma;
  for (const generate::DemoAsset& f : generate::demo_gemma_assets()) {
    if (f.name == "tokenizer.json")
      a.tokenizer_json = std::string(f.data);
    else
      a.sidecars.emplace(std::string(f.name), std::string(f.data));
  }
  return a;
}

// --text-encoder-format fp8: Gemma's Linear weights as ComfyUI's FP8 Gemma stores them, e4m3 with
// an f32 per-tensor weight_scale beside each (what the loader and the planner read); nullopt: as
// the loader asks. The values are the dense ones (rounded to e4m3 where kept) with scales of 1, so
// a run that widens them at load computes with the same distribution.
std::optional<DType> fp8_gemma_dtype(const std::string& name, const Shape&) {
  if (text::is_gemma_linear_weight(name)) return DType::F8E4M3FN;
  constexpr std::string_view kScale = "_scale";
  if (name.ends_with(".weight_scale") &&
      text::is_gemma_linear_weight(name.substr(0, name.size() - kScale.size())))
    return DType::F32;
  return std::nullopt;
}

Init fp8_gemma_init(const std::string& name, const Shape& shape) {
  if (fp8_gemma_dtype(name, shape) == DType::F32) return Init::constant(1.0);
  return transformer_init(name, shape);
}

// Every model of the pipeline built by its own loader from random weights made on the device,
// in the order and at the points generate_with asks for them; nothing is kept between requests,
// so each model is freed when its step ends, as with OneShotProvider.
class SyntheticModelProvider final : public generate::ModelProvider {
 public:
  SyntheticModelProvider(Preset preset, uint64_t seed, SynthesisMeter& meter,
                         GgmlRule transformer_ggml, bool fp8_text_encoder)
      : preset_(std::move(preset)), seed_(seed), meter_(meter),
        transformer_ggml_(std::move(transformer_ggml)), fp8_text_encoder_(fp8_text_encoder) {}

  std::shared_ptr<text::PromptEncoder> prompt_encoder(
      const generate::ModelPaths&, const nn::LoadOptions& where,
      const models::BlockStreaming& streaming) override {
    text::GemmaAssets assets = tokenizer_assets(preset_);
    const text::GemmaTextConfig gemma = text::GemmaTextConfig::from_json(assets.config, assets.source);
    const mt::EmbeddingsProcessorConfig processor = mt::EmbeddingsProcessorConfig::from_metadata(
        json{{"config", {{"transformer", preset_.transformer}}}},
        mt::GemmaTextDims{gemma.hidden_size, gemma.num_layers}, source(), /*audio=*/true);
    text::PromptEncoderOptions options;
    options.load = where;
    options.streaming = streaming;
    // Gemma and the connectors each made when encode() loads them, and freed after.
    text::PromptEncoderWeights weights;
    weights.text_encoder = [this] {
      return fp8_text_encoder_ ? synthetic(fp8_gemma_init, {}, fp8_gemma_dtype)
                               : synthetic(transformer_init);
    };
    weights.embeddings_processor = [this] { return synthetic(transformer_init); };
    return std::make_shared<text::PromptEncoder>(std::move(assets), processor, std::move(weights),
                                                 options);
  }

  std::shared_ptr<const models::duration_head::DurationHead> duration_head(
      const std::string&, const nn::LoadOptions&) override {
    return nullptr;  // the 2.3 pipelines have none
  }

  std::shared_ptr<const lora::LoraFile> lora_file(const std::string& path) override {
    fail("bench pipeline: no LoRA file can be read in a run with random weights (asked for ",
         path, ")");
  }

  std::shared_ptr<generate::StageTransformer> transformer(
      const generate::ModelPaths& paths, const std::vector<lora::LoraSet>& stage_sets,
      const nn::LoadOptions& where, const models::BlockStreaming& streaming) override {
    for (const lora::LoraSet& set : stage_sets)
      LTX_CHECK(lora::is_identity(set), "bench pipeline: a stage asks for ", lora::describe(set),
                ", but the run has no LoRA");
    auto st = std::make_shared<generate::StageTransformer>();
    // Its Linears stored as --quantization says, as OneShotProvider loads it, or as GGML blocks
    // (--weights-format), which Linear::load binds as a GGUF file's.
    io::WeightMap w = synthetic(transformer_init, transformer_ggml_);
    st->model = std::make_unique<models::transformer::LTXModel>(models::transformer::LTXModel::load(
        w, preset_.transformer_config(), generate::transformer_placement(where, paths.quantization),
        streaming));
    return st;
  }

  std::shared_ptr<const vae::VideoEncoder> video_encoder(const std::string&,
                                                         const nn::LoadOptions& where) override {
    io::WeightMap w = synthetic(vae_init);
    return std::make_shared<const vae::VideoEncoder>(
        vae::VideoEncoder::load(w, vae::encoder_config_from_json(preset_.vae, source()), where));
  }

  std::shared_ptr<const models::upsampler::LatentUpsampler> latent_upsampler(
      const std::string&, const nn::LoadOptions& where) override {
    io::WeightMap w = synthetic(vae_init);
    return std::make_shared<const models::upsampler::LatentUpsampler>(
        models::upsampler::LatentUpsampler::load(
            w, models::upsampler::upsampler_config_from_json(preset_.upsampler, source()), where));
  }

  generate::DecodeResult decode(const Tensor& video_latent, const Tensor& audio_latent,
                                const generate::ModelPaths&, generate::MediaSink& sink,
                                const generate::DecodeOptions& options,
                                generate::Progress* progress) override {
    // The decoders are made before the decode starts (its own stage, so that their synthesis is
    // counted); decode_latents then runs the audio decode and the video decode.
    if (progress) progress->stage("decoder loading");
    const nn::LoadOptions where = generate::model_placement(options.device, options.dtype);
    generate::DecodeModels models;
    if (audio_latent.defined()) {
      auto audio = std::make_shared<generate::AudioDecodeModels>();
      audio->path = source();
      const avae::AudioVaeConfig acfg = avae::AudioVaeConfig::from_config(preset_.audio, source());
      const avae::VocoderConfig vcfg = avae::VocoderConfig::from_config(preset_.audio, source());
      io::WeightMap wa = synthetic(vae_init);
      audio->decoder =
          std::make_shared<const avae::AudioDecoder>(avae::AudioDecoder::load(wa, acfg, where));
      io::WeightMap wv = synthetic(vae_init);
      audio->vocoder = std::make_shared<const avae::VocoderModel>(avae::VocoderModel::load(
          wv, vcfg, {avae::vocoder_dtype(vcfg, where.dtype), where.device}));
      models.audio = audio;
    }
    auto video = std::make_shared<generate::VideoDecodeModel>();
    video->path = source();
    video->where = where;
    io::WeightMap w = synthetic(vae_init);
    video->decoder = std::make_shared<const vae::VideoDecoder>(
        vae::ConvVideoDecoder::load(w, preset_.decoder_config(), where));
    models.video = video;
    return generate::decode_latents(video_latent, audio_latent, models, sink, options, progress);
  }

 private:
  Preset preset_;
  uint64_t seed_;
  SynthesisMeter& meter_;
  GgmlRule transformer_ggml_;  // empty: dense
  bool fp8_text_encoder_ = false;
  // The generators of the maps handed out (a map's synthesizer refers to its generator).
  std::vector<std::unique_ptr<RandomWeights>> generators_;

  std::string source() const { return "bench preset '" + preset_.name + "'"; }

  // A map that makes every weight a model's loader takes, timing each (the device is synchronised
  // so the time is the tensor's).
  io::WeightMap synthetic(InitRule rule, const GgmlRule& ggml = {},
                          io::StoredDtypeRule stored = {}) {
    generators_.push_back(std::make_unique<RandomWeights>(std::move(rule), seed_ + generators_.size()));
    RandomWeights* rw = generators_.back().get();
    SynthesisMeter* meter = &meter_;
    auto timed = [meter](auto make, Device device) {
      const Clock::time_point t0 = Clock::now();
      auto made = make();
      backend::synchronize(device);
      meter->seconds += wall_seconds_since(t0);
      return made;
    };
    io::GgmlSynthesizer blocks;
    if (ggml) {
      blocks = rw->ggml_synthesizer(ggml);
      blocks.make = [rw, meter, timed](const std::string& name, const Shape& shape, GgmlType type,
                                       Device device) {
        io::GgmlTensor g = timed([&] { return rw->make_ggml(name, shape, type, device); }, device);
        meter->elements += shape.numel();
        meter->bytes += static_cast<int64_t>(g.bytes.nbytes());
        return g;
      };
    }
    return io::WeightMap::synthetic(
        [rw, meter, timed](const std::string& name, const Shape& shape, DType dtype, Device device) {
          Tensor t = timed([&] { return rw->make(name, shape, dtype, device); }, device);
          meter->elements += t.numel();
          meter->bytes += static_cast<int64_t>(t.nbytes());
          return t;
        },
        blocks, std::move(stored));
  }
};

// Times the calls into the sink it wraps: the MP4 encode (inside the video decode stage, on the
// decode's sink thread when the tail overlaps).
class TimedSink final : public generate::MediaSink {
 public:
  explicit TimedSink(generate::MediaSink* inner) : inner_(inner) {}
  void begin(const generate::MediaFormat& f) override { timed([&] { if (inner_) inner_->begin(f); }); }
  void write_frames(const Tensor& frames) override {
    frames_ += frames.size(0);
    timed([&] { if (inner_) inner_->write_frames(frames); });
  }
  void write_audio(const Tensor& waveform) override {
    samples_ += waveform.size(-1);
    timed([&] { if (inner_) inner_->write_audio(waveform); });
  }
  void finish() override { timed([&] { if (inner_) inner_->finish(); }); }
  double seconds() const { return seconds_; }
  int64_t frames() const { return frames_; }
  int64_t samples() const { return samples_; }

 private:
  generate::MediaSink* inner_;  // null: the media are dropped (no FFmpeg)
  double seconds_ = 0;
  int64_t frames_ = 0, samples_ = 0;
  template <class F>
  void timed(const F& f) {
    const Clock::time_point t0 = Clock::now();
    f();
    seconds_ += wall_seconds_since(t0);
  }
};

// The device's peak allocation since the last reset (0 where the backend keeps none).
int64_t peak_bytes(Device d) { return backend::memory_stats(d).peak_bytes; }

// A safetensors file holding `infos` (floating tensors as bf16, as published, but e4m3 ones as
// they are) over a sparse data section: the header is real, the data reads as zeros and takes no
// disk space.
void write_header_only_file(const std::string& path, const std::vector<io::TensorInfo>& infos) {
  json header = json::object();
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const io::TensorInfo& i : infos) {
    if (!seen.insert(i.name).second) continue;
    const DType dt =
        dtype_is_floating(i.dtype) && i.dtype != DType::F8E4M3FN ? DType::BF16 : i.dtype;
    const uint64_t n = static_cast<uint64_t>(i.numel()) * dtype_size(dt);
    header[i.name] = {{"dtype", io::safetensors_dtype_name(dt)},
                      {"shape", i.shape.vec()},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    uint64_t len = text.size();
    unsigned char le[8];
    for (int b = 0; b < 8; ++b) le[b] = static_cast<unsigned char>(len >> (8 * b));
    f.write(reinterpret_cast<const char*>(le), 8);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    LTX_CHECK(f.good(), "bench pipeline: cannot write ", path);
  }
  std::filesystem::resize_file(path, 8 + text.size() + offset);
}

// A GGUF file of `infos` over a sparse data section: the tensors `ggml` types as those GGML
// blocks, the other floating ones bf16 (as the community GGUF transformers keep them).
void write_header_only_gguf(const std::string& path, const std::vector<io::TensorInfo>& infos,
                            const GgmlRule& ggml) {
  std::vector<io::GgufTensorSpec> specs;
  std::set<std::string> seen;
  for (const io::TensorInfo& i : infos) {
    if (!seen.insert(i.name).second) continue;
    LTX_CHECK(dtype_is_floating(i.dtype), "bench pipeline: the stand-in GGUF has no type for '",
              i.name, "' (", dtype_name(i.dtype), ")");
    specs.push_back({i.name, ggml(i.name, i.shape).value_or(GgmlType::BF16), i.shape});
  }
  io::write_gguf_header_only(path, {io::gguf_string("general.architecture", "ltxv")}, specs);
}

// The two largest models of the pipeline at their size on the device, as the planner reads them
// from the stand-in files (GGML blocks as stored), without making them (what check_budget_fits
// compares with the budget).
std::vector<generate::ComponentSize> whole_model_sizes(const StandInModelFiles& files, DType dtype) {
  const auto total = [](const generate::BlockModelSizes& s) {
    return s.fixed_bytes + s.blocks * s.block_bytes;
  };
  return {{"text encoder", total(generate::text_encoder_sizes(files.text_encoder(), dtype))},
          {"transformer", total(generate::transformer_sizes(files.transformer(), dtype,
                                                            quantization::Mode::None))}};
}

// Each set of stand-ins its own folder, also beside another one in the same process.
int64_t next_stand_in_id() {
  static std::atomic<int64_t> next{0};
  return next++;
}

}  // namespace

StandInModelFiles::StandInModelFiles(const Preset& p, const GgmlRule& transformer_ggml,
                                     bool fp8_text_encoder)
    : dir_(std::filesystem::temp_directory_path() /
           str("ltx-bench-models-", ::getpid(), "-", next_stand_in_id(), "-", p.name)),
      transformer_gguf_(static_cast<bool>(transformer_ggml)) {
  std::filesystem::create_directories(dir_);
  const std::vector<io::TensorInfo> transformer_infos = parameter_infos([&](io::WeightMap& w) {
    (void)models::transformer::LTXModel::load(w, p.transformer_config(), {});
  });
  if (transformer_gguf_)
    write_header_only_gguf(transformer(), transformer_infos, transformer_ggml);
  else
    write_header_only_file(transformer(), transformer_infos);
  const text::GemmaTextConfig gemma = text::GemmaTextConfig::from_json(p.gemma, "bench preset");
  std::vector<io::TensorInfo> gemma_infos = parameter_infos([&](io::WeightMap& w) {
    (void)text::GemmaTextModel::load(gemma, w, {}, "in memory", "bench preset");
  });
  if (fp8_text_encoder) {
    std::vector<io::TensorInfo> stored;
    for (const io::TensorInfo& i : gemma_infos) {
      if (fp8_gemma_dtype(i.name, i.shape) != DType::F8E4M3FN) {
        stored.push_back(i);
        continue;
      }
      stored.push_back({i.name, DType::F8E4M3FN, i.shape});
      stored.push_back({i.name + "_scale", DType::F32, Shape{}});
    }
    gemma_infos = std::move(stored);
  }
  write_header_only_file(text_encoder(), gemma_infos);
  write_header_only_file(upsampler(), parameter_infos([&](io::WeightMap& w) {
    (void)models::upsampler::LatentUpsampler::load(
        w, models::upsampler::upsampler_config_from_json(p.upsampler, "bench preset"), {});
  }));
}

StandInModelFiles::~StandInModelFiles() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string StandInModelFiles::transformer() const {
  return (dir_ / (transformer_gguf_ ? "transformer.gguf" : "transformer.safetensors")).string();
}
std::string StandInModelFiles::text_encoder() const {
  return (dir_ / "text_encoder.safetensors").string();
}
std::string StandInModelFiles::upsampler() const {
  return (dir_ / "spatial_upsampler.safetensors").string();
}

PipelineBenchResult run_pipeline_bench(const PipelineBenchOptions& o) {
  const Preset preset = bench::preset(o.preset);
  LTX_CHECK(!preset.gemma.is_null() && !preset.audio.is_null() && !preset.upsampler.is_null(),
            "--preset ", o.preset, ": this preset has no pipeline models (text encoder, audio, "
            "upsampler); use ltx23-22b or tiny");
  const pipelines::PipelineKind kind = pipelines::parse_pipeline_kind(o.pipeline);
  LTX_CHECK(kind == pipelines::PipelineKind::Distilled || kind == pipelines::PipelineKind::TwoStage ||
                kind == pipelines::PipelineKind::TwoStageHQ,
            "--pipeline ", o.pipeline, ": `ltx bench pipeline` runs distilled, two-stage or "
            "two-stage-hq");
  LTX_CHECK(o.mp4_path.empty() || media::ffmpeg_available(),
            "--mp4 ", o.mp4_path, ": this build has no FFmpeg (configure with LTX_FFMPEG=ON)");

  generate::GenerateOptions g;
  g.pipeline = o.pipeline;
  g.prompt = "A red fox trots through fresh snow at dawn, its breath steaming in the cold air; "
             "the camera follows at ground level; wind and the crunch of paws on snow.";
  g.seed = o.seed;
  g.width = o.width;
  g.height = o.height;
  g.num_frames = o.frames;
  if (o.steps) g.num_inference_steps = *o.steps;
  g.device = o.device;
  g.dtype = o.dtype;
  g.audio = o.audio;
  g.max_gpu_memory_bytes = o.max_gpu_memory_bytes;
  LTX_CHECK(o.offload != generate::Offload::Disk,
            "--offload disk streams blocks from the model files, and `ltx bench pipeline` has none "
            "(its weights are made in memory); use --offload cpu");
  g.offload = o.offload;
  g.step_cache = o.step_cache;
  generate::validate_options(g, /*to_file=*/false);
  const DType dtype = generate::model_placement(o.device, o.dtype).dtype;
  check_weights_format(o.weights_format, dtype, o.quantization);
  const std::optional<std::string> ggml = weights_format_ggml_type(o.weights_format);
  const GgmlRule transformer_ggml = ggml ? transformer_gguf_rule(*ggml) : GgmlRule();
  LTX_CHECK(o.text_encoder_format == "dense" || o.text_encoder_format == "fp8",
            "--text-encoder-format: unknown format '", o.text_encoder_format, "'; use dense or fp8");
  const bool fp8_text_encoder = o.text_encoder_format == "fp8";
  const StandInModelFiles files(preset, transformer_ggml, fp8_text_encoder);
  const int64_t previous_limit = backend::memory_limit_bytes(o.device);
  if (o.max_gpu_memory_bytes > 0) {
    // Whole models as the stand-in files give them (GGML blocks as stored); with streamed blocks
    // or --quantization's Linears their resident size is smaller than that count, so then the
    // allocator's limit alone holds them.
    if (o.offload == generate::Offload::None && o.quantization == quantization::Mode::None)
      generate::check_budget_fits(whole_model_sizes(files, dtype), o.max_gpu_memory_bytes);
    generate::apply_gpu_budget(o.device, o.max_gpu_memory_bytes);
  }
  // The budget holds for this run only: a later run in the same process (the tests, `ltx bench`
  // called as a library) finds the allocator's limit as it was.
  struct RestoreLimit {
    Device device;
    int64_t bytes = -1;
    ~RestoreLimit() {
      try {
        if (bytes >= 0) backend::set_memory_limit(device, bytes);
      } catch (const std::exception& e) {
        log_warn("ltx bench pipeline: could not restore the GPU memory limit: ", e.what());
      }
    }
  } restore_limit{o.device, o.max_gpu_memory_bytes > 0 ? previous_limit : -1};

  generate::ResolvedModels models;
  models.paths.layout = generate::ModelPaths::Layout::Split;
  const std::string what = "bench preset '" + preset.name + "'";
  models.paths.transformer = {files.transformer(), what + " (transformer)"};
  models.paths.text_encoder = {files.text_encoder(), what + " (text encoder)"};
  models.paths.spatial_upsampler = {files.upsampler(), what + " (spatial upsampler)"};
  models.report.model_version = preset.model_version;
  models.paths.quantization = o.quantization;
  models.report.version_name = preset.description;

  SynthesisMeter meter{o.device};
  SyntheticModelProvider provider(preset, static_cast<uint64_t>(o.seed), meter, transformer_ggml,
                                  fp8_text_encoder);

  PipelineBenchResult r;
  r.preset = preset.name;
  r.pipeline = pipelines::pipeline_name(kind);
  r.device_name = generate::describe_placement(generate::model_placement(o.device, o.dtype));
  r.width = o.width;
  r.height = o.height;
  r.frames = o.frames;
  r.max_gpu_memory_bytes = o.max_gpu_memory_bytes;
  r.quantization = quantization::mode_name(o.quantization);
  r.offload = generate::offload_name(o.offload);
  r.weights_format = ggml.value_or("dense");
  r.text_encoder_format = o.text_encoder_format;

  // Per-stage clocks: synchronised at every event so each number is the stage's device work.
  generate::Progress progress;
  PipelineStageTiming current;
  Clock::time_point stage_start{}, last_step{};
  double synthesis_at_start = 0;
  std::vector<double> step_ms;
  const Device dev = o.device;
  progress.set_listener([&](const generate::ProgressEvent& e) {
    // The calling thread's stream only: the decode's audio runs on its own stream beside the video
    // decode (generate::TailPlan), and a device-wide wait here would serialise the two.
    backend::synchronize_stream(dev);
    const Clock::time_point now = Clock::now();
    switch (e.kind) {
      case generate::ProgressEvent::Kind::StageStart:
        backend::reset_peak_memory(dev);
        current = PipelineStageTiming{};
        current.stage = e.stage;
        stage_start = last_step = now;
        synthesis_at_start = meter.seconds;
        step_ms.clear();
        break;
      case generate::ProgressEvent::Kind::Step:
        if (e.done > 0) step_ms.push_back(std::chrono::duration<double, std::milli>(now - last_step).count());
        last_step = now;
        break;
      case generate::ProgressEvent::Kind::StageEnd:
        current.seconds = std::chrono::duration<double>(now - stage_start).count();
        current.synthesis_seconds = meter.seconds - synthesis_at_start;
        current.steps = static_cast<int64_t>(step_ms.size());
        current.step_median_ms = median_or_zero(step_ms);
        current.peak_bytes = peak_bytes(dev);
        r.stages.push_back(current);
        break;
    }
  });

  std::unique_ptr<generate::Mp4Sink> mp4;
  std::string mp4_path = o.mp4_path;
  r.mp4 = media::ffmpeg_available();
  if (r.mp4) {
    if (mp4_path.empty())
      mp4_path = (std::filesystem::temp_directory_path() /
                  str("ltx-bench-pipeline-", ::getpid(), ".mp4"))
                     .string();
    mp4 = std::make_unique<generate::Mp4Sink>(mp4_path);
  }
  TimedSink sink(mp4.get());

  backend::synchronize(dev);
  backend::reset_peak_memory(dev);
  const Clock::time_point t0 = Clock::now();
  const generate::GenerateResult out = generate::generate_with(g, models, provider, progress, sink);
  backend::synchronize(dev);
  r.total_seconds = wall_seconds_since(t0);
  if (r.mp4 && o.mp4_path.empty()) std::filesystem::remove(mp4_path);

  r.synthesis_seconds = meter.seconds;
  r.end_to_end_seconds = r.total_seconds - meter.seconds;
  for (const PipelineStageTiming& s : r.stages) r.peak_bytes = std::max(r.peak_bytes, s.peak_bytes);
  r.parameters = meter.elements;
  r.weight_bytes = meter.bytes;
  r.mp4_seconds = sink.seconds();
  r.tail = out.decoded.tail;
  r.decoded_frames = out.decoded.frames;
  r.audio_samples = out.decoded.audio_samples;
  r.step_cache = o.step_cache.str();
  r.step_cache_stages = out.step_cache;
  LTX_CHECK(sink.frames() == o.frames, "bench pipeline: the decode gave ", sink.frames(),
            " frames, expected ", o.frames);
  return r;
}

namespace {
std::string tail_description(const generate::TailPlan& p) {
  if (!p.sink_thread && !p.audio_beside_video) return "sequential";
  return str(p.sink_thread ? "sink on its own thread" : "sink in line",
             p.audio_beside_video ? ", audio beside the video on its own stream"
                                  : ", audio before the video");
}
}  // namespace

std::string format_pipeline_bench(const PipelineBenchResult& r) {
  std::string s = str("ltx bench pipeline: ", r.pipeline, ", preset ", r.preset, ", ", r.width, "x",
                      r.height, "x", r.frames, " frames, ", r.device_name,
                      r.max_gpu_memory_bytes > 0
                          ? str(", --max-gpu-memory ", generate::gib_text(r.max_gpu_memory_bytes))
                          : std::string(),
                      r.quantization != "none" ? ", --quantization " + r.quantization : std::string(),
                      r.offload != "none" ? ", --offload " + r.offload : std::string(),
                      r.weights_format != "dense" ? ", --weights-format " + r.weights_format : std::string(),
                      r.text_encoder_format != "dense"
                          ? ", --text-encoder-format " + r.text_encoder_format
                          : std::string(),
                      r.step_cache != "none" ? ", --cache " + r.step_cache : std::string(), "\n");
  for (const models::transformer::StepCacheReport& c : r.step_cache_stages)
    s += str("step cache: ", c.stage, " computed ", c.computed, " of ", c.computed + c.reused,
             " model calls, reused ", c.reused, "\n");
  char line[256];
  std::snprintf(line, sizeof line, "%-18s %10s %10s %10s %6s %12s %9s\n", "stage", "time s",
                "synth s", "excl. s", "steps", "step med ms", "peak GiB");
  s += line;
  for (const PipelineStageTiming& t : r.stages) {
    std::snprintf(line, sizeof line, "%-18s %10s %10s %10s %6s %12s %9s\n", t.stage.c_str(),
                  fixed(t.seconds, 3).c_str(), fixed(t.synthesis_seconds, 3).c_str(),
                  fixed(t.seconds - t.synthesis_seconds, 3).c_str(),
                  t.steps ? std::to_string(t.steps).c_str() : "",
                  t.steps ? fixed(t.step_median_ms, 1).c_str() : "",
                  fixed(static_cast<double>(t.peak_bytes) / kBytesPerGiB, 2).c_str());
    s += line;
  }
  s += r.mp4 ? str("mp4 encode: ", fixed(r.mp4_seconds, 3), " s (inside the video decode stage",
                   r.tail.plan.sink_thread ? ", on its own thread" : "", ")\n")
             : std::string("mp4 encode: not built (no FFmpeg in this build)\n");
  s += str("tail (", tail_description(r.tail.plan), "): wall ", fixed(r.tail.wall_seconds, 3),
           " s; busy: video decode ", fixed(r.tail.video_seconds, 3), " s, audio decode ",
           fixed(r.tail.audio_seconds, 3), " s, sink ", fixed(r.tail.sink_seconds, 3),
           " s; waited for the sink ", fixed(r.tail.sink_wait_seconds, 3), " s\n");
  s += "lora switch: not run (no LoRA in a run with random weights)\n";
  s += str("end to end: ", fixed(r.end_to_end_seconds, 3), " s (", fixed(r.total_seconds, 3),
           " s wall minus ", fixed(r.synthesis_seconds, 3), " s of weight synthesis, ",
           fixed(static_cast<double>(r.weight_bytes) / kBytesPerGiB, 2), " GiB); peak ",
           fixed(static_cast<double>(r.peak_bytes) / kBytesPerGiB, 2), " GiB\n");
  return s;
}

nlohmann::ordered_json pipeline_bench_json(const PipelineBenchResult& r) {
  nlohmann::ordered_json j;
  j["tool"] = "ltx bench";
  j["bench"] = "pipeline";
  j["preset"] = r.preset;
  j["pipeline"] = r.pipeline;
  j["device"] = r.device_name;
  j["width"] = r.width;
  j["height"] = r.height;
  j["frames"] = r.frames;
  j["quantization"] = r.quantization;
  j["offload"] = r.offload;
  j["weights_format"] = r.weights_format;
  j["text_encoder_format"] = r.text_encoder_format;
  j["max_gpu_memory_gib"] = r.max_gpu_memory_bytes > 0
                                ? nlohmann::ordered_json(static_cast<double>(r.max_gpu_memory_bytes) / kBytesPerGiB)
                                : nlohmann::ordered_json(nullptr);
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const PipelineStageTiming& t : r.stages) {
    nlohmann::ordered_json st;
    st["stage"] = t.stage;
    st["seconds"] = t.seconds;
    st["synthesis_seconds"] = t.synthesis_seconds;
    st["seconds_excluding_synthesis"] = t.seconds - t.synthesis_seconds;
    st["steps"] = t.steps;
    st["step_median_ms"] = t.step_median_ms;
    st["peak_bytes"] = t.peak_bytes;
    st["peak_gib"] = static_cast<double>(t.peak_bytes) / kBytesPerGiB;
    stages.push_back(std::move(st));
  }
  j["stages"] = std::move(stages);
  j["mp4_encode"] = r.mp4 ? nlohmann::ordered_json{{"built", true}, {"seconds", r.mp4_seconds}}
                          : nlohmann::ordered_json{{"built", false}};
  j["tail"] = {{"sink_thread", r.tail.plan.sink_thread},
               {"audio_beside_video", r.tail.plan.audio_beside_video},
               {"wall_seconds", r.tail.wall_seconds},
               {"video_decode_busy_seconds", r.tail.video_seconds},
               {"audio_decode_busy_seconds", r.tail.audio_seconds},
               {"sink_busy_seconds", r.tail.sink_seconds},
               {"sink_wait_seconds", r.tail.sink_wait_seconds}};
  j["lora_switch"] = {{"run", false}, {"why", "no LoRA in a run with random weights"}};
  j["total_seconds"] = r.total_seconds;
  j["synthesis_seconds"] = r.synthesis_seconds;
  j["end_to_end_seconds"] = r.end_to_end_seconds;
  j["end_to_end_excludes"] = "weight synthesis (random weights made on the device, synchronised "
                             "per tensor), which stands in for loading the model files";
  j["peak_bytes"] = r.peak_bytes;
  j["peak_gib"] = static_cast<double>(r.peak_bytes) / kBytesPerGiB;
  j["synthesized_parameters"] = r.parameters;
  j["synthesized_gib"] = static_cast<double>(r.weight_bytes) / kBytesPerGiB;
  j["decoded_frames"] = r.decoded_frames;
  j["audio_samples"] = r.audio_samples;
  nlohmann::ordered_json cache_stages = nlohmann::ordered_json::array();
  for (const models::transformer::StepCacheReport& c : r.step_cache_stages)
    cache_stages.push_back(nlohmann::ordered_json{{"stage", c.stage}, {"computed", c.computed}, {"reused", c.reused}});
  j["step_cache"] = {{"mode", r.step_cache}, {"stages", std::move(cache_stages)}};
  return j;
}

}  // namespace ltx::bench
