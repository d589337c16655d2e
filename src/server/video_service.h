#pragma once
// What the HTTP routes (server/routes_*.cpp) ask of the server, and nothing about HTTP: the routes
// turn requests into these calls and the results (or ApiError) into responses. The server's
// implementation sits on the job store, the scheduler and the engine; tests may drive the routes
// over another implementation.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "server/job.h"

namespace ltx::server {

// One part of a multipart/form-data body (text fields have an empty filename), or, for a JSON
// body, nothing: CreateBody carries the JSON text instead.
struct FormPart {
  std::string name, content, filename, content_type;
};
struct CreateBody {
  bool multipart = false;
  std::string json;              // the body when !multipart
  std::vector<FormPart> parts;   // in the order they were sent, when multipart
};

struct ListQuery {
  int limit = 20;      // 1..100
  std::string after;   // a job id: the page starts after it (in the chosen order)
  bool ascending = false;
};
struct ListPage {
  std::vector<Job> data;
  bool has_more = false;
};

enum class ContentVariant { Video, Thumbnail };
// A finished job's file, to be streamed with Range support.
struct ContentFile {
  std::string path;          // absolute, inside the data dir
  int64_t bytes = 0;
  std::string content_type;  // video/mp4, image/png
  std::string etag;          // the quoted sha256 of the bytes
};

// The state of a job as its event stream reports it: every change bumps `version`.
struct JobSnapshot {
  uint64_t version = 0;
  Job job;
};

class VideoService {
 public:
  virtual ~VideoService() = default;

  // Validates, stores and queues a job; returns it as stored (status queued). Throws ApiError:
  // 400 malformed, 404 unknown model, 413 too large, 422 impossible, 429 queue full (with
  // retry_after_s), 503 draining.
  virtual Job create(const CreateBody& body) = 0;
  virtual std::optional<Job> get(const std::string& id) = 0;
  // Throws ApiError 400 for an unknown `after`.
  virtual ListPage list(const ListQuery& query) = 0;
  // Cancels a queued job at once, a running one at its next step boundary, then removes the job and
  // its files. False when there is no such job.
  virtual bool remove(const std::string& id) = 0;
  // Stops a queued or running job, keeping it as `cancelled`. Nullopt when there is no such job;
  // ApiError 409 when it already ended.
  virtual std::optional<Job> cancel(const std::string& id) = 0;
  // Nullopt when there is no such job; ApiError 409 (code video_not_ready) until it completed.
  // Thumbnail: ApiError 404 (thumbnail_not_found) for a job completed without one (by an older
  // server), 400 (unsupported_variant) when the server cannot make them (no image I/O).
  virtual std::optional<ContentFile> content(const std::string& id, ContentVariant variant) = 0;
  // Waits until the job's version differs from `seen` (or its first snapshot when seen is 0), or
  // `timeout` passes, or the service stops. Nullopt when there is no such job (any more).
  virtual std::optional<JobSnapshot> wait_for_change(const std::string& id, uint64_t seen,
                                                     std::chrono::milliseconds timeout) = 0;
  // True when the service is shutting down: event streams and waits end.
  virtual bool stopping() const = 0;

  // The served models (the body of GET /v1/models, JSON text).
  virtual std::string models_json() = 0;
  // GET /ready: ready (models loaded) or not, with a JSON body either way.
  struct Readiness {
    bool ready = false;
    std::string json;
  };
  virtual Readiness readiness() = 0;
  // GET /metrics in the Prometheus text format.
  virtual std::string metrics_text() = 0;

  // The download token of a job, for ?token= on content and events (empty when no such job).
  virtual std::string download_token(const std::string& id) = 0;
};

}  // namespace ltx::server
