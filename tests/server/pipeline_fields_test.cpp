// The pipelines beyond text/image-to-video through POST /v1/videos: the pipeline fields of
// video_request.h's table (retake, a2vid, ic-lora, t2a, keyframe-interpolation), their uploads
// (probed with the media/ code), the 400 / 413 / 422 answers naming the field, the output format
// and the stored-request round trip to the engine's options. Pure: no sockets, no engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "media/hdr.h"
#include "media/support.h"
#include "pipelines/pipeline.h"
#include "server/api_error.h"
#include "server/media_test_util.h"
#include "server/upload_test_util.h"
#include "server/video_request.h"

namespace ltx::server::pipeline_fields_test {
namespace {

using json = nlohmann::json;
using test::clip_part;
using test::form;
using test::text;

ServedModel served() {
  ServedModel m;
  m.id = "ltx-demo";
  m.pipelines = {"two-stage", "retake", "a2vid", "t2a", "ic-lora", "keyframe-interpolation",
                 "distilled", "dubit", "hdr-ic-lora"};
  m.default_pipeline = "two-stage";
  for (const auto& p : m.pipelines) m.defaults[p] = {128, 128, 9, 24.0, 4};
  m.defaults["retake"].steps.reset();
  m.defaults["ic-lora"].steps.reset();
  m.defaults["distilled"].steps.reset();
  m.defaults["dubit"].steps.reset();
  m.defaults["hdr-ic-lora"].steps.reset();
  return m;
}


void expect_error(const CreateBody& body, int status, const std::string& code,
                  const std::string& param, const std::string& message_part,
                  const ServedModel& model = served()) {
  try {
    parse_create(body, model);
    ADD_FAILURE() << "accepted; expected " << status << " " << code << " on " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(message_part), std::string::npos) << e.what();
  }
}

class PipelineFields : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!media::ffmpeg_available()) GTEST_SKIP() << "a build without FFmpeg reads no uploads";
  }
  // 24 frames of 64x64 at 24 fps: 1 s, with a sound track.
  static const std::string& clip() {
    static const std::string c = test::mp4_clip(24, 64, 64, 24.0, /*audio=*/true);
    return c;
  }
  static const std::string& wav() {
    static const std::string w = test::wav_clip(2.0);
    return w;
  }
};

// ---------------------------------------------------------------- retake

TEST_F(PipelineFields, RetakeTakesTheClipItsWindowAndItsSize) {
  const VideoRequest r = parse_create(form({text("prompt", "a cat"), text("pipeline", "retake"),
                                            clip_part("video_path", clip()),
                                            text("start_time", "0.25"), text("end_time", "0.5")}),
                                      served());
  EXPECT_EQ(r.options.pipeline, "retake");
  ASSERT_EQ(r.media.size(), 1u);
  EXPECT_EQ(r.media[0].field, "video_path");
  EXPECT_EQ(r.media[0].header.ext, "mp4");
  EXPECT_EQ(r.media[0].header.width, 64);
  EXPECT_EQ(r.media[0].header.frames, 24);
  EXPECT_EQ(r.size, "64x64");
  EXPECT_EQ(r.seconds, "1");
  EXPECT_EQ(r.output_format, "mp4");
  // the clip decides the size, frames and rate; the distilled schedule has no steps to set
  EXPECT_FALSE(r.options.width || r.options.height || r.options.num_frames ||
               r.options.frame_rate || r.options.num_inference_steps);
  // stored without the bytes and back: the engine reads the job's stored file
  const VideoRequest back = video_request_from_json(json::parse(to_json(r).dump()));
  ASSERT_EQ(back.media.size(), 1u);
  EXPECT_TRUE(back.media[0].bytes.empty());
  EXPECT_EQ(back.media[0].header.duration, r.media[0].header.duration);
  const generate::GenerateOptions o = to_generate_options(back, {"/data/inputs/x/0.mp4"});
  EXPECT_EQ(o.video_path, "/data/inputs/x/0.mp4");
  EXPECT_EQ(o.start_time, 0.25);
  EXPECT_EQ(o.end_time, 0.5);
  EXPECT_THROW(to_generate_options(back, {}), Error);
}

