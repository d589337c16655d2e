// Create bodies (JSON and the OpenAI SDKs' multipart forms) to checked VideoRequests: the 400 /
// 404 / 413 / 422 split of docs/SERVER.md, "Endpoints", the seconds and size mapping, images, and
// the stored-request round trip. Pure: no sockets, no engine.
#include "server/video_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "media/image.h"
#include "media/support.h"
#include "server/api_error.h"
#include "server/upload_test_util.h"

namespace ltx::server::video_request_test {
namespace {

using json = nlohmann::json;
using test::form;
using test::image_part;
using test::text;
using test::base64;
using test::data_url;
using test::jpeg;
using test::png;
using test::png_header;

ServedModel served() {
  ServedModel m;
  m.id = "ltx-2.3-22b";
  m.pipelines = {"distilled", "one-stage", "two-stage", "two-stage-hq"};
  m.default_pipeline = "two-stage";
  m.defaults["distilled"] = {768, 512, 121, 24.0, std::nullopt};
  m.defaults["one-stage"] = {768, 512, 121, 24.0, 30};
  m.defaults["two-stage"] = {768, 512, 121, 24.0, 30};
  m.defaults["two-stage-hq"] = {768, 512, 121, 24.0, 15};
  m.loras = {"style", "camera"};
  return m;
}

CreateBody json_body(const json& j) {
  CreateBody b;
  b.json = j.dump();
  return b;
}
CreateBody raw_json(std::string text) {
  CreateBody b;
  b.json = std::move(text);
  return b;
}

VideoRequest parse(const CreateBody& b, const ServedModel& m = served()) {
  return parse_create(b, m);
}

struct ErrorCase {
  std::string name;
  CreateBody body;
  int status;
  std::string code, param, message_part;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

class CreateErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(CreateErrors, AnswerWithTheStatusCodeAndField) {
  const ErrorCase& c = GetParam();
  try {
    parse(c.body);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), c.status) << e.what();
    EXPECT_EQ(e.code(), c.code) << e.what();
    EXPECT_EQ(e.param(), c.param) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos) << e.what();
  }
}

