#include "media/video_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/input_limits.h"
#include "media/support.h"

#if LTX_WITH_FFMPEG
extern "C" {
#include <libavutil/pixdesc.h>
}

#include "media/ffmpeg_util.h"
#endif

namespace ltx::media {

#if LTX_WITH_FFMPEG

namespace {

ff::InputPtr open_input(const std::string& path, const std::string& who) {
  ff::quiet_logs();
  AVFormatContext* f = nullptr;
  const int r = avformat_open_input(&f, path.c_str(), nullptr, nullptr);
  if (r < 0) fail(who, ": cannot open '", path, "': ", ff::error_string(r));
  ff::InputPtr in(f);
  ff::check(avformat_find_stream_info(f, nullptr), who, "reading the stream information");
  return in;
}

ff::CodecContextPtr open_decoder(const AVStream* st, const std::string& who) {
  const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
  LTX_CHECK(codec != nullptr, who, ": no decoder for codec '",
            avcodec_get_name(st->codecpar->codec_id), "'");
  ff::CodecContextPtr c(avcodec_alloc_context3(codec));
  LTX_CHECK(c != nullptr, who, ": out of memory (avcodec_alloc_context3)");
  ff::check(avcodec_parameters_to_context(c.get(), st->codecpar), who, "decoder parameters");
  c->pkt_timebase = st->time_base;
  ff::check(avcodec_open2(c.get(), codec, nullptr), who, "opening the decoder");
  return c;
}

// Feeds every packet of `stream` to the decoder and hands each decoded frame to on_frame, which
// returns false to stop early.
template <typename OnFrame>
void decode_stream(AVFormatContext* fmt, int stream, AVCodecContext* dec, const std::string& who,
                   OnFrame on_frame) {
  ff::PacketPtr pkt = ff::alloc_packet();
  ff::FramePtr frame = ff::alloc_frame();
  bool more = true;
  auto drain = [&]() {
    for (;;) {
      const int r = avcodec_receive_frame(dec, frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      ff::check(r, who, "decoding");
      more = on_frame(frame.get());
      av_frame_unref(frame.get());
      if (!more) return;
    }
  };
  while (more) {
    const int r = av_read_frame(fmt, pkt.get());
    if (r == AVERROR_EOF) break;
    ff::check(r, who, "reading a packet");
    if (pkt->stream_index == stream) {
      const int s = avcodec_send_packet(dec, pkt.get());
      av_packet_unref(pkt.get());
      ff::check(s, who, "decoding (avcodec_send_packet)");
      drain();
    } else {
      av_packet_unref(pkt.get());
    }
  }
  if (!more) return;
  ff::check(avcodec_send_packet(dec, nullptr), who, "flushing the decoder");
  drain();
}

int find_stream(AVFormatContext* fmt, AVMediaType type, const std::string& who, const char* what) {
  const int idx = av_find_best_stream(fmt, type, -1, -1, nullptr, 0);
  LTX_CHECK(idx >= 0, who, ": the file has no ", what, " stream");
  return idx;
}

}  // namespace

MediaInfo probe_media(const std::string& path) {
  const std::string who = str("probe_media '", path, "'");
  ff::InputPtr in = open_input(path, who);
  MediaInfo info;
  info.format = in->iformat->name;
  if (in->duration != AV_NOPTS_VALUE)
    info.duration = static_cast<double>(in->duration) / AV_TIME_BASE;
  for (unsigned i = 0; i < in->nb_streams; ++i) {
    const AVStream* st = in->streams[i];
    const AVCodecParameters* par = st->codecpar;
    StreamInfo s;
    const char* type = av_get_media_type_string(par->codec_type);
    s.type = type != nullptr ? type : "unknown";
    s.codec = avcodec_get_name(par->codec_id);
    if (st->duration != AV_NOPTS_VALUE)
      s.duration = static_cast<double>(st->duration) * av_q2d(st->time_base);
    s.frames = st->nb_frames;
    if (par->codec_type == AVMEDIA_TYPE_VIDEO) {
      s.width = par->width;
      s.height = par->height;
      s.fps = st->avg_frame_rate.den != 0 ? av_q2d(st->avg_frame_rate) : 0.0;
      const char* pf = av_get_pix_fmt_name(static_cast<AVPixelFormat>(par->format));
      s.pixel_format = pf != nullptr ? pf : "unknown";
      const char* cs = av_color_space_name(par->color_space);
      s.color_space = cs != nullptr ? cs : "unknown";
      const char* cr = av_color_range_name(par->color_range);
      s.color_range = cr != nullptr ? cr : "unknown";
      const char* cp = av_color_primaries_name(par->color_primaries);
      s.color_primaries = cp != nullptr ? cp : "unknown";
      const char* ct = av_color_transfer_name(par->color_trc);
      s.color_transfer = ct != nullptr ? ct : "unknown";
    } else if (par->codec_type == AVMEDIA_TYPE_AUDIO) {
      s.sample_rate = par->sample_rate;
      s.channels = par->ch_layout.nb_channels;
    }
    info.streams.push_back(std::move(s));
  }
  return info;
}

Tensor decode_video_frames(const std::string& path, int64_t max_frames) {
  const std::string who = str("decode_video_frames '", path, "'");
  ff::InputPtr in = open_input(path, who);
  const int idx = find_stream(in.get(), AVMEDIA_TYPE_VIDEO, who, "video");
  ff::CodecContextPtr dec = open_decoder(in->streams[idx], who);
  // The size the container declares, before the decoder allocates a frame of it.
  LTX_CHECK(int64_t{dec->width} <= limits::kMaxVideoFramePixels / std::max(dec->height, 1), who,
            ": the video stream declares ", dec->width, "x", dec->height, " frames, more than the limit of ",
            limits::kMaxVideoFramePixels, " pixels (16384 x 16384) for a video frame");
  std::vector<uint8_t> pixels;
  int64_t frames = 0, height = 0, width = 0;
  ff::SwsPtr sws;
  ff::FramePtr rgb;
  if (max_frames == 0) return Tensor::empty({0, dec->height, dec->width, 3}, DType::U8);
  decode_stream(in.get(), idx, dec.get(), who, [&](AVFrame* f) {
    if (frames == 0) {
      height = f->height;
      width = f->width;
      LTX_CHECK(width > 0 && height > 0 && width <= limits::kMaxVideoFramePixels / height, who, ": frames of ",
                width, "x", height, " pixels, more than the limit of ", limits::kMaxVideoFramePixels,
                " pixels (16384 x 16384) for a video frame");
      sws.reset(sws_getContext(f->width, f->height, static_cast<AVPixelFormat>(f->format), f->width,
                               f->height, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr,
                               nullptr));
      LTX_CHECK(sws != nullptr, who, ": cannot convert pixel format '",
                av_get_pix_fmt_name(static_cast<AVPixelFormat>(f->format)), "' to RGB");
      int *inv_table = nullptr, *table = nullptr;
      int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
      sws_getColorspaceDetails(sws.get(), &inv_table, &src_range, &table, &dst_range, &brightness,
                               &contrast, &saturation);
      if (f->color_range == AVCOL_RANGE_JPEG) src_range = 1;
      if (f->color_range == AVCOL_RANGE_MPEG) src_range = 0;
      sws_setColorspaceDetails(sws.get(), sws_getCoefficients(ff::sws_colorspace(f->colorspace)),
                               src_range, table, dst_range, brightness, contrast, saturation);
      rgb = ff::alloc_frame();
      rgb->format = AV_PIX_FMT_RGB24;
      rgb->width = f->width;
      rgb->height = f->height;
      ff::check(av_frame_get_buffer(rgb.get(), 0), who, "allocating a frame");
    }
    LTX_CHECK(f->height == height && f->width == width, who, ": frame ", frames, " is ", f->width,
              "x", f->height, " after frames of ", width, "x", height);
    LTX_CHECK(static_cast<int64_t>(pixels.size()) + width * height * 3 <= limits::kMaxDecodedVideoBytes, who,
              ": more than ", frames, " frames of ", width, "x", height, " take more than the limit of ",
              limits::bytes_text(limits::kMaxDecodedVideoBytes), " for a decoded clip; cut it first (e.g. ffmpeg -t)");
    // libswscale's SIMD paths write whole blocks past the width: convert into a padded frame.
    sws_scale(sws.get(), f->data, f->linesize, 0, f->height, rgb->data, rgb->linesize);
    const size_t row = static_cast<size_t>(width) * 3;
    for (int64_t r = 0; r < height; ++r)
      pixels.insert(pixels.end(), rgb->data[0] + r * rgb->linesize[0],
                    rgb->data[0] + r * rgb->linesize[0] + row);
    ++frames;
    return max_frames < 0 || frames < max_frames;
  });
  LTX_CHECK(frames > 0, who, ": the video stream has no decodable frames");
  Tensor out = Tensor::empty({frames, height, width, 3}, DType::U8);
  std::memcpy(out.raw_data(), pixels.data(), pixels.size());
  return out;
}

namespace {

// The first audio stream decoded whole; *first_time receives the first decoded frame's time in
// seconds (0 when the stream has no timestamps).
AudioTrack decode_audio_stream(const std::string& path, const std::string& who, double* first_time) {
  ff::InputPtr in = open_input(path, who);
  const int idx = find_stream(in.get(), AVMEDIA_TYPE_AUDIO, who, "audio");
  ff::CodecContextPtr dec = open_decoder(in->streams[idx], who);
  const AVRational time_base = in->streams[idx]->time_base;
  std::vector<std::vector<float>> chans;
  int sample_rate = 0;
  *first_time = 0.0;
  decode_stream(in.get(), idx, dec.get(), who, [&](AVFrame* f) {
    const int C = f->ch_layout.nb_channels;
    if (chans.empty()) {
      LTX_CHECK(C >= 1 && C <= limits::kMaxAudioChannels && f->sample_rate > 0, who, ": ", C, " channels at ",
                f->sample_rate, " Hz; at most ", limits::kMaxAudioChannels, " channels are read");
      chans.resize(static_cast<size_t>(C));
      sample_rate = f->sample_rate;
      const int64_t ts = f->best_effort_timestamp != AV_NOPTS_VALUE ? f->best_effort_timestamp : f->pts;
      if (ts != AV_NOPTS_VALUE) *first_time = static_cast<double>(ts) * av_q2d(time_base);
    }
    LTX_CHECK(static_cast<size_t>(C) == chans.size(), who, ": the channel count changes");
    const AVSampleFormat fmt = static_cast<AVSampleFormat>(f->format);
    const bool planar = av_sample_fmt_is_planar(fmt) != 0;
    const AVSampleFormat packed = av_get_packed_sample_fmt(fmt);
    const int n = f->nb_samples;
    const double seconds = static_cast<double>(chans[0].size() + static_cast<size_t>(n)) / sample_rate;
    LTX_CHECK(seconds <= limits::kMaxAudioSeconds, who, ": the audio runs past the limit of ",
              limits::kMaxAudioSeconds, " s for a decoded audio stream; cut it first (e.g. ffmpeg -t)");
    for (int c = 0; c < C; ++c) {
      const uint8_t* base = f->extended_data[planar ? c : 0];
      const int step = planar ? 1 : C, first = planar ? 0 : c;
      std::vector<float>& out = chans[static_cast<size_t>(c)];
      for (int i = 0; i < n; ++i) {
        const int k = first + i * step;
        float v = 0;
        switch (packed) {
          case AV_SAMPLE_FMT_U8:
            v = static_cast<float>(base[k]) / 128.0f;
            break;
          case AV_SAMPLE_FMT_S16:
            v = reinterpret_cast<const int16_t*>(base)[k] / 32768.0f;
            break;
          case AV_SAMPLE_FMT_S32:
            v = static_cast<float>(reinterpret_cast<const int32_t*>(base)[k] / 2147483648.0);
            break;
          case AV_SAMPLE_FMT_FLT:
            v = reinterpret_cast<const float*>(base)[k];
            break;
          case AV_SAMPLE_FMT_DBL:
            v = static_cast<float>(reinterpret_cast<const double*>(base)[k]);
            break;
          default:
            fail(who, ": unsupported sample format '", av_get_sample_fmt_name(fmt), "'");
        }
        out.push_back(v);
      }
    }
    return true;
  });
  LTX_CHECK(!chans.empty() && !chans[0].empty(), who, ": the audio stream has no samples");
  const int64_t C = static_cast<int64_t>(chans.size()), N = static_cast<int64_t>(chans[0].size());
  AudioTrack track{Tensor::empty({C, N}), sample_rate};
  for (int64_t c = 0; c < C; ++c)
    std::memcpy(track.waveform.data<float>() + c * N, chans[static_cast<size_t>(c)].data(),
                static_cast<size_t>(N) * sizeof(float));
  return track;
}

}  // namespace

AudioTrack decode_audio(const std::string& path) {
  double first_time = 0.0;
  return decode_audio_stream(path, str("decode_audio '", path, "'"), &first_time);
}

AudioTrack read_audio_clip(const std::string& path, double start_time, std::optional<double> max_duration,
                           const std::string& flag) {
  const std::string who = str(flag, " '", path, "'");
  std::error_code ec;
  LTX_CHECK(std::filesystem::is_regular_file(path, ec), who, ": no such file");
  LTX_CHECK(start_time >= 0.0 && std::isfinite(start_time), "--audio-start-time ", start_time,
            " must be a number >= 0");
  double first_time = 0.0;
  const AudioTrack track = decode_audio_stream(path, who, &first_time);
  return cut_audio_clip(track, start_time, max_duration, who, first_time);
}

#else  // no FFmpeg

MediaInfo probe_media(const std::string& path) { fail_no_ffmpeg(str("probe_media '", path, "'")); }
Tensor decode_video_frames(const std::string& path, int64_t) {
  fail_no_ffmpeg(str("decode_video_frames '", path, "'"));
}
AudioTrack decode_audio(const std::string& path) {
  fail_no_ffmpeg(str("decode_audio '", path, "'"));
}
AudioTrack read_audio_clip(const std::string& path, double, std::optional<double>, const std::string& flag) {
  fail_no_ffmpeg(str(flag, " '", path, "'"));
}

#endif

}  // namespace ltx::media
