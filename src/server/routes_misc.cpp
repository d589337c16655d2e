// The routes beside /v1/videos: /v1/models, /health, /ready, /metrics and the web page
// (/ and /assets/*, compiled into the binary), and add_routes, which registers them all.
#include <httplib.h>

#include <string>

#include "core/error.h"
#include "server/api_error.h"
#include "server/routes.h"
#include "server/web_assets.h"

namespace ltx::server {

namespace {

// The page may load only its own files: no CDN, no inline script.
constexpr const char* kPagePolicy = "default-src 'self'";

void send_asset(const httplib::Request& req, httplib::Response& res, const std::string& name) {
  const WebAsset* asset = find_web_asset(name);
  if (asset == nullptr)
    throw ApiError(404, "not_found", "no page asset '" + name.substr(0, 64) + "'");
  const std::string etag(asset->etag);
  res.set_header("Content-Security-Policy", kPagePolicy);
  res.set_header("Cache-Control", "no-cache");  // revalidate through the ETag: a new build shows
  res.set_header("ETag", etag);
  if (req.get_header_value("If-None-Match") == etag) {
    res.status = 304;
    return;
  }
  res.set_content(std::string(asset->bytes), std::string(asset->content_type));
}

}  // namespace

void add_misc_routes(HttpServer& http, VideoService& service) {
  auto& r = http.routes();
  add_health_route(r);

  r.Get("/ready", [&service](const httplib::Request&, httplib::Response& res) {
    const VideoService::Readiness ready = service.readiness();
    res.status = ready.ready ? 200 : 503;
    if (!ready.ready) res.set_header("Retry-After", "5");
    res.set_content(ready.json, "application/json");
  });

  r.Get("/v1/models", [&service](const httplib::Request&, httplib::Response& res) {
    res.set_content(service.models_json(), "application/json");
  });

  r.Get("/metrics", [&http, &service](const httplib::Request&, httplib::Response& res) {
    res.set_content(service.metrics_text() + http.metrics_text(), "text/plain; version=0.0.4");
  });

  r.Get("/", [](const httplib::Request& req, httplib::Response& res) {
    send_asset(req, res, "index.html");
  });
  r.Get(R"(/assets/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    send_asset(req, res, req.matches[1].str());
  });
}

void add_routes(HttpServer& http, VideoService& service, const RouteOptions& options) {
  // Each event stream and sync wait holds a pool thread; the pool must keep some for the rest.
  const int held = options.max_event_streams + options.max_sync_waits;
  if (options.max_event_streams < 1 || options.max_sync_waits < 1 || held >= http.options().threads)
    throw Error("--max-event-streams " + std::to_string(options.max_event_streams) +
                " + --max-sync-waits " + std::to_string(options.max_sync_waits) +
                " must be at least 1 each and together below --http-threads " +
                std::to_string(http.options().threads) +
                " (each open stream or sync request holds one HTTP thread)");
  http.set_download_token_lookup(
      [&service](const std::string& id) { return service.download_token(id); });
  add_video_routes(http, service, options);
  add_misc_routes(http, service);
}

}  // namespace ltx::server
