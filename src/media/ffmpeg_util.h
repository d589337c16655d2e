#pragma once
// Internal helpers for the FFmpeg-based sources (only included when LTX_WITH_FFMPEG).
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include <memory>
#include <string>

#include "core/error.h"

namespace ltx::media::ff {

inline std::string error_string(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof(buf));
  return buf;
}

// Throws "<who>: <what> failed: <FFmpeg's message>" when err < 0; returns err otherwise.
inline int check(int err, const std::string& who, const char* what) {
  if (err < 0) fail(who, ": ", what, " failed: ", error_string(err));
  return err;
}

// FFmpeg prints codec chatter (x264's statistics, ...) at AV_LOG_INFO; keep errors only.
void quiet_logs();

struct CodecContextFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsFree {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};
struct InputFormatClose {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};

using CodecContextPtr = std::unique_ptr<AVCodecContext, CodecContextFree>;
using FramePtr = std::unique_ptr<AVFrame, FrameFree>;
using PacketPtr = std::unique_ptr<AVPacket, PacketFree>;
using SwsPtr = std::unique_ptr<SwsContext, SwsFree>;
using InputPtr = std::unique_ptr<AVFormatContext, InputFormatClose>;

inline FramePtr alloc_frame() {
  FramePtr f(av_frame_alloc());
  LTX_CHECK(f != nullptr, "FFmpeg: out of memory (av_frame_alloc)");
  return f;
}
inline PacketPtr alloc_packet() {
  PacketPtr p(av_packet_alloc());
  LTX_CHECK(p != nullptr, "FFmpeg: out of memory (av_packet_alloc)");
  return p;
}

// SWS_CS_* coefficients for an AVColorSpace (BT.601 when unspecified, as libswscale assumes).
int sws_colorspace(AVColorSpace cs);

}  // namespace ltx::media::ff