TEST_F(PipelineFields, RetakeBadInputNamesTheField) {
  const auto retake = [&](std::vector<FormPart> more) {
    std::vector<FormPart> parts = {text("prompt", "a cat"), text("pipeline", "retake")};
    parts.insert(parts.end(), more.begin(), more.end());
    return form(parts);
  };
  expect_error(retake({text("start_time", "0.1"), text("end_time", "0.3")}), 400,
               "missing_required_parameter", "video_path", "needs video_path");
  expect_error(retake({clip_part("video_path", clip()), text("end_time", "0.3")}), 400,
               "missing_required_parameter", "start_time", "needs start_time");
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "0.25"),
                       text("end_time", "3")}),
               400, "time_range_outside_clip", "end_time", "shorter than the retake range");
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "1.5"),
                       text("end_time", "2")}),
               400, "time_range_outside_clip", "start_time", "not inside video_path");
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "0.5"),
                       text("end_time", "0.25")}),
               422, "invalid_value", "end_time", "greater than start_time");
  expect_error(retake({clip_part("video_path", "not a video at all"), text("start_time", "0"),
                       text("end_time", "0.5")}),
               400, "invalid_media", "video_path", "cannot be read");
  expect_error(retake({clip_part("video_path", ""), text("start_time", "0"), text("end_time", "0.5")}),
               400, "invalid_media", "video_path", "empty");
  expect_error(retake({clip_part("video_path", wav(), "a.wav", "audio/wav"), text("start_time", "0"),
                       text("end_time", "0.5")}),
               400, "invalid_media", "video_path", "no video stream");
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "0"),
                       text("end_time", "0.5"), text("size", "256x256")}),
               422, "invalid_value", "size", "takes the size");
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "0"),
                       text("end_time", "0.5"), text("seconds", "2")}),
               422, "invalid_value", "seconds", "frame count");
  // a path or a URL is not an upload
  CreateBody j;
  j.json = json{{"prompt", "a cat"},
                {"pipeline", "retake"},
                {"video_path", "/etc/passwd"},
                {"start_time", 0},
                {"end_time", 0.5}}
               .dump();
  expect_error(j, 400, "invalid_type", "video_path", "file part");
  // over the byte limit: 413 before any probing
  ServedModel small = served();
  small.limits.max_media_bytes = 100;
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "0"),
                       text("end_time", "0.5")}),
               413, "file_too_large", "video_path", "limit", small);
  // limits checked before anything is decoded: a frame's pixels, the declared duration
  ServedModel few_pixels = served();
  few_pixels.limits.max_image_pixels = 64 * 63;
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "0"),
                       text("end_time", "0.5")}),
               400, "invalid_media", "video_path", "pixels a frame", few_pixels);
  ServedModel short_media = served();
  short_media.limits.max_media_seconds = 0.5;
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "0"),
                       text("end_time", "0.5")}),
               400, "invalid_media", "video_path", "at most 0.5 s", short_media);
  // a clip above the size limit
  ServedModel narrow = served();
  narrow.limits.max_width = 32;
  expect_error(retake({clip_part("video_path", clip()), text("start_time", "0"),
                       text("end_time", "0.5")}),
               422, "invalid_value", "video_path", "above this server's limit", narrow);
}

TEST_F(PipelineFields, AFieldOfAnotherPipelineIsRefused) {
  expect_error(form({text("prompt", "a cat"), clip_part("video_path", clip()),
                     text("start_time", "0"), text("end_time", "0.5")}),
               422, "invalid_value", "video_path", "a field of the retake pipeline");
  expect_error(form({text("prompt", "a cat"), text("pipeline", "t2a"), text("skip_stage_2", "1")}),
               422, "invalid_value", "skip_stage_2", "ic-lora");
}

// ---------------------------------------------------------------- a2vid

TEST_F(PipelineFields, A2VidTakesTheSoundtrackAndItsWindow) {
  const VideoRequest r = parse_create(
      form({text("prompt", "a drum"), text("pipeline", "a2vid"),
            clip_part("audio_path", wav(), "drum.wav", "audio/wav"), text("audio_start_time", "0.5"),
            text("audio_max_duration", "1")}),
      served());
  ASSERT_EQ(r.media.size(), 1u);
  EXPECT_EQ(r.media[0].header.ext, "wav");
  EXPECT_EQ(r.media[0].header.sample_rate, 16000);
  EXPECT_NEAR(r.media[0].header.duration, 2.0, 1e-3);
  EXPECT_EQ(r.output_format, "mp4");
  const generate::GenerateOptions o =
      to_generate_options(video_request_from_json(to_json(r)), {"/in/0.wav"});
  EXPECT_EQ(o.audio_path, "/in/0.wav");
  EXPECT_EQ(o.audio_start_time, 0.5);
  EXPECT_EQ(o.audio_max_duration, 1.0);
  EXPECT_EQ(o.num_frames, 9);
}

