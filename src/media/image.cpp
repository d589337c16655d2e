#include "media/image.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "core/input_limits.h"
#include "core/log.h"
#include "core/parallel.h"
#include "media/exif.h"
#include "media/support.h"
#include "media/yuv.h"

#if LTX_WITH_IMAGE_IO
#include <jerror.h>
#include <jpeglib.h>
#include <lcms2.h>
#include <png.h>

#include <csetjmp>
#endif

namespace ltx::media {
namespace {

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes,
                       const std::string& who) {
  TempOutput out(path, TempOutput::Kind::File, who);
  std::FILE* f = std::fopen(out.temp_path().c_str(), "wb");
  if (f == nullptr) fail(who, ": cannot create '", out.temp_path(), "': ", std::strerror(errno));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed)
    fail(who, ": writing '", out.temp_path(), "' failed: ", std::strerror(ok ? errno : err));
  out.commit();
}

}  // namespace

#if LTX_WITH_IMAGE_IO

namespace {

std::vector<uint8_t> read_file(const std::string& path, const char* who) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(who, " '", path, "': cannot open the file: ", std::strerror(errno));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  LTX_CHECK(ec || size <= static_cast<uint64_t>(limits::kMaxImageFileBytes), who, " '", path, "' has ", size,
            " bytes, more than the limit of ", limits::bytes_text(limits::kMaxImageFileBytes),
            " for an image file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) fail(who, " '", path, "': reading the file failed");
  return bytes;
}

// What a decoder hands back: 8-bit pixels (1 or 3 channels) and the metadata the reference uses.
struct Decoded {
  std::vector<uint8_t> pixels;
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> icc;
  std::vector<uint8_t> exif;
  std::string xmp;
  std::vector<png_bytep> rows;  // decoder scratch (kept here: see the setjmp notes below)
  char error[JMSG_LENGTH_MAX + 200] = {};
};

// ---------------------------------------------------------------- PNG
// libpng reports errors through a callback that must not return: it longjmps back to the
// setjmp in the decoding function. Every object alive across that jump is either created before
// the setjmp or lives in `Decoded` (heap), so no destructor is skipped.

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  Decoded* out;
  std::jmp_buf jump;
};

void png_error_cb(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->out->error, sizeof(src->out->error), "%s", msg);
  std::longjmp(src->jump, 1);
}
void png_warning_cb(png_structp, png_const_charp) {}

void png_read_cb(png_structp png, png_bytep dst, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->size - src->pos < n) png_error(png, "the file is truncated");
  std::memcpy(dst, src->data + src->pos, n);
  src->pos += n;
}

std::vector<uint8_t> hex_decode(const std::string& text) {
  // ImageMagick's "Raw profile type exif": "\nexif\n   <length>\n<hex lines>"; PIL drops the
  // first three lines and decodes the rest.
  size_t start = 0;
  for (int line = 0; line < 3 && start != std::string::npos; ++line)
    start = text.find('\n', start == 0 && line == 0 ? 0 : start + 1);
  std::vector<uint8_t> out;
  if (start == std::string::npos) return out;
  int hi = -1;
  for (size_t i = start + 1; i < text.size(); ++i) {
    const char ch = text[i];
    int v;
    if (ch >= '0' && ch <= '9') {
      v = ch - '0';
    } else if (ch >= 'a' && ch <= 'f') {
      v = ch - 'a' + 10;
    } else if (ch >= 'A' && ch <= 'F') {
      v = ch - 'A' + 10;
    } else {
      continue;
    }
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi * 16 + v));
      hi = -1;
    }
  }
  return out;
}

// Fills out->error and answers false when a declared size is over kMaxImagePixels: checked before
// the pixels are allocated (a small file can declare a huge image).
bool within_pixel_limit(uint64_t width, uint64_t height, Decoded* out) {
  if (width * height <= static_cast<uint64_t>(kMaxImagePixels)) return true;
  std::snprintf(out->error, sizeof(out->error),
                "the image is %llux%llu = %llu pixels, more than the %lld (kMaxImagePixels) read_image "
                "decodes; downscale it",
                static_cast<unsigned long long>(width), static_cast<unsigned long long>(height),
                static_cast<unsigned long long>(width * height),
                static_cast<long long>(kMaxImagePixels));
  return false;
}

