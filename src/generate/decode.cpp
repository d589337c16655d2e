#include "generate/decode.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <variant>

#include "backend/device_query.h"
#include "backend/stream_fork.h"
#include "backend/stream_timer.h"
#include "core/error.h"
#include "core/log.h"
#include "generate/memory_budget.h"
#include "generate/placement.h"
#include "generate/progress.h"
#include "generate/sink_thread.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/vocoder.h"
#include "models/video_vae/diffusion_tiling.h"
#include "models/video_vae/memory_estimate.h"
#include "models/video_vae/model_configurator.h"
#include "models/video_vae/video_decoder.h"
#include "media/yuv.h"
#include "ops/shape.h"
#include "pipelines/pipeline.h"
#include "sampling/noise.h"

namespace ltx::generate {

namespace {

// The bytes the automatic tiling may plan with (the diffusion decoder's; the conv decoder's on a
// GPU): given, or what the decoding
// device has free now (backend::free_memory_bytes: cudaMemGetInfo on a GPU, MemAvailable on the
// host). On a GPU the allocator's cache is released first: the freed diffusion models' blocks are
// free memory for the decode (the reference empties its cache between the blocks, and its
// cuda_activation_budget_bytes counts cached blocks as used). While an audio decode runs beside
// (audio_in_flight) a release would wait for it, so the cached blocks are counted as free instead:
// the same bytes, apart from the audio decoders' weights, which are still held.
int64_t decode_budget_bytes(const DecodeOptions& options, Device device, bool audio_in_flight) {
  if (options.decode_free_bytes) return *options.decode_free_bytes;
  if (!audio_in_flight) {
    backend::release_cached_memory(device);  // then cudaMemGetInfo's free = min(free, total - reserved)
    return backend::free_memory_bytes(device);
  }
  // Under a limit free_memory_bytes already counts the cache as free (the limit less what is allocated).
  if (backend::memory_limit_bytes(device) > 0) return backend::free_memory_bytes(device);
  const backend::MemoryStats m = backend::memory_stats(device);
  return backend::free_memory_bytes(device) + std::max<int64_t>(0, m.reserved_bytes - m.live_bytes);
}

// The pipelines' tiling for the decoder (reference: ensure_tiling_config): a given layout is
// checked against the decoder's grid (and the diffusion decoder's overlap floors) before any work;
// automatic tiling is the conv VAE's long-side layout or the diffusion decoder's memory-aware
// recommendation for `free_bytes` on the decoding device.
std::optional<models::tiling::TilingConfig> decode_tiling(
    const models::video_vae::VideoDecoder& decoder, const std::string& path,
    const DecodeResult& video, const Shape& latent, const DecodeOptions& options,
    int64_t free_bytes, const nn::LoadOptions& where,
    const std::function<int64_t()>& diffusion_weight_bytes) {
  namespace vae = models::video_vae;
  namespace tiling = models::tiling;
  const auto* diffusion = std::get_if<vae::DiffusionVideoDecoder>(&decoder);
  const vae::DiffusionTilingGeometry geometry =
      diffusion ? vae::diffusion_tiling_geometry(diffusion->config()) : vae::DiffusionTilingGeometry{};
  if (options.tiling) {
    try {
      tiling::validate(*options.tiling,
                       diffusion ? geometry.pixel_scale : tiling::kVideoScaleFactors,
                       {1, video.frames, video.height, video.width});
      if (diffusion) {
        const auto [overlap_t, overlap_hw] =
            vae::recommended_pixel_overlaps(geometry.tile_halos, geometry.pixel_scale);
        tiling::validate_overlap(*options.tiling, overlap_t, overlap_hw);
      }
    } catch (const Error& e) {
      fail("decode: the video decode tiling (", tiling::describe(*options.tiling),
           ") does not suit the ", diffusion ? "diffusion" : "convolutional",
           " video decoder of '", path, "' for ", video.frames, " frames of ", video.width, "x",
           video.height, ": ", e.what());
    }
    return options.tiling;
  }
  if (!options.auto_tiling) return std::nullopt;
  if (!diffusion) {
    // On a GPU the layout follows the memory free under the budget (the conv VAE's own estimate).
    if (!where.device.is_cuda()) return tiling::auto_tiling_config(video.height, video.width);
    const tiling::TileSizeConfig t = vae::budgeted_decode_tiling(
        std::get<vae::ConvVideoDecoder>(decoder).config(), latent, free_bytes);
    log_info("video decode tiling ", tiling::describe(t), " for ", gib_text(free_bytes),
             " free on ", where.device.str());
    return t;
  }
  vae::DiffusionTilingBudget budget;
  budget.free_bytes = free_bytes;
  budget.model_bytes = diffusion_weight_bytes();
  if (where.device.is_cuda()) {
    // On a GPU the memory model must hold for this decoder, whose peak runs above the reference's
    // bf16 model (bf16 activations after conv_in, but larger transients such as the SwiGLU's
    // hidden rows, which is why they run in row chunks): activations are
    // counted at 4 bytes, and the weights at the load dtype's bytes (the header estimate counts 2
    // per element).
    budget.element_size = 4;
    budget.model_bytes = budget.model_bytes / 2 * static_cast<int64_t>(dtype_size(where.dtype));
  }
  return vae::recommended_decode_tiling(geometry, video.height, video.width, video.frames, budget);
}

}  // namespace

TailPlan plan_tail(TailMode mode, Device device, bool memory_limited) {
  TailPlan p;
  switch (mode) {
    case TailMode::Sequential:
      return p;
    case TailMode::Overlapped:
      p.sink_thread = true;
      p.audio_beside_video = true;
      return p;
    case TailMode::Auto:
      p.sink_thread = true;
      p.audio_beside_video = device.is_cuda() && !memory_limited;
      return p;
  }
  return p;
}

const char* tail_mode_name(TailMode mode) {
  switch (mode) {
    case TailMode::Auto: return "auto";
    case TailMode::Overlapped: return "overlapped";
    case TailMode::Sequential: return "sequential";
  }
  return "?";
}

Mp4Sink::Mp4Sink(std::string path, media::Mp4Options options)
    : path_(std::move(path)), options_(std::move(options)) {}
Mp4Sink::~Mp4Sink() = default;

void Mp4Sink::begin(const MediaFormat& format) {
  media::Mp4Options mp4 = options_;
  mp4.audio_sample_rate = static_cast<int>(format.audio_sample_rate);
  if (format.audio_sample_rate > 0) mp4.audio_channels = static_cast<int>(format.audio_channels);
  writer_ = std::make_unique<media::Mp4Writer>(path_, format.fps, mp4);
}

void Mp4Sink::write_frames(const Tensor& frames) { writer_->write_frames(frames); }
void Mp4Sink::write_audio(const Tensor& waveform) { writer_->write_audio(waveform); }
void Mp4Sink::finish() { writer_->finish(); }

PngSink::PngSink(std::string file_path, std::string dir_path)
    : file_path_(std::move(file_path)), dir_path_(std::move(dir_path)) {}
PngSink::~PngSink() = default;

void PngSink::begin(const MediaFormat& format) {
  single_ = format.frames == 1;
  single_frame_ = Tensor();
  folder_.reset();
  written_.clear();
  if (!single_) folder_ = std::make_unique<media::PngFrameWriter>(dir_path_);
}

void PngSink::write_frames(const Tensor& frames) {
  if (!single_) {
    folder_->write_frames(frames);
    return;
  }
  LTX_CHECK(!single_frame_.defined() && frames.dim() == 4 && frames.size(0) == 1, "PNG output: expected one frame, got ",
            frames.shape().str(), single_frame_.defined() ? " after the first" : "");
  single_frame_ = media::rgb_to_uint8(frames.to(Device::cpu())).select(0, 0);
}

void PngSink::write_audio(const Tensor& waveform) {
  if (waveform.defined())
    log_warn("PNG output: the audio track is not written (PNG frames hold no sound; use --output-format mp4 for it)");
}

void PngSink::finish() {
  if (single_) {
    LTX_CHECK(single_frame_.defined(), "PNG output: no frame was decoded");
    media::write_png(file_path_, single_frame_);
    written_ = file_path_;
  } else {
    folder_->finish();
    written_ = dir_path_;
  }
}

void MemorySink::begin(const MediaFormat& format) {
  media_ = {};
  media_.format = format;
  chunks_.clear();
}

void MemorySink::write_frames(const Tensor& frames) { chunks_.push_back(frames); }
void MemorySink::write_audio(const Tensor& waveform) { media_.waveform = waveform; }

void MemorySink::finish() {
  LTX_CHECK(!chunks_.empty() || media_.waveform.defined(), "decode: nothing was decoded");
  if (!chunks_.empty()) media_.frames = chunks_.size() == 1 ? chunks_[0] : ops::concat(chunks_, 0);
  chunks_.clear();
}

void WavSink::begin(const MediaFormat& format) {
  LTX_CHECK(format.audio_sample_rate > 0, "WAV output '", path_, "': there is no audio to write");
  sample_rate_ = format.audio_sample_rate;
  waveform_ = Tensor();
}
void WavSink::write_frames(const Tensor&) {
  fail("WAV output '", path_, "': a WAV file holds audio only; write video to an MP4 (--output-format mp4)");
}
void WavSink::write_audio(const Tensor& waveform) { waveform_ = waveform; }
void WavSink::finish() {
  LTX_CHECK(waveform_.defined(), "WAV output '", path_, "': no audio was decoded");
  media::write_wav(path_, waveform_, static_cast<int>(sample_rate_));
}

namespace {

// Where decode_impl gets its decoders: loaded from files when it needs them (and freed after),
// or pre-loaded by the caller.
struct DecoderSource {
  std::string video_vae_path;
  // Whether the video VAE holds the diffusion decoder (without loading it).
  std::function<bool()> is_diffusion;
  std::function<std::shared_ptr<const AudioDecodeModels>(const nn::LoadOptions&)> audio;
  std::function<std::shared_ptr<const models::video_vae::VideoDecoder>(const nn::LoadOptions&)>
      video;
  std::function<int64_t()> diffusion_weight_bytes;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The sink as the decode calls it: through a SinkThread, or in line with its calls timed.
class TailSink {
 public:
  TailSink(MediaSink& sink, bool threaded) : sink_(sink) {
    if (threaded) thread_.emplace(sink);
  }
  void begin(const MediaFormat& f) { call([&](MediaSink& s) { s.begin(f); }); }
  void write_frames(const Tensor& t) { call([&](MediaSink& s) { s.write_frames(t); }); }
  void write_audio(const Tensor& t) { call([&](MediaSink& s) { s.write_audio(t); }); }
  void finish() { call([&](MediaSink& s) { s.finish(); }); }
  double busy_seconds() const { return thread_ ? thread_->busy_seconds() : in_line_seconds_; }
  double wait_seconds() const { return thread_ ? thread_->wait_seconds() : 0.0; }

