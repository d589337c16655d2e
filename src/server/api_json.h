#pragma once
// The JSON bodies of the video API (docs/SERVER.md, "Endpoints"): the Video object, the list page,
// the delete answer and the model list. The Video object has every field of the OpenAI SDK's
// `Video` type (id, object, model, status, progress, created_at, completed_at, expires_at, error,
// prompt, remixed_from_video_id, seconds, size) and then ours: the settings used, timings,
// `adjustments` and, once completed, `download_url`.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/job.h"
#include "server/video_request.h"
#include "server/video_service.h"

namespace ltx::server {

// What the scheduler knows of a job that the store does not hold.
struct JobLive {
  std::optional<int64_t> queue_position;  // 0 = next to run; queued jobs only
  std::string stage;                      // the running stage ("text encoding", "stage 1", ...)
};

// The Video object of a job. Its settings come from job.request_json (a VideoRequest) and its
// timings from job.metrics_json; either may be empty (e.g. in tests) and is then left out.
nlohmann::json video_json(const Job& job, const JobLive& live = {});
// {"object": "list", "data": [Video...], "first_id", "last_id", "has_more"} (ids null when empty).
nlohmann::json list_json(const ListPage& page);
// {"id", "object": "video.deleted", "deleted": true}, as the SDK's delete() expects.
nlohmann::json deleted_json(const std::string& id);
// GET /v1/models: {"object": "list", "data": [{id, object: "model", created, owned_by, demo,
// pipelines, default_pipeline, defaults, limits, loras}]}; `created` in unix seconds.
nlohmann::json models_json(const ServedModel& model, int64_t created);
// The content URL a page or client can fetch without headers: /v1/videos/{id}/content?token=...
std::string download_url(const Job& job);
// The job's event stream for an EventSource (which sends no headers): /v1/videos/{id}/events?token=
std::string events_url(const Job& job);

}  // namespace ltx::server