TEST_F(PipelineFields, A2VidBadInputNamesTheField) {
  expect_error(form({text("prompt", "a drum"), text("pipeline", "a2vid")}), 400,
               "missing_required_parameter", "audio_path", "needs audio_path");
  expect_error(form({text("prompt", "a drum"), text("pipeline", "a2vid"),
                     clip_part("audio_path", wav(), "d.wav", "audio/wav"),
                     text("audio_start_time", "2.5")}),
               400, "time_range_outside_clip", "audio_start_time", "not inside audio_path");
  // a silent video has no audio stream
  expect_error(form({text("prompt", "a drum"), text("pipeline", "a2vid"),
                     clip_part("audio_path", test::mp4_clip(9, 32, 32, 24.0))}),
               400, "invalid_media", "audio_path", "no audio stream");
  expect_error(form({text("prompt", "a drum"), text("pipeline", "a2vid"),
                     clip_part("audio_path", wav(), "d.wav", "audio/wav"),
                     text("audio_max_duration", "-1")}),
               422, "invalid_value", "audio_max_duration", "positive");
  // A model whose audio encoder takes stereo refuses the mono soundtrack when it is sent.
  ServedModel stereo = served();
  stereo.defaults["a2vid"].input_audio_channels = 2;
  expect_error(form({text("prompt", "a drum"), text("pipeline", "a2vid"),
                     clip_part("audio_path", wav(), "d.wav", "audio/wav")}),
               400, "invalid_media", "audio_path", "1 channel(s) but this model's audio encoder takes 2", stereo);
  EXPECT_NO_THROW(parse_create(form({text("prompt", "a drum"), text("pipeline", "a2vid"),
                                     clip_part("audio_path", test::wav_clip(1.0, 16000, 2), "d.wav", "audio/wav")}),
                               stereo));
}

// ---------------------------------------------------------------- ic-lora

TEST_F(PipelineFields, IcLoraTakesReferenceVideosAMaskAndSkipStage2) {
  const std::string ref = test::mp4_clip(9, 64, 64, 24.0);
  const VideoRequest r = parse_create(
      form({text("prompt", "a dancer"), text("pipeline", "ic-lora"),
            clip_part("video_conditioning[][video]", ref), text("video_conditioning[][strength]", "0.7"),
            clip_part("video_conditioning[][video]", ref),
            clip_part("conditioning_attention_mask[video]", ref),
            text("conditioning_attention_mask[strength]", "0.5"), text("skip_stage_2", "true")}),
      served());
  ASSERT_EQ(r.media.size(), 3u);
  EXPECT_EQ(r.media[0].field, "video_conditioning");
  EXPECT_EQ(r.media[0].strength, 0.7);
  EXPECT_EQ(r.media[1].strength, 1.0);
  EXPECT_EQ(r.media[2].field, "conditioning_attention_mask");
  const generate::GenerateOptions o = to_generate_options(
      video_request_from_json(to_json(r)), {"/in/0.mp4", "/in/1.mp4", "/in/2.mp4"});
  ASSERT_EQ(o.video_conditionings.size(), 2u);
  EXPECT_EQ(o.video_conditionings[0].path, "/in/0.mp4");
  EXPECT_EQ(o.video_conditionings[0].strength, 0.7);
  EXPECT_EQ(o.video_conditionings[1].path, "/in/1.mp4");
  ASSERT_TRUE(o.conditioning_attention_mask);
  EXPECT_EQ(o.conditioning_attention_mask->first, "/in/2.mp4");
  EXPECT_EQ(o.conditioning_attention_mask->second, 0.5);
  EXPECT_TRUE(o.skip_stage_2);
  EXPECT_FALSE(o.num_inference_steps);
  // stage 1's half size is what the job makes
  EXPECT_EQ(r.size, "64x64");
  ASSERT_EQ(r.adjustments.size(), 1u);
  EXPECT_EQ(r.adjustments[0].text(),
            "size 128x128 -> 64x64 (skip_stage_2 decodes stage 1's half-size result)");
}

TEST_F(PipelineFields, IcLoraBadInputNamesTheField) {
  const std::string ref = test::mp4_clip(9, 64, 64, 24.0);
  expect_error(form({text("prompt", "a dancer"), text("pipeline", "ic-lora")}), 400,
               "missing_required_parameter", "video_conditioning", "needs video_conditioning");
  expect_error(form({text("prompt", "a dancer"), text("pipeline", "ic-lora"),
                     clip_part("video_conditioning[][video]", ref),
                     text("video_conditioning[][strength]", "1.5")}),
               422, "invalid_value", "video_conditioning[0][strength]", "[0, 1]");
  expect_error(form({text("prompt", "a dancer"), text("pipeline", "ic-lora"),
                     text("video_conditioning[][strength]", "0.5")}),
               400, "missing_required_parameter", "video_conditioning[0][video]", "required");
  expect_error(form({text("prompt", "a dancer"), text("pipeline", "ic-lora"),
                     clip_part("video_conditioning[][video]", "garbage")}),
               400, "invalid_media", "video_conditioning[0][video]", "cannot be read");
  expect_error(form({text("prompt", "a dancer"), text("pipeline", "ic-lora"),
                     clip_part("video_conditioning[][video]", ref), text("num_inference_steps", "4")}),
               422, "invalid_value", "", "num_inference_steps");
}