bool decode_png(const uint8_t* data, size_t size, Decoded* out) {
  PngSource src{data, size, 0, out, {}};
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_error_cb, png_warning_cb);
  if (png == nullptr) {
    std::snprintf(out->error, sizeof(out->error), "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(out->error, sizeof(out->error), "out of memory");
    return false;
  }
  if (setjmp(src.jump)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &src, png_read_cb);
  png_set_user_limits(png, 65535, 65535);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);  // tRNS -> alpha, dropped below
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);  // the high byte, as PIL's "RGB;16B"
  if ((color & PNG_COLOR_MASK_ALPHA) || color == PNG_COLOR_TYPE_PALETTE) png_set_strip_alpha(png);
  png_read_update_info(png, info);
  if (!within_pixel_limit(png_get_image_width(png, info), png_get_image_height(png, info), out)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  out->height = static_cast<int>(png_get_image_height(png, info));
  out->width = static_cast<int>(png_get_image_width(png, info));
  out->channels = png_get_channels(png, info);
  if (out->channels != 1 && out->channels != 3) png_error(png, "unexpected channel count");
  const size_t row_bytes = png_get_rowbytes(png, info);
  if (row_bytes != static_cast<size_t>(out->width) * static_cast<size_t>(out->channels))
    png_error(png, "unexpected row size");
  out->pixels.resize(row_bytes * static_cast<size_t>(out->height));
  out->rows.resize(static_cast<size_t>(out->height));
  for (int r = 0; r < out->height; ++r) out->rows[r] = out->pixels.data() + row_bytes * r;
  png_read_image(png, out->rows.data());
  png_read_end(png, info);  // chunks after the pixels (eXIf, text) join `info`

  png_charp name = nullptr;
  int compression = 0;
  png_bytep profile = nullptr;
  png_uint_32 profile_len = 0;
  if (png_get_iCCP(png, info, &name, &compression, &profile, &profile_len) != 0 && profile_len > 0)
    out->icc.assign(profile, profile + profile_len);
#ifdef PNG_eXIf_SUPPORTED
  png_bytep exif = nullptr;
  png_uint_32 exif_len = 0;
  if (png_get_eXIf_1(png, info, &exif_len, &exif) != 0 && exif_len > 0)
    out->exif.assign(exif, exif + exif_len);
#endif
  png_textp text = nullptr;
  int num_text = 0;
  png_get_text(png, info, &text, &num_text);
  for (int i = 0; i < num_text; ++i) {
    const char* key = text[i].key;
    const size_t len = text[i].compression > 0 ? text[i].itxt_length : text[i].text_length;
    if (std::strcmp(key, "XML:com.adobe.xmp") == 0 && out->xmp.empty()) {
      out->xmp.assign(text[i].text, len);
    } else if (std::strcmp(key, "Raw profile type exif") == 0 && out->exif.empty()) {
      out->exif = hex_decode(std::string(text[i].text, len));
    }
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// ---------------------------------------------------------------- JPEG

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  Decoded* out;
};

void jpeg_error_exit_cb(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  char msg[JMSG_LENGTH_MAX] = {};
  (*cinfo->err->format_message)(cinfo, msg);
  std::snprintf(err->out->error, sizeof(err->out->error), "%s", msg);
  std::longjmp(err->jump, 1);
}

// Warnings are ignored (PIL ignores them) except a truncated file, which PIL refuses.
void jpeg_emit_message_cb(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_error_exit_cb(cinfo);
}

bool decode_jpeg(const uint8_t* data, size_t size, Decoded* out) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit_cb;
  err.mgr.emit_message = jpeg_emit_message_cb;
  err.out = out;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);  // EXIF, XMP
  jpeg_save_markers(&cinfo, JPEG_APP0 + 2, 0xFFFF);  // ICC
  jpeg_read_header(&cinfo, TRUE);
  if (!within_pixel_limit(cinfo.image_width, cinfo.image_height, out)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(out->error, sizeof(out->error),
                  "CMYK JPEGs are not supported; convert the image to RGB");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  const bool gray = cinfo.jpeg_color_space == JCS_GRAYSCALE;
  cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    static const char kXmp[] = "http://ns.adobe.com/xap/1.0/";
    if (m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0 && out->exif.empty()) {
      out->exif.assign(m->data, m->data + m->data_length);
    } else if (m->data_length > sizeof(kXmp) && std::memcmp(m->data, kXmp, sizeof(kXmp)) == 0) {
      out->xmp.assign(reinterpret_cast<const char*>(m->data) + sizeof(kXmp),
                      m->data_length - sizeof(kXmp));
    }
  }
  JOCTET* icc = nullptr;
  unsigned int icc_len = 0;
  if (jpeg_read_icc_profile(&cinfo, &icc, &icc_len) && icc != nullptr) {
    out->icc.assign(icc, icc + icc_len);
    std::free(icc);
  }
  jpeg_start_decompress(&cinfo);
  out->height = static_cast<int>(cinfo.output_height);
  out->width = static_cast<int>(cinfo.output_width);
  out->channels = cinfo.output_components;
  const size_t row_bytes = static_cast<size_t>(out->width) * static_cast<size_t>(out->channels);
  out->pixels.resize(row_bytes * static_cast<size_t>(out->height));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->pixels.data() + row_bytes * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

