// `ltx serve` on the demo bundle running the pipelines with uploads and other outputs over
// loopback HTTP: a clip the server made is uploaded for retake, t2a answers a WAV, one frame a
// PNG; an HDR master and hdr-ic-lora come from EXR and text-embeddings uploads; the downloads are
// checked with ffprobe (FFmpeg's decoders, not ours) and tar; a queued retake survives kill -9
// with its uploaded clip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "generate/generate_test_util.h"
#include "media/support.h"
#include "server/media_test_util.h"
#include "server/serve_process.h"
#include "server/upload_test_util.h"

namespace ltx::test::serve_pipelines_test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json wait_done(const ServeProcess& s, const std::string& id, std::chrono::seconds timeout = 300s) {
  return test::wait_done(s, id, timeout);
}

// The job's download with its content type.
std::pair<std::string, std::string> download(const ServeProcess& s, const std::string& id,
                                             const std::string& query = "") {
  auto r = s.client().Get("/v1/videos/" + id + "/content" + query);
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return {r->body, r->get_header_value("Content-Type")};
}

httplib::MultipartFormDataItems retake_form(const std::string& clip, const std::string& end) {
  return {{"prompt", "a blue ball", "", ""},
          {"pipeline", "retake", "", ""},
          {"video_path", clip, "clip.mp4", "video/mp4"},
          {"start_time", "0.1", "", ""},
          {"end_time", end, "", ""}};
}

