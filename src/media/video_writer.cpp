#include "media/video_writer.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "media/hdr.h"
#include "media/support.h"
#include "media/temp_output.h"
#include "media/yuv.h"

#if LTX_WITH_FFMPEG
extern "C" {
#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>
}

#include "media/ffmpeg_util.h"
#endif

namespace ltx::media {

std::pair<int64_t, int64_t> limit_denominator(double fps, int64_t max_den) {
  LTX_CHECK(std::isfinite(fps) && fps > 0 && max_den >= 1,
            "limit_denominator: needs a positive finite value and max_den >= 1; got ", fps, ", ",
            max_den);
  __extension__ using i128 = __int128;
  int exp = 0;
  const double mant = std::frexp(fps, &exp);  // fps = mant * 2^exp, mant in [0.5, 1)
  i128 n = static_cast<i128>(std::ldexp(mant, 53)), d = 1;
  int shift = exp - 53;
  for (; shift > 0; --shift) n *= 2;
  for (; shift < 0 && n % 2 == 0; ++shift) n /= 2;
  for (; shift < 0; ++shift) d *= 2;
  if (d <= max_den) return {static_cast<int64_t>(n), static_cast<int64_t>(d)};
  const i128 den = d;
  i128 p0 = 0, q0 = 1, p1 = 1, q1 = 0;
  for (;;) {
    const i128 a = n / d;
    const i128 q2 = q0 + a * q1;
    if (q2 > max_den) break;
    const i128 p2 = p0 + a * p1;
    p0 = p1;
    q0 = q1;
    p1 = p2;
    q1 = q2;
    const i128 r = n - a * d;
    n = d;
    d = r;
  }
  const i128 k = (max_den - q0) / q1;
  // p1 / q1 wins when at least as close as (p0 + k p1) / (q0 + k q1): their distance is
  // 1 / (q1 (q0 + k q1)), that of p1 / q1 to fps d / (q1 den).
  if (2 * d * (q0 + k * q1) <= den) return {static_cast<int64_t>(p1), static_cast<int64_t>(q1)};
  return {static_cast<int64_t>(p0 + k * p1), static_cast<int64_t>(q0 + k * q1)};
}

#if LTX_WITH_FFMPEG

namespace {

struct SwrFree {
  void operator()(SwrContext* s) const { swr_free(&s); }
};

// The instruction sets libx264 may use ("asm" of x264-params), or nullptr for its own choice.
// With its AVX-512 kernels the same frames gave different H.264 bytes from process to process:
// their result depends on memory outside the picture x264 is given (the bytes became repeatable
// under MALLOC_PERTURB_, and which heap blocks x264 gets depends on what the engine's pool
// threads freed before). With every other set it detects the bytes are the same every run, so an
// AVX-512 CPU gets the "avx2" set: exactly what x264 detects there, less AVX-512 (every CPU with
// AVX-512 has AVX2, FMA3 and BMI2).
const char* x264_instruction_sets() {
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_cpu_supports("avx512f")) return "avx2";
#endif
  return nullptr;
}

}  // namespace

struct Mp4Writer::Impl {
  std::string path;
  std::string who;
  AVRational rate{0, 1};
  Mp4Options opt;
  HlgMapping hlg;
  std::unique_ptr<TempOutput> tmp;
  AVFormatContext* fmt = nullptr;  // owns fmt->pb while open
  AVStream* vst = nullptr;
  AVStream* ast = nullptr;
  ff::CodecContextPtr venc, aenc;
  ff::FramePtr vframe;
  ff::PacketPtr pkt;
  int64_t height = 0, width = 0;
  int64_t frames = 0;
  bool started = false;        // header written
  bool closed = false;         // finished or failed
  std::vector<int16_t> audio;  // interleaved int16, kept until finish()
  bool have_audio = false;

  ~Impl() { abandon(); }

  // Frees everything and removes the temporary file (no trailer).
  void abandon() noexcept {
    if (fmt != nullptr) {
      if (fmt->pb != nullptr) avio_closep(&fmt->pb);
      avformat_free_context(fmt);
      fmt = nullptr;
    }
    venc.reset();
    aenc.reset();
    if (tmp) tmp->discard();
    closed = true;
  }

