#pragma once
// A VideoService held in memory, for driving the HTTP routes over real sockets without the job
// store, the scheduler or the engine. The test moves jobs through their states (set_state,
// complete) as a worker would; every change bumps the job's version and wakes waiters.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/video_service.h"

namespace ltx::server::test {

class InMemoryVideoService : public VideoService {
 public:
  explicit InMemoryVideoService(std::string dir) : dir_(std::move(dir)) {}

  // What the test can turn.
  std::atomic<bool> queue_full{false};
  std::atomic<bool> ready{true};
  std::atomic<bool> models_throw{false};
  // False: thumbnails are answered as a server built without image I/O answers them (400).
  std::atomic<bool> makes_thumbnails{true};

  Job create(const CreateBody& body) override {
    std::string prompt;
    std::vector<std::string> fields;
    if (body.multipart) {
      for (const FormPart& p : body.parts) {
        if (p.name == "prompt") prompt = p.content;
        fields.push_back(p.name.substr(0, p.name.find('[')));
      }
    } else {
      const auto j = nlohmann::json::parse(body.json, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        throw ApiError(400, "invalid_json", "the body is not a JSON object");
      if (j.contains("prompt") && j["prompt"].is_string()) prompt = j["prompt"].get<std::string>();
      for (const auto& [k, v] : j.items()) fields.push_back(k);
    }
    static const std::vector<std::string> known = {"prompt",          "model", "size",
                                                   "seconds",         "seed",  "negative_prompt",
                                                   "input_reference", "images"};
    for (const std::string& f : fields)
      if (std::find(known.begin(), known.end(), f) == known.end())
        throw ApiError(422, "unknown_field", "unknown field '" + f + "'", f);
    if (prompt.empty()) throw ApiError(400, "missing_field", "'prompt' is required", "prompt");
    if (queue_full) {
      ApiError e(429, "queue_full", "the queue is full");
      e.retry_after_s = 7;
      throw e;
    }
    std::lock_guard lock(mu_);
    bodies_.push_back(body);
    Entry e;
    e.job.seq = ++seq_;
    e.job.id = "video_" + hex(32);
    e.job.status = JobStatus::Queued;
    e.job.model = "ltx-demo";
    e.job.prompt = prompt;
    e.job.size = "64x64";
    e.job.seconds = "1";
    e.job.created_at = 1700000000 + e.job.seq;
    e.job.download_token = hex(32);
    e.version = 1;
    const Job job = e.job;
    jobs_[job.id] = std::move(e);
    cv_.notify_all();
    return job;
  }

  std::optional<Job> get(const std::string& id) override {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    return it->second.job;
  }

  ListPage list(const ListQuery& q) override {
    std::lock_guard lock(mu_);
    std::vector<Job> all;
    for (const auto& [id, e] : jobs_) all.push_back(e.job);
    std::sort(all.begin(), all.end(), [&](const Job& a, const Job& b) {
      return q.ascending ? a.seq < b.seq : a.seq > b.seq;
    });
    size_t start = 0;
    if (!q.after.empty()) {
      const auto it =
          std::find_if(all.begin(), all.end(), [&](const Job& j) { return j.id == q.after; });
      if (it == all.end()) throw ApiError(400, "invalid_value", "no video " + q.after, "after");
      start = static_cast<size_t>(it - all.begin()) + 1;
    }
    ListPage page;
    for (size_t i = start; i < all.size() && page.data.size() < static_cast<size_t>(q.limit); ++i)
      page.data.push_back(all[i]);
    page.has_more = start + page.data.size() < all.size();
    return page;
  }

  bool remove(const std::string& id) override {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return false;
    if (!it->second.file.empty()) std::remove(it->second.file.c_str());
    if (!it->second.thumbnail_file.empty()) std::remove(it->second.thumbnail_file.c_str());
    jobs_.erase(it);
    cv_.notify_all();
    return true;
  }

  std::optional<Job> cancel(const std::string& id) override {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    if (is_terminal(it->second.job.status))
      throw ApiError(409, "video_finished", id + " already ended");
    it->second.job.status = JobStatus::Cancelled;
    ++it->second.version;
    cv_.notify_all();
    return it->second.job;
  }

  std::optional<ContentFile> content(const std::string& id, ContentVariant variant) override {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    if (variant == ContentVariant::Thumbnail && !makes_thumbnails)
      throw ApiError(400, "unsupported_variant", "this server makes no thumbnails", "variant");
    if (it->second.job.status != JobStatus::Completed)
      throw ApiError(409, "video_not_ready", id + " is not completed yet");
    if (variant == ContentVariant::Thumbnail) {
      if (it->second.thumbnail_file.empty())
        throw ApiError(404, "thumbnail_not_found", id + " has no thumbnail", "variant");
      return ContentFile{it->second.thumbnail_file,
                         static_cast<int64_t>(it->second.thumbnail_bytes.size()), "image/png",
                         "\"thumbnail-etag-" + id + "\""};
    }
    return ContentFile{it->second.file, static_cast<int64_t>(it->second.bytes.size()), "video/mp4",
                       "\"etag-" + id + "\""};
  }

  std::optional<JobSnapshot> wait_for_change(const std::string& id, uint64_t seen,
                                             std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] {
      const auto it = jobs_.find(id);
      return stopping_ || it == jobs_.end() || it->second.version != seen;
    });
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    return JobSnapshot{it->second.version, it->second.job};
  }

