#include "media/exr.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "core/error.h"
#include "core/input_limits.h"
#include "core/parallel.h"
#include "media/support.h"

#if LTX_WITH_OPENEXR
#include <IexBaseExc.h>
#include <ImfChannelList.h>
#include <ImfChromaticities.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfIO.h>
#include <ImfInputFile.h>
#include <ImfOutputFile.h>
#include <ImfStandardAttributes.h>
#include <ImfStringAttribute.h>
#include <ImfTestFile.h>
#include <half.h>
#endif

namespace ltx::media {

namespace fs = std::filesystem;

std::array<float, 8> exr_chromaticities(Primaries primaries) {
  switch (primaries) {
    case Primaries::Rec709:
      return {0.64f, 0.33f, 0.30f, 0.60f, 0.15f, 0.06f, 0.3127f, 0.3290f};
    case Primaries::ACEScg:
      return {0.713f, 0.293f, 0.165f, 0.830f, 0.128f, 0.044f, 0.32168f, 0.33767f};
  }
  fail("exr_chromaticities: unknown primaries");
}

namespace {

// [H, W, 3] f32 contiguous on the host from [H, W, 3] or [3, H, W] floating input.
Tensor frame_hwc_f32(const Tensor& frame, const std::string& who) {
  LTX_CHECK(frame.defined() && frame.dim() == 3 && (frame.size(2) == 3 || frame.size(0) == 3), who,
            ": a frame must be [H, W, 3] or [3, H, W]; got ",
            frame.defined() ? frame.describe() : std::string("an undefined tensor"));
  LTX_CHECK(frame.dtype() == DType::F32 || frame.dtype() == DType::F16 ||
                frame.dtype() == DType::BF16 || frame.dtype() == DType::F64,
            who, ": frames must be floating point; got ", frame.describe());
  // As the reference: channels-first only when dim 0 is 3 (an [3, H, 3] frame counts as CHW).
  const Tensor hwc = frame.size(0) == 3 ? frame.permute({1, 2, 0}) : frame;
  LTX_CHECK(hwc.size(0) > 0 && hwc.size(1) > 0, who, ": empty frame ", frame.describe());
  return hwc.to(Device::cpu(), DType::F32).contiguous();
}

#if LTX_WITH_OPENEXR
void write_exr_file(const std::string& file, const Tensor& hwc, const ExrWriteOptions& options) {
  const int h = static_cast<int>(hwc.size(0)), w = static_cast<int>(hwc.size(1));
  Imf::Header header(w, h);
  header.compression() = Imf::ZIP_COMPRESSION;
  const Imf::PixelType type = options.pixel_type == ExrPixelType::Half ? Imf::HALF : Imf::FLOAT;
  static const char* kNames[3] = {"R", "G", "B"};
  for (const char* name : kNames) header.channels().insert(name, Imf::Channel(type));
  const auto c = exr_chromaticities(options.primaries);
  Imf::addChromaticities(header,
                         Imf::Chromaticities(Imath::V2f(c[0], c[1]), Imath::V2f(c[2], c[3]),
                                             Imath::V2f(c[4], c[5]), Imath::V2f(c[6], c[7])));
  header.insert("colorSpace", Imf::StringAttribute(options.color_space));
  // OpenEXR writes a slice only into a channel of its own type: half frames are converted here
  // (Imath's float -> half, round to nearest even, as OpenImageIO's writer does).
  std::vector<half> halves;
  char* base = static_cast<char*>(hwc.raw_data());
  size_t elem = sizeof(float);
  if (type == Imf::HALF) {
    const float* src = hwc.data<float>();
    halves.resize(static_cast<size_t>(hwc.numel()));
    for (size_t i = 0; i < halves.size(); ++i) halves[i] = half(src[i]);
    base = reinterpret_cast<char*>(halves.data());
    elem = sizeof(half);
  }
  const size_t xs = 3 * elem, ys = xs * static_cast<size_t>(w);
  Imf::FrameBuffer fb;
  for (int ch = 0; ch < 3; ++ch) fb.insert(kNames[ch], Imf::Slice(type, base + ch * elem, xs, ys));
  Imf::OutputFile out(file.c_str(), header);
  out.setFrameBuffer(fb);
  out.writePixels(h);
}
#endif

}  // namespace

void write_exr(const std::string& path, const Tensor& frame, const ExrWriteOptions& options) {
  const std::string who = str("write_exr '", path, "'");
  if (!openexr_available()) fail_no_openexr(who);
  const Tensor hwc = frame_hwc_f32(frame, who);
#if LTX_WITH_OPENEXR
  TempOutput tmp(path, TempOutput::Kind::File, who);
  try {
    write_exr_file(tmp.temp_path(), hwc, options);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(who, ": ", e.what());
  }
  tmp.commit();
#else
  (void)options;
#endif
}

#if LTX_WITH_OPENEXR
namespace {

// An EXR held in memory, for OpenEXR's readers. Reading past the end throws as a truncated file
// does.
class MemoryIStream final : public Imf::IStream {
 public:
  MemoryIStream(const uint8_t* data, size_t size, const std::string& name)
      : Imf::IStream(name.c_str()), data_(data), size_(size) {}
  bool read(char c[], int n) override {
    if (n < 0 || pos_ > size_ || static_cast<uint64_t>(n) > size_ - pos_)
      throw IEX_NAMESPACE::InputExc("unexpected end of file");
    if (n > 0) std::memcpy(c, data_ + pos_, static_cast<size_t>(n));
    pos_ += static_cast<uint64_t>(n);
    return pos_ < size_;
  }
  uint64_t tellg() override { return pos_; }
  void seekg(uint64_t pos) override { pos_ = pos; }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// The bytes OpenEXR 3.1 reads for the value of an attribute of a registered type whose reader
// ignores the declared size (Header::readFrom never seeks past a value: what the type's reader
// reads is what it skips); 0 for the types whose readers take the declared size (string,
// stringvector, floatvector, preview, idmanifest, and every unknown type, read as opaque bytes),
// and for chlist, which reads channels up to an empty name.
size_t fixed_attribute_bytes(const std::string& type) {
  static const std::map<std::string, size_t, std::less<>> kFixed = {
      {"box2i", 16},  {"box2f", 16},  {"chromaticities", 32}, {"compression", 1},
      {"deepImageState", 1}, {"double", 8}, {"envmap", 1},   {"float", 4},
      {"int", 4},     {"keycode", 28}, {"lineOrder", 1},      {"m33d", 72},
      {"m33f", 36},   {"m44d", 128},  {"m44f", 64},           {"rational", 8},
      {"tiledesc", 9}, {"timecode", 8}, {"v2d", 16},          {"v2f", 8},
      {"v2i", 8},     {"v3d", 24},    {"v3f", 12},            {"v3i", 12}};
  const auto it = kFixed.find(type);
  return it == kFixed.end() ? 0 : it->second;
}

// OpenEXR 3.1 allocates (and clears) an attribute's declared size before reading its value: a few
// bytes can make it allocate 2 GB. The headers' attributes (name NUL, type NUL, int32 size,
// value; an empty name ends a header, an empty header ends a multi-part file's list) are walked
// first, reading each value as OpenEXR's reader of its type does, so that the walk stays where
// OpenEXR will be, and a declared size past the end of the bytes is refused. What this walk
// cannot follow (a string without its NUL, bytes cut short) is left to OpenEXR, which reports it
// before allocating anything large.
void check_attribute_sizes(const uint8_t* data, size_t size, const std::string& who) {
  if (size < 8) return;
  const bool multipart = (data[5] & 0x10) != 0;  // version flag bit 12
  size_t pos = 8;
  // A name as OpenEXR reads it (at most 255 bytes and a NUL); false where the walk must stop.
  auto read_name = [&](std::string* out) {
    const size_t window = std::min<size_t>(size - pos, 256);
    const auto* end = static_cast<const uint8_t*>(std::memchr(data + pos, 0, window));
    if (end == nullptr) return false;
    out->assign(reinterpret_cast<const char*>(data + pos), static_cast<size_t>(end - (data + pos)));
    pos = static_cast<size_t>(end - data) + 1;
    return true;
  };
  while (pos < size) {
    std::string name, type;
    if (!read_name(&name)) return;
    if (name.empty()) {  // the end of a header
      if (!multipart || pos >= size || data[pos] == 0) return;
      continue;
    }
    if (!read_name(&type) || size - pos < 4) return;
    const int32_t n = static_cast<int32_t>(static_cast<uint32_t>(data[pos]) |
                                           static_cast<uint32_t>(data[pos + 1]) << 8 |
                                           static_cast<uint32_t>(data[pos + 2]) << 16 |
                                           static_cast<uint32_t>(data[pos + 3]) << 24);
    pos += 4;
    if (type == "chlist") {  // channels (name NUL, 16 bytes) up to an empty name
      std::string channel;
      for (;;) {
        if (pos >= size || !read_name(&channel)) return;
        if (channel.empty()) break;
        if (size - pos < 16) return;
        pos += 16;
      }
      continue;
    }
    if (const size_t fixed = fixed_attribute_bytes(type); fixed > 0) {
      if (size - pos < fixed) return;
      pos += fixed;
      continue;
    }
    if (n < 0 || static_cast<uint64_t>(n) > size - pos)
      fail(who, ": attribute '", name, "' (", type, ") declares ", n, " bytes but ", size - pos,
           " follow: a corrupt or truncated file");
    pos += static_cast<size_t>(n);
  }
}

// The frame of an opened EXR as f32 [H, W, 3] (see read_exr).
Tensor read_exr_pixels(Imf::InputFile& in, const std::string& who) {
  const Imath::Box2i dw = in.header().dataWindow();
  const int64_t w = static_cast<int64_t>(dw.max.x) - dw.min.x + 1;
  const int64_t h = static_cast<int64_t>(dw.max.y) - dw.min.y + 1;
  LTX_CHECK(w > 0 && h > 0, who, ": empty data window");
  LTX_CHECK(w <= limits::kMaxImageSide && h <= limits::kMaxImageSide, who, ": the data window is ", w, "x", h,
            ", more than the limit of ", limits::kMaxImageSide, " x ", limits::kMaxImageSide, " pixels");
  const Imf::ChannelList& channels = in.header().channels();
  std::vector<std::string> names;
  for (auto it = channels.begin(); it != channels.end(); ++it) names.emplace_back(it.name());
  const bool rgb = channels.findChannel("R") != nullptr && channels.findChannel("G") != nullptr &&
                   channels.findChannel("B") != nullptr;
  if (!rgb && names.size() != 1) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    fail(who, ": needs the channels R, G and B (or exactly one channel, read as gray); it has ",
         list.empty() ? std::string("none") : list);
  }
  Tensor out = Tensor::empty({h, w, 3}, DType::F32);
  // Slices are addressed by absolute pixel coordinates. Slice::Make offsets the buffer by the
  // window's origin itself: the same offset taken as pointer arithmetic here overflows for a
  // window far from 0 (undefined behaviour; found by fuzz_exr).
  const size_t xs = 3 * sizeof(float), ys = xs * static_cast<size_t>(w);
  char* base = static_cast<char*>(out.raw_data());
  Imf::FrameBuffer fb;
  if (rgb) {
    static const char* kNames[3] = {"R", "G", "B"};
    for (int ch = 0; ch < 3; ++ch)
      fb.insert(kNames[ch], Imf::Slice::Make(Imf::FLOAT, base + ch * sizeof(float), dw, xs, ys));
  } else {
    fb.insert(names[0], Imf::Slice::Make(Imf::FLOAT, base, dw, xs, ys));
  }
  in.setFrameBuffer(fb);
  in.readPixels(dw.min.y, dw.max.y);
  if (!rgb) {
    float* p = out.data<float>();
    for (int64_t i = 0; i < h * w; ++i) p[3 * i + 1] = p[3 * i + 2] = p[3 * i];
  }
  return out;
}

}  // namespace
#endif

Tensor read_exr(const std::string& path) {
  const std::string who = str("EXR '", path, "'");
  if (!openexr_available()) fail_no_openexr(str("read_exr '", path, "'"));
  std::error_code ec;
  LTX_CHECK(fs::is_regular_file(path, ec), who, ": no such file");
  const uintmax_t file_bytes = fs::file_size(path, ec);
  LTX_CHECK(!ec && file_bytes <= static_cast<uintmax_t>(limits::kMaxImageFileBytes), who, ": the file is ",
            file_bytes, " bytes, more than the limit of ", limits::kMaxImageFileBytes, " bytes for an image");
  // Read whole, so that the header is checked before OpenEXR sees it (decode_exr).
  std::ifstream in(path, std::ios::binary);
  LTX_CHECK(in, who, ": cannot open the file");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  LTX_CHECK(!in.bad(), who, ": reading the file failed");
  return decode_exr(bytes.data(), bytes.size(), path);
}

#if LTX_WITH_OPENEXR
namespace {

// Opens an EXR held in memory after the checks that keep OpenEXR from allocating what the bytes
// cannot hold, and hands the file to `fn`. Throws naming `who`.
template <typename Fn>
auto with_exr_in_memory(const uint8_t* data, size_t size, const std::string& name,
                        const std::string& who, Fn&& fn) {
  // OpenEXR refuses a header whose data window passes this while reading it, before allocating
  // its line offset table and buffers (process-wide; nothing else in ltx reads EXR files).
  static const bool limited = [] {
    Imf::Header::setMaxImageSize(static_cast<int>(limits::kMaxImageSide), static_cast<int>(limits::kMaxImageSide));
    Imf::Header::setMaxTileSize(static_cast<int>(limits::kMaxImageSide), static_cast<int>(limits::kMaxImageSide));
    return true;
  }();
  (void)limited;
  try {
    MemoryIStream probe(data, size, name);
    bool tiled = false, deep = false, multipart = false;
    LTX_CHECK(Imf::isOpenExrFile(probe, tiled, deep, multipart), who, ": not an OpenEXR file");
    LTX_CHECK(!deep, who, ": deep EXR files are not supported (a flat RGB image is needed)");
    check_attribute_sizes(data, size, who);
    MemoryIStream stream(data, size, name);
    Imf::InputFile in(stream);
    return fn(in);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(who, ": ", e.what());
  }
}

}  // namespace
#endif

Tensor decode_exr(const uint8_t* data, size_t size, const std::string& name) {
  const std::string who = str("EXR '", name, "'");
  if (!openexr_available()) fail_no_openexr(str("decode_exr '", name, "'"));
#if LTX_WITH_OPENEXR
  return with_exr_in_memory(data, size, name, who,
                            [&](Imf::InputFile& in) { return read_exr_pixels(in, who); });
#else
  (void)data;
  (void)size;
  fail(who, ": unreachable");
#endif
}

ExrImageSize exr_image_size(const uint8_t* data, size_t size, const std::string& name) {
  const std::string who = str("EXR '", name, "'");
  if (!openexr_available()) fail_no_openexr(str("exr_image_size '", name, "'"));
#if LTX_WITH_OPENEXR
  return with_exr_in_memory(data, size, name, who, [&](Imf::InputFile& in) {
    const Imath::Box2i dw = in.header().dataWindow();
    const ExrImageSize s{static_cast<int64_t>(dw.max.x) - dw.min.x + 1,
                         static_cast<int64_t>(dw.max.y) - dw.min.y + 1};
    LTX_CHECK(s.width > 0 && s.height > 0, who, ": empty data window");
    return s;
  });
#else
  (void)data;
  (void)size;
  fail(who, ": unreachable");
#endif
}

bool is_exr_folder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".exr") return true;
  return false;
}