// ---------------------------------------------------------------- hdr-ic-lora

TEST_F(PipelineFields, HdrIcLoraTakesOneClipItsRateAndItsFlagsAndWritesExr) {
  // 17 frames of 96x64 at 25 fps: the job keeps the size and the rate, counts seconds at it.
  const std::string clip = test::mp4_clip(17, 96, 64, 25.0);
  const VideoRequest r = parse_create(
      form({text("prompt", "a sunset"), text("pipeline", "hdr-ic-lora"),
            clip_part("video_conditioning[video]", clip), text("video_conditioning[strength]", "0.8"),
            text("seconds", "0.3"), text("high_quality", "true"), text("spatial_tile", "768"),
            text("skip_mp4", "1")}),
      served());
  EXPECT_EQ(r.output_format, "exr");
  EXPECT_EQ(r.size, "96x64");
  EXPECT_EQ(r.options.num_frames, 9);  // ceil(0.3 * 25) = 8 -> 8k + 1
  EXPECT_EQ(r.seconds, "0.36");
  EXPECT_FALSE(r.options.frame_rate);  // the clip's, as `ltx generate` takes it
  EXPECT_FALSE(r.options.width);
  EXPECT_FALSE(r.options.num_inference_steps);
  EXPECT_EQ(r.batch_key, "");
  ASSERT_EQ(r.media.size(), 1u);
  EXPECT_EQ(r.media[0].strength, 0.8);
  const generate::GenerateOptions o =
      to_generate_options(video_request_from_json(to_json(r)), {"/in/0.mp4"});
  ASSERT_EQ(o.video_conditionings.size(), 1u);
  EXPECT_EQ(o.video_conditionings[0].path, "/in/0.mp4");
  EXPECT_EQ(o.video_conditionings[0].strength, 0.8);
  EXPECT_TRUE(o.high_quality);
  EXPECT_EQ(o.spatial_tile, 768);
  EXPECT_TRUE(o.skip_mp4);

  // A bare file part is the clip at strength 1; without a length, the pipeline's default count.
  const VideoRequest bare = parse_create(
      form({text("prompt", "a sunset"), text("pipeline", "hdr-ic-lora"), clip_part("video_conditioning", clip)}),
      served());
  EXPECT_EQ(bare.options.num_frames, 9);
  EXPECT_EQ(bare.media.at(0).strength, 1.0);
  EXPECT_FALSE(bare.options.high_quality || bare.options.skip_mp4 || bare.options.spatial_tile);
  // The ic-lora entry of the same name still reads its own list.
  const VideoRequest ic = parse_create(form({text("prompt", "a dancer"), text("pipeline", "ic-lora"),
                                             clip_part("video_conditioning[][video]", clip),
                                             clip_part("video_conditioning[][video]", clip)}),
                                       served());
  EXPECT_EQ(to_generate_options(ic, {"/a.mp4", "/b.mp4"}).video_conditionings.size(), 2u);
}

TEST_F(PipelineFields, HdrIcLoraBadInputNamesTheField) {
  const std::string clip = test::mp4_clip(9, 64, 64, 24.0);
  const auto hdr = [&](std::vector<FormPart> extra) {
    std::vector<FormPart> parts = {text("prompt", "a sunset"), text("pipeline", "hdr-ic-lora"),
                                   clip_part("video_conditioning", clip)};
    parts.insert(parts.end(), extra.begin(), extra.end());
    return form(parts);
  };
  expect_error(form({text("prompt", "a sunset"), text("pipeline", "hdr-ic-lora")}), 400,
               "missing_required_parameter", "video_conditioning", "needs video_conditioning");
  expect_error(hdr({text("fps", "30")}), 422, "invalid_value", "fps", "frame rate of video_conditioning");
  expect_error(hdr({text("size", "128x128")}), 422, "invalid_value", "size", "takes the size of");
  expect_error(hdr({text("spatial_tile", "300")}), 422, "invalid_value", "spatial_tile", "multiple of 32");
  expect_error(hdr({text("spatial_tile", "768.5")}), 422, "invalid_value", "spatial_tile", "whole number");
  expect_error(hdr({text("output_format", "mp4")}), 422, "invalid_value", "output_format", "writes exr");
  expect_error(hdr({text("num_inference_steps", "4")}), 422, "invalid_value", "", "num_inference_steps");
  expect_error(hdr({text("skip_stage_2", "true")}), 422, "invalid_value", "skip_stage_2", "ic-lora pipeline");
  expect_error(hdr({test::image_part("input_reference", test::png())}), 422, "invalid_value", "input_reference",
               "conditions on video_conditioning only");
  expect_error(form({text("prompt", "a cat"), text("pipeline", "two-stage"), text("high_quality", "true")}),
               422, "invalid_value", "high_quality", "field of the hdr-ic-lora pipeline");
  expect_error(form({text("prompt", "a cat"), text("pipeline", "two-stage"), clip_part("video_conditioning", clip)}),
               422, "invalid_value", "video_conditioning", "ic-lora, hdr-ic-lora pipelines");
}

