#include "server/thumbnail_sink.h"

#include <string_view>

#include "core/error.h"
#include "core/log.h"
#include "generate/hdr_output.h"
#include "media/hdr.h"
#include "media/image.h"
#include "media/yuv.h"
#include "server/data_dir.h"

namespace ltx::server {

int64_t thumbnail_frame_index(int64_t frames) { return frames > 0 ? (frames - 1) / 2 : 0; }

void ThumbnailSink::begin(const generate::MediaFormat& format) {
  wanted_ = thumbnail_frame_index(format.frames);
  seen_ = 0;
  frame_ = Tensor();
  video_.begin(format);
}

void ThumbnailSink::write_frames(const Tensor& frames) {
  const int64_t n = frames.size(0);
  if (!frame_.defined() && wanted_ >= seen_ && wanted_ < seen_ + n) {
    Tensor frame = frames.select(0, wanted_ - seen_);
    if (frames_ == ThumbnailFrames::AcesCct)
      frame = media::hdr_to_linear(frame, media::HdrTransfer::ACEScct, media::Primaries::Rec709);
    if (frames_ != ThumbnailFrames::Display)
      frame = generate::srgb_preview_frames(frame.unsqueeze(0)).select(0, 0);
    frame_ = media::rgb_to_uint8(frame);  // a copy either way: chunks go away
  }
  seen_ += n;
  video_.write_frames(frames);
}

void ThumbnailSink::write_audio(const Tensor& waveform) { video_.write_audio(waveform); }

void ThumbnailSink::finish() {
  video_.finish();
  if (!frame_.defined()) {
    log_warn("thumbnail '", path_, "': the video has ", seen_, " frames, none at index ", wanted_,
             "; the job has no thumbnail");
    return;
  }
  try {
    const std::vector<uint8_t> png = media::encode_png(frame_);
    write_file_atomic(path_,
                      std::string_view(reinterpret_cast<const char*>(png.data()), png.size()));
  } catch (const Error& e) {
    log_warn("thumbnail '", path_, "' not written (the video is complete): ", e.what());
  }
  frame_ = Tensor();
}

}  // namespace ltx::server
