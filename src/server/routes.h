#pragma once
// The routes of `ltx serve` (docs/design/server.md, (a)): /v1/videos*, /v1/models, /health,
// /ready, /metrics and the web page, registered on an HttpServer over a VideoService. The routes
// hold no state of their own beyond the counts of open event streams and sync waits.
#include <chrono>
#include <string>

#include "server/http_server.h"
#include "server/job.h"
#include "server/video_service.h"

namespace ltx::server {

struct RouteOptions {
  int max_event_streams = 16;  // open GET .../events at once (429 beyond)
  int max_sync_waits = 4;      // POST /v1/videos/sync waiting at once (429 beyond)
  int sync_timeout_s = 600;    // POST /v1/videos/sync without ?timeout_s=
  int max_sync_timeout_s = 3600;
  int max_form_parts = 256;  // parts of a multipart create
  std::chrono::milliseconds sse_ping_interval{15000};
  // How long one wait of an event stream or a sync request lasts before it looks again at the stop
  // flags and the client (bounds how long stop() waits for them).
  std::chrono::milliseconds poll_interval{500};
};

// Registers every route on `http` (which must outlive no one: `service` outlives `http`), and the
// service's download tokens for `?token=` on content and events.
void add_routes(HttpServer& http, VideoService& service, const RouteOptions& options = {});

// The Video object of the API (the SDK's fields and ours) for a job, as JSON text.
// Kept in one function so that server/api_json.h can take its place.
std::string video_json(const Job& job);

// The two halves of add_routes (routes_videos.cpp, routes_misc.cpp).
void add_video_routes(HttpServer& http, VideoService& service, const RouteOptions& options);
void add_misc_routes(HttpServer& http, VideoService& service);

}  // namespace ltx::server