// hdr-ic-lora's text_embeddings: the reference script's precomputed contexts stand for the prompt.
TEST_F(PipelineFields, HdrIcLoraTakesTextEmbeddingsInsteadOfAPrompt) {
  const std::string clip = test::mp4_clip(9, 64, 64, 24.0);
  const std::string embeddings = test::text_embeddings_file(7, 32);
  const auto file = [](const std::string& name, const std::string& bytes) {
    return clip_part(name, bytes, "contexts.safetensors", "application/octet-stream");
  };
  const VideoRequest r = parse_create(
      form({text("pipeline", "hdr-ic-lora"), clip_part("video_conditioning", clip),
            file("text_embeddings", embeddings)}),
      served());
  EXPECT_EQ(r.options.prompt, "");
  ASSERT_EQ(r.media.size(), 2u);
  EXPECT_EQ(r.media[1].field, "text_embeddings");
  EXPECT_EQ(r.media[1].header.ext, "safetensors");
  EXPECT_EQ(r.media[1].bytes, embeddings);
  const generate::GenerateOptions o =
      to_generate_options(video_request_from_json(to_json(r)), {"/in/0.mp4", "/in/1.safetensors"});
  EXPECT_EQ(o.text_embeddings, "/in/1.safetensors");
  EXPECT_EQ(o.video_conditionings.at(0).path, "/in/0.mp4");

  const auto with = [&](std::vector<FormPart> parts) {
    parts.insert(parts.begin(), {text("pipeline", "hdr-ic-lora"), clip_part("video_conditioning", clip)});
    return form(parts);
  };
  expect_error(with({text("prompt", "a sunset"), file("text_embeddings", embeddings)}), 400,
               "invalid_value", "prompt", "both give the text");
  expect_error(with({}), 400, "missing_required_parameter", "prompt", "prompt is required");
  expect_error(with({file("text_embeddings", test::text_embeddings_file(7, 32, false))}), 400,
               "invalid_media", "text_embeddings", "no video_context");
  expect_error(with({file("text_embeddings", "not a safetensors file")}), 400, "invalid_media",
               "text_embeddings", "not usable text embeddings");
  expect_error(with({text("text_embeddings", "/etc/contexts.safetensors")}), 400, "invalid_type",
               "text_embeddings", "file part");
  expect_error(form({text("pipeline", "two-stage"), file("text_embeddings", embeddings)}), 422,
               "invalid_value", "text_embeddings", "field of the hdr-ic-lora pipeline");
}

// `hdr`: the colour space of an HDR master (`ltx generate --hdr`), written as a tar of its EXR
// frames and HLG MP4, or the MP4 alone; EXR stills are its inputs.
TEST_F(PipelineFields, HdrRequestsTakeAColourSpaceAndWriteTheMaster) {
  const VideoRequest r = parse_create(
      form({text("prompt", "a sunset"), text("pipeline", "two-stage"), text("hdr", "ACESCCT")}),
      served());
  ASSERT_TRUE(r.options.hdr);
  EXPECT_EQ(*r.options.hdr, media::HdrColorSpace::ACEScct);
  EXPECT_EQ(r.output_format, "exr");
  EXPECT_EQ(r.batch_key, "") << "an HDR master is written by a sink of its own";
  const VideoRequest back = video_request_from_json(to_json(r));
  ASSERT_TRUE(back.options.hdr);
  EXPECT_EQ(*back.options.hdr, media::HdrColorSpace::ACEScct);
  EXPECT_EQ(to_generate_options(back, {}).hdr, r.options.hdr);
  EXPECT_FALSE(video_request_from_json(to_json(parse_create(
                   form({text("prompt", "a cat"), text("pipeline", "two-stage")}), served())))
                   .options.hdr);
  const VideoRequest mp4 = parse_create(
      form({text("prompt", "a sunset"), text("pipeline", "distilled"), text("hdr", "SRGB_LINEAR"),
            text("output_format", "mp4")}),
      served());
  EXPECT_EQ(mp4.output_format, "mp4");
  EXPECT_EQ(*mp4.options.hdr, media::HdrColorSpace::SrgbLinear);

  const auto hdr = [](std::vector<FormPart> extra) {
    std::vector<FormPart> parts = {text("prompt", "a sunset"), text("pipeline", "two-stage")};
    parts.insert(parts.end(), extra.begin(), extra.end());
    return form(parts);
  };
  expect_error(hdr({text("hdr", "PQ")}), 422, "invalid_value", "hdr", "SRGB_LINEAR");
  expect_error(hdr({text("hdr", "ACESCG"), text("output_format", "png"), text("num_frames", "1")}),
               422, "invalid_value", "output_format", "an hdr request writes exr");
  expect_error(form({text("prompt", "rain"), text("pipeline", "t2a"), text("hdr", "ACESCG")}), 422,
               "invalid_value", "hdr", "");
  expect_error(hdr({text("output_format", "exr")}), 422, "invalid_value", "output_format",
               "hdr requests");
}