std::vector<ErrorCase> error_cases() {
  const std::string p5001(5001, 'a');
  std::string euro5001;  // 5001 code points of three bytes each
  for (int i = 0; i < 5001; ++i) euro5001 += "\xE2\x82\xAC";
  return {
      // 400: malformed
      {"BadJson", raw_json("{\"prompt\": "), 400, "invalid_json", "", "not valid JSON"},
      {"JsonNotAnObject", raw_json("[1, 2]"), 400, "invalid_json", "", "JSON object"},
      // Found by fuzz_server_request: nlohmann reports a number too large for a double as
      // out_of_range, not as a parse error (tests/fuzz/regressions/server_request/).
      {"JsonNumberOutOfRange", raw_json("{\"prompt\": \"x\", \"seed\": 1e999}"), 400,
       "invalid_json", "", "not valid JSON"},
      {"PromptMissing", json_body({{"size", "768x512"}}), 400, "missing_required_parameter",
       "prompt", "prompt is required"},
      {"PromptCheckedFirst", json_body({{"pipeline", "fast"}, {"model", "sora-2"}}), 400,
       "missing_required_parameter", "prompt", "required"},
      {"PromptEmpty", json_body({{"prompt", ""}}), 400, "empty_prompt", "prompt", "empty"},
      {"PromptBlank", json_body({{"prompt", " \n\t"}}), 400, "empty_prompt", "prompt", "empty"},
      {"PromptNull", json_body({{"prompt", nullptr}}), 400, "missing_required_parameter", "prompt",
       "required"},
      {"PromptNumber", json_body({{"prompt", 3}}), 400, "invalid_type", "prompt", "a string"},
      {"FormPromptMissing", form({text("seconds", "4")}), 400, "missing_required_parameter",
       "prompt", "required"},
      {"FormPromptBadUtf8", form({text("prompt", "a\xC3\x28 b")}), 400, "invalid_encoding",
       "prompt", "UTF-8"},
      {"FormPromptOverlongUtf8", form({text("prompt", "\xC0\xAF")}), 400, "invalid_encoding",
       "prompt", "UTF-8"},
      {"FormPromptSurrogate", form({text("prompt", "\xED\xA0\x80")}), 400, "invalid_encoding",
       "prompt", "UTF-8"},
      {"FormPromptAsAFile", form({image_part("prompt", "a cat", "p.txt", "text/plain")}), 400,
       "invalid_type", "prompt", "a file"},
      {"JsonSeedString", json_body({{"prompt", "x"}, {"seed", "1"}}), 400, "invalid_type", "seed",
       "an integer"},
      {"JsonSeedFraction", json_body({{"prompt", "x"}, {"seed", 1.5}}), 400, "invalid_type", "seed",
       "an integer"},
      {"FormSeedFraction", form({text("prompt", "x"), text("seed", "1.5")}), 400, "invalid_type",
       "seed", "an integer"},
      {"FormSeedWord", form({text("prompt", "x"), text("seed", "one")}), 400, "invalid_type",
       "seed", "\"one\""},
      {"FormDuplicatedScalar", form({text("prompt", "x"), text("seed", "1"), text("seed", "2")}),
       400, "duplicate_field", "seed", "more than once"},
      {"JsonDuplicatedKey", raw_json(R"({"prompt": "x", "seed": 1, "seed": 2})"), 400,
       "duplicate_field", "seed", "more than once"},
      {"JsonDuplicatedNestedKey",
       raw_json(R"({"prompt": "x", "loras": [{"name": "style", "name": "camera"}]})"), 400,
       "duplicate_field", "name", "more than once"},
      {"FormDuplicatedPrompt", form({text("prompt", "x"), text("prompt", "y")}), 400,
       "duplicate_field", "prompt", "more than once"},
      {"FormBadBool", form({text("prompt", "x"), text("generate_audio", "yes")}), 400,
       "invalid_type", "generate_audio", "true, false, 1 or 0"},
      {"JsonBoolAsString", json_body({{"prompt", "x"}, {"enhance_prompt", "true"}}), 400,
       "invalid_type", "enhance_prompt", "a boolean"},
      {"FormNumberWithTrailingText", form({text("prompt", "x"), text("fps", "24fps")}), 400,
       "invalid_type", "fps", "a number"},
      {"FormBadBrackets", form({text("prompt", "x"), text("images[[image]", "a")}), 400,
       "invalid_field_name", "images[[image]", "unsupported shape"},
      {"FormTwoShapes", form({text("prompt", "x"), text("seed", "1"), text("seed[]", "2")}), 400,
       "invalid_field_name", "seed", "two shapes"},
      {"SizeNotWxH", json_body({{"prompt", "x"}, {"size", "big"}}), 400, "invalid_value", "size",
       "WIDTHxHEIGHT"},
      {"SizeAndWidth", json_body({{"prompt", "x"}, {"size", "768x512"}, {"width", 768}}), 400,
       "conflicting_fields", "size", "not both"},
      {"SecondsAndFrames", json_body({{"prompt", "x"}, {"seconds", "4"}, {"num_frames", 97}}), 400,
       "conflicting_fields", "seconds", "not both"},
      {"GuidanceAliasConflict",
       json_body({{"prompt", "x"}, {"guidance_scale", 3}, {"video_cfg_guidance_scale", 4}}), 400,
       "conflicting_fields", "guidance_scale", "video_cfg_guidance_scale"},
      {"ExtraBodyDuplicate", json_body({{"prompt", "x"}, {"extra_body", {{"prompt", "y"}}}}), 400,
       "duplicate_field", "prompt", "extra_body"},
      {"ExtraBodyNotAnObject", json_body({{"prompt", "x"}, {"extra_body", 3}}), 400, "invalid_type",
       "extra_body", "JSON object"},
      {"FormExtraBodyBadJson", form({text("prompt", "x"), text("extra_body", "{seed")}), 400,
       "invalid_json", "extra_body", "not valid JSON"},
      {"FormExtraBodyNumberOutOfRange",
       form({text("prompt", "x"), text("extra_body", "{\"seed\": -1e999}")}), 400,
       "invalid_json", "extra_body", "not valid JSON"},
      {"ImagesNotAnArray", json_body({{"prompt", "x"}, {"images", "a"}}), 400, "invalid_type",
       "images", "an array"},
      {"ImageWithoutImage", json_body({{"prompt", "x"}, {"images", {{{"frame_index", 0}}}}}), 400,
       "missing_required_parameter", "images[0]", "[image] is required"},
      // 404
      {"UnknownModel", json_body({{"prompt", "x"}, {"model", "sora-2"}}), 404, "model_not_found",
       "model", "'ltx-2.3-22b'"},
      // 422: impossible
      {"PromptTooLong", json_body({{"prompt", p5001}}), 422, "string_above_max_length", "prompt",
       "5001 characters"},
      {"PromptTooLongInCodePoints", json_body({{"prompt", euro5001}}), 422,
       "string_above_max_length", "prompt", "5001 characters"},
      {"NegativePromptTooLong", json_body({{"prompt", "x"}, {"negative_prompt", p5001}}), 422,
       "string_above_max_length", "negative_prompt", "at most 5000"},
      {"UnknownFields",
       form({text("prompt", "x"), text("quality", "high"), image_part("images[][image]", png()),
             text("images[][bogus]", "1"), text("output_path", "/etc/x")}),
       422, "unknown_field", "images[][bogus]",
       "unknown fields: images[][bogus], output_path, quality"},
      {"UnknownJsonField", json_body({{"prompt", "x"}, {"checkpoint_path", "/m"}}), 422,
       "unknown_field", "checkpoint_path", "unknown field: checkpoint_path"},
      {"UnknownFieldInExtraBody", json_body({{"prompt", "x"}, {"extra_body", {{"flow_shift", 3}}}}),
       422, "unknown_field", "flow_shift", "flow_shift"},
      {"UnknownLoraMember",
       json_body({{"prompt", "x"}, {"loras", {{{"name", "style"}, {"path", "/x"}}}}}), 422,
       "unknown_field", "loras[][path]", "loras[][path]"},
      {"NumFramesNot8kPlus1", json_body({{"prompt", "x"}, {"num_frames", 30}}), 422,
       "invalid_value", "num_frames", "e.g. 25"},
      {"FormNumFramesNot8kPlus1", form({text("prompt", "x"), text("num_frames", "30")}), 422,
       "invalid_value", "num_frames", "num_frames 30 must be 8k + 1"},
      {"NumFramesAboveLimit", json_body({{"prompt", "x"}, {"num_frames", 265}}), 422,
       "invalid_value", "num_frames", "limit of 257"},
      {"SecondsZero", json_body({{"prompt", "x"}, {"seconds", "0"}}), 422, "invalid_value",
       "seconds", "must be positive"},
      {"SecondsNegative", json_body({{"prompt", "x"}, {"seconds", -1}}), 422, "invalid_value",
       "seconds", "must be positive"},
      {"SecondsHuge", json_body({{"prompt", "x"}, {"seconds", 1e9}}), 422, "invalid_value",
       "seconds", "limit of 257"},
      {"FormSecondsHuge", form({text("prompt", "x"), text("seconds", "1e9")}), 422, "invalid_value",
       "seconds", "limit of 257"},
      {"SecondsJustAboveLimit", json_body({{"prompt", "x"}, {"seconds", "10.75"}}), 422,
       "invalid_value", "seconds", "258 frames"},
      {"SecondsWord", json_body({{"prompt", "x"}, {"seconds", "four"}}), 400, "invalid_type",
       "seconds", "a number of seconds"},
      {"FpsZero", json_body({{"prompt", "x"}, {"fps", 0}}), 422, "invalid_value", "fps",
       "must be positive"},
      {"SizeZero", json_body({{"prompt", "x"}, {"size", "0x512"}}), 422, "invalid_value", "size",
       "at least 1x1"},
      {"SizeAboveLimit", json_body({{"prompt", "x"}, {"size", "4096x512"}}), 422, "invalid_value",
       "size", "limit of 2048"},
      {"WidthNotAMultiple", json_body({{"prompt", "x"}, {"width", 720}}), 422, "invalid_value",
       "width", "width 720 must be a positive multiple of 64 for the two-stage pipeline"},
      {"OneStageWidthNotAMultiple",
       json_body({{"prompt", "x"}, {"pipeline", "one-stage"}, {"height", 500}}), 422,
       "invalid_value", "height", "multiple of 32"},
      {"GuidanceOnDistilled",
       json_body({{"prompt", "x"}, {"pipeline", "distilled"}, {"guidance_scale", 3}}), 422,
       "invalid_value", "", "the distilled pipeline runs without guidance"},
      {"NegativePromptOnDistilled",
       json_body({{"prompt", "x"}, {"pipeline", "distilled"}, {"negative_prompt", "blur"}}), 422,
       "invalid_value", "", "negative_prompt and the guidance scale flags do not apply"},
      {"StepsOnDistilled",
       json_body({{"prompt", "x"}, {"pipeline", "distilled"}, {"num_inference_steps", 8}}), 422,
       "invalid_value", "num_inference_steps", "fixed 8 + 3 step schedules"},
      {"StepsZero", json_body({{"prompt", "x"}, {"num_inference_steps", 0}}), 422, "invalid_value",
       "num_inference_steps", "at least 1"},
      {"TemporalRoundsOffDfr", json_body({{"prompt", "x"}, {"temporal_upsample_rounds", 1}}), 422,
       "invalid_value", "temporal_upsample_rounds", "pipeline dfr"},
      {"CacheUnknownMode", json_body({{"prompt", "x"}, {"cache", "teacache"}}), 422,
       "invalid_value", "cache", "fbcache"},
      {"CacheNotAString", json_body({{"prompt", "x"}, {"cache", 1}}), 400, "invalid_type", "cache",
       "\"fbcache\""},
      {"CacheOnDistilled",
       json_body({{"prompt", "x"}, {"pipeline", "distilled"}, {"cache", "fbcache"}}), 422,
       "invalid_value", "cache", "distilled"},
      {"CacheThresholdWithoutCache", json_body({{"prompt", "x"}, {"cache_threshold", 0.1}}), 422,
       "invalid_value", "cache_threshold", "add cache \"fbcache\""},
      {"CacheThresholdNegative",
       json_body({{"prompt", "x"}, {"cache", "fbcache"}, {"cache_threshold", -1}}), 422,
       "invalid_value", "cache_threshold", "cache_threshold"},
      {"UnknownPipeline", json_body({{"prompt", "x"}, {"pipeline", "dfr"}}), 422, "invalid_value",
       "pipeline", "use one of: distilled, one-stage, two-stage, two-stage-hq"},
      {"BadPipelineName", json_body({{"prompt", "x"}, {"pipeline", "fast"}}), 422, "invalid_value",
       "pipeline", "'fast'"},
      {"UnknownLora", json_body({{"prompt", "x"}, {"loras", {{{"name", "/tmp/x.safetensors"}}}}}),
       422, "invalid_value", "loras[0][name]", "use one of: style, camera"},
      {"LoraTwice",
       json_body({{"prompt", "x"}, {"loras", {{{"name", "style"}}, {{"name", "style"}}}}}), 422,
       "invalid_value", "loras[1][name]", "twice"},
      {"AutoDurationWithoutHead", json_body({{"prompt", "x"}, {"auto_duration", {2, 5}}}), 422,
       "invalid_value", "auto_duration", "duration head"},
      {"RemoteImageUrl",
       json_body({{"prompt", "x"}, {"images", {{{"image", "http://example.com/a.png"}}}}}), 422,
       "unsupported_url", "images[0][image]", "does not fetch URLs"},
      {"RemoteInputReference",
       form({text("prompt", "x"), text("input_reference[image_url]", "https://x/a.png")}), 422,
       "unsupported_url", "input_reference", "does not fetch URLs"},
      {"InputReferenceFileId", form({text("prompt", "x"), text("input_reference[file_id]", "f1")}),
       422, "unsupported_value", "input_reference[file_id]", "keeps no files"},
      {"TextAsInputReference",
       form({text("prompt", "x"), image_part("input_reference", "hello, world", "a.txt", "text/plain")}),
       422, "invalid_image", "input_reference", "not a PNG, JPEG or OpenEXR image"},
      {"TruncatedPng", form({text("prompt", "x"), image_part("input_reference", png().substr(0, 40))}),
       422, "invalid_image", "input_reference", "cannot be decoded"},
      {"HugePngHeader",
       form({text("prompt", "x"), image_part("input_reference", png_header(20000, 20000))}), 422,
       "image_too_many_pixels", "input_reference", "20000x20000"},
      {"DataUrlNotBase64", json_body({{"prompt", "x"}, {"images", {{{"image", "data:,abc"}}}}}),
       422, "invalid_image", "images[0][image]", "base64"},
      {"DataUrlBadBase64",
       json_body({{"prompt", "x"}, {"images", {{{"image", "data:image/png;base64,@@@@"}}}}}), 422,
       "invalid_image", "images[0][image]", "base64"},
      {"ImageFrameOutside",
       json_body({{"prompt", "x"},
                  {"num_frames", 9},
                  {"images", {{{"image", data_url(png())}, {"frame_index", 9}}}}}),
       422, "invalid_value", "images[0][frame_index]", "[0, 9)"},
      {"ImageStrengthOutside",
       json_body({{"prompt", "x"}, {"images", {{{"image", data_url(png())}, {"strength", 1.5}}}}}),
       422, "invalid_value", "images[0][strength]", "[0, 1]"},
      {"ImageCrfOutside",
       json_body({{"prompt", "x"}, {"images", {{{"image", data_url(png())}, {"crf", 60}}}}}), 422,
       "invalid_value", "images[0][crf]", "[0, 51]"},
  };
}

