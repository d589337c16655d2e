// hdr-ic-lora through `ltx serve`'s runner, in process on the demo engine: the job's output is one
// ustar archive (server/tar_archive.h) holding the EXR frame folder and the sRGB preview as
// `ltx generate --pipeline hdr-ic-lora` writes them for a clip named after the job; its thumbnail
// is the preview's middle frame; the progress plan follows the pipeline's stages. The archive
// writer on its own: entries in byte order as GNU tar lists and extracts them, long names split,
// no archive for a folder it cannot hold. An `hdr` request's job: its HLG master and EXR frames.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "generate/engine.h"
#include "generate/generate_test_util.h"
#include "generate/hdr_output.h"
#include "io/io_test_util.h"
#include "media/exr.h"
#include "media/hdr.h"
#include "media/image.h"
#include "media/support.h"
#include "media/video_reader.h"
#include "media/yuv.h"
#include "server/data_dir.h"
#include "server/engine_runner.h"
#include "server/media_test_util.h"
#include "server/progress_plan.h"
#include "server/tar_archive.h"
#include "server/upload_test_util.h"
#include "server/video_request.h"
#include "support/test_support.h"

namespace ltx::server {
namespace {

namespace fs = std::filesystem;

struct TarEntry {
  std::string name;
  char type = 0;  // '5' a folder, '0' a file
  std::string content;
};

// An archive as GNU tar reads it (the system's tar, not our code): `tar --list` for the entries
// in archive order and their format, `tar --extract` into a scratch folder for the contents.
std::vector<TarEntry> read_tar(const std::string& path) {
  const std::string listing = path + ".list", out = path + ".x";
  fs::remove_all(out);
  fs::create_directories(out);
  const std::string list_cmd = "tar --list --file '" + path + "' > '" + listing + "'";
  EXPECT_EQ(std::system(list_cmd.c_str()), 0) << list_cmd;
  const std::string x_cmd = "tar --extract --file '" + path + "' --directory '" + out + "'";
  EXPECT_EQ(std::system(x_cmd.c_str()), 0) << x_cmd;
  std::vector<TarEntry> entries;
  std::istringstream lines(test::read_bytes(listing));
  for (std::string name; std::getline(lines, name);) {
    const bool folder = name.ends_with("/");
    entries.push_back({name, folder ? '5' : '0',
                       folder ? std::string() : test::read_bytes((fs::path(out) / name).string())});
  }
  return entries;
}

// The demo engine (the built-in bundle) and a runner over a data dir in a scratch folder.
struct DemoRunner {
  static generate::EngineOptions demo_options() {
    generate::EngineOptions eo;
    eo.demo_dir = ltx::test::shared_demo_bundle().dir;
    return eo;
  }
  ltx::test::TempDir tmp;
  generate::Engine engine{demo_options()};
  DataDir dir{tmp.file("data")};
  EngineRunner runner{engine, Device::cpu(), dir};
};

TEST(TarArchive, AFolderBecomesUstarEntriesInByteOrder) {
  ltx::test::TempDir tmp;
  const fs::path root = tmp.file("parts");
  const std::string deep(60, 'd');  // a path past ustar's 100-byte name: split at a '/'
  fs::create_directories(root / "a" / deep / deep);
  ltx::test::write_bytes((root / "b.txt").string(), "hello");
  ltx::test::write_bytes((root / "a" / "x.bin").string(), std::string(600, 'x'));
  ltx::test::write_bytes((root / "a" / deep / deep / "f.exr").string(), "frame");
  const std::string tar = tmp.file("out.tar");
  write_tar(root.string(), tar);
  EXPECT_FALSE(fs::exists(tar + ".tmp"));
  const std::vector<TarEntry> e = read_tar(tar);
  EXPECT_EQ(test::read_bytes(tar).substr(257, 6), std::string("ustar\0", 6)) << "POSIX ustar";
  std::vector<std::string> names;
  for (const TarEntry& x : e) names.push_back(x.name);
  const std::string long_name = "a/" + deep + "/" + deep + "/f.exr";
  EXPECT_EQ(names, (std::vector<std::string>{"a/", "a/" + deep + "/", "a/" + deep + "/" + deep + "/", long_name,
                                             "a/x.bin", "b.txt"}));
  EXPECT_EQ(e[0].type, '5');
  EXPECT_EQ(e[3].type, '0');
  EXPECT_EQ(e[3].content, "frame");
  EXPECT_EQ(e[4].content, std::string(600, 'x'));
  EXPECT_EQ(e[5].content, "hello");

  // A link is not archived: one error naming it, no archive.
  fs::create_symlink(root / "b.txt", root / "link");
  const std::string bad = tmp.file("bad.tar");
  EXPECT_ERROR_HAS(write_tar(root.string(), bad), "link' is not a plain file or folder");
  EXPECT_FALSE(fs::exists(bad));
  EXPECT_FALSE(fs::exists(bad + ".tmp"));
}

// An uploaded archive of frames (made by GNU tar, in pax and GNU formats): the *.exr files at any
// depth under their base names, sorted; folders and hidden files (macOS's "._" companions)
// skipped; anything else one error naming the entry.
TEST(TarArchive, AnUploadedArchiveUnpacksItsExrFramesUnderTheirBaseNames) {
  ltx::test::TempDir tmp;
  const fs::path root = tmp.file("upload");
  fs::create_directories(root / "shot" / "more");
  ltx::test::write_bytes((root / "shot" / "frame_00001.exr").string(), "one");
  ltx::test::write_bytes((root / "shot" / "frame_00000.EXR").string(), "zero");
  ltx::test::write_bytes((root / "shot" / "more" / "frame_00002.exr").string(), "two");
  ltx::test::write_bytes((root / "shot" / "._frame_00000.exr").string(), "apple double");
  const auto pack = [&](const std::string& format, const std::string& what) {
    const std::string tar = tmp.file(format + ".tar");
    fs::remove(tar);
    const std::string cmd = "tar --create --format=" + format + " --file '" + tar +
                            "' --directory '" + root.string() + "' " + what;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return test::read_bytes(tar);
  };
  const auto unpack = [&](const std::string& bytes, int64_t max_frames = 100,
                          int64_t max_bytes = 1 << 20) {
    const fs::path out = tmp.file("out");
    fs::remove_all(out);
    fs::create_directories(out);
    return unpack_exr_tar(bytes, out.string(), max_frames, max_bytes);
  };
  for (const std::string format : {"pax", "gnu", "ustar"}) {
    const std::string bytes = pack(format, "shot");
    EXPECT_TRUE(is_tar(bytes)) << format;
    EXPECT_EQ(unpack(bytes), (std::vector<std::string>{"frame_00000.EXR", "frame_00001.exr",
                                                       "frame_00002.exr"}))
        << format;
    EXPECT_EQ(test::read_bytes(tmp.file("out/frame_00002.exr")), "two");
  }
  const std::string good = pack("pax", "shot");
  EXPECT_ERROR_HAS(unpack(good, 2), "more than 2 EXR frames");
  EXPECT_ERROR_HAS(unpack(good, 100, 6), "more than 6 bytes unpacked");
  EXPECT_ERROR_HAS(unpack(good.substr(0, 700)), "");
  EXPECT_FALSE(is_tar("an MP4 is not a tar"));
  EXPECT_ERROR_HAS(unpack(std::string(1024, '\0')), "no EXR frame");

  ltx::test::write_bytes((root / "shot" / "notes.txt").string(), "a note");
  EXPECT_ERROR_HAS(unpack(pack("pax", "shot")), "'shot/notes.txt' is not an EXR frame");
  fs::remove(root / "shot" / "notes.txt");
  ltx::test::write_bytes((root / "shot" / "more" / "frame_00001.exr").string(), "again");
  EXPECT_ERROR_HAS(unpack(pack("pax", "shot")), "'frame_00001.exr' is in the archive twice");
  fs::remove(root / "shot" / "more" / "frame_00001.exr");
  fs::create_symlink(root / "shot" / "frame_00001.exr", root / "shot" / "link.exr");
  EXPECT_ERROR_HAS(unpack(pack("pax", "shot")), "'shot/link.exr' is a link or special file");
  fs::remove(root / "shot" / "link.exr");
  ltx::test::write_bytes((root / "shot" / "frame 3.exr").string(), "spaced");
  EXPECT_ERROR_HAS(unpack(pack("pax", "shot")), "frame names are letters");
}

// An ic-lora hdr job whose reference is an uploaded tar of EXR frames: stored as the tar, unpacked
// when the job runs; the master and its EXR frames come back as the job's tar.
TEST(EngineRunnerHdr, AnIcLoraHdrJobReadsItsUploadedExrFrames) {
  if (!media::openexr_available() || !media::ffmpeg_available())
    GTEST_SKIP() << "an HDR master needs OpenEXR and FFmpeg in the build";
  DemoRunner demo;
  generate::Engine& engine = demo.engine;
  DataDir& dir = demo.dir;
  EngineRunner& runner = demo.runner;
  const std::string seq = test::exr_frames_tar(9, 128, 128);
  const VideoRequest r = parse_create(
      test::form({test::text("prompt", "a dancer"), test::text("pipeline", "ic-lora"),
                  test::text("hdr", "SRGB_LINEAR"), test::text("size", "128x128"),
                  test::text("num_frames", "9"),
                  test::clip_part("video_conditioning", seq, "shot.tar", "application/x-tar")}),
      served_model(engine.info(), {}));
  Job job;
  job.id = "video_c123456789abcdef0123456789abcdef";
  job.request_json = to_json(r).dump();
  const std::vector<std::string> names = dir.store_inputs(job.id, {InputImage{seq, "tar"}});
  job.inputs = {JobInput{0, names.at(0), 0, 1.0, std::nullopt}};
  RunItem item;
  item.job = &job;
  const std::vector<RunOutcome> out = runner.run({item});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].status, RunStatus::Completed) << out[0].error.message;
  const std::vector<TarEntry> entries = read_tar(out[0].output_file);
  ASSERT_EQ(entries.size(), 1u + 1u + 9u);
  EXPECT_EQ(entries[0].name, job.id + ".mp4");
  EXPECT_TRUE(fs::exists(dir.input_path(job.id, names.at(0)))) << "the upload is kept as sent";
}