  void write_packets(AVCodecContext* enc, AVStream* st) {
    for (;;) {
      const int r = avcodec_receive_packet(enc, pkt.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      ff::check(r, who, "encoding (avcodec_receive_packet)");
      av_packet_rescale_ts(pkt.get(), enc->time_base, st->time_base);
      pkt->stream_index = st->index;
      ff::check(av_interleaved_write_frame(fmt, pkt.get()), who, "writing a packet");
    }
  }

  void encode(AVCodecContext* enc, AVStream* st, const AVFrame* frame) {
    ff::check(avcodec_send_frame(enc, frame), who, "encoding (avcodec_send_frame)");
    write_packets(enc, st);
  }

  bool is_hlg() const { return opt.video == Mp4Video::HevcHlgBt2020; }

  void open_video(int64_t h, int64_t w) {
    const char* name = is_hlg() ? "libx265" : "libx264";
    const AVCodec* codec = avcodec_find_encoder_by_name(name);
    LTX_CHECK(codec != nullptr, who, ": this FFmpeg has no ", name,
              " encoder; install an FFmpeg built with it (Debian's libavcodec is)");
    venc.reset(avcodec_alloc_context3(codec));
    LTX_CHECK(venc != nullptr, who, ": out of memory (avcodec_alloc_context3)");
    AVCodecContext* c = venc.get();
    c->width = static_cast<int>(w);
    c->height = static_cast<int>(h);
    c->time_base = av_inv_q(rate);
    c->framerate = rate;
    c->bit_rate = 0;
    c->thread_type = FF_THREAD_FRAME;
    c->color_range = AVCOL_RANGE_MPEG;
    if (fmt->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    AVDictionary* dict = nullptr;
    av_dict_set(&dict, "crf", std::to_string(opt.crf).c_str(), 0);
    av_dict_set(&dict, "preset", opt.preset.c_str(), 0);
    if (is_hlg()) {
      // The reference clamps libx265's automatic thread count (0 can hang on hosts with 100+ CPUs).
      const int threads =
          opt.threads > 0
              ? opt.threads
              : std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 1, 16);
      c->pix_fmt = AV_PIX_FMT_YUV420P10LE;
      c->thread_count = threads;
      c->color_primaries = AVCOL_PRI_BT2020;
      c->color_trc = AVCOL_TRC_ARIB_STD_B67;
      c->colorspace = AVCOL_SPC_BT2020_NCL;
      // As the reference's x265-params, plus log-level=error: x265 prints its settings otherwise.
      av_dict_set(&dict, "x265-params",
                  str("colorprim=bt2020:transfer=arib-std-b67:colormatrix=bt2020nc:range=limited:"
                      "repeat-headers=1:info=0:pools=",
                      threads, ":frame-threads=4:log-level=error")
                      .c_str(),
                  0);
    } else {
      c->pix_fmt = AV_PIX_FMT_YUV420P;
      c->thread_count = opt.threads;
      c->colorspace = AVCOL_SPC_BT709;
      if (const char* sets = x264_instruction_sets())
        av_dict_set(&dict, "x264-params", str("asm=", sets).c_str(), 0);
    }
    const int r = avcodec_open2(c, codec, &dict);
    av_dict_free(&dict);
    ff::check(r, who,
              str("opening ", name, " (crf ", opt.crf, ", preset '", opt.preset, "')").c_str());
    vst = avformat_new_stream(fmt, nullptr);
    LTX_CHECK(vst != nullptr, who, ": out of memory (avformat_new_stream)");
    ff::check(avcodec_parameters_from_context(vst->codecpar, c), who, "video stream parameters");
    if (is_hlg()) vst->codecpar->codec_tag = MKTAG('h', 'v', 'c', '1');  // plays in Apple players
    vst->time_base = c->time_base;
    vst->avg_frame_rate = c->framerate;

    vframe = ff::alloc_frame();
    vframe->format = c->pix_fmt;
    vframe->width = c->width;
    vframe->height = c->height;
    if (is_hlg()) {  // the reference tags the HLG frames too
      vframe->colorspace = c->colorspace;
      vframe->color_range = c->color_range;
    }
    ff::check(av_frame_get_buffer(vframe.get(), 0), who, "allocating a video frame");
  }

  void open_audio() {
    const AVCodec* codec = avcodec_find_encoder_by_name("aac");
    LTX_CHECK(codec != nullptr, who, ": this FFmpeg has no AAC encoder");
    aenc.reset(avcodec_alloc_context3(codec));
    LTX_CHECK(aenc != nullptr, who, ": out of memory (avcodec_alloc_context3)");
    AVCodecContext* c = aenc.get();
    c->sample_fmt = codec->sample_fmts != nullptr ? codec->sample_fmts[0] : AV_SAMPLE_FMT_FLTP;
    c->sample_rate = opt.audio_sample_rate;
    av_channel_layout_default(&c->ch_layout, opt.audio_channels);
    c->time_base = AVRational{1, opt.audio_sample_rate};
    c->bit_rate = 0;
    if (fmt->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    ff::check(avcodec_open2(c, codec, nullptr), who,
              str("opening the AAC encoder at ", opt.audio_sample_rate, " Hz").c_str());
    ast = avformat_new_stream(fmt, nullptr);
    LTX_CHECK(ast != nullptr, who, ": out of memory (avformat_new_stream)");
    ff::check(avcodec_parameters_from_context(ast->codecpar, c), who, "audio stream parameters");
    ast->time_base = c->time_base;
  }

  void start(int64_t h, int64_t w) {
    open_video(h, w);
    if (opt.audio_sample_rate > 0) open_audio();
    AVDictionary* muxer = nullptr;
    if (opt.faststart) av_dict_set(&muxer, "movflags", "+faststart", 0);
    const int r = avformat_write_header(fmt, &muxer);
    av_dict_free(&muxer);
    ff::check(r, who, "writing the MP4 header");
    started = true;
    height = h;
    width = w;
  }

  void encode_audio() {
    AVCodecContext* c = aenc.get();
    const int channels = opt.audio_channels;
    const int64_t n = static_cast<int64_t>(audio.size()) / channels;
    AVChannelLayout in_layout;
    av_channel_layout_default(&in_layout, channels);
    SwrContext* raw = nullptr;
    ff::check(swr_alloc_set_opts2(&raw, &c->ch_layout, c->sample_fmt, c->sample_rate, &in_layout,
                                  AV_SAMPLE_FMT_S16, opt.audio_sample_rate, 0, nullptr),
              who, "setting up the audio sample conversion");
    std::unique_ptr<SwrContext, SwrFree> swr(raw);
    ff::check(swr_init(swr.get()), who, "setting up the audio sample conversion");

    const bool any_size = (c->codec->capabilities & AV_CODEC_CAP_VARIABLE_FRAME_SIZE) != 0;
    const bool small_last = (c->codec->capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME) != 0;
    const int64_t frame_size = (any_size || c->frame_size <= 0) ? 1024 : c->frame_size;
    ff::FramePtr frame = ff::alloc_frame();
    for (int64_t off = 0; off < n; off += frame_size) {
      const int64_t count = std::min(frame_size, n - off);
      const int64_t alloc = (count < frame_size && !any_size && !small_last) ? frame_size : count;
      av_frame_unref(frame.get());
      frame->format = c->sample_fmt;
      frame->sample_rate = c->sample_rate;
      ff::check(av_channel_layout_copy(&frame->ch_layout, &c->ch_layout), who, "audio layout");
      frame->nb_samples = static_cast<int>(alloc);
      ff::check(av_frame_get_buffer(frame.get(), 0), who, "allocating an audio frame");
      if (alloc > count)
        av_samples_set_silence(frame->data, 0, static_cast<int>(alloc), channels, c->sample_fmt);
      const uint8_t* in = reinterpret_cast<const uint8_t*>(audio.data() + off * channels);
      const int got = swr_convert(swr.get(), frame->data, static_cast<int>(count), &in,
                                  static_cast<int>(count));
      ff::check(got, who, "converting audio samples");
      LTX_CHECK(got == count, who, ": the audio sample conversion returned ", got, " of ", count,
                " samples");
      frame->pts = off;
      encode(c, ast, frame.get());
    }
    encode(c, ast, nullptr);
  }
};

Mp4Writer::Mp4Writer(std::string path, double fps, Mp4Options options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = std::move(path);
  m.who = str("write_mp4 '", m.path, "'");
  m.opt = std::move(options);
  if (m.opt.video == Mp4Video::HevcHlgBt2020 || m.opt.exact_rate) {
    LTX_CHECK(std::isfinite(fps) && fps > 0 && fps < 1e6, m.who,
              ": the frame rate must be positive; got ", fps);
    const auto [num, den] = limit_denominator(fps, 1000);
    LTX_CHECK(num > 0 && num <= 1000000000, m.who, ": the frame rate ", fps,
              " is below 1/1000 or too large");
    m.rate = AVRational{static_cast<int>(num), static_cast<int>(den)};
    if (m.opt.video == Mp4Video::HevcHlgBt2020) m.hlg = hlg_mapping(m.opt.hlg_primaries);
  } else {
    LTX_CHECK(std::isfinite(fps) && fps >= 1 && fps < 1e6, m.who,
              ": the frame rate must be at least 1 (it is written as int(fps)); got ", fps);
    m.rate = AVRational{static_cast<int>(fps), 1};  // the reference's int(fps): truncation
  }
  LTX_CHECK(m.opt.crf >= 0 && m.opt.crf <= 51, m.who, ": crf must be in [0, 51]; got ", m.opt.crf);
  LTX_CHECK(m.opt.threads >= 0, m.who, ": threads must be >= 0; got ", m.opt.threads);
  LTX_CHECK(m.opt.audio_sample_rate >= 0, m.who, ": the audio sample rate must be positive; got ",
            m.opt.audio_sample_rate);
  LTX_CHECK(m.opt.audio_sample_rate == 0 || m.opt.audio_channels == 1 || m.opt.audio_channels == 2,
            m.who, ": audio must be mono or stereo; got ", m.opt.audio_channels, " channels");
  ff::quiet_logs();
  m.tmp = std::make_unique<TempOutput>(m.path, TempOutput::Kind::File, m.who);
  ff::check(avformat_alloc_output_context2(&m.fmt, nullptr, "mp4", m.tmp->temp_path().c_str()),
            m.who, "creating the MP4 muxer");
  const int r = avio_open(&m.fmt->pb, m.tmp->temp_path().c_str(), AVIO_FLAG_WRITE);
  if (r < 0) {
    m.abandon();
    fail(m.who, ": cannot open '", m.tmp->temp_path(), "' for writing: ", ff::error_string(r));
  }
  m.pkt = ff::alloc_packet();
}

Mp4Writer::~Mp4Writer() = default;

int64_t Mp4Writer::frames_written() const { return impl_->frames; }

void Mp4Writer::write_frames(const Tensor& frames) {
  Impl& m = *impl_;
  LTX_CHECK(!m.closed, m.who, ": write_frames after finish() or after an error");
  try {
    LTX_CHECK(frames.defined() && (frames.dim() == 3 || frames.dim() == 4) &&
                  frames.size(-1) == 3 && dtype_is_floating(frames.dtype()),
              m.who, ": frames must be floating [F, H, W, 3] or [H, W, 3] in [0, 1]; got ",
              frames.defined() ? frames.describe() : std::string("an undefined tensor"));
    const Tensor f4 = (frames.dim() == 3 ? frames.unsqueeze(0) : frames).to(Device::cpu());
    const int64_t h = f4.size(1), w = f4.size(2);
    if (!m.started) {
      LTX_CHECK(h >= 2 && w >= 2 && h % 2 == 0 && w % 2 == 0 && h <= 16384 && w <= 16384, m.who,
                ": height and width must be even (yuv420p), between 2 and 16384; got ", h, "x", w);
      m.start(h, w);
    }
    LTX_CHECK(h == m.height && w == m.width, m.who, ": a chunk of ", h, "x", w,
              " frames after frames of ", m.height, "x", m.width);
    for (int64_t i = 0; i < f4.size(0); ++i) {
      AVFrame* fr = m.vframe.get();
      ff::check(av_frame_make_writable(fr), m.who, "av_frame_make_writable");
      if (m.is_hlg()) {
        const auto plane = [&](int p) { return reinterpret_cast<uint16_t*>(fr->data[p]); };
        rgb_to_yuv420p10_bt2020(hlg_signal(f4.select(0, i), m.hlg), plane(0), fr->linesize[0] / 2,
                                plane(1), fr->linesize[1] / 2, plane(2), fr->linesize[2] / 2);
      } else {
        rgb_to_yuv420_bt709(f4.select(0, i), fr->data[0], fr->linesize[0], fr->data[1],
                            fr->linesize[1], fr->data[2], fr->linesize[2]);
      }
      fr->pts = m.frames;
      m.encode(m.venc.get(), m.vst, fr);
      ++m.frames;
    }
  } catch (...) {
    m.abandon();
    throw;
  }
}

void Mp4Writer::write_audio(const Tensor& waveform) {
  Impl& m = *impl_;
  LTX_CHECK(!m.closed, m.who, ": write_audio after finish() or after an error");
  try {
    LTX_CHECK(m.opt.audio_sample_rate > 0, m.who,
              ": write_audio on a writer made without an "
              "audio track (set Mp4Options::audio_sample_rate)");
    LTX_CHECK(!m.have_audio, m.who, ": write_audio called twice; pass the whole waveform once");
    const auto [channels, n] = audio_layout(waveform, m.who.c_str());
    LTX_CHECK(channels == m.opt.audio_channels, m.who, ": the waveform has ", channels,
              " channel(s) but the writer was made for ", m.opt.audio_channels);
    (void)n;
    m.audio = waveform_to_int16(waveform);
    m.have_audio = true;
  } catch (...) {
    m.abandon();
    throw;
  }
}

void Mp4Writer::finish() {
  Impl& m = *impl_;
  LTX_CHECK(!m.closed, m.who, ": finish() after finish() or after an error");
  try {
    LTX_CHECK(m.frames > 0, m.who, ": no frames were written; a video needs at least one frame");
    LTX_CHECK(m.opt.audio_sample_rate == 0 || m.have_audio, m.who,
              ": an audio track was declared but write_audio was never called");
    m.encode(m.venc.get(), m.vst, nullptr);  // flush the delayed frames
    if (m.have_audio) m.encode_audio();
    ff::check(av_write_trailer(m.fmt), m.who, "writing the MP4 trailer");
    const int r = avio_closep(&m.fmt->pb);
    ff::check(r, m.who, "closing the file");
    avformat_free_context(m.fmt);
    m.fmt = nullptr;
    m.tmp->commit();
    m.closed = true;
  } catch (...) {
    m.abandon();
    throw;
  }
}

#else  // no FFmpeg

struct Mp4Writer::Impl {};

Mp4Writer::Mp4Writer(std::string path, double, Mp4Options) {
  fail_no_ffmpeg(str("write_mp4 '", path, "'"));
}
Mp4Writer::~Mp4Writer() = default;
int64_t Mp4Writer::frames_written() const { return 0; }
void Mp4Writer::write_frames(const Tensor&) { fail_no_ffmpeg("write_mp4"); }
void Mp4Writer::write_audio(const Tensor&) { fail_no_ffmpeg("write_mp4"); }
void Mp4Writer::finish() { fail_no_ffmpeg("write_mp4"); }

#endif

Mp4Options hlg_mp4_options() {
  Mp4Options o;
  o.video = Mp4Video::HevcHlgBt2020;
  o.crf = 12;
  o.preset = "ultrafast";
  o.faststart = true;
  return o;
}

void write_mp4(const std::string& path, const Tensor& frames, double fps, const AudioTrack* audio,
               Mp4Options options) {
  if (audio != nullptr) {
    const auto [channels, n] = audio_layout(audio->waveform, "write_mp4");
    (void)n;
    LTX_CHECK(audio->sample_rate > 0, "write_mp4 '", path,
              "': the audio sample rate must be positive; got ", audio->sample_rate);
    options.audio_sample_rate = audio->sample_rate;
    options.audio_channels = channels;
  } else {
    options.audio_sample_rate = 0;
  }
  Mp4Writer writer(path, fps, std::move(options));
  writer.write_frames(frames);
  if (audio != nullptr) writer.write_audio(audio->waveform);
  writer.finish();
}

}  // namespace ltx::media