INSTANTIATE_TEST_SUITE_P(VideoRequest, CreateErrors, ::testing::ValuesIn(error_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(VideoRequest, DefaultsOfThePipeline) {
  const VideoRequest r = parse(json_body({{"prompt", "a cat"}}));
  EXPECT_EQ(r.model, "ltx-2.3-22b");
  EXPECT_EQ(r.options.pipeline, "two-stage");
  EXPECT_EQ(r.options.prompt, "a cat");
  EXPECT_EQ(r.size, "768x512");
  EXPECT_EQ(*r.options.num_frames, 121);
  EXPECT_EQ(*r.options.frame_rate, 24.0);
  EXPECT_EQ(r.seconds, "5.04");
  EXPECT_EQ(*r.options.seed, 10);
  EXPECT_EQ(*r.options.num_inference_steps, 30);
  EXPECT_TRUE(r.generate_audio);
  EXPECT_TRUE(r.adjustments.empty());
  EXPECT_TRUE(r.options.output_path.empty());
  EXPECT_TRUE(r.options.models.empty());
  EXPECT_FALSE(r.batch_key.empty());
}

TEST(VideoRequest, SizeIsSnappedWithAnAdjustment) {
  const VideoRequest r = parse(json_body({{"prompt", "x"}, {"size", "720x1280"}}));
  EXPECT_EQ(r.size, "704x1280");
  EXPECT_EQ(*r.options.width, 704);
  EXPECT_EQ(*r.options.height, 1280);
  ASSERT_EQ(r.adjustments.size(), 1u);
  EXPECT_EQ(r.adjustments[0].text(),
            "size 720x1280 -> 704x1280 (the two-stage pipeline needs multiples of 64)");
  // one-stage snaps to 32, a half rounding up as `ltx generate`'s suggestion
  const VideoRequest one =
      parse(json_body({{"prompt", "x"}, {"size", "720x1280"}, {"pipeline", "one-stage"}}));
  EXPECT_EQ(one.size, "736x1280");
  ASSERT_EQ(one.adjustments.size(), 1u);
  EXPECT_EQ(one.adjustments[0].reason, "the one-stage pipeline needs multiples of 32");
  const VideoRequest fits =
      parse(json_body({{"prompt", "x"}, {"size", "704x1280"}, {"pipeline", "one-stage"}}));
  EXPECT_EQ(fits.size, "704x1280");
  EXPECT_TRUE(fits.adjustments.empty());
  // a tiny size goes up to one multiple
  EXPECT_EQ(parse(json_body({{"prompt", "x"}, {"size", "10x10"}})).size, "64x64");
}

TEST(VideoRequest, SecondsAsTextOrNumberGiveTheSameFrames) {
  for (const CreateBody& b : {json_body({{"prompt", "x"}, {"seconds", "4"}}),
                              json_body({{"prompt", "x"}, {"seconds", 4}}),
                              form({text("prompt", "x"), text("seconds", "4")})}) {
    const VideoRequest r = parse(b);
    EXPECT_EQ(*r.options.num_frames, 97);
    EXPECT_EQ(r.seconds, "4.04");
    ASSERT_EQ(r.adjustments.size(), 1u);
    EXPECT_EQ(r.adjustments[0].param, "seconds");
    EXPECT_EQ(r.adjustments[0].requested, "4");
    EXPECT_EQ(r.adjustments[0].used, "4.04");
  }
  EXPECT_EQ(*parse(json_body({{"prompt", "x"}, {"seconds", "1"}})).options.num_frames, 25);
  EXPECT_EQ(*parse(json_body({{"prompt", "x"}, {"seconds", "8"}})).options.num_frames, 193);
  EXPECT_EQ(*parse(json_body({{"prompt", "x"}, {"seconds", 0.01}})).options.num_frames, 1);
  // a duration that is already 8k + 1 frames needs no adjustment
  const VideoRequest exact = parse(json_body({{"prompt", "x"}, {"seconds", "1"}, {"fps", 25}}));
  EXPECT_EQ(*exact.options.num_frames, 25);
  EXPECT_EQ(exact.seconds, "1");
  EXPECT_TRUE(exact.adjustments.empty());
  // the limit itself is allowed: 257 frames = 10.71 s at 24 fps
  EXPECT_EQ(*parse(json_body({{"prompt", "x"}, {"seconds", "10.7"}})).options.num_frames, 257);
}

TEST(VideoRequest, ExplicitFramesAndSizeAreTakenAsGiven) {
  const VideoRequest r =
      parse(json_body({{"prompt", "x"}, {"num_frames", 9}, {"width", 128}, {"height", 64}}));
  EXPECT_EQ(*r.options.num_frames, 9);
  EXPECT_EQ(r.size, "128x64");
  EXPECT_EQ(r.seconds, "0.38");
  EXPECT_TRUE(r.adjustments.empty());
}

TEST(VideoRequest, FormScalarsAreParsedFromText) {
  const VideoRequest r =
      parse(form({text("prompt", "x"), text("seed", "-7"), text("fps", "12.5"),
                  text("num_inference_steps", "3"), text("generate_audio", "false"),
                  text("enhance_prompt", "0"), text("video_stg_blocks", "28,29"),
                  text("audio_stg_blocks[]", "1"), text("audio_stg_blocks[]", "2")}));
  EXPECT_EQ(*r.options.seed, -7);
  EXPECT_EQ(*r.options.frame_rate, 12.5);
  EXPECT_EQ(*r.options.num_inference_steps, 3);
  EXPECT_FALSE(r.generate_audio);
  EXPECT_FALSE(r.options.enhance_prompt);
  EXPECT_EQ(*r.options.video_guidance.stg_blocks, (std::vector<int64_t>{28, 29}));
  EXPECT_EQ(*r.options.audio_guidance.stg_blocks, (std::vector<int64_t>{1, 2}));
}

TEST(VideoRequest, GuidanceFieldsByTheirFlagNames) {
  const VideoRequest r = parse(json_body({{"prompt", "x"},
                                          {"guidance_scale", 3.5},
                                          {"video_stg_guidance_scale", 1},
                                          {"video_rescale_scale", 0.7},
                                          {"a2v_guidance_scale", 3},
                                          {"video_skip_step", 1},
                                          {"audio_cfg_guidance_scale", 7},
                                          {"v2a_guidance_scale", 2},
                                          {"negative_prompt", "blur"}}));
  EXPECT_EQ(*r.options.video_guidance.cfg, 3.5);
  EXPECT_EQ(*r.options.video_guidance.stg, 1.0);
  EXPECT_EQ(*r.options.video_guidance.rescale, 0.7);
  EXPECT_EQ(*r.options.video_guidance.modality, 3.0);
  EXPECT_EQ(*r.options.video_guidance.skip_step, 1);
  EXPECT_EQ(*r.options.audio_guidance.cfg, 7.0);
  EXPECT_EQ(*r.options.audio_guidance.modality, 2.0);
  EXPECT_EQ(*r.options.negative_prompt, "blur");
  // both names with one value are fine
  EXPECT_EQ(
      *parse(json_body({{"prompt", "x"}, {"guidance_scale", 3}, {"video_cfg_guidance_scale", 3}}))
           .options.video_guidance.cfg,
      3.0);
}

TEST(VideoRequest, DistilledHasNoSteps) {
  const VideoRequest r = parse(json_body({{"prompt", "x"}, {"pipeline", "distilled"}}));
  EXPECT_EQ(r.options.pipeline, "distilled");
  EXPECT_FALSE(r.options.num_inference_steps);
  // '_' is accepted for '-' and the canonical name kept
  EXPECT_EQ(parse(json_body({{"prompt", "x"}, {"pipeline", "two_stage_hq"}})).options.pipeline,
            "two-stage-hq");
}

TEST(VideoRequest, ModelMayNameTheServedModelAndNullMeansUnset) {
  EXPECT_EQ(parse(json_body({{"prompt", "x"}, {"model", "ltx-2.3-22b"}})).model, "ltx-2.3-22b");
  EXPECT_EQ(parse(json_body({{"prompt", "x"}, {"model", nullptr}, {"seed", nullptr}})).options.seed,
            10);
}

TEST(VideoRequest, ExtraBodyIsMerged) {
  const VideoRequest j =
      parse(json_body({{"prompt", "x"}, {"extra_body", {{"seed", 5}, {"num_frames", 9}}}}));
  EXPECT_EQ(*j.options.seed, 5);
  EXPECT_EQ(*j.options.num_frames, 9);
  // in a form it is JSON text, typed strictly as JSON
  const VideoRequest f = parse(
      form({text("prompt", "x"), text("extra_body", R"({"seed": 6, "pipeline": "one-stage"})")}));
  EXPECT_EQ(*f.options.seed, 6);
  EXPECT_EQ(f.options.pipeline, "one-stage");
}

TEST(VideoRequest, SdkImageGroupsKeepTheirOrder) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const VideoRequest r = parse(
      form({text("prompt", "x"), text("num_frames", "25"), image_part("images[][image]", png(16, 8)),
            text("images[][frame_index]", "0"), text("images[][strength]", "0.5"),
            image_part("images[][image]", jpeg(24, 16), "b.jpg", "image/jpeg"),
            text("images[][frame_index]", "24"), text("images[][crf]", "0")}));
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0].format, "png");
  EXPECT_EQ(r.images[0].width, 16);
  EXPECT_EQ(r.images[0].height, 8);
  EXPECT_EQ(r.images[0].frame_index, 0);
  EXPECT_EQ(r.images[0].strength, 0.5);
  EXPECT_FALSE(r.images[0].crf);
  EXPECT_EQ(r.images[0].bytes, png(16, 8));
  EXPECT_EQ(r.images[1].format, "jpeg");
  EXPECT_EQ(r.images[1].width, 24);
  EXPECT_EQ(r.images[1].frame_index, 24);
  EXPECT_EQ(r.images[1].strength, 1.0);
  EXPECT_EQ(r.images[1].crf, 0);
}

