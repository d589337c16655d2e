#include "media/preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "media/image.h"
#include "media/support.h"
#include "ops/elementwise.h"
#include "ops/resample.h"
#include "ops/shape.h"

#if LTX_WITH_FFMPEG
#include "media/ffmpeg_util.h"
#endif

namespace ltx::media {
namespace {

#if LTX_WITH_FFMPEG

// rgb24 <-> yuv420p with libswscale's defaults (bilinear; BT.601 limited for the YUV side).
void sws_convert(const uint8_t* const src[4], const int src_stride[4], AVPixelFormat src_fmt,
                 uint8_t* const dst[4], const int dst_stride[4], AVPixelFormat dst_fmt, int w,
                 int h, const std::string& who) {
  ff::SwsPtr sws(
      sws_getContext(w, h, src_fmt, w, h, dst_fmt, SWS_BILINEAR, nullptr, nullptr, nullptr));
  LTX_CHECK(sws != nullptr, who, ": libswscale cannot convert ", av_get_pix_fmt_name(src_fmt),
            " to ", av_get_pix_fmt_name(dst_fmt));
  sws_scale(sws.get(), src, src_stride, 0, h, dst, dst_stride);
}

Tensor recompress(const Tensor& rgb, int crf, int threads) {
  const std::string who = "crf_recompress";
  ff::quiet_logs();
  const int h = static_cast<int>(rgb.size(0)), w = static_cast<int>(rgb.size(1));

  // ---- encode one frame (libx264, as encode_single_frame with PyAV's codec defaults)
  const AVCodec* enc_codec = avcodec_find_encoder_by_name("libx264");
  LTX_CHECK(enc_codec != nullptr, who, ": this FFmpeg has no libx264 encoder");
  ff::CodecContextPtr enc(avcodec_alloc_context3(enc_codec));
  LTX_CHECK(enc != nullptr, who, ": out of memory");
  enc->width = w;
  enc->height = h;
  enc->pix_fmt = AV_PIX_FMT_YUV420P;
  enc->time_base = AVRational{1, 1};  // rate=1
  enc->framerate = AVRational{1, 1};
  enc->bit_rate = 0;
  enc->thread_count = threads;
  enc->thread_type = FF_THREAD_SLICE;         // PyAV's default threading
  enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;  // as in the reference's MP4 container
  AVDictionary* dict = nullptr;
  av_dict_set(&dict, "crf", std::to_string(crf).c_str(), 0);
  av_dict_set(&dict, "preset", "veryfast", 0);
  const int r = avcodec_open2(enc.get(), enc_codec, &dict);
  av_dict_free(&dict);
  ff::check(r, who, "opening libx264");

  ff::FramePtr yuv = ff::alloc_frame();
  yuv->format = AV_PIX_FMT_YUV420P;
  yuv->width = w;
  yuv->height = h;
  ff::check(av_frame_get_buffer(yuv.get(), 0), who, "allocating a frame");
  // libswscale's SIMD paths read and write whole blocks past the width: convert between
  // FFmpeg frames (aligned, padded rows; what PyAV's from_ndarray / to_ndarray use).
  ff::FramePtr rgb_in = ff::alloc_frame();
  rgb_in->format = AV_PIX_FMT_RGB24;
  rgb_in->width = w;
  rgb_in->height = h;
  ff::check(av_frame_get_buffer(rgb_in.get(), 0), who, "allocating a frame");
  for (int r = 0; r < h; ++r)
    std::memcpy(rgb_in->data[0] + static_cast<ptrdiff_t>(r) * rgb_in->linesize[0],
                rgb.data<uint8_t>() + static_cast<size_t>(r) * w * 3, static_cast<size_t>(w) * 3);
  sws_convert(rgb_in->data, rgb_in->linesize, AV_PIX_FMT_RGB24, yuv->data, yuv->linesize,
              AV_PIX_FMT_YUV420P, w, h, who);
  yuv->pts = 0;

  std::vector<ff::PacketPtr> packets;
  auto collect = [&]() {
    for (;;) {
      ff::PacketPtr p = ff::alloc_packet();
      const int s = avcodec_receive_packet(enc.get(), p.get());
      if (s == AVERROR(EAGAIN) || s == AVERROR_EOF) return;
      ff::check(s, who, "encoding");
      packets.push_back(std::move(p));
    }
  };
  ff::check(avcodec_send_frame(enc.get(), yuv.get()), who, "encoding");
  collect();
  ff::check(avcodec_send_frame(enc.get(), nullptr), who, "encoding");
  collect();
  LTX_CHECK(!packets.empty(), who, ": libx264 produced no packet");

  // ---- decode it back (decode_single_frame: the first frame)
  const AVCodec* dec_codec = avcodec_find_decoder(AV_CODEC_ID_H264);
  LTX_CHECK(dec_codec != nullptr, who, ": this FFmpeg has no H.264 decoder");
  ff::CodecContextPtr dec(avcodec_alloc_context3(dec_codec));
  LTX_CHECK(dec != nullptr, who, ": out of memory");
  if (enc->extradata_size > 0) {
    dec->extradata = static_cast<uint8_t*>(
        av_mallocz(static_cast<size_t>(enc->extradata_size) + AV_INPUT_BUFFER_PADDING_SIZE));
    LTX_CHECK(dec->extradata != nullptr, who, ": out of memory");
    std::memcpy(dec->extradata, enc->extradata, static_cast<size_t>(enc->extradata_size));
    dec->extradata_size = enc->extradata_size;
  }
  ff::check(avcodec_open2(dec.get(), dec_codec, nullptr), who, "opening the H.264 decoder");
  ff::FramePtr out = ff::alloc_frame();
  bool got = false;
  auto receive = [&]() {
    if (got) return;
    const int s = avcodec_receive_frame(dec.get(), out.get());
    if (s == AVERROR(EAGAIN) || s == AVERROR_EOF) return;
    ff::check(s, who, "decoding");
    got = true;
  };
  for (const auto& p : packets) {
    ff::check(avcodec_send_packet(dec.get(), p.get()), who, "decoding");
    receive();
  }
  ff::check(avcodec_send_packet(dec.get(), nullptr), who, "decoding");
  receive();
  LTX_CHECK(got && out->width == w && out->height == h, who,
            ": decoding the re-encoded frame failed");

  ff::FramePtr rgb_out = ff::alloc_frame();
  rgb_out->format = AV_PIX_FMT_RGB24;
  rgb_out->width = w;
  rgb_out->height = h;
  ff::check(av_frame_get_buffer(rgb_out.get(), 0), who, "allocating a frame");
  sws_convert(out->data, out->linesize, static_cast<AVPixelFormat>(out->format), rgb_out->data,
              rgb_out->linesize, AV_PIX_FMT_RGB24, w, h, who);
  Tensor result = Tensor::empty({h, w, 3}, DType::U8);
  for (int r = 0; r < h; ++r)
    std::memcpy(result.data<uint8_t>() + static_cast<size_t>(r) * w * 3,
                rgb_out->data[0] + static_cast<ptrdiff_t>(r) * rgb_out->linesize[0],
                static_cast<size_t>(w) * 3);
  return result;
}

#endif

Tensor to_nchw_f32(const Tensor& image, const char* who) {
  LTX_CHECK(image.defined() && (image.dim() == 3 || image.dim() == 4) && image.size(-1) == 3, who,
            ": expected an image [H, W, 3] or frames [F, H, W, 3]; got ",
            image.defined() ? image.describe() : std::string("an undefined tensor"));
  const Tensor f4 = image.dim() == 3 ? image.unsqueeze(0) : image;
  return f4.to(Device::cpu(), DType::F32).permute({0, 3, 1, 2}).contiguous();  // [F, 3, H, W]
}

}  // namespace

Tensor crf_recompress(const Tensor& image, int crf, int threads) {
  LTX_CHECK(image.defined() && image.dim() == 3 && image.size(2) == 3 && image.dtype() == DType::U8,
            "crf_recompress: expected a u8 RGB image [H, W, 3]; got ",
            image.defined() ? image.describe() : std::string("an undefined tensor"));
  LTX_CHECK(crf >= 0 && crf <= 51, "crf_recompress: crf must be in [0, 51]; got ", crf);
  LTX_CHECK(threads >= 0, "crf_recompress: threads must be >= 0; got ", threads);
  if (crf == 0 || std::min(image.size(0), image.size(1)) < 2) return image;
  const int64_t h = image.size(0) / 2 * 2, w = image.size(1) / 2 * 2;
  const Tensor cropped = image.narrow(0, 0, h).narrow(1, 0, w).to(Device::cpu()).contiguous();
#if LTX_WITH_FFMPEG
  return recompress(cropped, crf, threads);
#else
  fail_no_ffmpeg(str("crf_recompress (image CRF ", crf, "; 0 skips the re-encode)"));
#endif
}

Tensor resize_and_center_crop(const Tensor& image, int64_t height, int64_t width) {
  const char* who = "resize_and_center_crop";
  LTX_CHECK(height >= 1 && width >= 1, who, ": the target size must be positive; got ", height, "x",
            width);
  const Tensor x = to_nchw_f32(image, who);
  const int64_t src_h = x.size(2), src_w = x.size(3);
  LTX_CHECK(src_h >= 1 && src_w >= 1, who, ": the image is empty: ", image.describe());
  const double scale = std::max(static_cast<double>(height) / static_cast<double>(src_h),
                                static_cast<double>(width) / static_cast<double>(src_w));
  const int64_t new_h = static_cast<int64_t>(std::ceil(static_cast<double>(src_h) * scale));
  const int64_t new_w = static_cast<int64_t>(std::ceil(static_cast<double>(src_w) * scale));
  const Tensor resized = ops::interpolate(x, {new_h, new_w}, ops::InterpMode::Linear, false);
  const int64_t top = (new_h - height) / 2, left = (new_w - width) / 2;
  const Tensor cropped = resized.narrow(2, top, height).narrow(3, left, width);  // [F, 3, h, w]
  return cropped.permute({1, 0, 2, 3}).unsqueeze(0).contiguous();                // [1, 3, F, h, w]
}

Tensor resize_and_reflect_pad(const Tensor& image, int64_t height, int64_t width) {
  const char* who = "resize_and_reflect_pad";
  LTX_CHECK(height >= 1 && width >= 1, who, ": the target size must be positive; got ", height, "x",
            width);
  Tensor x = to_nchw_f32(image, who);
  const int64_t src_h = x.size(2), src_w = x.size(3);
  LTX_CHECK(src_h >= 1 && src_w >= 1, who, ": the image is empty: ", image.describe());
  int64_t new_h = src_h, new_w = src_w;
  if (height < src_h || width < src_w) {
    const double scale = std::min(static_cast<double>(height) / static_cast<double>(src_h),
                                  static_cast<double>(width) / static_cast<double>(src_w));
    new_h = static_cast<int64_t>(std::nearbyint(static_cast<double>(src_h) * scale));
    new_w = static_cast<int64_t>(std::nearbyint(static_cast<double>(src_w) * scale));
    LTX_CHECK(new_h >= 1 && new_w >= 1, who, ": ", src_h, "x", src_w, " does not fit ", height,
              "x", width, " without vanishing");
    x = ops::interpolate(x, {new_h, new_w}, ops::InterpMode::Linear, false);
  }
  const int64_t pad_bottom = height - new_h, pad_right = width - new_w;
  if (pad_bottom > 0 || pad_right > 0) {
    const ops::PadMode mode = pad_bottom < new_h && pad_right < new_w ? ops::PadMode::Reflect
                                                                      : ops::PadMode::Replicate;
    x = ops::pad(x, {0, pad_right, 0, pad_bottom}, mode);
  }
  return x.permute({1, 0, 2, 3}).unsqueeze(0).contiguous();  // [1, 3, F, h, w]
}

Tensor normalize_to_unit_range(const Tensor& x, DType dtype) {
  const Tensor src = x.to(Device::cpu(), DType::F32).contiguous();
  Tensor out = Tensor::empty(src.shape(), DType::F32);
  const float* p = src.data<float>();
  float* o = out.data<float>();
  const float inv = 1.0f / 127.5f;
  for (int64_t i = 0; i < src.numel(); ++i) o[i] = p[i] * inv - 1.0f;
  return out.to(dtype);
}

Tensor prepare_hdr_frames(const Tensor& frames, int64_t height, int64_t width, HdrColorSpace cs, ResizeMode mode,
                          DType dtype) {
  LTX_CHECK(frames.defined() && dtype_is_floating(frames.dtype()),
            "prepare_hdr_frames: expected floating (EXR) pixels; got ",
            frames.defined() ? frames.describe() : std::string("an undefined tensor"));
  const Tensor resized = mode == ResizeMode::ReflectPad ? resize_and_reflect_pad(frames, height, width)
                                                        : resize_and_center_crop(frames, height, width);
  // The curves work on channels-last pixels: [1, 3, F, h, w] -> [1, F, h, w, 3] and back.
  const Tensor pixels = resized.permute({0, 2, 3, 4, 1});
  const Tensor working = hdr_is_log_working(cs)
                             ? ops::clamp(pixels.contiguous(), 0.0, 1.0)
                             : hdr_to_working_space(pixels, kHdrWorkingTransfer, hdr_source_primaries(cs));
  return to_vae_range(working, "HDR conditioning").permute({0, 4, 1, 2, 3}).contiguous().to(dtype);
}

Tensor load_image_conditioning(const std::string& path, int64_t height, int64_t width, int crf,
                               DType dtype) {
  const Tensor image = crf_recompress(read_image(path), crf);
  return normalize_to_unit_range(resize_and_center_crop(image, height, width), dtype);
}

}  // namespace ltx::media