// ---------------------------------------------------------------- colour

// PIL's ImageCms.profileToProfile(image, embedded, sRGB, outputMode="RGB"): lcms2, perceptual
// intent, no flags. Returns false (and leaves the pixels alone) when lcms2 refuses the profile.
bool icc_to_srgb(Decoded* d) {
  cmsHPROFILE in =
      cmsOpenProfileFromMem(d->icc.data(), static_cast<cmsUInt32Number>(d->icc.size()));
  if (in == nullptr) return false;
  cmsHPROFILE srgb = cmsCreate_sRGBProfile();
  cmsHTRANSFORM t = cmsCreateTransform(in, d->channels == 3 ? TYPE_RGB_8 : TYPE_GRAY_8, srgb,
                                       TYPE_RGB_8, INTENT_PERCEPTUAL, 0);
  cmsCloseProfile(in);
  cmsCloseProfile(srgb);
  if (t == nullptr) return false;
  const size_t n = static_cast<size_t>(d->height) * static_cast<size_t>(d->width);
  std::vector<uint8_t> rgb(n * 3);
  const size_t row_in = static_cast<size_t>(d->width) * static_cast<size_t>(d->channels);
  for (int r = 0; r < d->height; ++r)
    cmsDoTransform(t, d->pixels.data() + row_in * r,
                   rgb.data() + static_cast<size_t>(d->width) * 3 * r,
                   static_cast<cmsUInt32Number>(d->width));
  cmsDeleteTransform(t);
  d->pixels.swap(rgb);
  d->channels = 3;
  return true;
}

// ---------------------------------------------------------------- writers

struct PngSink {
  std::vector<uint8_t>* bytes;
  std::jmp_buf jump;
  char error[256];
};

void png_write_error_cb(png_structp png, png_const_charp msg) {
  auto* sink = static_cast<PngSink*>(png_get_error_ptr(png));
  std::snprintf(sink->error, sizeof(sink->error), "%s", msg);
  std::longjmp(sink->jump, 1);
}
void png_write_cb(png_structp png, png_bytep data, png_size_t n) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  sink->bytes->insert(sink->bytes->end(), data, data + n);
}
void png_flush_cb(png_structp) {}