TEST(VideoRequest, IndexedImagePartsAreOrderedByIndex) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const VideoRequest r = parse(
      form({text("prompt", "x"), text("num_frames", "25"), text("images[1][frame_index]", "8"),
            image_part("images[1][image]", png(32, 8)), image_part("images[0][image]", png(16, 8))}));
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0].width, 16);
  EXPECT_EQ(r.images[1].width, 32);
  EXPECT_EQ(r.images[1].frame_index, 8);
}

TEST(VideoRequest, InputReferenceIsFrameZeroFirst) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  // the SDK's file part
  const VideoRequest f = parse(form({text("prompt", "x"), image_part("input_reference", png())}));
  ASSERT_EQ(f.images.size(), 1u);
  EXPECT_EQ(f.images[0].frame_index, 0);
  EXPECT_EQ(f.images[0].strength, 1.0);
  // input_reference[image_url] as a data URL, then an image list after it
  const VideoRequest u =
      parse(form({text("prompt", "x"), text("num_frames", "9"),
                  text("input_reference[image_url]", data_url(jpeg(), "image/jpeg")),
                  image_part("images[][image]", png(8, 8)), text("images[][frame_index]", "8")}));
  ASSERT_EQ(u.images.size(), 2u);
  EXPECT_EQ(u.images[0].format, "jpeg");
  EXPECT_EQ(u.images[1].frame_index, 8);
  // JSON: a data URL string or {image_url}
  EXPECT_EQ(parse(json_body({{"prompt", "x"}, {"input_reference", data_url(png())}})).images.size(),
            1u);
  EXPECT_EQ(
      parse(json_body({{"prompt", "x"}, {"input_reference", {{"image_url", data_url(png())}}}}))
          .images[0]
          .format,
      "png");
}