 private:
  MediaSink& sink_;
  std::optional<SinkThread> thread_;
  double in_line_seconds_ = 0;
  template <class F>
  void call(const F& f) {
    if (thread_) {
      f(*thread_);
      return;
    }
    const Clock::time_point t0 = Clock::now();
    f(sink_);
    in_line_seconds_ += seconds_since(t0);
  }
};

// An audio decode issued on the device and read back later. Beside the video decode it is issued
// by a host thread of its own onto the side stream (backend/stream_fork.h): the vocoder's many
// small kernels make issuing it take about as long as running it, so issued from the thread that
// also issues the video decode it would run before the video, not beside it. The main stream waits
// for it only at the read-back. Until then it keeps its models and its input alive; unwinding
// before the read-back joins the thread and waits for its device work first, so nothing it reads
// is freed under it.
class AudioDecode {
 public:
  AudioDecode(Device device, bool beside) : device_(device), timer_(device) {
    if (beside) fork_.emplace(device);
  }
  ~AudioDecode() {
    if (thread_.joinable()) thread_.join();
    if (!pending_) return;
    try {
      fork_->join();
      backend::synchronize_stream(device_);
    } catch (const std::exception& e) {
      log_warn("decode: waiting for the abandoned audio decode failed: ", e.what());
    }
  }
  AudioDecode(const AudioDecode&) = delete;
  AudioDecode& operator=(const AudioDecode&) = delete;

