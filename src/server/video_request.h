#pragma once
// POST /v1/videos bodies (JSON or multipart/form-data) turned into a checked VideoRequest, the
// request stored with a job (its JSON, without the image bytes) and what a worker hands the engine
// (generate::GenerateOptions). Pure: no sockets, no files, no engine runs.
//
// Errors are ApiError (docs/SERVER.md, "Endpoints"): 400 when the body is malformed (bad JSON, a
// wrong type, a missing or empty prompt, a duplicated scalar part, two fields that contradict each
// other), 404 `model_not_found`, 413 for an image over the byte limit, 422 when the request cannot
// be done (unknown fields, all named in one error; out-of-range sizes, frames or seconds; a flag
// the pipeline does not use; an upload that is not a bounded PNG/JPEG; a remote URL; an unknown
// pipeline or LoRA name).
//
// Mapping, each change recorded in VideoRequest::adjustments:
//   - fps: `fps`, else the pipeline's default.
//   - `seconds` -> frames: n = ceil(seconds * fps), frames = 8 * ceil((n - 1) / 8) + 1 (4 s at 24
//   fps
//     -> 97 frames); `num_frames` is taken as given and must be 8k + 1, as `ltx generate` checks
//     it.
//   - `size` "WxH" is snapped to the pipeline's multiple (64 two-stage, 32 one-stage) the way
//     `ltx generate` suggests it (720x1280 -> 704x1280); `width` / `height` must already fit.
//   - Sizes and frame counts above the model's limits are refused, never clamped.
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "server/video_service.h"

namespace ltx::server {

// A pipeline's defaults as the served model runs it when the request does not say.
struct PipelineDefaults {
  int64_t width = 0, height = 0, num_frames = 0;
  double fps = 24.0;
  std::optional<int64_t> steps;  // stage-1 steps of the guided pipelines; none for distilled
};

// What a request may ask of the model; above these it gets a 422 (images over the byte limit 413).
struct RequestLimits {
  int64_t max_width = 2048, max_height = 2048, max_frames = 257;
  int64_t max_prompt_chars = 5000;  // Unicode code points, for prompt and negative_prompt
  int64_t max_images = 8;
  int64_t max_image_bytes = 20 << 20;
  int64_t max_image_pixels = 16'000'000;
};

// The served model as requests see it; the server fills it from the engine at start.
struct ServedModel {
  std::string id;  // "ltx-demo" for the demo bundle, e.g. "ltx-2.3-22b" otherwise
  bool demo = false;
  std::vector<std::string> pipelines;  // the canonical names (pipelines::pipeline_name)
  std::string default_pipeline;
  std::map<std::string, PipelineDefaults> defaults;  // by pipeline name, one per entry of pipelines
  RequestLimits limits;
  std::vector<std::string> loras;  // the --lora-library names a request may use
  bool duration_head = false;      // whether `auto_duration` can run
};

// A value the server changed from what was asked, e.g. {"size", "720x1280", "704x1280", "the
// two-stage pipeline needs multiples of 64"}.
struct Adjustment {
  std::string param, requested, used, reason;
  // "size 720x1280 -> 704x1280 (the two-stage pipeline needs multiples of 64)"
  std::string text() const;
};

// A conditioning image: its file bytes (PNG or JPEG, checked) and where it conditions.
struct RequestImage {
  std::string bytes;   // empty in a request read back from JSON: the store keeps the files
  std::string format;  // "png" or "jpeg"
  int64_t width = 0, height = 0;
  int64_t frame_index = 0;
  double strength = 1.0;
  std::optional<int> crf;
};

// A LoRA of the server's library, by name.
struct RequestLora {
  std::string name;
  double strength = 1.0;
};

// A checked request. `options` holds every generation setting resolved (pipeline, size, frames,
// fps, seed, steps of the guided pipelines, guidance, ...) and has passed generate::
// validate_options; it carries no output path, device, model files or images (those are `images`).
struct VideoRequest {
  std::string model;  // the served model's id
  generate::GenerateOptions options;
  std::vector<RequestImage> images;  // in the order they were sent; input_reference first
  std::vector<RequestLora> loras;
  bool generate_audio = true;
  std::vector<Adjustment> adjustments;
  std::string size;     // "WxH" generated
  std::string seconds;  // the duration generated (frames / fps, 2 decimals, no trailing zeros);
                        // "auto" when the duration head picks it
  // Jobs whose keys are equal may be denoised as one batch (same model, pipeline, shape, steps,
  // guidance passes, image frames, LoRA set, audio). Empty: the job always runs alone.
  std::string batch_key;
};

// The body of a create request, checked against the served model. Throws ApiError.
VideoRequest parse_create(const CreateBody& body, const ServedModel& model);

// The request as stored with its job and back (a queued job survives a restart). The image bytes
// are left out: the JSON keeps each image's order, format, size, frame, strength and CRF.
nlohmann::json to_json(const VideoRequest& request);
// Throws ltx::Error naming the field when `j` is not what to_json writes.
VideoRequest video_request_from_json(const nlohmann::json& j);

// What the engine runs for the request: its options with images[i] conditioning from
// image_files[i] (the job's stored input files, one per image, in order). The request's LoRAs and
// `generate_audio` are not GenerateOptions fields: the engine runner applies them.
generate::GenerateOptions to_generate_options(const VideoRequest& request,
                                              const std::vector<std::string>& image_files);

// "4" for 4.0, "4.04" for 97 / 24: seconds with 2 decimals, trailing zeros dropped.
std::string format_seconds(double seconds);

}  // namespace ltx::server