std::vector<std::string> exr_frame_paths(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    std::string ext = fs::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    LTX_CHECK(ext == ".exr", "EXR path '", path, "': a file must end in .exr");
    return {path};
  }
  LTX_CHECK(fs::is_directory(path, ec), "EXR path '", path,
            "': must be a .exr file or a folder of .exr frames");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".exr") files.push_back(e.path().string());
  LTX_CHECK(!files.empty(), "EXR folder '", path, "': holds no .exr frames");
  std::sort(files.begin(), files.end());
  return files;
}

ExrWriteOptions exr_output_options(HdrColorSpace cs) {
  ExrWriteOptions o;
  o.pixel_type = ExrPixelType::Half;
  switch (cs) {
    case HdrColorSpace::ACEScct:
      o.primaries = Primaries::ACEScg;
      o.color_space = "ACEScct";
      break;
    case HdrColorSpace::ACEScg:
      o.primaries = Primaries::ACEScg;
      o.color_space = "ACEScg";
      break;
    case HdrColorSpace::SrgbLinear:
      o.primaries = Primaries::Rec709;
      o.color_space = "sRGB";
      break;
  }
  return o;
}

Tensor read_exr_frames(const std::string& path, int64_t start, int64_t max_frames, const std::string& who) {
  std::vector<std::string> files;
  try {
    files = exr_frame_paths(path);
  } catch (const Error& e) {
    fail(who, " '", path, "': ", e.what());
  }
  LTX_CHECK(start >= 0 && start < static_cast<int64_t>(files.size()), who, " '", path,
            "': no EXR frame left from frame ", start, " (it holds ", files.size(), ")");
  const auto begin = files.begin() + start;
  const auto end = max_frames > 0 && max_frames < static_cast<int64_t>(files.end() - begin) ? begin + max_frames
                                                                                            : files.end();
  std::vector<Tensor> frames;
  for (auto it = begin; it != end; ++it) {
    Tensor f;
    try {
      f = read_exr(*it);
    } catch (const Error& e) {
      fail(who, " '", path, "': ", e.what());
    }
    if (!frames.empty())
      LTX_CHECK(f.size(0) == frames[0].size(0) && f.size(1) == frames[0].size(1), who, " '", path, "': frame '",
                fs::path(*it).filename().string(), "' is ", f.size(1), "x", f.size(0), " but the first is ",
                frames[0].size(1), "x", frames[0].size(0), " (width x height); every frame must have one size");
    // The folder's frames are held decoded at once: bounded like a decoded video.
    const int64_t frame_bytes = f.numel() * static_cast<int64_t>(sizeof(float));
    LTX_CHECK(frame_bytes * static_cast<int64_t>(frames.size() + 1) <= limits::kMaxDecodedVideoBytes, who, " '",
              path, "': ", frames.size() + 1, " frames of ", f.size(1), "x", f.size(0), " decode to more than ",
              limits::kMaxDecodedVideoBytes >> 30, " GiB; pass fewer frames (a shorter folder or a frame limit)");
    frames.push_back(f.contiguous());
  }
  // Stacked with a copy per frame (the media layer does not depend on ops).
  Shape shape{static_cast<int64_t>(frames.size())};
  for (int d = 0; d < frames[0].dim(); ++d) shape.push_back(frames[0].size(d));
  Tensor out = Tensor::empty(shape, DType::F32, Device::cpu());
  const size_t frame_bytes = static_cast<size_t>(frames[0].numel()) * sizeof(float);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (size_t i = 0; i < frames.size(); ++i)
    std::memcpy(dst + i * frame_bytes, frames[i].raw_data(), frame_bytes);
  return out;
}

