#include "server/api_json.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "generate/generate.h"
#include "pipelines/pipeline.h"

namespace ltx::server {

namespace {

using json = nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json();
}

// A stored JSON column as an object; text that is empty or not an object gives an empty one, so
// that a GET still answers (the fields it would give are then null).
json parse_column(const std::string& text) {
  if (text.empty()) return json::object();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : json::object();
}

json member_or_null(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() ? json() : *it;
}

// Unreserved characters stay; the rest is percent-encoded (tokens are hex today).
std::string url_encode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

}  // namespace

std::string download_url(const Job& job) {
  return str("/v1/videos/", job.id, "/content?token=", url_encode(job.download_token));
}

std::string events_url(const Job& job) {
  return str("/v1/videos/", job.id, "/events?token=", url_encode(job.download_token));
}

nlohmann::json video_json(const Job& job, const JobLive& live) {
  const json request = parse_column(job.request_json);
  const json metrics = parse_column(job.metrics_json);
  json v = {
      // the OpenAI SDK's Video
      {"id", job.id},
      {"object", "video"},
      {"model", job.model},
      {"status", to_string(job.status)},
      {"progress", job.progress},
      {"created_at", job.created_at},
      {"completed_at", or_null(job.completed_at)},
      {"expires_at", or_null(job.expires_at)},
      {"error",
       job.error ? json{{"code", job.error->code}, {"message", job.error->message}} : json()},
      {"prompt", job.prompt},
      {"remixed_from_video_id", json()},
      {"seconds", job.seconds},
      {"size", job.size},
  };
  // the settings used
  v["pipeline"] = member_or_null(request, "pipeline");
  v["num_frames"] = member_or_null(request, "num_frames");
  v["fps"] = member_or_null(request, "fps");
  v["seed"] = member_or_null(request, "seed");
  v["num_inference_steps"] = member_or_null(request, "num_inference_steps");
  v["generate_audio"] = member_or_null(request, "generate_audio");
  // what download_url holds: mp4, wav or png (requests stored before it existed made MP4s)
  v["output_format"] = request.contains("output_format") ? request["output_format"]
                       : request.is_object()              ? json("mp4")
                                                          : json();
  if (request.contains("field_values")) v["pipeline_fields"] = request["field_values"];
  v["adjustments"] = request.contains("adjustments") ? request["adjustments"] : json::array();
  // where it is
  v["stage"] = live.stage.empty() ? json() : json(live.stage);
  v["queue_position"] = job.status == JobStatus::Queued ? or_null(live.queue_position) : json();
  v["started_at"] = or_null(job.started_at);
  v["attempts"] = job.attempts;
  // how it went
  v["time_to_first_step_s"] = member_or_null(metrics, "time_to_first_step_s");
  v["inference_time_s"] = member_or_null(metrics, "inference_time_s");
  v["peak_memory_mb"] = member_or_null(metrics, "peak_memory_mb");
  json timings = json::array();
  if (const auto it = metrics.find("stages"); it != metrics.end() && it->is_array())
    for (const json& s : *it)
      if (s.is_object())
        timings.push_back({{"stage", s.contains("stage") ? s["stage"] : member_or_null(s, "name")},
                           {"seconds", member_or_null(s, "seconds")}});
  v["timings"] = timings;
  v["download_url"] = job.status == JobStatus::Completed ? json(download_url(job)) : json();
  v["events_url"] = events_url(job);
  return v;
}

nlohmann::json list_json(const ListPage& page) {
  json data = json::array();
  for (const Job& j : page.data) data.push_back(video_json(j));
  return {{"object", "list"},
          {"data", data},
          {"first_id", page.data.empty() ? json() : json(page.data.front().id)},
          {"last_id", page.data.empty() ? json() : json(page.data.back().id)},
          {"has_more", page.has_more}};
}

nlohmann::json deleted_json(const std::string& id) {
  return {{"id", id}, {"object", "video.deleted"}, {"deleted", true}};
}

namespace {
// The pipeline's own fields (video_request.h's table) in the table's order, as
// [{name, type, required, description}].
json pipeline_fields_json(const std::string& pipeline) {
  json out = json::array();
  for (const PipelineField& f : pipeline_fields())
    if (std::find(f.pipelines.begin(), f.pipelines.end(), pipeline) != f.pipelines.end())
      out.push_back({{"name", f.name},
                     {"type", field_type_name(f.type)},
                     {"required", f.required},
                     {"description", f.description}});
  return out;
}
}  // namespace

nlohmann::json models_json(const ServedModel& m, int64_t created) {
  json defaults = json::object();
  for (const auto& [name, d] : m.defaults)
    defaults[name] = {{"size", str(d.width, "x", d.height)},
                      {"width", d.width},
                      {"height", d.height},
                      {"num_frames", d.num_frames},
                      {"fps", d.fps},
                      {"seconds", format_seconds(static_cast<double>(d.num_frames) / d.fps)},
                      {"num_inference_steps", or_null(d.steps)},
                      {"output_format", default_output_format(name, d.num_frames)},
                      {"takes_size", takes_size(name)},
                      {"takes_duration", takes_duration(name)},
                      {"takes_hdr", generate::takes_hdr(pipelines::parse_pipeline_kind(name))},
                      {"fields", pipeline_fields_json(name)}};
  const RequestLimits& l = m.limits;
  json limits = {{"max_width", l.max_width},
                 {"max_height", l.max_height},
                 {"max_frames", l.max_frames},
                 {"max_prompt_chars", l.max_prompt_chars},
                 {"max_images", l.max_images},
                 {"max_image_bytes", l.max_image_bytes},
                 {"max_image_pixels", l.max_image_pixels},
                 {"max_media_bytes", l.max_media_bytes},
                 {"max_media_seconds", l.max_media_seconds}};
  json model = {{"id", m.id},
                {"object", "model"},
                {"created", created},
                {"owned_by", "ltx.cpp"},
                {"demo", m.demo},
                {"pipelines", m.pipelines},
                {"default_pipeline", m.default_pipeline},
                {"defaults", defaults},
                {"limits", limits},
                {"loras", m.loras},
                {"auto_duration", m.duration_head}};
  return {{"object", "list"}, {"data", json::array({model})}};
}

}  // namespace ltx::server
