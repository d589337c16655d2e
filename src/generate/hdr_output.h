#pragma once
// The outputs of `ltx generate --pipeline hdr-ic-lora` (the reference's hdr_ic_lora.py
// _process_single_video): in an output folder, <clip>_exr/frame_00000.exr, ... (scene-linear
// Rec.709, half float, R G B, chromaticities Rec.709, colorSpace "sRGB", as save_exr_tensor with
// half=True) and, unless skipped, <clip>.mp4: an H.264 preview of those frames as the reference's
// encode_exr_sequence_to_mp4 makes it (the half-float values clamped to [0, 1], the sRGB curve,
// 8 bits, libx264 crf 18 yuv420p). <clip> is the conditioning clip's file name without its
// extension.
//
// LinearHdrSink turns the VAE decode of the final latent (frames in [0, 1], the LoRA's working
// space, at the generation size) into the HDR frames (pipelines::hdr_ic_lora::linear_frames) for
// the sink behind it: ExrOutputSink for the files, any other sink (memory) for library callers.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "generate/decode.h"
#include "media/exr.h"
#include "media/hdr.h"
#include "media/video_writer.h"
#include "pipelines/hdr_ic_lora.h"

namespace ltx::generate {

// ---- --hdr on the standard pipelines (the reference's encode_video with a colour space:
// _encode_hdr_video_outputs). The decode (in f32) gives ACEScct working-space codes in [0, 1];
// one pass feeds two files:
//  - the output path: the HLG master (media::hlg_mp4_options: HEVC Main10, BT.2020 / ARIB STD-B67
//    tags) of the frames as scene-linear Rec.709, with the audio track;
//  - <output folder>/<output stem>_exr/frame_00000.exr, ...: media::hdr_exr_frames (the codes
//    for ACESCCT, else scene-linear in the colour space's primaries), half float, tagged by
//    media::exr_output_options.
struct HdrMasterPaths {
  std::string mp4;      // the output path
  std::string exr_dir;  // <parent>/<stem>_exr
};
HdrMasterPaths hdr_master_paths(const std::string& output_path);
// Before any model loads: both can be written and the EXR folder does not exist or is empty.
void check_hdr_master_output(const HdrMasterPaths& paths, const std::string& who);

// Both files are built under temporary names and appear together in finish(); on an error, or
// without finish(), neither appears.
class HdrMasterSink final : public MediaSink {
 public:
  HdrMasterSink(HdrMasterPaths paths, media::HdrColorSpace color_space);
  ~HdrMasterSink() override;
  void begin(const MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;
  const HdrMasterPaths& paths() const { return paths_; }

 private:
  HdrMasterPaths paths_;
  media::HdrColorSpace color_space_;
  std::unique_ptr<media::ExrFrameWriter> exr_;
  std::unique_ptr<media::Mp4Writer> master_;
};

// ---- hdr-ic-lora

struct HdrOutputPaths {
  std::string dir;          // the output folder (made when missing)
  std::string exr_dir;      // <dir>/<clip>_exr
  std::string preview_mp4;  // <dir>/<clip>.mp4
};
HdrOutputPaths hdr_output_paths(const std::string& output_dir, const std::string& clip_path);

// Before any model loads: the folder is a folder (or can be made), the EXR folder does not exist
// or is empty, the preview can be written (unless `skip_mp4`). Throws naming `who`.
void check_hdr_output(const HdrOutputPaths& paths, bool skip_mp4, const std::string& who);

// The preview's pixels from scene-linear frames [F, H, W, 3]: each value rounded to half float
// (the EXR's precision, which the reference's preview reads back), clamped to [0, 1], through the
// sRGB OETF (IEC 61966-2-1) and quantised to 8 bits as the reference (x * 255 + 0.5, truncated);
// returned as f32 q / 255 on the host.
Tensor srgb_preview_frames(const Tensor& linear);

// Decoded working-space chunks -> scene-linear frames for `next`: each chunk cropped to the
// request size, every other frame of the whole clip kept in high-quality mode (by its index in
// the clip, across chunks), decompressed by `transfer`. Audio is dropped (the pipeline is video
// only). `next` sees the output frame count in begin().
class LinearHdrSink final : public MediaSink {
 public:
  LinearHdrSink(MediaSink& next, pipelines::hdr_ic_lora::HdrResolution size, bool high_quality,
                media::HdrTransfer transfer);
  void begin(const MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;
  int64_t frames_out() const { return frames_out_; }

 private:
  MediaSink& next_;
  pipelines::hdr_ic_lora::HdrResolution size_;
  bool high_quality_;
  media::HdrTransfer transfer_;
  int64_t frames_in_ = 0, frames_out_ = 0;
};

// The EXR frame folder and the preview MP4 of scene-linear frames. Both are written under
// temporary names and appear together in finish(); on an error, or without finish(), neither
// appears and the folders this sink made for them are removed again.
class ExrOutputSink final : public MediaSink {
 public:
  ExrOutputSink(HdrOutputPaths paths, bool skip_mp4);
  ~ExrOutputSink() override;
  void begin(const MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;
  const HdrOutputPaths& paths() const { return paths_; }

 private:
  HdrOutputPaths paths_;
  bool skip_mp4_;
  bool finished_ = false;
  std::filesystem::path made_root_;  // the first folder begin() created (empty: none)
  std::unique_ptr<media::ExrFrameWriter> exr_;
  std::unique_ptr<media::Mp4Writer> preview_;
};

}  // namespace ltx::generate
