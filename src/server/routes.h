#pragma once
// The routes of `ltx serve` (docs/SERVER.md, "Endpoints"): /v1/videos*, /v1/models, /health,
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

// The event stream of GET /v1/videos/{id}/events (text/event-stream, never compressed):
//   - on connect the job's state, then one event per change (changes between two reads coalesce
//     into the latest): "id: <version>\nevent: video.updated\ndata: <Video JSON>\n\n";
//   - the terminal state as event video.completed, video.failed or video.cancelled, then the end;
//   - video.deleted when the job goes away, server.shutdown when the server stops, then the end;
//   - ": ping" (a comment) every sse_ping_interval while nothing changes.
//
// Registers every route on `http` (`service` must outlive `http`), and the service's download
// tokens for `?token=` on content and events. Throws ltx::Error when the stream and sync caps
// would leave no HTTP thread for other requests.
void add_routes(HttpServer& http, VideoService& service, const RouteOptions& options = {});

// The two halves of add_routes (routes_videos.cpp, routes_misc.cpp).
void add_video_routes(HttpServer& http, VideoService& service, const RouteOptions& options);
void add_misc_routes(HttpServer& http, VideoService& service);

}  // namespace ltx::server
