#pragma once
// A job's thumbnail (GET /v1/videos/{id}/content?variant=thumbnail): one frame of its video as a
// PNG, taken from the decoded frames on their way to the MP4, so the video is never decoded again.
// The frame is the middle one: for image-to-video the first frame is the conditioning image the
// client sent, while the middle frame shows what was generated.
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "generate/decode.h"

namespace ltx::server {

// The frame a thumbnail shows for a video of `frames` frames: the middle one ((frames - 1) / 2),
// the first when the count is unknown (0).
int64_t thumbnail_frame_index(int64_t frames);

// Forwards everything to `video` (the MP4) and keeps the thumbnail's frame as 8-bit RGB (as the
// reference converts frames for writing: clamp, * 255, truncate). After the video's finish() it
// writes the PNG to `path` (as <path>.tmp, fsync'd, renamed; server/data_dir.h). A thumbnail that
// cannot be written is logged and left out: the video is the job's result, the thumbnail a view of
// it. Needs image I/O (media::image_io_available()); the runner makes none without it.
// What the frames are, and so how the thumbnail shows them.
enum class ThumbnailFrames {
  Display,      // display-referred values in [0, 1] (the SDR pipelines)
  SceneLinear,  // scene-linear Rec.709 HDR (hdr-ic-lora's): shown as its sRGB preview
                // (generate::srgb_preview_frames)
  AcesCct,      // ACEScct codes in [0, 1] (an `hdr` request's decode): made scene-linear Rec.709,
                // then shown as above
};

class ThumbnailSink final : public generate::MediaSink {
 public:
  ThumbnailSink(generate::MediaSink& video, std::string path,
                ThumbnailFrames frames = ThumbnailFrames::Display)
      : video_(video), path_(std::move(path)), frames_(frames) {}
  void begin(const generate::MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;

 private:
  generate::MediaSink& video_;
  std::string path_;
  ThumbnailFrames frames_ = ThumbnailFrames::Display;
  int64_t wanted_ = 0;  // the index of the frame to keep
  int64_t seen_ = 0;    // frames that went by
  Tensor frame_;        // u8 [H, W, 3] once the wanted frame went by
};

}  // namespace ltx::server