TEST(ServePipelines, RetakeOfAnUploadT2AWavAndOneFramePngCheckedByFfprobe) {
  if (const std::string why = mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string data = dir.file("data");
  std::string clip, queued_retake;
  {
    ServeProcess s(data, dir.file("cache"), dir.file("serve1.log"));
    s.start();
    // Every pipeline is served, with its fields and output format.
    const auto models = s.client().Get("/v1/models");
    ASSERT_TRUE(models);
    const json m = json::parse(models->body)["data"][0];
    for (const char* p : {"retake", "t2a", "a2vid", "ic-lora", "keyframe-interpolation", "hdr-ic-lora"})
      EXPECT_NE(std::find(m["pipelines"].begin(), m["pipelines"].end(), p), m["pipelines"].end())
          << p << ": " << models->body;
    const json& retake_fields = m["defaults"]["retake"]["fields"];
    ASSERT_EQ(retake_fields.size(), 3u) << models->body;
    EXPECT_EQ(retake_fields[0]["name"], "video_path");
    EXPECT_EQ(retake_fields[0]["type"], "video file");
    EXPECT_EQ(retake_fields[0]["required"], true);
    EXPECT_EQ(retake_fields[2]["name"], "end_time");
    EXPECT_EQ(m["defaults"]["retake"]["takes_size"], false);
    EXPECT_EQ(m["defaults"]["t2a"]["output_format"], "wav") << models->body;
    EXPECT_EQ(m["defaults"]["t2a"]["takes_size"], false);
    EXPECT_EQ(m["defaults"]["t2a"]["takes_duration"], true);
    EXPECT_EQ(m["defaults"]["ic-lora"]["fields"][0]["name"], "video_conditioning");
    EXPECT_EQ(m["defaults"]["two-stage"]["fields"], json::array());
    EXPECT_EQ(m["defaults"]["hdr-ic-lora"]["output_format"], "exr") << models->body;
    EXPECT_EQ(m["defaults"]["hdr-ic-lora"]["fields"][0]["type"], "{video: video file, strength: number}");

    // A clip from the server itself: 9 frames of 128x64 at 24 fps with sound.
    const json made = create_job(s, {{"prompt", "a red ball"}, {"pipeline", "distilled"},
                                     {"width", 128}, {"height", 64}, {"num_frames", 9}});
    ASSERT_EQ(wait_done(s, made["id"])["status"], "completed") << s.log();
    clip = download(s, made["id"]).first;

    // Retake a window of it, uploaded as a file part.
    auto r = s.client().Post("/v1/videos", retake_form(clip, "0.3"));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json retake = json::parse(r->body);
    EXPECT_EQ(retake["size"], "128x64") << r->body;
    const json done = wait_done(s, retake["id"]);
    ASSERT_EQ(done["status"], "completed") << done.dump() << s.log();
    EXPECT_EQ(done["output_format"], "mp4");
    const auto [mp4, mp4_type] = download(s, retake["id"]);
    EXPECT_EQ(mp4_type, "video/mp4");
    write_bytes(dir.file("retake.mp4"), mp4);
    expect_mp4(dir.file("retake.mp4"), 128, 64, 9, "24/1", 48000);

    // A window past the clip's end: 400 naming end_time, nothing queued.
    auto bad = s.client().Post("/v1/videos", retake_form(clip, "2"));
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400) << bad->body;
    EXPECT_EQ(json::parse(bad->body)["error"]["param"], "end_time") << bad->body;

    // t2a: a WAV (16-bit PCM, 48 kHz stereo), no thumbnail.
    const json t2a = create_job(s, {{"prompt", "rain on a tin roof"}, {"pipeline", "t2a"},
                                    {"num_frames", 9}, {"num_inference_steps", 2}});
    const json t2a_done = wait_done(s, t2a["id"]);
    ASSERT_EQ(t2a_done["status"], "completed") << t2a_done.dump() << s.log();
    EXPECT_EQ(t2a_done["output_format"], "wav");
    const auto [wav, wav_type] = download(s, t2a["id"]);
    EXPECT_EQ(wav_type, "audio/wav");
    write_bytes(dir.file("rain.wav"), wav);
    const json probe = ffprobe(dir.file("rain.wav"));
    const json* a = stream_of(probe, "audio");
    ASSERT_NE(a, nullptr) << probe.dump();
    EXPECT_EQ(stream_of(probe, "video"), nullptr) << probe.dump();
    EXPECT_EQ((*a)["codec_name"], "pcm_s16le");
    EXPECT_EQ((*a)["sample_rate"], "48000");
    EXPECT_EQ((*a)["channels"], 2);
    // 9 frames at 24 fps: 0.375 s, give or take a latent frame
    EXPECT_NEAR(std::stod(probe["format"]["duration"].get<std::string>()), 0.375, 0.05);
    auto thumb = s.client().Get("/v1/videos/" + t2a["id"].get<std::string>() +
                                "/content?variant=thumbnail");
    ASSERT_TRUE(thumb);
    EXPECT_EQ(thumb->status, 404) << thumb->body;

    // One frame: a PNG of the asked size, which is its own thumbnail.
    const json still = create_job(s, {{"prompt", "a red ball"}, {"pipeline", "distilled"},
                                      {"width", 128}, {"height", 64}, {"num_frames", 1}});
    ASSERT_EQ(wait_done(s, still["id"])["status"], "completed") << s.log();
    const auto [png, png_type] = download(s, still["id"]);
    EXPECT_EQ(png_type, "image/png");
    write_bytes(dir.file("still.png"), png);
    const json still_probe = ffprobe(dir.file("still.png"));
    const json* v = stream_of(still_probe, "video");
    ASSERT_NE(v, nullptr) << still_probe.dump();
    EXPECT_EQ((*v)["codec_name"], "png");
    EXPECT_EQ((*v)["width"], 128);
    EXPECT_EQ((*v)["height"], 64);
    EXPECT_EQ(download(s, still["id"], "?variant=thumbnail").first, png);

    // A long job runs while a retake waits; kill -9 loses neither.
    const json slow = create_job(s, {{"prompt", "slow"}, {"pipeline", "one-stage"}, {"width", 64},
                                     {"height", 64}, {"num_frames", 9},
                                     {"num_inference_steps", 100}});
    auto q = s.client().Post("/v1/videos", retake_form(clip, "0.3"));
    ASSERT_TRUE(q);
    ASSERT_EQ(q->status, 200) << q->body;
    queued_retake = json::parse(q->body)["id"];
    ASSERT_TRUE(wait_until(
        [&] { return get_job(s, slow["id"]).value("status", "") == "in_progress"; }, 120s))
        << s.log();
    EXPECT_EQ(get_job(s, queued_retake)["status"], "queued");
    s.kill9();
  }
  ServeProcess s(data, dir.file("cache"), dir.file("serve2.log"));
  s.start();
  const json after = wait_done(s, queued_retake, 600s);
  ASSERT_EQ(after["status"], "completed") << after.dump() << s.log();
  write_bytes(dir.file("retake2.mp4"), download(s, queued_retake).first);
  expect_mp4(dir.file("retake2.mp4"), 128, 64, 9, "24/1", 48000);
  EXPECT_EQ(s.terminate(), 0) << s.log();
}

