#pragma once
// POST /v1/videos bodies (JSON or multipart/form-data) turned into a checked VideoRequest, the
// request stored with a job (its JSON, without the uploaded bytes) and what a worker hands the
// engine (generate::GenerateOptions). No sockets, no engine runs; uploaded video and audio files
// are written to scratch files to be probed (upload_media.h), held by the request.
//
// Errors are ApiError (docs/SERVER.md, "Endpoints"): 400 when the body is malformed (bad JSON, a
// wrong type, a missing or empty prompt, a duplicated scalar part, two fields that contradict each
// other, a pipeline's required field missing) or an uploaded video / audio file cannot be used
// (`invalid_media`, `time_range_outside_clip`), 404 `model_not_found`, 413 for an upload over the
// byte limit, 422 when the request cannot be done (unknown fields, all named in one error;
// out-of-range sizes, frames or seconds; a flag or field the pipeline does not use; an image that
// is not a bounded PNG/JPEG; a remote URL; an unknown pipeline or LoRA name).
//
// The pipelines: each one `ltx generate` runs and the engine serves; a pipeline's own inputs are
// the fields of pipeline_fields() (named as the CLI flags), its output format follows its kind
// (default_output_format).
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
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "server/upload_media.h"
#include "server/video_service.h"

namespace ltx::server {

// A pipeline's defaults as the served model runs it when the request does not say.
struct PipelineDefaults {
  int64_t width = 0, height = 0, num_frames = 0;
  double fps = 24.0;
  std::optional<int64_t> steps;  // stage-1 steps of the guided pipelines; none for distilled
  int64_t input_audio_channels = 0;  // a2vid: the soundtrack's channels the model takes (0: any)
};

// What a request may ask of the model; above these it gets a 422 (images over the byte limit 413).
struct RequestLimits {
  int64_t max_width = 2048, max_height = 2048, max_frames = 257;
  int64_t max_prompt_chars = 5000;  // Unicode code points, for prompt and negative_prompt
  int64_t max_images = 8;
  int64_t max_image_bytes = 20 << 20;
  int64_t max_image_pixels = 16'000'000;
  int64_t max_media_bytes = 64 << 20;  // one uploaded video or audio file
  double max_media_seconds = 600.0;    // its duration as the container declares it
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

// An uploaded video or audio file (a file part) and the pipeline field it is: "video_path",
// "audio_path", "video_conditioning", "conditioning_attention_mask" (docs/SERVER.md).
struct RequestMedia {
  std::string field;
  std::string bytes;  // empty in a request read back from JSON: the store keeps the files
  double strength = 1.0;  // video_conditioning, conditioning_attention_mask
  MediaHeader header;     // what the check found (ext, duration, size, frames, rate)
  // The bytes as a file while the request is checked (the pipeline's own checks read files);
  // null in a request read back from JSON.
  std::shared_ptr<const ScratchFile> scratch;
  // A tar of EXR frames (header.ext "tar"): the frames unpacked, which the checks read as the
  // EXR frame folder `ltx generate` takes; null otherwise.
  std::shared_ptr<const ScratchFolder> frames;
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
  std::vector<RequestMedia> media;   // in the order of the pipeline's fields
  std::map<std::string, double> field_values;  // the pipeline's Number / Flag fields given
  // What the job writes: "mp4" (video + audio), "wav" (t2a: audio only), "png" (one frame) or
  // "exr" (hdr-ic-lora: a tar of its EXR frame folder and sRGB preview, docs/SERVER.md).
  std::string output_format = "mp4";
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

// The request as stored with its job and back (a queued job survives a restart). The image and
// media bytes are left out: the JSON keeps each image's order, format, size, frame, strength and
// CRF, and each media file's field, strength and probed facts.
nlohmann::json to_json(const VideoRequest& request);
// Throws ltx::Error naming the field when `j` is not what to_json writes.
VideoRequest video_request_from_json(const nlohmann::json& j);

// What the engine runs for the request: its options with images[i] conditioning from
// input_files[i] and media[j] read from input_files[images.size() + j] (the job's stored input
// files, images first, in order). The request's LoRAs and `generate_audio` are not
// GenerateOptions fields: the engine runner applies them.
generate::GenerateOptions to_generate_options(const VideoRequest& request,
                                              const std::vector<std::string>& input_files);

// The fields of POST /v1/videos that belong to some pipelines only, named as `ltx generate`'s
// flags (snake_case), with the pipelines that take them. The reader, the stored request, GET
// /v1/models and the errors all go by this table (video_request.cpp): a new pipeline's inputs join
// as entries of it.
enum class FieldType {
  Number,         // a number (JSON number or form text)
  Flag,           // true / false
  Video,          // one video file part
  Audio,          // one audio file part
  VideoList,      // [{video, strength}] (form: field[][video], field[][strength]) or bare file parts
  VideoStrength,  // {video, strength} (form: field[video], field[strength])
  Embeddings,     // one safetensors file part (hdr-ic-lora's precomputed text contexts)
};
const char* field_type_name(FieldType type);  // "number", "boolean", "video file", ...
// A field's value as apply() gets it: the number (flags: 0 or 1) or the files (path, strength).
struct FieldValue {
  double number = 0.0;
  std::vector<std::pair<std::string, double>> files;
};
struct PipelineField {
  std::string name;                    // "video_path"
  std::vector<std::string> pipelines;  // {"retake"}
  FieldType type = FieldType::Number;
  bool required = false;
  std::string description;
  // Puts the value into the options the engine runs (the CLI flag's field).
  std::function<void(generate::GenerateOptions&, const FieldValue&)> apply;
  // A media field whose clip gives the job its size / its frame count and rate: the request then
  // takes no size / width / height, or no seconds / num_frames / fps / auto_duration.
  bool sets_size = false, sets_duration = false;
  // A media field whose clip gives the job its frame rate alone (hdr-ic-lora): the request takes
  // num_frames or seconds (counted at the clip's rate), no fps / auto_duration.
  bool sets_rate = false;
  // A video field that also takes, in an `hdr` request, a tar of EXR frames (the EXR frame folder
  // of `ltx generate --hdr`); such a clip has no frame rate: a field that sets the duration then
  // takes `fps`.
  bool takes_exr_frames = false;
};
const std::vector<PipelineField>& pipeline_fields();

// The output format a pipeline writes by default for `num_frames` frames: "wav" for the pipelines
// without video, "exr" for hdr-ic-lora (its only one) and for an `hdr` request (its master: EXR
// frames and HLG MP4), "png" for one frame, else "mp4".
std::string default_output_format(const std::string& pipeline, int64_t num_frames,
                                  bool hdr = false);
// Whether a pipeline's requests take size / width / height (not where a field's clip sets it, not
// the audio-only pipelines) and seconds / num_frames / fps (not where a field's clip sets them).
bool takes_size(const std::string& pipeline);
bool takes_duration(const std::string& pipeline);
// The content type of an output file name's extension: video/mp4, audio/wav, image/png,
// application/x-tar.
std::string content_type_of(const std::string& file_name);

// An engine message in the API's words: `ltx generate`'s flags become the request's field names
// ("--audio-path" -> "audio_path", "--frame-rate" -> "fps"); `first_field` gets the field a
// message starting with a flag is about.
std::string flags_as_fields(const std::string& message, std::string* first_field = nullptr);

// "4" for 4.0, "4.04" for 97 / 24: seconds with 2 decimals, trailing zeros dropped.
std::string format_seconds(double seconds);

}  // namespace ltx::server