// rows: contiguous u8 pixels. Returns false with sink->error set on failure.
bool encode_png_raw(const uint8_t* pixels, int h, int w, int c, PngSink* sink,
                    std::vector<png_bytep>* rows) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, sink, png_write_error_cb, png_warning_cb);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    return false;
  }
  if (setjmp(sink->jump)) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, sink, png_write_cb, png_flush_cb);
  const int type = c == 1 ? PNG_COLOR_TYPE_GRAY : c == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGBA;
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), 8, type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int r = 0; r < h; ++r)
    (*rows)[r] = const_cast<png_bytep>(pixels + static_cast<size_t>(r) * w * c);
  png_write_image(png, rows->data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

struct JpegDest {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char error[JMSG_LENGTH_MAX];
};

void jpeg_write_error_cb(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegDest*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->error);
  std::longjmp(err->jump, 1);
}

// On success *mem holds malloc'd bytes (jpeg_mem_dest) that the caller frees.
bool encode_jpeg_raw(const uint8_t* pixels, int h, int w, int c, int quality, JpegDest* err,
                     unsigned char** mem, unsigned long* mem_size) {
  jpeg_compress_struct cinfo;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = jpeg_write_error_cb;
  if (setjmp(err->jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, mem, mem_size);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = c;
  cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels + static_cast<size_t>(cinfo.next_scanline) * w * c);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

Tensor checked_u8_image(const Tensor& image, const char* who, bool allow_alpha) {
  LTX_CHECK(image.defined() && image.dim() == 3 && image.dtype() == DType::U8, who,
            ": expected a u8 image [H, W, C]; got ",
            image.defined() ? image.describe() : std::string("an undefined tensor"));
  const int64_t c = image.size(2);
  LTX_CHECK(c == 1 || c == 3 || (allow_alpha && c == 4), who, ": expected 1, 3",
            allow_alpha ? " or 4" : "", " channels; got ", image.describe());
  LTX_CHECK(
      image.size(0) >= 1 && image.size(1) >= 1 && image.size(0) <= 65535 && image.size(1) <= 65535,
      who, ": image sizes must be in [1, 65535]; got ", image.describe());
  return image.to(Device::cpu()).contiguous();
}

}  // namespace

Tensor decode_image(const uint8_t* data, size_t size, const std::string& name) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  const bool is_png = size >= 8 && std::memcmp(data, kPng, 8) == 0;
  const bool is_jpeg = size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
  LTX_CHECK(is_png || is_jpeg, "read_image '", name,
            "': not a PNG or JPEG file (the supported image formats)");
  // The pixel count the header declares, before the decoder allocates for it (a header the probe
  // cannot read is left to the decoder, whose error says more).
  std::optional<ImageInfo> declared;
  try {
    declared = probe_image(data, size, name);
  } catch (const Error&) {
  }
  if (declared)
    LTX_CHECK(declared->width <= limits::kMaxImagePixels / declared->height, "read_image '", name, "': the ",
              is_png ? "PNG" : "JPEG", " header declares ", declared->width, "x", declared->height,
              " pixels, more than the limit of ", limits::kMaxImagePixels, " pixels (16384 x 16384) for an image");
  auto d = std::make_unique<Decoded>();
  const bool ok = is_png ? decode_png(data, size, d.get()) : decode_jpeg(data, size, d.get());
  if (!ok)
    fail("read_image '", name, "': cannot decode this ", is_png ? "PNG" : "JPEG",
         " file: ", d->error);
  LTX_CHECK(d->height > 0 && d->width > 0, "read_image '", name, "': the image is empty");

  int orientation = exif_orientation(d->exif.data(), d->exif.size());
  if (orientation == 0) orientation = xmp_orientation(d->xmp);
  if (!d->icc.empty() && !icc_to_srgb(d.get()))
    log_warn("read_image '", name,
             "': could not convert its ICC profile to sRGB; using the "
             "pixels as they are");
  Tensor img = Tensor::empty({d->height, d->width, 3}, DType::U8);
  uint8_t* o = img.data<uint8_t>();
  const size_t n = static_cast<size_t>(d->height) * static_cast<size_t>(d->width);
  if (d->channels == 3) {
    std::memcpy(o, d->pixels.data(), n * 3);
  } else {
    for (size_t i = 0; i < n; ++i) o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = d->pixels[i];
  }
  return apply_orientation(img, orientation);
}