TEST(VideoRequest, DataUrlImagesInJson) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const VideoRequest r = parse(json_body(
      {{"prompt", "x"},
       {"images", {{{"image", data_url(png(16, 8))}, {"frame_index", 0}, {"strength", 0.8}}}}}));
  ASSERT_EQ(r.images.size(), 1u);
  EXPECT_EQ(r.images[0].bytes, png(16, 8));
  EXPECT_EQ(r.images[0].strength, 0.8);
}

TEST(VideoRequest, ImageLimits) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  ServedModel m = served();
  m.limits.max_image_bytes = 100;
  try {
    parse(
        form({text("prompt", "x"), image_part("input_reference", png(64, 64) + std::string(200, '\0'))}),
        m);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 413);
    EXPECT_EQ(e.param(), "input_reference");
  }
  try {  // a data URL is measured before it is decoded
    parse(json_body({{"prompt", "x"}, {"input_reference", data_url(std::string(400, 'a'))}}), m);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 413);
  }
  m = served();
  m.limits.max_image_pixels = 100;
  try {
    parse(form({text("prompt", "x"), image_part("input_reference", png(16, 8))}), m);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_EQ(e.code(), "image_too_many_pixels");
  }
  m = served();
  m.limits.max_images = 1;
  try {
    parse(
        form({text("prompt", "x"), image_part("images[][image]", png()), image_part("images[][image]", png())}),
        m);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_EQ(e.code(), "too_many_images");
  }
  // a JPEG whose SOF declares a huge frame is refused from its header
  std::string big = jpeg();
  const size_t sof = big.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  big[sof + 5] = big[sof + 6] = big[sof + 7] = big[sof + 8] = '\x7F';
  try {
    parse(form({text("prompt", "x"), image_part("input_reference", big)}));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), "image_too_many_pixels") << e.what();
  }
}