TEST(EngineRunnerHdr, AJobWritesATarOfTheExrFramesAndPreviewWithThePreviewsThumbnail) {
  if (!media::openexr_available() || !media::ffmpeg_available())
    GTEST_SKIP() << "hdr-ic-lora needs OpenEXR and FFmpeg in the build";
  DemoRunner demo;
  ltx::test::TempDir& tmp = demo.tmp;
  generate::Engine& engine = demo.engine;
  DataDir& dir = demo.dir;
  EngineRunner& runner = demo.runner;
  ASSERT_EQ(engine.info().unavailable.count("hdr-ic-lora"), 0u) << engine.info().unavailable.at("hdr-ic-lora");

  // 9 frames of 64x64 at 24 fps: the output keeps them.
  const std::string clip = test::mp4_clip(9, 64, 64, 24.0);
  const VideoRequest r = parse_create(
      test::form({test::text("prompt", "a sunset"), test::text("pipeline", "hdr-ic-lora"),
                  test::clip_part("video_conditioning", clip), test::text("num_frames", "9"),
                  test::text("spatial_tile", "768")}),
      served_model(engine.info(), {}));
  Job job;
  job.id = "video_0123456789abcdef0123456789abcdef";
  job.request_json = to_json(r).dump();
  const std::vector<std::string> names = dir.store_inputs(job.id, {InputImage{clip, "mp4"}});
  job.inputs = {JobInput{0, names.at(0), 0, 1.0, std::nullopt}};

  ProgressTracker tracker(runner.progress_plan(job));
  RunItem item;
  item.job = &job;
  item.progress = [&](const ProgressEvent& e) { tracker.update(e.stage, e.done, e.total); };
  const std::vector<RunOutcome> out = runner.run({item});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].status, RunStatus::Completed) << out[0].error.message;
  EXPECT_EQ(out[0].output_file, dir.output_path(job.id, "tar"));
  EXPECT_GE(tracker.percent(), 90) << "the plan names the stages the pipeline reports";
  EXPECT_FALSE(fs::exists(dir.parts_path(job.id)));

  const std::vector<TarEntry> entries = read_tar(out[0].output_file);
  std::map<std::string, std::string> files;
  for (const TarEntry& e : entries) files[e.name] = e.content;
  ASSERT_EQ(entries.size(), 1u + 1u + 9u) << "the preview, the frame folder and its 9 frames";
  EXPECT_EQ(entries[0].name, job.id + ".mp4");
  EXPECT_EQ(entries[1].name, job.id + "_exr/");
  EXPECT_EQ(entries.back().name, job.id + "_exr/frame_00008.exr");

  // The files are what they say: the EXR frames scene-linear at the clip's size, the preview an
  // MP4 of 9 frames at that size.
  const std::string frame = tmp.file("frame.exr"), preview = tmp.file("preview.mp4");
  ltx::test::write_bytes(frame, files.at(job.id + "_exr/frame_00004.exr"));
  ltx::test::write_bytes(preview, files.at(job.id + ".mp4"));
  const Tensor middle = media::read_exr(frame);
  EXPECT_EQ(middle.shape(), (Shape{64, 64, 3}));
  const media::MediaInfo info = media::probe_media(preview);
  ASSERT_FALSE(info.streams.empty());
  EXPECT_EQ(info.streams[0].width, 64);
  EXPECT_EQ(info.streams[0].height, 64);

  // The thumbnail: the middle frame as the preview shows it.
  if (!media::image_io_available()) return;
  const Tensor thumbnail = media::read_image(dir.thumbnail_path(job.id));
  const Tensor expected = media::rgb_to_uint8(generate::srgb_preview_frames(middle.unsqueeze(0)).select(0, 0));
  EXPECT_TRUE(ltx::test::same_bits(thumbnail, expected));
}