ExrFrameWriter::ExrFrameWriter(std::string dir, ExrWriteOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  if (!openexr_available()) fail_no_openexr(str("write_exr_frames '", dir_, "'"));
  tmp_ = std::make_unique<TempOutput>(dir_, TempOutput::Kind::Directory,
                                      str("write_exr_frames '", dir_, "'"));
}

ExrFrameWriter::~ExrFrameWriter() = default;

void ExrFrameWriter::write_frames(const Tensor& frames) {
  LTX_CHECK(!closed_, "write_exr_frames '", dir_, "': write_frames after finish() or an error");
  try {
    LTX_CHECK(frames.defined() && (frames.dim() == 3 || frames.dim() == 4) && frames.size(-1) == 3,
              "write_exr_frames '", dir_, "': frames must be [F, H, W, 3] or [H, W, 3]; got ",
              frames.defined() ? frames.describe() : std::string("an undefined tensor"));
    const Tensor f4 = frames.dim() == 3 ? frames.unsqueeze(0) : frames;
#if LTX_WITH_OPENEXR
    const int64_t first = frames_;
    const std::string dir = tmp_->temp_path();
    std::vector<Tensor> hwc;
    for (int64_t i = 0; i < f4.size(0); ++i)
      hwc.push_back(frame_hwc_f32(f4.select(0, i), str("write_exr_frames '", dir_, "'")));
    // Each frame is an independent file: compress them in parallel, report the first failure.
    std::vector<std::string> errors(hwc.size());
    parallel_for(0, f4.size(0), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        char name[32];
        std::snprintf(name, sizeof(name), "/frame_%05lld.exr", static_cast<long long>(first + i));
        try {
          write_exr_file(dir + name, hwc[static_cast<size_t>(i)], options_);
        } catch (const std::exception& ex) {
          errors[static_cast<size_t>(i)] =
              str("write_exr_frames: writing '", dir, name, "': ", ex.what());
        }
      }
    });
    for (const auto& e : errors)
      if (!e.empty()) fail(e);
#endif
    frames_ += f4.size(0);
  } catch (...) {
    closed_ = true;
    tmp_->discard();
    throw;
  }
}

void ExrFrameWriter::finish() {
  LTX_CHECK(!closed_, "write_exr_frames '", dir_, "': finish() after finish() or an error");
  closed_ = true;
  LTX_CHECK(frames_ > 0, "write_exr_frames '", dir_, "': no frames were written");
  tmp_->commit();
}

void write_exr_frames(const std::string& dir, const Tensor& frames,
                      const ExrWriteOptions& options) {
  ExrFrameWriter w(dir, options);
  w.write_frames(frames);
  w.finish();
}

}  // namespace ltx::media