TEST(VideoRequest, LimitsOfADemoModel) {
  ServedModel m = served();
  m.limits.max_width = m.limits.max_height = 512;
  m.limits.max_frames = 49;
  m.defaults["two-stage"] = {320, 192, 25, 24.0, 30};
  EXPECT_EQ(parse(json_body({{"prompt", "x"}, {"seconds", "2"}}), m).options.num_frames, 49);
  for (const json& j :
       {json{{"prompt", "x"}, {"seconds", "3"}}, json{{"prompt", "x"}, {"size", "576x512"}},
        json{{"prompt", "x"}, {"height", 576}}, json{{"prompt", "x"}, {"num_frames", 57}}}) {
    try {
      parse(json_body(j), m);
      FAIL() << j.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 422) << e.what();
      EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
    }
  }
}

TEST(VideoRequest, LorasByLibraryName) {
  const VideoRequest r =
      parse(form({text("prompt", "x"), text("loras[][name]", "style"),
                  text("loras[][strength]", "0.8"), text("loras[][name]", "camera")}));
  ASSERT_EQ(r.loras.size(), 2u);
  EXPECT_EQ(r.loras[0].name, "style");
  EXPECT_EQ(r.loras[0].strength, 0.8);
  EXPECT_EQ(r.loras[1].name, "camera");
  EXPECT_EQ(r.loras[1].strength, 1.0);
}