TEST_F(PipelineFields, ExrStillsAreHdrInputsAndNeverMixWithSdrOnes) {
  if (!media::openexr_available()) GTEST_SKIP() << "a build without OpenEXR reads no EXR";
  const std::string exr = test::exr_still(48, 32);
  const auto still = [&](const std::string& name) {
    return test::image_part(name, exr, "still.exr", "image/x-exr");
  };
  const VideoRequest r = parse_create(
      form({text("prompt", "a sunset"), text("pipeline", "two-stage"), text("hdr", "SRGB_LINEAR"),
            still("input_reference")}),
      served());
  ASSERT_EQ(r.images.size(), 1u);
  EXPECT_EQ(r.images[0].format, "exr");
  EXPECT_EQ(r.images[0].width, 48);
  EXPECT_EQ(r.images[0].height, 32);
  EXPECT_EQ(video_request_from_json(to_json(r)).images.at(0).format, "exr");

  expect_error(form({text("prompt", "a sunset"), text("pipeline", "two-stage"), still("input_reference")}),
               422, "invalid_value", "input_reference", "set hdr to their colour space");
  expect_error(form({text("prompt", "a sunset"), text("pipeline", "keyframe-interpolation"),
                     text("hdr", "ACESCG"), still("images[0][image]"), text("images[0][frame_index]", "0"),
                     test::image_part("images[1][image]", test::png()),
                     text("images[1][frame_index]", "8")}),
               422, "invalid_value", "images", "all EXR or all SDR");
  expect_error(form({text("prompt", "a dancer"), text("pipeline", "ic-lora"), text("hdr", "ACESCG"),
                     still("input_reference"), clip_part("video_conditioning", clip())}),
               422, "invalid_value", "input_reference", "video_conditioning holds SDR");
  std::string broken = exr.substr(0, 40);
  expect_error(form({text("prompt", "a sunset"), text("pipeline", "two-stage"), text("hdr", "ACESCG"),
                     test::image_part("input_reference", broken, "still.exr", "image/x-exr")}),
               422, "invalid_image", "input_reference", "cannot be decoded");
}