  bool stopping() const override { return stopping_; }

  std::string models_json() override {
    if (models_throw) throw std::runtime_error("secret internal detail");
    return R"({"object":"list","data":[{"id":"ltx-demo","object":"model","demo":true,)"
           R"("defaults":{"size":"64x64","seconds":"1"},"limits":{"max_width":512,"max_height":512}}]})";
  }
  Readiness readiness() override {
    return ready ? Readiness{true, R"({"status":"ready"})"}
                 : Readiness{false, R"({"status":"loading"})"};
  }
  std::string metrics_text() override {
    return "# TYPE ltx_queue_depth gauge\nltx_queue_depth 0\n";
  }
  std::string download_token(const std::string& id) override {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    return it == jobs_.end() ? std::string() : it->second.job.download_token;
  }

  // --- the worker's side
  void set_state(const std::string& id, JobStatus status, int progress) {
    std::lock_guard lock(mu_);
    auto& e = jobs_.at(id);
    e.job.status = status;
    e.job.progress = progress;
    if (status == JobStatus::Failed) e.job.error = JobError{"generation_error", "it broke"};
    ++e.version;
    cv_.notify_all();
  }
  // Writes the output file (and the thumbnail, when given) and marks the job completed.
  void complete(const std::string& id, const std::string& bytes,
                const std::string& thumbnail = {}) {
    const std::string path = dir_ + "/" + id + ".mp4";
    std::ofstream(path, std::ios::binary) << bytes;
    const std::string thumbnail_path = thumbnail.empty() ? "" : dir_ + "/" + id + ".png";
    if (!thumbnail.empty()) std::ofstream(thumbnail_path, std::ios::binary) << thumbnail;
    std::lock_guard lock(mu_);
    auto& e = jobs_.at(id);
    e.file = path;
    e.bytes = bytes;
    e.thumbnail_file = thumbnail_path;
    e.thumbnail_bytes = thumbnail;
    e.job.status = JobStatus::Completed;
    e.job.progress = 100;
    e.job.completed_at = 1700001000;
    e.job.metrics_json = R"({"inference_time_s":1.5})";
    ++e.version;
    cv_.notify_all();
  }
  void stop() {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  std::vector<CreateBody> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::vector<std::string> ids() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& [id, e] : jobs_) out.push_back(id);
    return out;
  }

 private:
  struct Entry {
    Job job;
    uint64_t version = 0;
    std::string file, bytes;
    std::string thumbnail_file, thumbnail_bytes;  // empty: completed without a thumbnail
  };
  std::string hex(int n) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < n; ++i) s += digits[rng_() % 16];
    return s;
  }

  std::string dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> jobs_;
  std::vector<CreateBody> bodies_;
  int64_t seq_ = 0;
  bool stopping_ = false;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace ltx::server::test
