// EXR frames: our files checked through OpenEXR's own API (channels, pixel type, compression,
// chromaticities and colorSpace tags, values), files written by OpenEXR directly read by ours,
// frame folders, and the errors for files we cannot use.
#include "media/exr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "media_test_util.h"
#include "support/test_support.h"

#if LTX_TEST_OPENEXR
#include <ImfChannelList.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfInputFile.h>
#include <ImfOutputFile.h>
#include <ImfStandardAttributes.h>
#include <ImfStringAttribute.h>
#include <half.h>
#endif

namespace ltx {
namespace {

// Scene-linear test values: negatives, tiny, mid-grey, highlights far above 1.
[[maybe_unused]] Tensor hdr_frame(int64_t h, int64_t w, float scale = 1.0f) {
  Tensor t = Tensor::empty({h, w, 3}, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = scale * (0.37f * std::sin(0.7f * static_cast<float>(i)) + (i % 11 == 0 ? 40.0f : 0.0f) +
                    (i % 7 == 0 ? 1e-3f : 0.25f) - (i % 13 == 0 ? 0.5f : 0.0f));
  return t;
}

#if LTX_TEST_OPENEXR
struct OpenExrImage {
  std::vector<std::string> channels;
  std::vector<Imf::PixelType> types;
  Imf::Compression compression{};
  bool has_chromaticities = false;
  Imf::Chromaticities chromaticities;
  std::string color_space;
  int width = 0, height = 0;
  std::vector<float> rgb;  // [H, W, 3]
};

OpenExrImage read_with_openexr(const std::string& path) {
  Imf::InputFile in(path.c_str());
  OpenExrImage img;
  const auto& hd = in.header();
  for (auto it = hd.channels().begin(); it != hd.channels().end(); ++it) {
    img.channels.emplace_back(it.name());
    img.types.push_back(it.channel().type);
  }
  img.compression = hd.compression();
  img.has_chromaticities = Imf::hasChromaticities(hd);
  if (img.has_chromaticities) img.chromaticities = Imf::chromaticities(hd);
  if (const auto* cs = hd.findTypedAttribute<Imf::StringAttribute>("colorSpace"))
    img.color_space = cs->value();
  const Imath::Box2i dw = hd.dataWindow();
  img.width = dw.max.x - dw.min.x + 1;
  img.height = dw.max.y - dw.min.y + 1;
  img.rgb.assign(static_cast<size_t>(img.width) * img.height * 3, -1.0f);
  Imf::FrameBuffer fb;
  const size_t xs = 3 * sizeof(float), ys = xs * static_cast<size_t>(img.width);
  char* base = reinterpret_cast<char*>(img.rgb.data());
  fb.insert("R", Imf::Slice(Imf::FLOAT, base, xs, ys));
  fb.insert("G", Imf::Slice(Imf::FLOAT, base + sizeof(float), xs, ys));
  fb.insert("B", Imf::Slice(Imf::FLOAT, base + 2 * sizeof(float), xs, ys));
  in.setFrameBuffer(fb);
  in.readPixels(dw.min.y, dw.max.y);
  return img;
}

void expect_chromaticities(const Imf::Chromaticities& c, media::Primaries primaries) {
  const auto want = media::exr_chromaticities(primaries);
  EXPECT_FLOAT_EQ(c.red.x, want[0]);
  EXPECT_FLOAT_EQ(c.red.y, want[1]);
  EXPECT_FLOAT_EQ(c.green.x, want[2]);
  EXPECT_FLOAT_EQ(c.green.y, want[3]);
  EXPECT_FLOAT_EQ(c.blue.x, want[4]);
  EXPECT_FLOAT_EQ(c.blue.y, want[5]);
  EXPECT_FLOAT_EQ(c.white.x, want[6]);
  EXPECT_FLOAT_EQ(c.white.y, want[7]);
}

// Writes an EXR with OpenEXR alone: the given channels (each HALF or FLOAT), values
// value(channel index, pixel index), and a data window that does not start at the origin.
void write_with_openexr(const std::string& path, int w, int h,
                        const std::vector<std::pair<std::string, Imf::PixelType>>& channels,
                        const std::function<float(size_t, int64_t)>& value) {
  const Imath::Box2i display(Imath::V2i(0, 0), Imath::V2i(w + 9, h + 9));
  const Imath::Box2i data(Imath::V2i(5, 3), Imath::V2i(5 + w - 1, 3 + h - 1));
  Imf::Header header(display, data);
  header.compression() = Imf::PIZ_COMPRESSION;
  // Each channel's plane in the channel's own type (OpenEXR writes no conversions).
  std::vector<std::vector<float>> floats(channels.size());
  std::vector<std::vector<half>> halves(channels.size());
  Imf::FrameBuffer fb;
  const size_t n = static_cast<size_t>(w) * h;
  const ptrdiff_t origin = data.min.x + static_cast<ptrdiff_t>(data.min.y) * w;
  for (size_t c = 0; c < channels.size(); ++c) {
    const Imf::PixelType type = channels[c].second;
    header.channels().insert(channels[c].first, Imf::Channel(type));
    char* base = nullptr;
    size_t elem = 0;
    if (type == Imf::HALF) {
      halves[c].resize(n);
      for (size_t i = 0; i < n; ++i) halves[c][i] = half(value(c, static_cast<int64_t>(i)));
      base = reinterpret_cast<char*>(halves[c].data());
      elem = sizeof(half);
    } else {
      floats[c].resize(n);
      for (size_t i = 0; i < n; ++i) floats[c][i] = value(c, static_cast<int64_t>(i));
      base = reinterpret_cast<char*>(floats[c].data());
      elem = sizeof(float);
    }
    fb.insert(channels[c].first,
              Imf::Slice(type, base - origin * static_cast<ptrdiff_t>(elem), elem, elem * w));
  }
  Imf::OutputFile out(path.c_str(), header);
  out.setFrameBuffer(fb);
  out.writePixels(h);
}
#endif

TEST(Exr, HalfFramesCarryTheReferenceChannelsAndTags) {
  LTX_REQUIRE_OPENEXR();
#if LTX_TEST_OPENEXR
  test::TempDir dir;
  const Tensor frame = hdr_frame(7, 10);
  media::write_exr(dir.file("f.exr"), frame);
  const OpenExrImage img = read_with_openexr(dir.file("f.exr"));
  EXPECT_EQ(img.channels, (std::vector<std::string>{"B", "G", "R"}));  // stored sorted by name
  for (auto t : img.types) EXPECT_EQ(t, Imf::HALF);
  EXPECT_EQ(img.compression, Imf::ZIP_COMPRESSION);
  ASSERT_TRUE(img.has_chromaticities);
  expect_chromaticities(img.chromaticities, media::Primaries::Rec709);
  EXPECT_EQ(img.color_space, "sRGB");
  ASSERT_EQ(img.width, 10);
  ASSERT_EQ(img.height, 7);
  const float* want = frame.data<float>();
  for (size_t i = 0; i < img.rgb.size(); ++i)  // float -> half rounds to nearest
    ASSERT_EQ(img.rgb[i], static_cast<float>(half(want[i]))) << "element " << i;
  // Our reader gives the same values back.
  const Tensor back = media::read_exr(dir.file("f.exr"));
  ASSERT_EQ(back.shape(), frame.shape());
  for (int64_t i = 0; i < back.numel(); ++i)
    ASSERT_EQ(back.data<float>()[i], img.rgb[static_cast<size_t>(i)]);
#endif
}

TEST(Exr, FloatFramesWithAcesTagsAreExact) {
  LTX_REQUIRE_OPENEXR();
#if LTX_TEST_OPENEXR
  test::TempDir dir;
  const Tensor frame = hdr_frame(5, 6, 3.0f);
  media::ExrWriteOptions opt;
  opt.pixel_type = media::ExrPixelType::Float;
  opt.primaries = media::Primaries::ACEScg;
  opt.color_space = "ACEScct";
  // Channels-first input, as the reference's save_exr_tensor accepts.
  media::write_exr(dir.file("f.exr"), frame.permute({2, 0, 1}).contiguous(), opt);
  const OpenExrImage img = read_with_openexr(dir.file("f.exr"));
  for (auto t : img.types) EXPECT_EQ(t, Imf::FLOAT);
  expect_chromaticities(img.chromaticities, media::Primaries::ACEScg);
  EXPECT_EQ(img.color_space, "ACEScct");
  for (size_t i = 0; i < img.rgb.size(); ++i)
    ASSERT_EQ(img.rgb[i], frame.data<float>()[i]) << "element " << i;
#endif
}

TEST(Exr, ReadsFilesWrittenByOpenEXR) {
  LTX_REQUIRE_OPENEXR();
#if LTX_TEST_OPENEXR
  test::TempDir dir;
  const int w = 9, h = 4;
  auto value = [](size_t c, int64_t i) {
    return 0.125f * static_cast<float>(c + 1) * static_cast<float>(i) - 1.0f;
  };
  // RGBA plus a depth channel, mixed pixel types, an offset data window, PIZ compression.
  write_with_openexr(
      dir.file("rgba.exr"), w, h,
      {{"R", Imf::HALF}, {"G", Imf::FLOAT}, {"B", Imf::HALF}, {"A", Imf::HALF}, {"Z", Imf::FLOAT}},
      value);
  const Tensor rgb = media::read_exr(dir.file("rgba.exr"));
  ASSERT_EQ(rgb.shape(), Shape({h, w, 3}));
  for (int64_t i = 0; i < w * h; ++i) {
    EXPECT_EQ(rgb.data<float>()[3 * i + 0], static_cast<float>(half(value(0, i))));
    EXPECT_EQ(rgb.data<float>()[3 * i + 1], value(1, i));
    EXPECT_EQ(rgb.data<float>()[3 * i + 2], static_cast<float>(half(value(2, i))));
  }
  // One channel (any name): replicated to RGB, as the reference.
  write_with_openexr(dir.file("y.exr"), w, h, {{"Y", Imf::FLOAT}}, value);
  const Tensor gray = media::read_exr(dir.file("y.exr"));
  for (int64_t i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(gray.data<float>()[3 * i + c], value(0, i));
#endif
}

// decode_exr reads the bytes of a file as read_exr reads the file.
TEST(Exr, DecodesFilesHeldInMemory) {
  LTX_REQUIRE_OPENEXR();
  test::TempDir dir;
  const Tensor frame = test::random_tensor({5, 7, 3}, 3, -2.f, 8.f);
  media::write_exr(dir.file("f.exr"), frame, {media::ExrPixelType::Float});
  std::ifstream in(dir.file("f.exr"), std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Tensor mem = media::decode_exr(bytes.data(), bytes.size(), "mem.exr");
  EXPECT_EQ(test::max_abs_diff(mem, media::read_exr(dir.file("f.exr"))), 0.0);
  EXPECT_EQ(test::max_abs_diff(mem, frame), 0.0);
  test::expect_error_containing(
      [&] { media::decode_exr(bytes.data(), bytes.size() / 2, "half.exr"); }, {"half.exr"});
  const std::string junk = "not an exr file at all";
  test::expect_error_containing(
      [&] { media::decode_exr(reinterpret_cast<const uint8_t*>(junk.data()), junk.size(), "junk"); },
      {"junk", "not an OpenEXR file"});
}

// An input that once crashed fuzz_exr or fuzz_exr_frames (tests/fuzz/regressions/exr/).
std::vector<uint8_t> exr_regression(const std::string& name) {
  std::ifstream in(std::string(LTX_TESTS_DIR) + "/fuzz/regressions/exr/" + name, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot open the regression input " << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Found by fuzz_exr (tests/fuzz/regressions/exr/): a 1 KB file whose `writer` attribute declares
// 1979711492 bytes made OpenEXR allocate and clear them before finding the file too short.
TEST(Exr, RefusesAttributesLargerThanTheFileBeforeOpenExrAllocatesThem) {
  LTX_REQUIRE_OPENEXR();
  const std::vector<uint8_t> bytes = exr_regression("string_attribute_2gb.exr");
  test::expect_error_containing([&] { media::decode_exr(bytes.data(), bytes.size(), "w.exr"); },
                                {"w.exr", "attribute 'writer'", "1979711492 bytes"});
  test::TempDir dir;
  test::write_bytes(dir.file("w.exr"), std::string(bytes.begin(), bytes.end()));
  test::expect_error_containing([&] { media::read_exr(dir.file("w.exr")); },
                                {"w.exr", "attribute 'writer'", "1979711492 bytes"});
}

// Found by fuzz_exr_frames: a channel list whose declared size is not the bytes its channels take.
// OpenEXR reads a chlist up to its empty channel name whatever the size says, so a walk that
// skipped the declared size lost step with OpenEXR and missed the 1.7 GB string that follows.
TEST(Exr, TheAttributeWalkReadsEachValueAsOpenExrDoes) {
  LTX_REQUIRE_OPENEXR();
  const std::vector<uint8_t> bytes = exr_regression("chlist_walk_out_of_step.exr");
  test::expect_error_containing([&] { media::decode_exr(bytes.data(), bytes.size(), "c.exr"); },
                                {"c.exr", "attribute 'writer'", "1761607684 bytes"});
}

// Found by fuzz_exr: a data window far from the origin. Its pixels are addressed through
// OpenEXR's Slice::Make, not through a pointer offset of ours that overflowed (undefined
// behaviour, which the sanitizer builds stop on). The file is damaged: an error, never a crash.
TEST(Exr, ADataWindowFarFromTheOriginIsReadWithoutPointerOverflow) {
  LTX_REQUIRE_OPENEXR();
  const std::vector<uint8_t> bytes = exr_regression("data_window_far_from_origin.exr");
  test::expect_error_containing([&] { media::decode_exr(bytes.data(), bytes.size(), "o.exr"); },
                                {"o.exr"});
}

TEST(Exr, FilesWeCannotUseGiveClearErrors) {
  LTX_REQUIRE_OPENEXR();
  test::TempDir dir;
#if LTX_TEST_OPENEXR
  auto zero = [](size_t, int64_t) { return 0.0f; };
  write_with_openexr(dir.file("rg.exr"), 4, 4, {{"R", Imf::HALF}, {"G", Imf::HALF}}, zero);
  test::expect_error_containing([&] { media::read_exr(dir.file("rg.exr")); },
                                {"rg.exr", "needs the channels R, G and B", "it has G, R"});
  write_with_openexr(dir.file("layer.exr"), 4, 4,
                     {{"diffuse.R", Imf::HALF}, {"diffuse.G", Imf::HALF}, {"diffuse.B", Imf::HALF}},
                     zero);
  test::expect_error_containing([&] { media::read_exr(dir.file("layer.exr")); },
                                {"layer.exr", "needs the channels R, G and B", "diffuse.B"});
#endif
  test::write_bytes(dir.file("junk.exr"), "not an exr file at all");
  test::expect_error_containing([&] { media::read_exr(dir.file("junk.exr")); },
                                {"junk.exr", "not an OpenEXR file"});
  test::expect_error_containing([&] { media::read_exr(dir.file("missing.exr")); },
                                {"missing.exr", "no such file"});
  test::expect_error_containing(
      [&] {
        media::write_exr(dir.file("x.exr"), Tensor::zeros({4, 4, 2}));
      },
      {"x.exr", "[H, W, 3] or [3, H, W]"});
  test::expect_error_containing(
      [&] {
        media::write_exr(dir.file("x.exr"), Tensor::zeros({4, 4, 3}, DType::U8));
      },
      {"x.exr", "floating point"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.exr")));
}

TEST(Exr, FrameFoldersAreWrittenAtomicallyAndListedInOrder) {
  LTX_REQUIRE_OPENEXR();
  test::TempDir dir;
  const std::string out = dir.file("clip_exr");
  Tensor frames = Tensor::empty({3, 4, 6, 3}, DType::F32);
  for (int64_t i = 0; i < frames.numel(); ++i)
    frames.data<float>()[i] = 0.5f * static_cast<float>(i % 17);
  {
    media::ExrFrameWriter w(out);
    w.write_frames(frames.slice(0, 0, 2));
    EXPECT_FALSE(std::filesystem::exists(out));  // built under a temporary name
    w.write_frames(frames.select(0, 2));
    w.finish();
  }
  EXPECT_EQ(test::list_dir(std::filesystem::path(out).parent_path().string()),
            (std::vector<std::string>{"clip_exr"}));
  EXPECT_EQ(test::list_dir(out),
            (std::vector<std::string>{"frame_00000.exr", "frame_00001.exr", "frame_00002.exr"}));
  EXPECT_TRUE(media::is_exr_folder(out));
  const auto paths = media::exr_frame_paths(out);
  ASSERT_EQ(paths.size(), 3u);
  for (int64_t f = 0; f < 3; ++f) {
    EXPECT_EQ(std::filesystem::path(paths[static_cast<size_t>(f)]).filename().string(),
              "frame_0000" + std::to_string(f) + ".exr");
    const Tensor back = media::read_exr(paths[static_cast<size_t>(f)]);
    const Tensor want = frames.select(0, f).contiguous();
    for (int64_t i = 0; i < back.numel(); ++i)  // multiples of 0.5 below 8: exact in half
      ASSERT_EQ(back.data<float>()[i], want.data<float>()[i]);
  }
  EXPECT_EQ(media::exr_frame_paths(paths[1]), std::vector<std::string>{paths[1]});
  std::filesystem::create_directory(dir.file("empty"));
  EXPECT_FALSE(media::is_exr_folder(dir.file("empty")));
  test::expect_error_containing([&] { media::exr_frame_paths(dir.file("empty")); },
                                {"empty", "holds no .exr frames"});
  test::write_bytes(dir.file("a.png"), "x");
  test::expect_error_containing([&] { media::exr_frame_paths(dir.file("a.png")); },
                                {"a.png", "must end in .exr"});
  // A failed clip leaves nothing behind.
  {
    media::ExrFrameWriter w(dir.file("bad_exr"));
    EXPECT_THROW(w.write_frames(Tensor::zeros({2, 4, 4, 2})), Error);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad_exr")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad_exr.tmp")));
}

TEST(Exr, HdrOutputTagsFollowTheColourSpace) {
  const media::ExrWriteOptions cct = media::exr_output_options(media::HdrColorSpace::ACEScct);
  EXPECT_EQ(cct.primaries, media::Primaries::ACEScg);
  EXPECT_EQ(cct.color_space, "ACEScct");
  EXPECT_EQ(cct.pixel_type, media::ExrPixelType::Half);
  const media::ExrWriteOptions cg = media::exr_output_options(media::HdrColorSpace::ACEScg);
  EXPECT_EQ(cg.primaries, media::Primaries::ACEScg);
  EXPECT_EQ(cg.color_space, "ACEScg");
  const media::ExrWriteOptions srgb = media::exr_output_options(media::HdrColorSpace::SrgbLinear);
  EXPECT_EQ(srgb.primaries, media::Primaries::Rec709);
  EXPECT_EQ(srgb.color_space, "sRGB");
}

TEST(Exr, FrameSequencesAreReadFromAStartUpToACount) {
  LTX_REQUIRE_OPENEXR();
  test::TempDir dir;
  Tensor frames = Tensor::empty({4, 2, 3, 3}, DType::F32);
  for (int64_t i = 0; i < frames.numel(); ++i) frames.data<float>()[i] = 0.25f * static_cast<float>(i % 29);
  media::write_exr_frames(dir.file("seq"), frames);
  const Tensor all = media::read_exr_frames(dir.file("seq"), 0, 0, "--video-path");
  ASSERT_EQ(all.shape(), (Shape{4, 2, 3, 3}));
  EXPECT_EQ(all.to_float_vector(), frames.to_float_vector());  // quarters below 8: exact in half
  const Tensor mid = media::read_exr_frames(dir.file("seq"), 1, 2, "--video-path");
  EXPECT_EQ(mid.to_float_vector(), frames.slice(0, 1, 3).contiguous().to_float_vector());
  EXPECT_EQ(media::read_exr_frames(dir.file("seq"), 2, 10, "x").size(0), 2);  // fewer than asked: what is left
  test::expect_error_containing([&] { media::read_exr_frames(dir.file("seq"), 4, 1, "--video-path"); },
                                {"--video-path", "no EXR frame left from frame 4", "holds 4"});
  // Frames of different sizes.
  media::write_exr(dir.file("seq/frame_00004.exr"), Tensor::zeros({4, 4, 3}));
  test::expect_error_containing([&] { media::read_exr_frames(dir.file("seq"), 0, 0, "--video-conditioning"); },
                                {"--video-conditioning", "frame_00004.exr", "is 4x4 but the first is 3x2"});
  std::filesystem::create_directory(dir.file("none"));
  test::expect_error_containing([&] { media::read_exr_frames(dir.file("none"), 0, 0, "--video-path"); },
                                {"--video-path", "holds no .exr frames"});
}

TEST(Exr, WithoutOpenExrSaysHowToRebuild) {
  if (media::openexr_available()) GTEST_SKIP() << "built with OpenEXR";
  test::TempDir dir;
  test::expect_error_containing([&] { media::read_exr(dir.file("a.exr")); },
                                {"a.exr", "no EXR support", "-DLTX_OPENEXR=ON"});
  test::expect_error_containing(
      [&] {
        media::write_exr_frames(dir.file("f"), Tensor::zeros({1, 2, 2, 3}));
      },
      {"no EXR support"});
  EXPECT_TRUE(test::list_dir(dir.file("")).empty());
}

}  // namespace
}  // namespace ltx
