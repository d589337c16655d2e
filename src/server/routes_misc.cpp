// The routes beside /v1/videos: /v1/models, /health, /ready, /metrics and the web page
// (/ and /assets/*, compiled into the binary), and add_routes, which registers them all.
#include <httplib.h>

#include <string>

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

  r.Get("/metrics", [&service](const httplib::Request&, httplib::Response& res) {
    res.set_content(service.metrics_text(), "text/plain; version=0.0.4");
  });

  r.Get("/", [](const httplib::Request& req, httplib::Response& res) {
    send_asset(req, res, "index.html");
  });
  r.Get(R"(/assets/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    send_asset(req, res, req.matches[1].str());
  });
}

void add_routes(HttpServer& http, VideoService& service, const RouteOptions& options) {
  http.set_download_token_lookup(
      [&service](const std::string& id) { return service.download_token(id); });
  add_video_routes(http, service, options);
  add_misc_routes(http, service);
}

}  // namespace ltx::server
