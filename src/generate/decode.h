#pragma once
// The decode stage of every pipeline (the reference's VideoDecoder / AudioDecoder blocks and
// encode_video): final latents -> pixels through the video VAE decoder (the convolutional one or
// LTX-2.5's diffusion decoder, chosen from the file's metadata; tiled with the pipelines'
// automatic layout for that decoder), -> waveform through the audio VAE decoder + vocoder, -> a
// MediaSink: one MP4 (H.264 yuv420p + AAC at the vocoder's rate), or memory. Each decoder is loaded
// from its file onto DecodeOptions::device, used and freed (the audio ones first). Video chunks
// stream into the sink as the tiled decode yields them, each brought to the host once; the
// waveform comes back once. The three overlap as DecodeOptions::tail says (TailMode: the sink on
// its own thread, the audio decode on its own stream beside the video's on a GPU), with the same
// media bit for bit. An MP4 appears only when everything succeeded (media::Mp4Writer writes a
// temporary and renames it).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "media/audio.h"
#include "media/image.h"
#include "media/video_writer.h"
#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/vocoder.h"
#include "models/tiling.h"
#include "models/video_vae/video_decoder.h"
#include "nn/module.h"

namespace ltx::generate {

class Progress;

// How the tail of a generation (audio decode, video decode, the sink's encode) runs; the media
// are the same bit for bit either way.
enum class TailMode {
  // Overlapped, except that under a GPU memory limit (--max-gpu-memory) the audio decode runs
  // before the video decode: beside it, its activations would take memory the video decode's
  // tiling was planned with.
  Auto,
  // The sink's calls on a thread of their own (SinkThread: the MP4's conversion and encoding of a
  // chunk while the next one decodes) and the audio decode issued by a host thread of its own
  // while the video decode runs, read back after it; on a GPU onto its own stream. (On the CPU
  // the two decodes' parallel loops take turns on the one thread pool: Auto runs the audio decode
  // first there.)
  Overlapped,
  // The audio decode, then the video decode with the sink called in line.
  Sequential,
};
struct TailPlan {
  bool sink_thread = false;         // the sink's calls on their own thread
  bool audio_beside_video = false;  // the audio decode on its own thread and stream, beside the video's
};
// What `mode` means on `device` (memory_limited: the device's allocator has a cap).
TailPlan plan_tail(TailMode mode, Device device, bool memory_limited);
const char* tail_mode_name(TailMode mode);

struct DecodeOptions {
  double fps = 24.0;
  // Where the decoders run: the CPU (f32), or a GPU (generate::model_placement: the video
  // decoders' weights in `dtype`, default bf16 as the reference; the vocoder in f32, as the
  // reference computes it). Chunks and the waveform come back to the host for the sink.
  Device device = Device::cpu();
  std::optional<DType> dtype;
  // Decode tiling, checked against the decoder's grid and (diffusion decoder) its overlap floors;
  // nullopt with auto_tiling: the pipelines' automatic layout (reference: tiling_config_for_vae):
  // conv VAE models::tiling::auto_tiling_config, diffusion decoder
  // models::video_vae::recommended_decode_tiling; nullopt without: one tile.
  std::optional<models::tiling::TilingConfig> tiling;
  bool auto_tiling = true;
  // Memory budget (bytes free on the decoding device) of the diffusion decoder's automatic
  // tiling; nullopt: what the decoding device has free before the decoder is loaded
  // (bench::free_memory_bytes: on a GPU its free memory after the cache is released, as the
  // reference's cuda_activation_budget_bytes; on the CPU the host's available memory, where the
  // reference passes 0, with which no layout fits).
  std::optional<int64_t> decode_free_bytes;
  // Seed of the decoder noise of timestep-conditioned video decoders (torch CPU generator; the
  // reference continues the pipeline's generator on its device, which is not reproduced).
  int64_t noise_seed = 0;
  // > 0: cut the waveform to this many seconds (DFR pads its canvas; the reference cuts the audio
  // to the video's length, pipelines::audio_samples_to_keep).
  double audio_max_seconds = 0.0;
  // The waveform to write instead of decoding an audio latent (a2vid: the input audio, which the
  // reference muxes as it is); the audio latent must then be undefined.
  std::optional<media::AudioTrack> audio_track;
  media::Mp4Options mp4;  // decode_to_mp4's encoder settings
  TailMode tail = TailMode::Auto;
};

// Where the tail's time went. The parts overlap when the plan says so, so they need not add up to
// the wall time.
struct TailTiming {
  TailPlan plan;
  double wall_seconds = 0;   // from the audio decode's start (the video's without audio) to the sink's finish
  double video_seconds = 0;  // the video decoder's work on the calling thread (its load when it
                             // loads here, the decode, the chunks' copies to the host), less the
                             // time it waited for the sink thread
  double audio_seconds = 0;  // the audio decoder + vocoder: their span on the device's stream
                             // (on the CPU: their wall time); 0 without an audio decode
  double sink_seconds = 0;   // inside the sink's calls (on its thread, or in line)
  double sink_wait_seconds = 0;  // the calling thread waited for the sink thread
};

struct DecodeResult {
  int64_t frames = 0, height = 0, width = 0;
  int64_t audio_samples = 0;  // per channel; 0 without audio
  int64_t audio_sample_rate = 0;
  TailTiming tail;
};

// Where decoded media goes, in this order: begin() once (after the audio decode and the video
// decoder's checks, before any frame), write_frames() per chunk, write_audio() once when there is
// audio, finish(). Everything it gets is on the host.
struct MediaFormat {
  double fps = 24.0;
  int64_t audio_sample_rate = 0;  // 0: no audio
  int64_t audio_channels = 0;
  // The video's frame count: what the write_frames() calls deliver in all (a sink that keeps one
  // frame, as the server's thumbnail does, picks it by index); 0 when unknown.
  int64_t frames = 0;
};
class MediaSink {
 public:
  virtual ~MediaSink() = default;
  virtual void begin(const MediaFormat& format) = 0;
  // frames: [f, H, W, 3] f32 in [0, 1], the next f frames.
  virtual void write_frames(const Tensor& frames) = 0;
  // waveform: [channels, samples] f32.
  virtual void write_audio(const Tensor& waveform) = 0;
  virtual void finish() = 0;
};

// An MP4 file through media::Mp4Writer (opened in begin(); the file appears in finish()).
class Mp4Sink final : public MediaSink {
 public:
  explicit Mp4Sink(std::string path, media::Mp4Options options = {});
  ~Mp4Sink() override;
  void begin(const MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;

 private:
  std::string path_;
  media::Mp4Options options_;
  std::unique_ptr<media::Mp4Writer> writer_;
};

// A 16-bit PCM WAV file of the audio (media::write_wav, written in finish(); the file appears only
// then): text-to-audio's output. Video frames are refused.
class WavSink final : public MediaSink {
 public:
  explicit WavSink(std::string path) : path_(std::move(path)) {}
  void begin(const MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;

 private:
  std::string path_;
  int64_t sample_rate_ = 0;
  Tensor waveform_;
};

// PNG frames (libpng, media/image.h): a one-frame video (format.frames == 1, text-to-image) as
// the file `file_path`; more frames as a folder `dir_path` of frame_00000.png, frame_00001.png, ...
// Each appears only in finish() (temporary name + rename). The audio is dropped (with a warning).
class PngSink final : public MediaSink {
 public:
  PngSink(std::string file_path, std::string dir_path);
  ~PngSink() override;
  void begin(const MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;
  // Where the output went (file_path or dir_path), after finish().
  const std::string& written_path() const { return written_; }

 private:
  std::string file_path_, dir_path_, written_;
  bool single_ = false;
  Tensor single_frame_;
  std::unique_ptr<media::PngFrameWriter> folder_;
};

// Decoded media kept in memory (library callers, tests; no FFmpeg needed).
struct DecodedMedia {
  MediaFormat format;
  Tensor frames;    // [F, H, W, 3] f32 in [0, 1], on the host; undefined for audio only
  Tensor waveform;  // [channels, samples] f32 on the host; undefined without audio
};
class MemorySink final : public MediaSink {
 public:
  void begin(const MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;  // joins the chunks
  const DecodedMedia& media() const { return media_; }

 private:
  DecodedMedia media_;
  std::vector<Tensor> chunks_;
};

// video_latent: [1, C, F, H, W] normalised video latent (the pipeline's result), or undefined for
// audio only (text-to-audio: the sink then gets begin() with frames 0, write_audio(), finish());
// audio_latent: [1, z, T, mel] normalised audio latent, or undefined for a silent video (or when
// DecodeOptions::audio_track gives the waveform). video_vae_path /
// audio_vae_path: files holding the video VAE decoder / the audio VAE decoder + vocoder (a
// single-file checkpoint may be both). `progress` (optional) gets the stages "audio decode" and
// "video decode" (one step per decoded chunk); with the audio beside the video, "audio decode" is
// its load and issue, and its device work ends inside "video decode". Checks run before the sink
// sees anything. The sink's calls come from the calling thread, or from a SinkThread
// (DecodeOptions::tail), never from two threads at once.
DecodeResult decode_latents(const Tensor& video_latent, const Tensor& audio_latent,
                            const std::string& video_vae_path, const std::string& audio_vae_path,
                            MediaSink& sink, const DecodeOptions& options = {},
                            Progress* progress = nullptr);

// The decoders, loaded ahead (a resident engine keeps them between generations).
struct AudioDecodeModels {
  std::string path;  // the file they came from (messages)
  std::shared_ptr<const models::audio_vae::AudioDecoder> decoder;
  std::shared_ptr<const models::audio_vae::VocoderModel> vocoder;
};
struct VideoDecodeModel {
  std::string path;
  nn::LoadOptions where;  // must be DecodeOptions' placement (generate::model_placement)
  bool diffusion = false;  // LTX-2.5's diffusion decoder (else the convolutional one)
  int64_t diffusion_weight_bytes = 0;  // the header estimate its automatic tiling plans with
  std::shared_ptr<const models::video_vae::VideoDecoder> decoder;
};
struct DecodeModels {
  std::shared_ptr<const AudioDecodeModels> audio;  // null: only silent videos can be decoded
  std::shared_ptr<const VideoDecodeModel> video;
};
// `where` as generate::model_placement(device, dtype) gives it; the vocoder in its own dtype.
std::shared_ptr<const AudioDecodeModels> load_audio_decode_models(const std::string& path,
                                                                  const nn::LoadOptions& where);
std::shared_ptr<const VideoDecodeModel> load_video_decode_model(const std::string& path,
                                                                const nn::LoadOptions& where);

// decode_latents with decoders loaded ahead: the same steps, checks and results, no file read
// (on a GPU the diffusion decoder's automatic tiling then plans with the memory left beside its
// resident weights).
DecodeResult decode_latents(const Tensor& video_latent, const Tensor& audio_latent,
                            const DecodeModels& models, MediaSink& sink,
                            const DecodeOptions& options = {}, Progress* progress = nullptr);

// decode_latents into an Mp4Sink(output_path, options.mp4).
DecodeResult decode_to_mp4(const std::string& output_path, const Tensor& video_latent,
                           const Tensor& audio_latent, const std::string& video_vae_path,
                           const std::string& audio_vae_path, const DecodeOptions& options = {},
                           Progress* progress = nullptr);

}  // namespace ltx::generate