TEST(VideoRequest, AutoDurationWithADurationHead) {
  ServedModel m = served();
  m.duration_head = true;
  const VideoRequest r = parse(json_body({{"prompt", "x"}, {"auto_duration", "2,5"}}), m);
  EXPECT_EQ(r.options.auto_duration, (std::pair{2.0, 5.0}));
  EXPECT_FALSE(r.options.num_frames);
  EXPECT_EQ(r.seconds, "auto");
  EXPECT_TRUE(r.batch_key.empty());  // its frame count is only known when it runs
  EXPECT_EQ(parse(json_body({{"prompt", "x"}, {"auto_duration", {1, 2}}}), m).options.auto_duration,
            (std::pair{1.0, 2.0}));
}

TEST(VideoRequest, AutoDurationRangeIsChecked) {
  ServedModel m = served();
  m.duration_head = true;
  for (const json& range : {json{5, 2}, json{-1, 2}, json{1, 20}, json{1, 2, 3}, json("2")}) {
    try {
      parse(json_body({{"prompt", "x"}, {"auto_duration", range}}), m);
      FAIL() << range.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param(), "auto_duration") << e.what();
    }
  }
}

// Image-aware enhancement (Gemma 3's vision tower looks at the first image) is a valid request;
// a text encoder without a vision tower fails the job when it runs, naming what is needed.
TEST(VideoRequest, EnhancePromptWithImagesIsAccepted) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const auto r = parse(form(
      {text("prompt", "x"), text("enhance_prompt", "true"), image_part("input_reference", png())}));
  EXPECT_TRUE(r.options.enhance_prompt);
  EXPECT_EQ(r.images.size(), 1u);
}

TEST(VideoRequest, BatchKeySeparatesShapesNotPrompts) {
  const auto key = [](json j) {
    j["prompt"] = j.contains("prompt") ? j["prompt"] : json("x");
    return parse(json_body(j)).batch_key;
  };
  const std::string base = key({});
  EXPECT_EQ(base, key({{"prompt", "another"}, {"seed", 3}, {"negative_prompt", "n"}}));
  EXPECT_NE(base, key({{"size", "512x512"}}));
  EXPECT_NE(base, key({{"seconds", "2"}}));
  EXPECT_NE(base, key({{"num_inference_steps", 8}}));
  EXPECT_NE(base, key({{"pipeline", "one-stage"}}));
  EXPECT_NE(base, key({{"generate_audio", false}}));
  EXPECT_NE(base, key({{"loras", {{{"name", "style"}}}}}));
  EXPECT_NE(base, key({{"video_stg_guidance_scale", 0}}));
  // guidance scales are per sample: two jobs with CFG on share a key
  EXPECT_EQ(key({{"guidance_scale", 3}}), key({{"guidance_scale", 5}}));
  // Where the engine never batches, the job runs alone.
  EXPECT_TRUE(key({{"pipeline", "two-stage-hq"}}).empty());
  EXPECT_TRUE(key({{"enhance_prompt", true}}).empty());
}

TEST(VideoRequest, BatchKeySeparatesImageStrengths) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const auto key = [](const char* strength) {
    return parse(form({text("prompt", "x"), image_part("images[][image]", png()),
                       text("images[][frame_index]", "0"), text("images[][strength]", strength)}))
        .batch_key;
  };
  // The strength sets the sample's denoise mask, which the pipeline's batch key fixes.
  EXPECT_NE(key("1"), key("0.5"));
  EXPECT_EQ(key("0.5"), key("0.5"));
}