  // Issues the decode of `latent` (on the host or the device) with `models` at `where`; beside the
  // video decode it returns once the issuing thread has started.
  void issue(const Tensor& latent, std::shared_ptr<const AudioDecodeModels> decoders,
             const nn::LoadOptions& where) {
    models_ = std::move(decoders);
    LTX_CHECK(latent.size(1) == models_->decoder->config().z_channels, "decode: the audio latent has ",
              latent.size(1), " channels but the audio VAE decoder of '", models_->path, "' takes ",
              models_->decoder->config().z_channels, "; were the latents made with another model?");
    latent_ = latent.to(where.device);
    sample_rate_ = models_->vocoder->output_sampling_rate();
    if (!fork_) {
      run();
      return;
    }
    fork_->fork();  // after the latent's copy and the models' load on the main stream
    fork_->read_on_side(latent_);
    pending_ = fork_->active();
    thread_ = std::thread([this] {
      try {
        fork_->on_side([this] { run(); });
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  }
  // Known once issued (the waveform's length only at collect()).
  int64_t channels() const { return models::audio_vae::kVocoderChannels; }
  int64_t sample_rate() const { return sample_rate_; }

  // The waveform on the host in f32 (the one trip back); frees the models and the device tensors.
  Tensor collect() {
    if (thread_.joinable()) thread_.join();
    if (error_) {
      // The work it issued before failing is waited for by the destructor.
      std::rethrow_exception(std::exchange(error_, nullptr));
    }
    if (fork_) {
      fork_->join();
      fork_->read_on_main(waveform_);
    }
    const Tensor host = waveform_.to(Device::cpu(), DType::F32);
    pending_ = false;
    seconds_ = timer_.seconds();
    waveform_ = Tensor();
    latent_ = Tensor();
    models_.reset();
    fork_.reset();
    return host;
  }
  double seconds() const { return seconds_; }

 private:
  void run() {
    timer_.start();
    models::audio_vae::Audio audio =
        models::audio_vae::decode_audio(latent_, *models_->decoder, *models_->vocoder);
    timer_.stop();
    LTX_CHECK(audio.waveform.dim() == 2 && audio.waveform.size(0) == channels(),
              "decode: the vocoder returned ", audio.waveform.describe(), ", expected [",
              channels(), ", samples]");
    waveform_ = audio.waveform;
  }

  Device device_;
  std::optional<backend::StreamFork> fork_;
  backend::StreamTimer timer_;
  std::shared_ptr<const AudioDecodeModels> models_;
  Tensor latent_, waveform_;
  int64_t sample_rate_ = 0;
  bool pending_ = false;  // side work not yet waited for
  double seconds_ = 0;
  std::thread thread_;        // issues the decode beside the video's
  std::exception_ptr error_;  // what it threw, rethrown by collect()
};

DecodeResult decode_impl(const Tensor& video_latent_in, const Tensor& audio_latent_in,
                         const DecoderSource& src, MediaSink& sink_in, const DecodeOptions& options,
                         Progress* progress) {
  const std::string& video_vae_path = src.video_vae_path;
  // The pipelines' latents are bf16 by default; widened here exactly (each decoder casts its input
  // to its weights' dtype).
  const Tensor video_latent = video_latent_in.defined() ? video_latent_in.to(DType::F32) : Tensor();
  const Tensor audio_latent = audio_latent_in.defined() ? audio_latent_in.to(DType::F32) : Tensor();
  LTX_CHECK(!video_latent.defined() || (video_latent.dim() == 5 && video_latent.size(0) == 1),
            "decode: the video latent must be [1, C, F, H, W], got ", video_latent.describe());
  LTX_CHECK(video_latent.defined() || audio_latent.defined() || options.audio_track,
            "decode: neither a video nor an audio latent was given");
  LTX_CHECK(!options.audio_track || !audio_latent.defined(),
            "decode: give an audio latent or DecodeOptions::audio_track, not both");
  LTX_CHECK(!audio_latent.defined() || (audio_latent.dim() == 4 && audio_latent.size(0) == 1),
            "decode: the audio latent must be [1, C, T, mel], got ", audio_latent.describe());
  LTX_CHECK(options.fps > 0, "decode: the frame rate must be positive, got ", options.fps);

  const nn::LoadOptions video_where = model_placement(options.device, options.dtype);
  const Device device = video_where.device;
  const TailPlan plan =
      plan_tail(options.tail, device, backend::memory_limit_bytes(device) > 0);
  const Clock::time_point tail_start = Clock::now();

  DecodeResult r;
  r.tail.plan = plan;
  TailSink sink(sink_in, plan.sink_thread);
  // Beside the video only when there is a video decode to overlap.
  AudioDecode audio_decode(device, plan.audio_beside_video && video_latent.defined());
  Tensor waveform;  // on the host, cut
  int64_t audio_rate = 0, audio_channels = 0;
  bool audio_in_flight = false;
  // The decoded waveform, cut by the pipelines' rule.
  const auto collect_audio = [&] {
    const Tensor decoded = audio_decode.collect();
    pipelines::GenerationResult cut;
    cut.audio_max_seconds = options.audio_max_seconds;
    r.audio_samples = pipelines::audio_samples_to_keep(cut, decoded.size(1),
                                                       static_cast<double>(audio_rate));
    r.tail.audio_seconds = audio_decode.seconds();
    return decoded.narrow(1, 0, r.audio_samples);
  };
  if (audio_latent.defined()) {
    if (progress) progress->stage("audio decode");
    audio_decode.issue(audio_latent, src.audio(video_where), video_where);
    r.audio_sample_rate = audio_rate = audio_decode.sample_rate();
    audio_channels = audio_decode.channels();
    audio_in_flight = plan.audio_beside_video && video_latent.defined();
    if (!audio_in_flight) waveform = collect_audio();
    if (progress) progress->end_stage();
  } else if (options.audio_track) {
    const auto [channels, samples] = media::audio_layout(options.audio_track->waveform, "decode: the audio track");
    waveform = options.audio_track->waveform.to(Device::cpu(), DType::F32).reshape({channels, samples});
    r.audio_samples = samples;
    r.audio_sample_rate = audio_rate = options.audio_track->sample_rate;
    audio_channels = channels;
  }

  if (!video_latent.defined()) {  // audio only
    MediaFormat format;
    format.fps = options.fps;
    format.audio_sample_rate = audio_rate;
    format.audio_channels = audio_channels;
    sink.begin(format);
    sink.write_audio(waveform);
    sink.finish();
    r.tail.sink_seconds = sink.busy_seconds();
    r.tail.sink_wait_seconds = sink.wait_seconds();
    r.tail.wall_seconds = seconds_since(tail_start);
    return r;
  }

  if (progress) progress->stage("video decode");
  const Clock::time_point video_start = Clock::now();
  // Convolutional or diffusion decoder, chosen from the file's metadata like the reference.
  const bool diffusion_file = src.is_diffusion();
  // The automatic diffusion tiling's budget: on a GPU measured before the decoder's weights
  // arrive, as the reference (the budget counts them apart); on the CPU after the load, as before.
  // The conv decoder's on a GPU: measured after its weights arrive.
  const bool auto_tiled = !options.tiling && options.auto_tiling;
  const bool needs_budget = auto_tiled && (diffusion_file || device.is_cuda());
  std::optional<int64_t> free_bytes;
  if (needs_budget && diffusion_file && device.is_cuda())
    free_bytes = decode_budget_bytes(options, device, audio_in_flight);
  log_placement(diffusion_file ? "diffusion video decoder" : "video decoder", video_where);
  const std::shared_ptr<const models::video_vae::VideoDecoder> decoder_lease =
      src.video(video_where);
  const models::video_vae::VideoDecoder& decoder = *decoder_lease;
  const auto* diffusion = std::get_if<models::video_vae::DiffusionVideoDecoder>(&decoder);
  const int64_t latent_channels =
      diffusion ? diffusion->config().in_channels
                : std::get<models::video_vae::ConvVideoDecoder>(decoder).config().latent_channels;
  LTX_CHECK(video_latent.size(1) == latent_channels, "decode: the video latent has ",
            video_latent.size(1), " channels but the ", diffusion ? "diffusion " : "",
            "video VAE decoder of '", video_vae_path, "' takes ", latent_channels,
            "; were the latents made with another model?");
  const Shape out_shape =
      std::visit([&](const auto& d) { return d.output_shape(video_latent.shape()); }, decoder);
  r.frames = out_shape[2];
  r.height = out_shape[3];
  r.width = out_shape[4];
  if (needs_budget && !free_bytes) free_bytes = decode_budget_bytes(options, device, audio_in_flight);
  const std::optional<models::tiling::TilingConfig> tiling =
      decode_tiling(decoder, video_vae_path, r, video_latent.shape(), options,
                    free_bytes.value_or(0), video_where, src.diffusion_weight_bytes);
  const int64_t chunks = models::tiling::video_chunks_number(r.frames, tiling);

  MediaFormat format;
  format.fps = options.fps;
  format.frames = r.frames;
  if (audio_rate > 0) {
    format.audio_sample_rate = audio_rate;
    format.audio_channels = audio_channels;
  }
  sink.begin(format);
  sampling::TorchCpuGenerator generator(options.noise_seed);
  const models::video_vae::NoiseFn noise = [&](const Shape& shape) {
    return generator.randn(shape, DType::F32).to(device);  // drawn on the host, as before
  };
  int64_t done = 0, frames_written = 0;
  if (progress) progress->step(0, chunks);
  const Tensor latent_on_device = video_latent.to(device, video_where.dtype);
  models::video_vae::decode_video(decoder, latent_on_device, tiling, noise, [&](const Tensor& chunk) {
    if (chunk.size(0) > 0) {
      sink.write_frames(chunk.to(Device::cpu(), DType::F32));
      frames_written += chunk.size(0);
    }
    if (progress) progress->step(++done, std::max(chunks, done));
  });
  LTX_CHECK(frames_written == r.frames, "decode: the video decoder produced ", frames_written,
            " frames, expected ", r.frames);
  r.tail.video_seconds = seconds_since(video_start) - sink.wait_seconds();
  if (audio_in_flight) waveform = collect_audio();
  if (waveform.defined()) sink.write_audio(waveform);
  sink.finish();
  r.tail.sink_seconds = sink.busy_seconds();
  r.tail.sink_wait_seconds = sink.wait_seconds();
  r.tail.wall_seconds = seconds_since(tail_start);
  if (progress) progress->end_stage();
  return r;
}

}  // namespace

// The audio decoder at `where` (the pipeline dtype), the vocoder in the dtype the reference's
// AudioDecoder block runs it in for that pipeline (models::audio_vae::vocoder_dtype: the BWE
// vocoder in f32, the 19B's plain one in the pipeline dtype).
std::shared_ptr<const AudioDecodeModels> load_audio_decode_models(const std::string& path,
                                                                  const nn::LoadOptions& where) {
  const auto file = io::SafetensorsFile::open(path);
  const nn::LoadOptions vocoder_where{models::audio_vae::vocoder_dtype(*file, where.dtype),
                                     where.device};
  log_placement("audio decoder", where);
  log_placement("vocoder", vocoder_where);
  auto m = std::make_shared<AudioDecodeModels>();
  m->path = path;
  m->decoder = std::make_shared<const models::audio_vae::AudioDecoder>(
      models::audio_vae::AudioDecoder::from_file(file, where));
  m->vocoder = std::make_shared<const models::audio_vae::VocoderModel>(
      models::audio_vae::VocoderModel::from_file(file, vocoder_where));
  return m;
}

std::shared_ptr<const VideoDecodeModel> load_video_decode_model(const std::string& path,
                                                                const nn::LoadOptions& where) {
  const auto file = io::SafetensorsFile::open(path);
  auto m = std::make_shared<VideoDecodeModel>();
  m->path = path;
  m->diffusion = models::video_vae::is_diffusion_video_vae(file->metadata_json());
  if (m->diffusion)
    m->diffusion_weight_bytes = models::video_vae::diffusion_decoder_weight_bytes(*file);
  m->where = where;
  m->decoder = std::make_shared<const models::video_vae::VideoDecoder>(
      models::video_vae::load_video_decoder(path, where));
  return m;
}

DecodeResult decode_latents(const Tensor& video_latent, const Tensor& audio_latent,
                            const std::string& video_vae_path, const std::string& audio_vae_path,
                            MediaSink& sink, const DecodeOptions& options, Progress* progress) {
  // Each decoder is loaded when its step starts and freed when it ends (the audio ones first).
  DecoderSource src;
  src.video_vae_path = video_vae_path;
  src.is_diffusion = [&] {
    return models::video_vae::is_diffusion_video_vae(
        io::SafetensorsFile::open(video_vae_path)->metadata_json());
  };
  src.audio = [&](const nn::LoadOptions& where) {
    return load_audio_decode_models(audio_vae_path, where);
  };
  src.video = [&](const nn::LoadOptions& where) {
    return std::make_shared<const models::video_vae::VideoDecoder>(
        models::video_vae::load_video_decoder(video_vae_path, where));
  };
  src.diffusion_weight_bytes = [&] {
    return models::video_vae::diffusion_decoder_weight_bytes(
        *io::SafetensorsFile::open(video_vae_path));
  };
  return decode_impl(video_latent, audio_latent, src, sink, options, progress);
}

DecodeResult decode_latents(const Tensor& video_latent, const Tensor& audio_latent,
                            const DecodeModels& models, MediaSink& sink,
                            const DecodeOptions& options, Progress* progress) {
  LTX_CHECK(models.video != nullptr, "decode: no video decoder was given");
  LTX_CHECK(!audio_latent.defined() || models.audio != nullptr,
            "decode: an audio latent was given but no audio decoder");
  const nn::LoadOptions where = model_placement(options.device, options.dtype);
  LTX_CHECK(models.video->where.device == where.device && models.video->where.dtype == where.dtype,
            "decode: the video decoder was loaded for another device or dtype than DecodeOptions'");
  DecoderSource src;
  src.video_vae_path = models.video->path;
  src.is_diffusion = [&] { return models.video->diffusion; };
  src.audio = [&](const nn::LoadOptions&) { return models.audio; };
  src.video = [&](const nn::LoadOptions&) { return models.video->decoder; };
  src.diffusion_weight_bytes = [&] { return models.video->diffusion_weight_bytes; };
  return decode_impl(video_latent, audio_latent, src, sink, options, progress);
}

DecodeResult decode_to_mp4(const std::string& output_path, const Tensor& video_latent,
                           const Tensor& audio_latent, const std::string& video_vae_path,
                           const std::string& audio_vae_path, const DecodeOptions& options,
                           Progress* progress) {
  Mp4Sink sink(output_path, options.mp4);
  return decode_latents(video_latent, audio_latent, video_vae_path, audio_vae_path, sink, options,
                        progress);
}

}  // namespace ltx::generate