Tensor read_image(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path, "read_image");
  return decode_image(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> encode_png(const Tensor& image) {
  const Tensor img = checked_u8_image(image, "encode_png", true);
  std::vector<uint8_t> bytes;
  PngSink sink{&bytes, {}, {}};
  std::vector<png_bytep> rows(static_cast<size_t>(img.size(0)));
  if (!encode_png_raw(img.data<uint8_t>(), static_cast<int>(img.size(0)),
                      static_cast<int>(img.size(1)), static_cast<int>(img.size(2)), &sink, &rows))
    fail("encode_png: libpng failed: ", sink.error[0] ? sink.error : "out of memory");
  return bytes;
}

std::vector<uint8_t> encode_jpeg(const Tensor& image, int quality) {
  LTX_CHECK(quality >= 1 && quality <= 100, "encode_jpeg: quality must be in [1, 100]; got ",
            quality);
  const Tensor img = checked_u8_image(image, "encode_jpeg", false);
  JpegDest err{};
  unsigned char* mem = nullptr;
  unsigned long mem_size = 0;
  const bool ok = encode_jpeg_raw(img.data<uint8_t>(), static_cast<int>(img.size(0)),
                                  static_cast<int>(img.size(1)), static_cast<int>(img.size(2)),
                                  quality, &err, &mem, &mem_size);
  std::vector<uint8_t> bytes;
  if (ok && mem != nullptr) bytes.assign(mem, mem + mem_size);
  std::free(mem);
  if (!ok) fail("encode_jpeg: libjpeg failed: ", err.error);
  return bytes;
}

#else  // no image I/O

Tensor decode_image(const uint8_t*, size_t, const std::string& name) {
  fail_no_image_io(str("read_image '", name, "'"));
}
Tensor read_image(const std::string& path) { fail_no_image_io(str("read_image '", path, "'")); }
std::vector<uint8_t> encode_png(const Tensor&) { fail_no_image_io("encode_png"); }
std::vector<uint8_t> encode_jpeg(const Tensor&, int) { fail_no_image_io("encode_jpeg"); }

#endif

void write_png(const std::string& path, const Tensor& image) {
  const std::vector<uint8_t> bytes = encode_png(image);
  write_file_atomic(path, bytes, str("write_png '", path, "'"));
}

void write_jpeg(const std::string& path, const Tensor& image, int quality) {
  const std::vector<uint8_t> bytes = encode_jpeg(image, quality);
  write_file_atomic(path, bytes, str("write_jpeg '", path, "'"));
}

PngFrameWriter::PngFrameWriter(std::string dir) : dir_(std::move(dir)) {
  if (!image_io_available()) fail_no_image_io(str("write_png_frames '", dir_, "'"));
  tmp_ = std::make_unique<TempOutput>(dir_, TempOutput::Kind::Directory,
                                      str("write_png_frames '", dir_, "'"));
}

PngFrameWriter::~PngFrameWriter() = default;

void PngFrameWriter::write_frames(const Tensor& frames) {
  LTX_CHECK(!closed_, "write_png_frames '", dir_, "': write_frames after finish() or an error");
  try {
    LTX_CHECK(frames.defined() && (frames.dim() == 3 || frames.dim() == 4) && frames.size(-1) == 3,
              "write_png_frames '", dir_, "': frames must be [F, H, W, 3] or [H, W, 3]; got ",
              frames.defined() ? frames.describe() : std::string("an undefined tensor"));
    const Tensor f4 = frames.dim() == 3 ? frames.unsqueeze(0) : frames;
    const Tensor u8 =
        f4.dtype() == DType::U8 ? f4.to(Device::cpu()).contiguous() : rgb_to_uint8(f4);
    const int64_t first = frames_;
    const std::string dir = tmp_->temp_path();
    std::vector<std::vector<uint8_t>> encoded(static_cast<size_t>(u8.size(0)));
    parallel_for(0, u8.size(0), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) encoded[static_cast<size_t>(i)] = encode_png(u8.select(0, i));
    });
    for (int64_t i = 0; i < u8.size(0); ++i) {
      char name[32];
      std::snprintf(name, sizeof(name), "/frame_%05lld.png", static_cast<long long>(first + i));
      const std::string file = dir + name;
      std::FILE* f = std::fopen(file.c_str(), "wb");
      if (f == nullptr)
        fail("write_png_frames: cannot create '", file, "': ", std::strerror(errno));
      const auto& b = encoded[static_cast<size_t>(i)];
      const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
      const int err = errno;
      const bool closed = std::fclose(f) == 0;
      if (!ok || !closed)
        fail("write_png_frames: writing '", file, "' failed: ", std::strerror(ok ? errno : err));
    }
    frames_ += u8.size(0);
  } catch (...) {
    closed_ = true;
    tmp_->discard();
    throw;
  }
}