// An hdr request's EXR frame folder, uploaded as a tar: retake's clip (its rate given as fps) and
// ic-lora's references; checked frame by frame when sent.
TEST_F(PipelineFields, ExrFrameArchivesAreTheHdrClipsOfRetakeAndIcLora) {
  if (!media::openexr_available()) GTEST_SKIP() << "a build without OpenEXR reads no EXR";
  const std::string seq = test::exr_frames_tar(9, 64, 64);
  const auto tar = [&](const std::string& name, const std::string& bytes) {
    return clip_part(name, bytes, "shot.tar", "application/x-tar");
  };
  const VideoRequest r = parse_create(
      form({text("prompt", "a blue ball"), text("pipeline", "retake"), text("hdr", "ACESCG"),
            tar("video_path", seq), text("fps", "24"), text("start_time", "0.1"),
            text("end_time", "0.3")}),
      served());
  ASSERT_EQ(r.media.size(), 1u);
  EXPECT_EQ(r.media[0].header.ext, "tar");
  EXPECT_EQ(r.media[0].header.frames, 9);
  EXPECT_EQ(r.size, "64x64");
  EXPECT_EQ(r.options.frame_rate, 24.0);
  EXPECT_EQ(r.output_format, "exr");
  const generate::GenerateOptions o = to_generate_options(video_request_from_json(to_json(r)), {"/in/0.tar"});
  EXPECT_EQ(o.video_path, "/in/0.tar");
  EXPECT_EQ(o.frame_rate, 24.0);

  const VideoRequest ic = parse_create(
      form({text("prompt", "a dancer"), text("pipeline", "ic-lora"), text("hdr", "ACESCCT"),
            tar("video_conditioning[][video]", seq), text("video_conditioning[][strength]", "0.5")}),
      served());
  ASSERT_EQ(ic.media.size(), 1u);
  EXPECT_EQ(ic.media[0].header.ext, "tar");
  EXPECT_EQ(ic.media[0].strength, 0.5);

  const auto retake = [&](std::vector<FormPart> extra) {
    std::vector<FormPart> parts = {text("prompt", "a blue ball"), text("pipeline", "retake"),
                                   text("start_time", "0.1"), text("end_time", "0.3")};
    parts.insert(parts.end(), extra.begin(), extra.end());
    return form(parts);
  };
  expect_error(retake({text("hdr", "ACESCG"), tar("video_path", seq)}), 400,
               "missing_required_parameter", "fps", "no frame rate");
  expect_error(retake({tar("video_path", seq), text("fps", "24")}), 422, "invalid_value",
               "video_path", "set hdr to their colour space");
  expect_error(retake({text("hdr", "ACESCG"), tar("video_path", seq), text("fps", "24"),
                       text("num_frames", "9")}),
               422, "invalid_value", "num_frames", "takes the frame count of video_path");
  expect_error(form({text("prompt", "a blue ball"), text("pipeline", "retake"), text("hdr", "ACESCG"),
                     tar("video_path", seq), text("fps", "24"), text("start_time", "0.1"),
                     text("end_time", "0.5")}),
               400, "time_range_outside_clip", "end_time", "s long");
  expect_error(retake({text("fps", "24"), clip_part("video_path", clip())}), 422, "invalid_value",
               "fps", "frame count and frame rate of video_path");
  // Another field, a damaged archive, frames of two sizes, a file that is not a frame.
  expect_error(form({text("prompt", "a sunset"), text("pipeline", "hdr-ic-lora"), text("hdr", "ACESCG"),
                     tar("video_conditioning", seq)}),
               400, "invalid_media", "video_conditioning", "is a tar archive");
  expect_error(retake({text("hdr", "ACESCG"), tar("video_path", seq.substr(0, seq.size() / 2)),
                       text("fps", "24")}),
               400, "invalid_media", "video_path", "");
  expect_error(retake({text("hdr", "ACESCG"), tar("video_path", test::exr_frames_tar(3, 64, 64, 32)),
                       text("fps", "24")}),
               400, "invalid_media", "video_path", "every frame of a sequence has one size");
  expect_error(form({text("prompt", "a dancer"), text("pipeline", "ic-lora"), text("hdr", "ACESCG"),
                     tar("video_conditioning[][video]", seq),
                     clip_part("video_conditioning[][video]", clip())}),
               422, "invalid_value", "video_conditioning", "all EXR or all SDR");
}

// ---------------------------------------------------------------- dubit

TEST_F(PipelineFields, DubItTakesTheReferenceClipsLengthAndTheRequestsSize) {
  const VideoRequest r = parse_create(
      form({text("prompt", "she speaks French"), text("pipeline", "dubit"),
            clip_part("reference_video", clip()), text("reference_strength", "0.6"),
            text("size", "128x64")}),
      served());
  EXPECT_EQ(r.size, "128x64");
  EXPECT_EQ(r.seconds, "1");  // the clip's
  EXPECT_FALSE(r.options.num_frames || r.options.frame_rate);
  const generate::GenerateOptions o =
      to_generate_options(video_request_from_json(to_json(r)), {"/in/0.mp4"});
  EXPECT_EQ(o.reference_video, "/in/0.mp4");
  EXPECT_EQ(o.reference_strength, 0.6);
  expect_error(form({text("prompt", "x"), text("pipeline", "dubit"),
                     clip_part("reference_video", clip()), text("num_frames", "9")}),
               422, "invalid_value", "num_frames", "frame rate of reference_video");
  expect_error(form({text("prompt", "x"), text("pipeline", "dubit")}), 400,
               "missing_required_parameter", "reference_video", "needs reference_video");
  // DubIt keeps the clip's voice: a silent clip is refused by the pipeline's own check
  expect_error(form({text("prompt", "x"), text("pipeline", "dubit"),
                     clip_part("reference_video", test::mp4_clip(9, 64, 64, 24.0))}),
               422, "invalid_value", "reference_video", "no audio track");
}

// ---------------------------------------------------------------- t2a, one frame, keyframes