// An `hdr` request (`ltx generate --hdr`): an EXR still conditions a distilled clip; the job's
// output is a tar of the HLG master and its EXR frames (output_format exr), or the master alone
// (mp4); the thumbnail shows the middle frame's ACEScct codes made scene-linear, as a preview.
TEST(EngineRunnerHdr, AnHdrJobWritesItsMasterAndExrFramesOrTheMasterAlone) {
  if (!media::openexr_available() || !media::ffmpeg_available())
    GTEST_SKIP() << "an HDR master needs OpenEXR and FFmpeg in the build";
  DemoRunner demo;
  ltx::test::TempDir& tmp = demo.tmp;
  generate::Engine& engine = demo.engine;
  DataDir& dir = demo.dir;
  EngineRunner& runner = demo.runner;
  const std::string still = test::exr_still(128, 64);

  for (const std::string format : {"exr", "mp4"}) {
    const VideoRequest r = parse_create(
        test::form({test::text("prompt", "a plate"), test::text("pipeline", "distilled"),
                    test::text("hdr", "ACESCCT"), test::text("size", "128x64"),
                    test::text("num_frames", "9"), test::text("output_format", format),
                    test::image_part("input_reference", still, "plate.exr", "image/x-exr")}),
        served_model(engine.info(), {}));
    Job job;
    job.id = "video_" + std::string(format == "exr" ? "a" : "b") + "123456789abcdef0123456789abcdef";
    job.request_json = to_json(r).dump();
    const std::vector<std::string> names = dir.store_inputs(job.id, {InputImage{still, "exr"}});
    job.inputs = {JobInput{0, names.at(0), 0, 1.0, std::nullopt}};
    EXPECT_TRUE(names.at(0).ends_with(".exr")) << names.at(0);
    RunItem item;
    item.job = &job;
    const std::vector<RunOutcome> out = runner.run({item});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].status, RunStatus::Completed) << out[0].error.message;
    EXPECT_FALSE(fs::exists(dir.parts_path(job.id))) << format;

    std::string master = out[0].output_file, frame = tmp.file(format + "_frame.exr");
    if (format == "exr") {
      EXPECT_EQ(out[0].output_file, dir.output_path(job.id, "tar"));
      const std::vector<TarEntry> entries = read_tar(out[0].output_file);
      ASSERT_EQ(entries.size(), 1u + 1u + 9u) << "the master, the frame folder and its 9 frames";
      EXPECT_EQ(entries[0].name, job.id + ".mp4");
      EXPECT_EQ(entries[1].name, job.id + "_exr/");
      EXPECT_EQ(entries.back().name, job.id + "_exr/frame_00008.exr");
      master = tmp.file("master.mp4");
      ltx::test::write_bytes(master, entries[0].content);
      ltx::test::write_bytes(frame, entries[1 + 1 + 4].content);  // frame_00004
    } else {
      EXPECT_EQ(out[0].output_file, dir.output_path(job.id, "mp4"));
    }
    const media::MediaInfo info = media::probe_media(master);
    const media::StreamInfo* v = nullptr;
    for (const media::StreamInfo& st : info.streams)
      if (st.type == "video") v = &st;
    ASSERT_NE(v, nullptr) << format;
    EXPECT_EQ(v->codec, "hevc");
    EXPECT_EQ(v->color_transfer, "arib-std-b67");
    EXPECT_EQ(v->width, 128);
    EXPECT_EQ(v->height, 64);
    if (format != "exr" || !media::image_io_available()) continue;
    // The thumbnail: the middle frame's codes (here as the EXR keeps them, in half float) made
    // scene-linear and shown as a preview.
    const Tensor codes = media::read_exr(frame);
    const Tensor expected = media::rgb_to_uint8(
        generate::srgb_preview_frames(
            media::hdr_to_linear(codes, media::HdrTransfer::ACEScct).unsqueeze(0))
            .select(0, 0));
    const Tensor thumbnail = media::read_image(dir.thumbnail_path(job.id));
    EXPECT_EQ(thumbnail.shape(), expected.shape());
    // Within 2 levels but where the codes' half-float rounding is amplified (a Rec.709 channel
    // made from larger ACEScg ones: a few pixels in a thousand).
    const std::vector<float> a = thumbnail.to_float_vector(), b = expected.to_float_vector();
    size_t off = 0;
    for (size_t i = 0; i < a.size(); ++i) off += std::abs(a[i] - b[i]) > 2.0f;
    EXPECT_LE(off, a.size() / 200) << off << " of " << a.size() << " values differ by more than 2";
    EXPECT_LE(ltx::test::max_abs_diff(thumbnail, expected), 24.0);
  }
}

}  // namespace
}  // namespace ltx::server
