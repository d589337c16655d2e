// The /v1/videos routes (docs/SERVER.md, "Endpoints") over a VideoService: create (JSON or
// multipart), retrieve, list, content (with Range), delete, cancel, the event stream and the
// synchronous create.
#include <fcntl.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/api_error.h"
#include "server/api_json.h"
#include "server/routes.h"

namespace ltx::server {

namespace {

using Clock = std::chrono::steady_clock;
using Handler = httplib::Server::Handler;
using ReaderHandler = httplib::Server::HandlerWithContentReader;
constexpr const char* kJson = "application/json";

ApiError video_not_found(const std::string& id) {
  // Only an id of the right form is echoed: anything else is request text of any length.
  const std::string which = is_job_id(id) ? "'" + id + "'" : "with that id";
  return ApiError(404, "not_found",
                  "No video found " + which + " (ids look like video_ followed by 32 hex digits)",
                  "id");
}

// The job id of a /v1/videos/{id}... path, checked against the id form before any lookup.
std::string path_id(const httplib::Request& req) {
  const std::string id = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  if (!is_job_id(id)) throw video_not_found(id);
  return id;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An integer query parameter in [lo, hi], or `fallback` when absent; 400 naming it otherwise.
int int_param(const httplib::Request& req, const std::string& name, int fallback, int lo, int hi) {
  if (!req.has_param(name.c_str())) return fallback;
  const std::string v = req.get_param_value(name.c_str());
  const int n = all_digits(v) ? std::stoi(v) : -1;
  if (n < lo || n > hi)
    throw ApiError(400, "invalid_value",
                   "'" + name + "' must be an integer from " + std::to_string(lo) + " to " +
                       std::to_string(hi),
                   name);
  return n;
}

// The body of a create: multipart parts in the order they were sent (the SDK's `images[][…]` groups
// depend on it), else the raw text, which the request parser reads as JSON. Nullopt when the
// library already answered (413 over --max-body-bytes, 400 for a broken multipart body).
std::optional<CreateBody> read_create_body(const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader, int max_parts) {
  CreateBody body;
  bool too_many_parts = false;
  bool ok = true;
  if (req.is_multipart_form_data()) {
    body.multipart = true;
    ok = reader(
        [&](const httplib::MultipartFormData& part) {
          if (static_cast<int>(body.parts.size()) >= max_parts) {
            too_many_parts = true;
            return false;
          }
          body.parts.push_back({part.name, {}, part.filename, part.content_type});
          return true;
        },
        [&](const char* data, size_t n) {
          body.parts.back().content.append(data, n);
          return true;
        });
  } else {
    ok = reader([&](const char* data, size_t n) {
      body.json.append(data, n);
      return true;
    });
  }
  if (!ok) close_connection_after(req);
  if (too_many_parts)
    throw ApiError(400, "too_many_parts",
                   "the multipart body has more than " + std::to_string(max_parts) + " parts");
  if (ok) return body;
  if (res.status >= 400) return std::nullopt;
  throw ApiError(400, "bad_request", "the request body could not be read");
}

// A finished job's file, streamed from an open descriptor (a delete that unlinks it meanwhile does
// not cut the download short). With `ranges`, a Range header is honoured (206 / 416).
void send_file(const httplib::Request& req, httplib::Response& res, const std::string& id,
               const ContentFile& file, bool ranges) {
  const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ApiError(404, "not_found", "the file of " + id + " is gone (it was deleted)");
  auto closer = std::shared_ptr<void>(nullptr, [fd](void*) { ::close(fd); });
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw ApiError(500, "internal_error", "cannot read the file of " + id);
  const auto size = static_cast<int64_t>(st.st_size);

  if (ranges) res.set_header("Accept-Ranges", "bytes");
  if (!file.etag.empty()) {
    res.set_header("ETag", file.etag);
    if (req.get_header_value("If-None-Match") == file.etag) {
      const_cast<httplib::Request&>(req).ranges.clear();
      res.status = 304;
      return;
    }
  }
  auto& req_ranges = const_cast<httplib::Request&>(req).ranges;
  if (!ranges) req_ranges.clear();
  if (fix_content_ranges(req_ranges, size) == RangeFix::NotSatisfiable) {
    send_api_error(req, res,
                   ApiError(416, "range_not_satisfiable",
                            "the Range is outside the file of " + id + " (" + std::to_string(size) +
                                " bytes)"));
    res.set_header("Content-Range", "bytes */" + std::to_string(size));
    return;
  }
  if (size == 0) {
    res.set_content(std::string(), file.content_type);
    return;
  }
  res.set_content_provider(static_cast<size_t>(size), file.content_type,
                           [fd, closer](size_t offset, size_t length, httplib::DataSink& sink) {
                             char buf[64 * 1024];
                             while (length > 0) {
                               const ssize_t n = ::pread(fd, buf, std::min(length, sizeof(buf)),
                                                         static_cast<off_t>(offset));
                               if (n <= 0) return false;
                               if (!sink.write(buf, static_cast<size_t>(n))) return false;
                               offset += static_cast<size_t>(n);
                               length -= static_cast<size_t>(n);
                             }
                             return true;
                           });
}

// Counts a slot of a capped resource (event streams, sync waits) for as long as it lives.
class Slot {
 public:
  Slot(std::shared_ptr<std::atomic<int>> count, int max, const char* what, int retry_after_s)
      : count_(std::move(count)) {
    if (count_->fetch_add(1) >= max) {
      count_->fetch_sub(1);
      ApiError e(429, "too_many_requests",
                 std::string("too many ") + what + " are open (at most " + std::to_string(max) +
                     "); retry later");
      e.retry_after_s = retry_after_s;
      throw e;
    }
  }
  ~Slot() { count_->fetch_sub(1); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  std::shared_ptr<std::atomic<int>> count_;
};

std::string sse_event(const JobSnapshot& snap) {
  const std::string name = is_terminal(snap.job.status)
                               ? std::string("video.") + to_string(snap.job.status)
                               : std::string("video.updated");
  return "id: " + std::to_string(snap.version) + "\nevent: " + name +
         "\ndata: " + video_json(snap.job).dump() + "\n\n";
}

void add_events_route(HttpServer& http, VideoService& service, const RouteOptions& options) {
  auto streams = std::make_shared<std::atomic<int>>(0);
  http.routes().Get(
      R"(/v1/videos/([^/]+)/events)",
      [&http, &service, options, streams](const httplib::Request& req, httplib::Response& res) {
        const std::string id = path_id(req);
        if (!service.get(id)) throw video_not_found(id);
        // The slot lives as long as the response's provider: released by the library's releaser.
        auto slot = std::make_shared<Slot>(streams, options.max_event_streams, "event streams", 5);
        struct State {
          uint64_t seen = 0;
          bool sent_first = false;  // the first snapshot goes out whatever its version
          Clock::time_point last_write = Clock::now();
        };
        auto state = std::make_shared<State>();
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [&http, &service, options, id, state](size_t, httplib::DataSink& sink) {
              const auto write = [&](const std::string& text) {
                state->last_write = Clock::now();
                return sink.write(text.data(), text.size());
              };
              if (http.stopping() || service.stopping()) {
                write("event: server.shutdown\ndata: {}\n\n");
                sink.done();
                return true;
              }
              if (!sink.is_writable()) return false;
              const auto since = Clock::now() - state->last_write;
              const auto to_ping = std::chrono::duration_cast<std::chrono::milliseconds>(
                  options.sse_ping_interval - since);
              const auto wait =
                  std::clamp(to_ping, std::chrono::milliseconds(1), options.poll_interval);
              const auto snap = service.wait_for_change(id, state->seen, wait);
              if (!snap) {
                write("event: video.deleted\ndata: {\"id\":\"" + id + "\",\"deleted\":true}\n\n");
                sink.done();
                return true;
              }
              if (!state->sent_first || snap->version != state->seen) {
                state->sent_first = true;
                state->seen = snap->version;
                if (!write(sse_event(*snap))) return false;
                if (is_terminal(snap->job.status)) sink.done();
                return true;
              }
              if (Clock::now() - state->last_write >= options.sse_ping_interval)
                return write(": ping\n\n");
              return true;
            },
            [slot](bool) {});
      });
}

void add_sync_route(HttpServer& http, VideoService& service, const RouteOptions& options) {
  auto waits = std::make_shared<std::atomic<int>>(0);
  const auto run = [&http, &service, options, waits](const httplib::Request& req,
                                                     httplib::Response& res,
                                                     const CreateBody& body) {
    const int timeout_s =
        int_param(req, "timeout_s", options.sync_timeout_s, 1, options.max_sync_timeout_s);
    Slot slot(waits, options.max_sync_waits, "synchronous requests", 5);
    const Job created = service.create(body);
    const std::string& id = created.id;
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    uint64_t seen = 0;
    for (;;) {
      if (http.stopping() || service.stopping()) {
        ApiError e(503, "server_stopping",
                   "the server is stopping; " + id + " is kept: GET /v1/videos/" + id +
                       " once it is back");
        e.retry_after_s = 5;
        throw e;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0)
        throw ApiError(504, "timeout",
                       "no result within " + std::to_string(timeout_s) + " s; " + id +
                           " goes on: poll GET /v1/videos/" + id + " (or raise ?timeout_s=)");
      const auto snap = service.wait_for_change(id, seen, std::min(left, options.poll_interval));
      if (!snap) throw ApiError(404, "not_found", id + " was deleted while the request waited");
      seen = snap->version;
      const Job& job = snap->job;
      if (job.status == JobStatus::Completed) {
        const auto file = service.content(id, ContentVariant::Video);
        if (!file) throw video_not_found(id);
        res.set_header("X-Video-Id", id);
        send_file(req, res, id, *file, false);
        return;
      }
      if (job.status == JobStatus::Failed) {
        const std::string code = job.error ? job.error.value().code : "generation_error";
        const std::string message = job.error ? job.error.value().message : "the job failed";
        ApiError e(500, code, id + " failed: " + message);
        throw e;
      }
      if (job.status == JobStatus::Cancelled)
        throw ApiError(409, "video_cancelled", id + " was cancelled before it completed");
    }
  };
  http.routes().Post(
      "/v1/videos/sync",
      ReaderHandler([run, options](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
        const auto body = read_create_body(req, res, reader, options.max_form_parts);
        if (body) run(req, res, *body);
      }));
  http.routes().Post("/v1/videos/sync",
                     Handler([run](const httplib::Request& req, httplib::Response& res) {
                       run(req, res, CreateBody{});
                     }));
}

}  // namespace

void add_video_routes(HttpServer& http, VideoService& service, const RouteOptions& options) {
  auto& r = http.routes();
  const int max_parts = options.max_form_parts;

  r.Post("/v1/videos",
         ReaderHandler([&service, max_parts](const httplib::Request& req, httplib::Response& res,
                                             const httplib::ContentReader& reader) {
           const auto body = read_create_body(req, res, reader, max_parts);
           if (body) res.set_content(video_json(service.create(*body)).dump(), kJson);
         }));
  // A POST without a body never reaches the reader handler; the request parser says what is
  // missing.
  r.Post("/v1/videos", Handler([&service](const httplib::Request&, httplib::Response& res) {
           res.set_content(video_json(service.create(CreateBody{})).dump(), kJson);
         }));
  add_sync_route(http, service, options);

  r.Get("/v1/videos", [&service](const httplib::Request& req, httplib::Response& res) {
    ListQuery q;
    q.limit = int_param(req, "limit", 20, 1, 100);
    if (req.has_param("order")) {
      const std::string order = req.get_param_value("order");
      if (order != "asc" && order != "desc")
        throw ApiError(400, "invalid_value", "'order' must be asc or desc", "order");
      q.ascending = order == "asc";
    }
    if (req.has_param("after")) {
      q.after = req.get_param_value("after");
      if (!is_job_id(q.after))
        throw ApiError(400, "invalid_value",
                       "'after' must be a video id (video_ followed by 32 hex digits)", "after");
    }
    const ListPage page = service.list(q);
    std::string data;
    for (const Job& job : page.data) data += (data.empty() ? "" : ",") + video_json(job).dump();
    const auto id_or_null = [](const std::string& id) { return nlohmann::json(id).dump(); };
    const std::string first = page.data.empty() ? "null" : id_or_null(page.data.front().id);
    const std::string last = page.data.empty() ? "null" : id_or_null(page.data.back().id);
    res.set_content(R"({"object":"list","data":[)" + data + R"(],"first_id":)" + first +
                        R"(,"last_id":)" + last + R"(,"has_more":)" +
                        (page.has_more ? "true" : "false") + "}",
                    kJson);
  });

  r.Get(R"(/v1/videos/([^/]+))", [&service](const httplib::Request& req, httplib::Response& res) {
    const std::string id = path_id(req);
    const auto job = service.get(id);
    if (!job) throw video_not_found(id);
    res.set_content(video_json(*job).dump(), kJson);
  });

  r.Delete(R"(/v1/videos/([^/]+))", [&service](const httplib::Request& req,
                                               httplib::Response& res) {
    const std::string id = path_id(req);
    if (!service.remove(id)) throw video_not_found(id);
    res.set_content(
        nlohmann::json{{"id", id}, {"object", "video.deleted"}, {"deleted", true}}.dump(), kJson);
  });

  r.Post(R"(/v1/videos/([^/]+)/cancel)",
         [&service](const httplib::Request& req, httplib::Response& res) {
           const std::string id = path_id(req);
           const auto job = service.cancel(id);
           if (!job) throw video_not_found(id);
           res.set_content(video_json(*job).dump(), kJson);
         });

  r.Get(R"(/v1/videos/([^/]+)/content)",
        [&service](const httplib::Request& req, httplib::Response& res) {
          const std::string id = path_id(req);
          ContentVariant variant = ContentVariant::Video;
          if (req.has_param("variant")) {
            const std::string v = req.get_param_value("variant");
            if (v == "thumbnail") {
              variant = ContentVariant::Thumbnail;
            } else if (v != "video") {
              throw ApiError(400, "invalid_value",
                             "'variant' must be video or thumbnail (spritesheet is not served)",
                             "variant");
            }
          }
          const auto file = service.content(id, variant);
          if (!file) throw video_not_found(id);
          send_file(req, res, id, *file, true);
        });

  add_events_route(http, service, options);
}

}  // namespace ltx::server