// HDR through the server: an HDR master (`hdr`) of a distilled clip conditioned on an uploaded
// OpenEXR still, downloaded as a tar whose MP4 ffprobe reads as HLG BT.2020 HEVC beside its EXR
// frames; a retake of EXR frames uploaded as a tar; hdr-ic-lora from uploaded precomputed text
// contexts, with no prompt.
TEST(ServePipelines, AnHdrMasterFromAnExrStillAndHdrIcLoraFromTextEmbeddings) {
  if (const std::string why = mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  if (!media::openexr_available()) GTEST_SKIP() << "this build has no OpenEXR (LTX_OPENEXR=OFF)";
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"));
  s.start();
  const auto models = s.client().Get("/v1/models");
  ASSERT_TRUE(models);
  const json m = json::parse(models->body)["data"][0];
  EXPECT_EQ(m["defaults"]["distilled"]["takes_hdr"], true) << models->body;
  EXPECT_EQ(m["defaults"]["t2a"]["takes_hdr"], false);
  EXPECT_EQ(m["defaults"]["hdr-ic-lora"]["takes_hdr"], false);
  bool embeddings_field = false;
  for (const json& f : m["defaults"]["hdr-ic-lora"]["fields"])
    embeddings_field = embeddings_field ||
                       (f["name"] == "text_embeddings" && f["type"] == "safetensors file");
  EXPECT_TRUE(embeddings_field) << models->body;

  auto r = s.client().Post(
      "/v1/videos",
      httplib::MultipartFormDataItems{
          {"prompt", "a plate at dusk", "", ""},
          {"pipeline", "distilled", "", ""},
          {"hdr", "ACESCG", "", ""},
          {"size", "128x64", "", ""},
          {"num_frames", "9", "", ""},
          {"input_reference", server::test::exr_still(128, 64), "plate.exr", "image/x-exr"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string id = json::parse(r->body)["id"];
  const json done = wait_done(s, id);
  ASSERT_EQ(done["status"], "completed") << done.dump() << s.log();
  EXPECT_EQ(done["output_format"], "exr");
  const auto [tar, type] = download(s, id);
  EXPECT_EQ(type, "application/x-tar");
  write_bytes(dir.file("master.tar"), tar);
  const std::string out = dir.file("master");
  std::filesystem::create_directories(out);
  const std::string untar = "tar --extract --file '" + dir.file("master.tar") + "' --directory '" + out + "'";
  ASSERT_EQ(std::system(untar.c_str()), 0) << untar;
  const json probe = ffprobe(out + "/" + id + ".mp4");
  const json* v = stream_of(probe, "video");
  ASSERT_NE(v, nullptr) << probe.dump();
  EXPECT_EQ((*v)["codec_name"], "hevc");
  EXPECT_EQ((*v)["color_transfer"], "arib-std-b67");
  EXPECT_EQ((*v)["color_primaries"], "bt2020");
  EXPECT_EQ((*v)["width"], 128);
  EXPECT_NE(stream_of(probe, "audio"), nullptr) << probe.dump();
  int64_t frames = 0;
  for (const auto& e : std::filesystem::directory_iterator(out + "/" + id + "_exr"))
    frames += e.path().extension() == ".exr";
  EXPECT_EQ(frames, 9);

  // An EXR still without hdr: 422 naming the field, nothing queued.
  auto bad = s.client().Post(
      "/v1/videos",
      httplib::MultipartFormDataItems{
          {"prompt", "a plate", "", ""},
          {"pipeline", "distilled", "", ""},
          {"input_reference", server::test::exr_still(128, 64), "plate.exr", "image/x-exr"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 422) << bad->body;
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "input_reference") << bad->body;

  // A retake of an EXR frame folder sent as a tar (GNU tar's), at the rate the request gives.
  auto retake = s.client().Post(
      "/v1/videos",
      httplib::MultipartFormDataItems{
          {"prompt", "a blue ball", "", ""},
          {"pipeline", "retake", "", ""},
          {"hdr", "SRGB_LINEAR", "", ""},
          {"fps", "24", "", ""},
          {"start_time", "0.1", "", ""},
          {"end_time", "0.3", "", ""},
          {"video_path", server::test::exr_frames_tar(9, 128, 64), "shot.tar", "application/x-tar"}});
  ASSERT_TRUE(retake);
  ASSERT_EQ(retake->status, 200) << retake->body;
  const json retake_done = wait_done(s, json::parse(retake->body)["id"]);
  ASSERT_EQ(retake_done["status"], "completed") << retake_done.dump() << s.log();
  EXPECT_EQ(retake_done["size"], "128x64");

  // hdr-ic-lora from the reference script's contexts (32 wide: the demo transformer's), no prompt.
  auto hdr = s.client().Post(
      "/v1/videos",
      httplib::MultipartFormDataItems{
          {"pipeline", "hdr-ic-lora", "", ""},
          {"num_frames", "9", "", ""},
          {"video_conditioning", server::test::mp4_clip(9, 64, 64, 24.0), "shot.mp4", "video/mp4"},
          {"text_embeddings", server::test::text_embeddings_file(7, 32), "contexts.safetensors",
           "application/octet-stream"}});
  ASSERT_TRUE(hdr);
  ASSERT_EQ(hdr->status, 200) << hdr->body << s.log();
  const json hdr_done = wait_done(s, json::parse(hdr->body)["id"]);
  ASSERT_EQ(hdr_done["status"], "completed") << hdr_done.dump() << s.log();
  EXPECT_EQ(hdr_done["prompt"], "");
  EXPECT_EQ(download(s, hdr_done["id"]).second, "application/x-tar");
}

// a2vid to an uploaded stereo soundtrack (the audio VAE's encoder takes two channels), ic-lora
// with an uploaded reference clip, dubit with an uploaded clip with sound, keyframe interpolation
// between two uploaded images: each completes with the MP4 ffprobe expects.
TEST(ServePipelines, A2VidIcLoraDubItAndKeyframesRunFromUploads) {
  if (const std::string why = mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"));
  s.start();
  const auto post = [&](const httplib::MultipartFormDataItems& form) {
    auto r = s.client().Post("/v1/videos", form);
    EXPECT_TRUE(r);
    if (!r) return std::string();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body).value("id", std::string());
  };
  const std::string a2vid =
      post({{"prompt", "a drummer on a stage", "", ""},
            {"pipeline", "a2vid", "", ""},
            {"audio_path", server::test::wav_clip(1.0, 44100, 2), "drums.wav", "audio/wav"},
            {"audio_start_time", "0.25", "", ""},
            {"size", "128x64", "", ""},
            {"num_frames", "9", "", ""},
            {"num_inference_steps", "2", "", ""}});
  const std::string ic = post(
      {{"prompt", "a test pattern", "", ""},
       {"pipeline", "ic-lora", "", ""},
       {"video_conditioning[][video]", server::test::mp4_clip(9, 128, 128, 24.0), "ref.mp4",
        "video/mp4"},
       {"video_conditioning[][strength]", "0.8", "", ""},
       {"size", "128x128", "", ""},
       {"num_frames", "9", "", ""}});
  const std::string dubit =
      post({{"prompt", "she speaks French", "", ""},
            {"pipeline", "dubit", "", ""},
            {"reference_video", server::test::mp4_clip(9, 128, 64, 24.0, /*audio=*/true),
             "speech.mp4", "video/mp4"},
            {"size", "128x64", "", ""}});
  const std::string keyframes =
      post({{"prompt", "a ball rolls", "", ""},
            {"pipeline", "keyframe-interpolation", "", ""},
            {"images[][image]", server::test::png(128, 64), "first.png", "image/png"},
            {"images[][frame_index]", "0", "", ""},
            {"images[][image]", server::test::jpeg(128, 64), "last.jpg", "image/jpeg"},
            {"images[][frame_index]", "8", "", ""},
            {"size", "128x64", "", ""},
            {"num_frames", "9", "", ""},
            {"num_inference_steps", "2", "", ""}});
  // A mono soundtrack is audio, but the model's encoder takes two channels: refused when it is
  // sent (400 naming the field), not when the job runs.
  const auto mono = s.client().Post("/v1/videos", httplib::MultipartFormDataItems{
                                                      {"prompt", "a drummer on a stage", "", ""},
                                                      {"pipeline", "a2vid", "", ""},
                                                      {"audio_path", server::test::wav_clip(1.0, 44100, 1),
                                                       "mono.wav", "audio/wav"},
                                                      {"size", "128x64", "", ""},
                                                      {"num_frames", "9", "", ""}});
  ASSERT_TRUE(mono);
  EXPECT_EQ(mono->status, 400) << mono->body;
  const json refused = json::parse(mono->body);
  EXPECT_EQ(refused["error"]["param"], "audio_path") << mono->body;
  EXPECT_EQ(refused["error"]["code"], "invalid_media") << mono->body;
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("1 channel(s) but this model's audio encoder takes 2"),
            std::string::npos)
      << mono->body;
  struct Expect {
    std::string id;
    int64_t width, height, audio_rate;
  };
  for (const Expect& e : {Expect{a2vid, 128, 64, 44100},  // the soundtrack's own rate
                          Expect{ic, 128, 128, 48000}, Expect{dubit, 128, 64, 48000},
                          Expect{keyframes, 128, 64, 48000}}) {
    ASSERT_FALSE(e.id.empty());
    const json done = wait_done(s, e.id);
    ASSERT_EQ(done["status"], "completed") << done.dump() << s.log();
    const auto [mp4, type] = download(s, e.id);
    EXPECT_EQ(type, "video/mp4");
    write_bytes(dir.file(e.id + ".mp4"), mp4);
    expect_mp4(dir.file(e.id + ".mp4"), e.width, e.height, 9, "24/1", e.audio_rate);
  }
  EXPECT_EQ(s.terminate(), 0) << s.log();
}

}  // namespace
}  // namespace ltx::test::serve_pipelines_test
