#include "generate/hdr_output.h"

#include <cmath>
#include <filesystem>
#include <system_error>

#include "core/dtype_bits.h"
#include "core/error.h"
#include "core/log.h"
#include "media/temp_output.h"

namespace ltx::generate {

namespace fs = std::filesystem;

HdrMasterPaths hdr_master_paths(const std::string& output_path) {
  const fs::path out(output_path);
  return {output_path, (out.parent_path() / (out.stem().string() + "_exr")).string()};
}

void check_hdr_master_output(const HdrMasterPaths& paths, const std::string& who) {
  std::error_code ec;
  LTX_CHECK(!fs::exists(paths.exr_dir, ec) || (fs::is_directory(paths.exr_dir, ec) && fs::is_empty(paths.exr_dir, ec)),
            who, ": with --hdr the EXR frames go to '", paths.exr_dir,
            "', which exists and is not an empty folder; remove it or pick another output path");
  media::check_output_location(paths.exr_dir, who);
  media::check_output_location(paths.mp4, who);
}

HdrMasterSink::HdrMasterSink(HdrMasterPaths paths, media::HdrColorSpace color_space)
    : paths_(std::move(paths)), color_space_(color_space) {}

HdrMasterSink::~HdrMasterSink() = default;  // the writers remove their temporaries

void HdrMasterSink::begin(const MediaFormat& format) {
  exr_ = std::make_unique<media::ExrFrameWriter>(paths_.exr_dir, media::exr_output_options(color_space_));
  media::Mp4Options mp4 = media::hlg_mp4_options();
  mp4.hlg_primaries = media::Primaries::Rec709;  // the master is always fed Rec.709 linear
  if (format.audio_sample_rate > 0) {
    mp4.audio_sample_rate = static_cast<int>(format.audio_sample_rate);
    mp4.audio_channels = static_cast<int>(format.audio_channels);
  }
  master_ = std::make_unique<media::Mp4Writer>(paths_.mp4, format.fps, mp4);
}

void HdrMasterSink::write_frames(const Tensor& frames) {
  LTX_CHECK(exr_ && master_, "HDR output: frames before begin()");
  const Tensor linear = media::hdr_to_linear(frames, media::kHdrWorkingTransfer, media::Primaries::Rec709);
  // The EXR sink reuses the master's pixels when they match (SRGB_LINEAR), as the reference does.
  exr_->write_frames(color_space_ == media::HdrColorSpace::SrgbLinear ? linear
                                                                       : media::hdr_exr_frames(frames, color_space_));
  master_->write_frames(linear);
}

void HdrMasterSink::write_audio(const Tensor& waveform) {
  LTX_CHECK(master_, "HDR output: audio before begin()");
  master_->write_audio(waveform);
}

void HdrMasterSink::finish() {
  LTX_CHECK(exr_ && master_, "HDR output: no frame was decoded");
  master_->finish();
  try {
    exr_->finish();
  } catch (...) {
    std::error_code ec;
    fs::remove(paths_.mp4, ec);
    throw;
  }
}

HdrOutputPaths hdr_output_paths(const std::string& output_dir, const std::string& clip_path) {
  // A trailing '/' names the folder itself.
  fs::path dir(output_dir);
  if (!dir.has_filename() && dir.has_parent_path()) dir = dir.parent_path();
  const std::string stem = fs::path(clip_path).stem().string();
  LTX_CHECK(!stem.empty(), "--video-conditioning '", clip_path, "': the clip's file name is empty");
  return {dir.string(), (dir / (stem + "_exr")).string(), (dir / (stem + ".mp4")).string()};
}

void check_hdr_output(const HdrOutputPaths& paths, bool skip_mp4, const std::string& who) {
  std::error_code ec;
  LTX_CHECK(!fs::exists(paths.dir, ec) || fs::is_directory(paths.dir, ec), who, " '", paths.dir,
            "' is a file: the hdr-ic-lora pipeline writes into a folder (an EXR frame folder and a "
            "preview MP4); name a folder");
  LTX_CHECK(!fs::exists(paths.exr_dir, ec) ||
                (fs::is_directory(paths.exr_dir, ec) && fs::is_empty(paths.exr_dir, ec)),
            who, ": the EXR frames go to '", paths.exr_dir,
            "', which exists and is not an empty folder; remove it or pick another output folder");
  media::check_output_location(paths.exr_dir, who);
  if (!skip_mp4) media::check_output_location(paths.preview_mp4, who);
}

Tensor srgb_preview_frames(const Tensor& linear) {
  const Tensor in = linear.to(Device::cpu(), DType::F32).contiguous();
  Tensor out = Tensor::empty(in.shape(), DType::F32);
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  const int64_t n = in.numel();
  for (int64_t i = 0; i < n; ++i) {
    // The EXR holds half floats; the reference's preview reads them back.
    float x = dtype_bits::f16_to_f32(dtype_bits::f32_to_f16(src[i]));
    x = std::isnan(x) ? 0.0f : std::fmin(std::fmax(x, 0.0f), 1.0f);
    const double s = x <= 0.0031308 ? x * 12.92 : 1.055 * std::pow(static_cast<double>(x), 1.0 / 2.4) - 0.055;
    dst[i] = static_cast<float>(static_cast<int>(s * 255.0 + 0.5)) / 255.0f;
  }
  return out;
}

LinearHdrSink::LinearHdrSink(MediaSink& next, pipelines::hdr_ic_lora::HdrResolution size,
                             bool high_quality, media::HdrTransfer transfer)
    : next_(next), size_(size), high_quality_(high_quality), transfer_(transfer) {}

void LinearHdrSink::begin(const MediaFormat& format) {
  MediaFormat f = format;
  f.audio_sample_rate = 0;
  f.audio_channels = 0;
  if (high_quality_ && f.frames > 0) f.frames = (f.frames + 1) / 2;
  next_.begin(f);
}

void LinearHdrSink::write_frames(const Tensor& frames) {
  const int64_t n = frames.size(0);
  // High quality keeps the clip's even frames: this chunk's first kept one by the clip index.
  const int64_t first = high_quality_ && frames_in_ % 2 == 1 ? 1 : 0;
  frames_in_ += n;
  if (first >= n) return;
  const Tensor kept = pipelines::hdr_ic_lora::linear_frames(frames.slice(0, first, n), size_,
                                                            high_quality_, transfer_);
  frames_out_ += kept.size(0);
  next_.write_frames(kept);
}

void LinearHdrSink::write_audio(const Tensor&) {}

void LinearHdrSink::finish() { next_.finish(); }

ExrOutputSink::ExrOutputSink(HdrOutputPaths paths, bool skip_mp4)
    : paths_(std::move(paths)), skip_mp4_(skip_mp4) {}

ExrOutputSink::~ExrOutputSink() {
  // The writers remove their temporaries; a folder made for them goes too when nothing landed.
  exr_.reset();
  preview_.reset();
  if (finished_ || made_root_.empty()) return;
  // The folders this sink made, from the output folder up to the first it created, while empty.
  std::error_code ec;
  for (fs::path p = paths_.dir;; p = p.parent_path()) {
    if (!fs::is_empty(p, ec) || ec || !fs::remove(p, ec)) break;
    if (p == made_root_ || !p.has_parent_path()) break;
  }
}

void ExrOutputSink::begin(const MediaFormat& format) {
  std::error_code ec;
  if (!fs::exists(paths_.dir, ec)) {
    fs::path root(paths_.dir);
    while (root.has_parent_path() && !root.parent_path().empty() && !fs::exists(root.parent_path(), ec))
      root = root.parent_path();
    fs::create_directories(paths_.dir, ec);
    LTX_CHECK(!ec, "--output-path '", paths_.dir, "': cannot create the folder: ", ec.message());
    made_root_ = root;
  }
  // save_exr_tensor(frame, path, half=True): half float, Rec.709 chromaticities, "sRGB".
  media::ExrWriteOptions exr;
  exr.pixel_type = media::ExrPixelType::Half;
  exr.primaries = media::Primaries::Rec709;
  exr.color_space = "sRGB";
  exr_ = std::make_unique<media::ExrFrameWriter>(paths_.exr_dir, exr);
  if (!skip_mp4_) {
    // encode_exr_sequence_to_mp4: libx264 with PyAV's defaults but crf 18, yuv420p, +faststart,
    // the rate as Fraction(fps).limit_denominator(1000).
    media::Mp4Options mp4;
    mp4.crf = 18;
    mp4.preset = "medium";
    mp4.faststart = true;
    mp4.exact_rate = true;
    preview_ = std::make_unique<media::Mp4Writer>(paths_.preview_mp4, format.fps, mp4);
  }
}

void ExrOutputSink::write_frames(const Tensor& frames) {
  LTX_CHECK(exr_, "EXR output: frames before begin()");
  exr_->write_frames(frames);
  if (preview_) preview_->write_frames(srgb_preview_frames(frames));
}

void ExrOutputSink::write_audio(const Tensor& waveform) {
  if (waveform.defined()) log_warn("EXR output: the audio track is not written (EXR frames hold no sound)");
}

void ExrOutputSink::finish() {
  LTX_CHECK(exr_ && exr_->frames_written() > 0, "EXR output: no frame was decoded");
  if (preview_) preview_->finish();
  try {
    exr_->finish();
  } catch (...) {
    std::error_code ec;
    if (preview_) fs::remove(paths_.preview_mp4, ec);
    throw;
  }
  finished_ = true;
}

}  // namespace ltx::generate
