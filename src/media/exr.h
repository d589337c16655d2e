#pragma once
// EXR frames: scene-linear (or log-coded) RGB written and read the way the reference's
// ltx_pipelines/utils/media_io/exr.py does through OpenImageIO: three channels named R, G, B,
// half (default) or float pixels, ZIP compression, a `chromaticities` attribute for the gamut and
// a `colorSpace` string attribute for the encoding; folders of frame_00000.exr, frame_00001.exr,
// ... for a clip. Needs OpenEXR (CMake option LTX_OPENEXR); without it these functions throw
// ltx::Error saying how to rebuild.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "media/hdr.h"
#include "media/primaries.h"
#include "media/temp_output.h"

namespace ltx::media {

// The `chromaticities` attribute of a gamut: red, green, blue, white x/y pairs.
std::array<float, 8> exr_chromaticities(Primaries primaries);

enum class ExrPixelType { Half, Float };

struct ExrWriteOptions {
  ExrPixelType pixel_type = ExrPixelType::Half;
  Primaries primaries = Primaries::Rec709;
  // The `colorSpace` attribute: "sRGB" / "ACEScg" for linear frames, "ACEScct" / "LogC3" for log.
  std::string color_space = "sRGB";
};

// The tags of an --hdr run's EXR frames (the reference's HDRColorSpace.exr_output_tags): ACEScg
// primaries tagged "ACEScct" (log codes) or "ACEScg", Rec.709 tagged "sRGB"; half float.
ExrWriteOptions exr_output_options(HdrColorSpace cs);

// One frame [H, W, 3] (or [3, H, W], as the reference accepts), any floating dtype, any device;
// values are written as they are (no clamp: highlights above 1 survive). Atomic (temp name +
// rename). Throws ltx::Error naming the file.
void write_exr(const std::string& path, const Tensor& frame, const ExrWriteOptions& options = {});

// An EXR frame as f32 [H, W, 3]: the R, G and B channels (a file with exactly one channel is
// replicated to three, as the reference does); alpha and other channels are ignored. Values are
// returned unmodified. Throws ltx::Error naming the file when it is not a readable EXR or has
// neither R, G and B nor a single channel.
Tensor read_exr(const std::string& path);
// The same from bytes in memory; `name` is used in error messages.
Tensor decode_exr(const uint8_t* data, size_t size, const std::string& name);
// The size of the data window of an EXR in memory, from its header alone (the file checked as
// decode_exr checks it before reading pixels). Throws ltx::Error naming `name`.
struct ExrImageSize {
  int64_t width = 0, height = 0;
};
ExrImageSize exr_image_size(const uint8_t* data, size_t size, const std::string& name);

// The frames of a conditioning path: a single .exr file, or a folder's *.exr files sorted by name
// (the reference's rule). Throws ltx::Error when the path is neither or the folder has none.
std::vector<std::string> exr_frame_paths(const std::string& path);
// The frames of a conditioning path from `start` on, at most `max_frames` of them (0: all), read
// with read_exr into f32 [F, H, W, 3] (the reference's load_exr_conditioning_hdr before its
// resize). Every frame must have the first one's size. Throws naming `who` (the flag) when the
// path has no frame left from `start` or a frame is unreadable or of another size.
Tensor read_exr_frames(const std::string& path, int64_t start, int64_t max_frames, const std::string& who);
// Whether `path` is a folder that directly holds *.exr files.
bool is_exr_folder(const std::string& path);

// A folder of frame_00000.exr, frame_00001.exr, ... filled chunk by chunk. It is built as
// "<dir>.tmp" and renamed on finish(); `dir` must not exist or be an empty folder.
class ExrFrameWriter {
 public:
  ExrFrameWriter(std::string dir, ExrWriteOptions options = {});
  ~ExrFrameWriter();
  ExrFrameWriter(const ExrFrameWriter&) = delete;
  ExrFrameWriter& operator=(const ExrFrameWriter&) = delete;

  // frames: [F, H, W, 3] or [H, W, 3], floating point.
  void write_frames(const Tensor& frames);
  void finish();
  int64_t frames_written() const { return frames_; }

 private:
  std::string dir_;
  ExrWriteOptions options_;
  std::unique_ptr<TempOutput> tmp_;
  int64_t frames_ = 0;
  bool closed_ = false;
};

void write_exr_frames(const std::string& dir, const Tensor& frames,
                      const ExrWriteOptions& options = {});

}  // namespace ltx::media