TEST(VideoRequest, StoredJsonRoundTripWithoutImageBytes) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const VideoRequest r = parse(
      form({text("prompt", "a \xE2\x82\xAC cat"), text("size", "720x1280"), text("seconds", "4"),
            text("seed", "42"), text("negative_prompt", "blur"), text("guidance_scale", "3"),
            text("video_stg_blocks", "28"), text("generate_audio", "false"),
            text("loras[][name]", "style"), text("loras[][strength]", "0.5"),
            image_part("images[][image]", png()), text("images[][frame_index]", "8"),
            text("images[][strength]", "0.25"), text("images[][crf]", "18")}));
  const json j = to_json(r);
  EXPECT_EQ(j.dump().find(base64(png()).substr(0, 40)), std::string::npos);
  const VideoRequest back = video_request_from_json(json::parse(j.dump()));
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.options.prompt, r.options.prompt);
  EXPECT_EQ(back.options.width, r.options.width);
  EXPECT_EQ(back.options.num_frames, r.options.num_frames);
  EXPECT_EQ(back.options.video_guidance.cfg, 3.0);
  EXPECT_EQ(*back.options.video_guidance.stg_blocks, (std::vector<int64_t>{28}));
  EXPECT_FALSE(back.generate_audio);
  ASSERT_EQ(back.images.size(), 1u);
  EXPECT_TRUE(back.images[0].bytes.empty());
  EXPECT_EQ(back.images[0].frame_index, 8);
  EXPECT_EQ(back.images[0].strength, 0.25);
  EXPECT_EQ(back.images[0].crf, 18);
  EXPECT_EQ(back.images[0].format, "png");
  ASSERT_EQ(back.adjustments.size(), 2u);
  EXPECT_EQ(back.adjustments[0].text(), r.adjustments[0].text());
  EXPECT_EQ(back.batch_key, r.batch_key);
  EXPECT_EQ(back.size, "704x1280");
  EXPECT_EQ(back.seconds, "4.04");
}

TEST(VideoRequest, StepCacheFieldsAsTheCliFlagsAndInTheBatchKey) {
  const VideoRequest off = parse(json_body({{"prompt", "x"}}));
  EXPECT_FALSE(off.options.step_cache.enabled());
  const VideoRequest r = parse(form({text("prompt", "x"), text("cache", "fbcache"),
                                     text("cache_threshold", "0.12"), text("cache_warmup_steps", "4"),
                                     text("cache_first_blocks", "2")}));
  EXPECT_EQ(r.options.step_cache.mode, models::transformer::StepCacheMode::FirstBlock);
  EXPECT_EQ(r.options.step_cache.threshold, 0.12);
  EXPECT_EQ(r.options.step_cache.warmup_steps, 4);
  EXPECT_EQ(r.options.step_cache.first_blocks, 2);
  EXPECT_NE(r.batch_key, off.batch_key);  // cached and uncached jobs never share a run
  const VideoRequest back = video_request_from_json(json::parse(to_json(r).dump()));
  EXPECT_EQ(back.options.step_cache.str(), r.options.step_cache.str());
  EXPECT_EQ(back.batch_key, r.batch_key);
  // A job stored before the fields existed reads back with caching off.
  json old = to_json(off);
  old.erase("step_cache");
  EXPECT_FALSE(video_request_from_json(old).options.step_cache.enabled());
}

TEST(VideoRequest, StoredJsonThatIsNotARequestIsAnError) {
  EXPECT_THROW(video_request_from_json(json{{"version", 2}}), Error);
  json j = to_json(parse(json_body({{"prompt", "x"}})));
  j.erase("pipeline");
  EXPECT_THROW(video_request_from_json(j), Error);
}

TEST(VideoRequest, GenerateOptionsConditionOnTheStoredFiles) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const VideoRequest r =
      parse(form({text("prompt", "x"), text("num_frames", "9"), image_part("input_reference", png()),
                  image_part("images[][image]", png()), text("images[][frame_index]", "8"),
                  text("images[][crf]", "0")}));
  const generate::GenerateOptions o =
      to_generate_options(r, {"/data/inputs/a/0.png", "/data/inputs/a/1.png"});
  ASSERT_EQ(o.images.size(), 2u);
  EXPECT_EQ(o.images[0].path, "/data/inputs/a/0.png");
  EXPECT_EQ(o.images[0].frame_index, 0);
  EXPECT_EQ(o.images[1].path, "/data/inputs/a/1.png");
  EXPECT_EQ(o.images[1].frame_index, 8);
  EXPECT_EQ(o.images[1].crf, 0);
  EXPECT_EQ(o.prompt, "x");
  EXPECT_EQ(*o.num_frames, 9);
  EXPECT_THROW(to_generate_options(r, {"/one"}), Error);
}

TEST(VideoRequest, FormatSeconds) {
  EXPECT_EQ(format_seconds(4.0), "4");
  EXPECT_EQ(format_seconds(97.0 / 24.0), "4.04");
  EXPECT_EQ(format_seconds(25.0 / 24.0), "1.04");
  EXPECT_EQ(format_seconds(0.5), "0.5");
  EXPECT_EQ(format_seconds(9.0 / 24.0), "0.38");
}

}  // namespace
}  // namespace ltx::server::video_request_test