TEST_F(PipelineFields, T2AWritesAWavAndTakesNoSize) {
  const VideoRequest r = parse_create(
      form({text("prompt", "rain on a roof"), text("pipeline", "t2a"), text("seconds", "1")}),
      served());
  EXPECT_EQ(r.output_format, "wav");
  EXPECT_EQ(r.size, "");
  EXPECT_EQ(r.options.num_frames, 25);
  EXPECT_FALSE(r.options.width);
  expect_error(form({text("prompt", "rain"), text("pipeline", "t2a"), text("size", "64x64")}), 422,
               "invalid_value", "size", "audio only");
  expect_error(form({text("prompt", "rain"), text("pipeline", "t2a"), text("output_format", "mp4")}),
               422, "invalid_value", "output_format", "audio only");
  expect_error(form({text("prompt", "rain"), text("pipeline", "t2a"),
                     text("generate_audio", "false")}),
               422, "invalid_value", "generate_audio", "generates audio");
}

TEST_F(PipelineFields, OneFrameIsAPng) {
  const VideoRequest r = parse_create(
      form({text("prompt", "a cat"), text("pipeline", "distilled"), text("num_frames", "1")}),
      served());
  EXPECT_EQ(r.output_format, "png");
  EXPECT_EQ(parse_create(form({text("prompt", "a cat"), text("pipeline", "distilled"),
                               text("num_frames", "1"), text("output_format", "mp4")}),
                         served())
                .output_format,
            "mp4");
  expect_error(form({text("prompt", "a cat"), text("output_format", "png")}), 422, "invalid_value",
               "output_format", "one frame");
  expect_error(form({text("prompt", "a cat"), text("output_format", "exr")}), 422, "invalid_value",
               "output_format", "exr is the output of the hdr-ic-lora pipeline");
  expect_error(form({text("prompt", "a cat"), text("output_format", "tiff")}), 422, "invalid_value",
               "output_format", "mp4, wav, png or exr");
  expect_error(form({text("prompt", "a cat"), text("output_format", "wav")}), 422, "invalid_value",
               "output_format", "audio only");
}

TEST_F(PipelineFields, KeyframeInterpolationTakesImagesAtFrames) {
  const VideoRequest r = parse_create(
      form({text("prompt", "a door opens"), text("pipeline", "keyframe-interpolation"),
            clip_part("images[][image]", test::png(), "a.png", "image/png"),
            text("images[][frame_index]", "0"),
            clip_part("images[][image]", test::png(), "b.png", "image/png"),
            text("images[][frame_index]", "8")}),
      served());
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[1].frame_index, 8);
  EXPECT_TRUE(r.media.empty());
  EXPECT_EQ(r.output_format, "mp4");
}

TEST(PipelineFieldTable, EveryEntryNamesServedPipelinesAndApplies) {
  for (const PipelineField& f : pipeline_fields()) {
    EXPECT_FALSE(f.pipelines.empty()) << f.name;
    for (const auto& p : f.pipelines) EXPECT_NO_THROW(pipelines::parse_pipeline_kind(p)) << f.name;
    EXPECT_TRUE(static_cast<bool>(f.apply)) << f.name;
    EXPECT_FALSE(f.description.empty()) << f.name;
  }
  EXPECT_FALSE(takes_size("retake"));
  EXPECT_FALSE(takes_duration("retake"));
  EXPECT_TRUE(takes_size("dubit"));
  EXPECT_FALSE(takes_duration("dubit"));
  EXPECT_FALSE(takes_size("t2a"));
  EXPECT_TRUE(takes_duration("t2a"));
  EXPECT_TRUE(takes_size("two-stage") && takes_duration("two-stage"));
  EXPECT_EQ(default_output_format("t2a", 25), "wav");
  EXPECT_EQ(default_output_format("two-stage", 1), "png");
  EXPECT_EQ(default_output_format("two-stage", 9), "mp4");
  EXPECT_EQ(content_type_of("video_x.wav"), "audio/wav");
  EXPECT_EQ(content_type_of("video_x.png"), "image/png");
  EXPECT_EQ(content_type_of("video_x.mp4"), "video/mp4");
  EXPECT_EQ(content_type_of("video_x.tar"), "application/x-tar");
  EXPECT_FALSE(takes_size("hdr-ic-lora"));
  EXPECT_TRUE(takes_duration("hdr-ic-lora"));
  EXPECT_EQ(default_output_format("hdr-ic-lora", 1), "exr");
  std::string first;
  EXPECT_EQ(flags_as_fields("--audio-path 'x.wav': 1 channel; --frame-rate 0 and --image", &first),
            "audio_path 'x.wav': 1 channel; fps 0 and images");
  EXPECT_EQ(first, "audio_path");
  EXPECT_EQ(flags_as_fields("a-b --not-a-flag-at-word-end x--y"), "a-b not_a_flag_at_word_end x--y");
}

}  // namespace
}  // namespace ltx::server::pipeline_fields_test