void PngFrameWriter::finish() {
  LTX_CHECK(!closed_, "write_png_frames '", dir_, "': finish() after finish() or an error");
  closed_ = true;
  LTX_CHECK(frames_ > 0, "write_png_frames '", dir_, "': no frames were written");
  tmp_->commit();
}

void write_png_frames(const std::string& dir, const Tensor& frames) {
  PngFrameWriter w(dir);
  w.write_frames(frames);
  w.finish();
}

ImageInfo probe_image(const uint8_t* data, size_t size, const std::string& name) {
  const auto be16 = [&](size_t at) { return static_cast<int64_t>(data[at] << 8 | data[at + 1]); };
  const auto be32 = [&](size_t at) {
    return static_cast<int64_t>(static_cast<uint32_t>(data[at]) << 24 |
                                static_cast<uint32_t>(data[at + 1]) << 16 |
                                static_cast<uint32_t>(data[at + 2]) << 8 | data[at + 3]);
  };
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  ImageInfo info;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) {
    // Signature, then the IHDR chunk: length (4), "IHDR", width (4), height (4), ...
    LTX_CHECK(size >= 24, "image '", name, "': the PNG file is truncated before its size (",
              size, " bytes)");
    LTX_CHECK(std::memcmp(data + 12, "IHDR", 4) == 0, "image '", name,
              "': not a valid PNG file (its first chunk is not IHDR)");
    info = {"png", be32(16), be32(20)};
  } else if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
    // Marker segments up to the frame header (SOF0..SOF15 except DHT C4, JPG C8, DAC CC):
    // length (2), precision (1), height (2), width (2).
    size_t at = 2;
    for (;;) {
      while (at < size && data[at] == 0xFF) ++at;  // the marker's 0xFF and any fill bytes
      LTX_CHECK(at < size, "image '", name, "': the JPEG file is truncated before its size");
      const uint8_t m = data[at++];
      if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;  // markers without a segment
      LTX_CHECK(m != 0xD9 && m != 0xDA, "image '", name,
                "': the JPEG file has no frame header before its ",
                m == 0xD9 ? "end" : "scan data");
      LTX_CHECK(at + 2 <= size, "image '", name, "': the JPEG file is truncated before its size");
      const int64_t length = be16(at);
      LTX_CHECK(length >= 2, "image '", name, "': a JPEG segment has an invalid length ", length);
      if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
        LTX_CHECK(at + 7 <= size, "image '", name,
                  "': the JPEG file is truncated before its size");
        info = {"jpeg", be16(at + 5), be16(at + 3)};
        break;
      }
      at += static_cast<size_t>(length);
    }
  } else {
    fail("image '", name, "': not a PNG or JPEG file (the supported image formats)");
  }
  LTX_CHECK(info.width > 0 && info.height > 0, "image '", name, "': the ", info.format,
            " header declares a size of ", info.width, "x", info.height);
  return info;
}

}  // namespace ltx::media
