#include "server/video_server.h"

#include <ctime>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "media/support.h"
#include "server/api_error.h"
#include "server/api_json.h"

namespace ltx::server {

namespace {

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

double unix_now_precise() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

namespace {
std::vector<JobRunner*> pointers(const std::vector<std::unique_ptr<JobRunner>>& runners) {
  std::vector<JobRunner*> out;
  for (const auto& r : runners) out.push_back(r.get());
  return out;
}
}  // namespace

VideoServer::VideoServer(ServerOptions options, ServedModel model,
                         const RunnerFactory& make_runners, Metrics& metrics)
    : options_(std::move(options)),
      model_(std::move(model)),
      metrics_(metrics),
      started_at_(unix_now()),
      dir_(options_.data_dir),
      store_(dir_, options_.store),
      runners_(make_runners(dir_)),
      scheduler_(options_.scheduler, pointers(runners_), *this) {
  metrics_.gauge("ltx_queue_depth", "Jobs waiting in the queue.", [this] {
    return std::vector<std::pair<Labels, double>>{
        {{}, static_cast<double>(scheduler_.queue_length())}};
  });
  metrics_.gauge("ltx_jobs", "Jobs in the store, by status.", [this] {
    const StatusCounts c = store_.counts();
    std::vector<std::pair<Labels, double>> out;
    for (JobStatus s : {JobStatus::Queued, JobStatus::InProgress, JobStatus::Completed,
                        JobStatus::Failed, JobStatus::Cancelled})
      out.push_back({{{"status", to_string(s)}}, static_cast<double>(c[s])});
    return out;
  });
  metrics_.gauge("ltx_data_dir_bytes", "Bytes the data dir holds, by kind.", [this] {
    const DiskUsage d = dir_.disk_usage();
    return std::vector<std::pair<Labels, double>>{
        {{{"kind", "outputs"}}, static_cast<double>(d.outputs_bytes)},
        {{{"kind", "inputs"}}, static_cast<double>(d.inputs_bytes)},
        {{{"kind", "database"}}, static_cast<double>(d.database_bytes)}};
  });
  // The jobs a previous run left queued go first, before any create can queue a new one (the
  // routes may take creates while the models load, before start()).
  for (const Job& job : store_.queued()) {
    events_.publish(job);
    scheduler_.restore(job);
  }
}

VideoServer::~VideoServer() {
  drain(std::chrono::milliseconds(0));
  {
    std::lock_guard lock(janitor_mu_);
    janitor_stop_ = true;
  }
  janitor_cv_.notify_all();
  if (janitor_.joinable()) janitor_.join();
}

void VideoServer::start() {
  std::lock_guard lock(lifecycle_mu_);
  if (draining_) return;  // a stop came while the models loaded: nothing is to run
  scheduler_.start();
  janitor_ = std::thread([this] { janitor(); });
}

void VideoServer::drain(std::chrono::milliseconds grace) {
  std::lock_guard lock(lifecycle_mu_);
  draining_ = true;
  scheduler_.drain(grace);
  events_.stop();
}

void VideoServer::janitor() {
  std::unique_lock lock(janitor_mu_);
  while (!janitor_cv_.wait_for(lock, options_.janitor_interval, [&] { return janitor_stop_; })) {
    lock.unlock();
    try {
      if (const int n = store_.expire(); n > 0)
        log_info("ltx serve: retention removed ", n, " job", n == 1 ? "" : "s");
    } catch (const std::exception& e) {
      log_warn("ltx serve: retention pass failed: ", e.what());
    }
    lock.lock();
  }
}

Job VideoServer::create(const CreateBody& body) {
  // Turned away before the uploads are decoded and stored.
  scheduler_.check_admission();
  const VideoRequest r = parse_create(body, model_);
  Job j;
  j.model = r.model;
  j.prompt = r.options.prompt;
  j.request_json = to_json(r).dump();
  j.batch_key = r.batch_key;
  j.size = r.size;
  j.seconds = r.seconds;
  std::vector<NewInput> inputs;
  for (const RequestImage& im : r.images)
    inputs.push_back({InputImage{im.bytes, im.format == "jpeg" ? "jpg" : im.format}, im.frame_index,
                      im.strength, im.crf});
  for (const RequestMedia& m : r.media)
    inputs.push_back({InputImage{m.bytes, m.header.ext}, 0, m.strength, std::nullopt});
  const Job job = store_.insert(std::move(j), inputs);
  events_.publish(job);
  try {
    scheduler_.submit(job);
  } catch (...) {
    store_.remove(job.id);
    events_.remove(job.id);
    throw;
  }
  metrics_.count("ltx_jobs_created_total");
  return job;
}

std::optional<Job> VideoServer::get(const std::string& id) {
  if (!is_job_id(id)) return std::nullopt;
  return store_.get(id);
}

ListPage VideoServer::list(const ListQuery& query) {
  auto page = store_.list(query);
  if (!page)
    throw ApiError(400, "invalid_value",
                   "after: no video " + query.after + " (pass the id of a listed video)", "after");
  return *page;
}

bool VideoServer::remove(const std::string& id) {
  if (!is_job_id(id) || !store_.get(id)) return false;
  // Hidden at once; the row and files go when the worker lets go of the job.
  if (!store_.mark_deleting(id)) return false;
  {
    std::lock_guard lock(mu_);
    deleting_.insert(id);
  }
  if (scheduler_.cancel(id) != Scheduler::CancelResult::Stopping) {
    {
      std::lock_guard lock(mu_);
      deleting_.erase(id);
    }
    store_.remove(id);
  }
  events_.remove(id);
  return true;
}

std::optional<Job> VideoServer::cancel(const std::string& id) {
  const auto job = get(id);
  if (!job) return std::nullopt;
  if (is_terminal(job->status))
    throw ApiError(409, "video_already_ended",
                   "video " + id + " already ended (" + to_string(job->status) + ")");
  switch (scheduler_.cancel(id)) {
    case Scheduler::CancelResult::Removed: break;  // the listener stored it as cancelled
    case Scheduler::CancelResult::Stopping: return store_.get(id);  // stops at its next step
    case Scheduler::CancelResult::NotFound: after_transition(id, store_.cancel(id), true); break;
  }
  return store_.get(id);
}

std::optional<ContentFile> VideoServer::content(const std::string& id, ContentVariant variant) {
  const auto job = get(id);
  if (!job) return std::nullopt;
  const std::string thumbnail = dir_.thumbnail_path(id);
  std::error_code ec;
  // Said whatever the job's state: no job of this server will ever have one.
  if (variant == ContentVariant::Thumbnail && !media::image_io_available() &&
      !std::filesystem::exists(thumbnail, ec))
    throw ApiError(400, "unsupported_variant",
                   "this server was built without image support (CMake LTX_IMAGE_IO), so it makes "
                   "no thumbnails; ask for variant=video",
                   "variant");
  if (job->status != JobStatus::Completed)
    throw ApiError(409, "video_not_ready",
                   "video " + id + " is " + to_string(job->status) +
                       "; its content is available once it is completed");
  // The output's name says its format (an older store's completed jobs have no name: MP4).
  const std::string output = job->output_file.empty() ? dir_.output_path(id)
                                                      : dir_.output_file_path(id, job->output_file);
  if (variant == ContentVariant::Video)
    return ContentFile{output, job->output_bytes, content_type_of(output),
                       "\"" + job->output_sha256 + "\""};
  if (content_type_of(output) == "audio/wav")
    throw ApiError(404, "thumbnail_not_found",
                   "video " + id + " is audio only (a WAV): it has no thumbnail; ask for "
                   "variant=video",
                   "variant");
  const std::string& path = thumbnail;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec)
    throw ApiError(404, "thumbnail_not_found",
                   "video " + id +
                       " has no thumbnail (it was completed by a server version that made none, "
                       "or writing it failed: see the server log); ask for variant=video",
                   "variant");
  // Thumbnails are small: hashing one per request costs less than keeping its hash in the store.
  std::string sha;
  try {
    sha = sha256_hex_of_file(path);
  } catch (const Error&) {
    throw ApiError(404, "not_found", "the thumbnail of " + id + " is gone (it was deleted)");
  }
  return ContentFile{path, static_cast<int64_t>(bytes), "image/png", "\"" + sha + "\""};
}

std::optional<JobSnapshot> VideoServer::wait_for_change(const std::string& id, uint64_t seen,
                                                        std::chrono::milliseconds timeout) {
  if (!is_job_id(id)) return std::nullopt;
  // Jobs of an earlier run of the server are known to the store only: publish their state once.
  if (!events_.latest(id)) {
    const auto job = store_.get(id);
    if (!job) return std::nullopt;
    events_.publish(*job);
  }
  return events_.wait_for_change(id, seen, timeout);
}

std::string VideoServer::models_json() { return server::models_json(model_, started_at_).dump(); }

VideoService::Readiness VideoServer::readiness() {
  const char* status = draining_ ? "draining" : ready_ ? "ready" : "loading";
  nlohmann::json body = {{"status", status}, {"model", model_.id}, {"demo", model_.demo}};
  const DiskUsage d = dir_.disk_usage();
  body["disk"] = {{"outputs_bytes", d.outputs_bytes},
                  {"inputs_bytes", d.inputs_bytes},
                  {"database_bytes", d.database_bytes}};
  body["queue"] = {{"queued", scheduler_.queue_length()},
                   {"running", scheduler_.running().size()}};
  if (status_extra_) body.update(status_extra_());
  return {ready_ && !draining_, body.dump()};
}

std::string VideoServer::metrics_text() { return metrics_.render(); }

std::string VideoServer::download_token(const std::string& id) {
  const auto job = get(id);
  return job ? job->download_token : std::string();
}

void VideoServer::after_transition(const std::string& id, const std::optional<Job>& changed,
                                   bool ended) {
  bool deleting = false;
  {
    std::lock_guard lock(mu_);
    if (ended) {
      stage_.erase(id);
      deleting = deleting_.erase(id) > 0;
    }
  }
  if (deleting) {
    store_.remove(id);
    events_.remove(id);
    return;
  }
  if (changed) events_.publish(*changed);
}

void VideoServer::ended(const Job& job, const char* outcome) {
  metrics_.count("ltx_jobs_total", {{"outcome", outcome}});
  if (job.started_at)
    metrics_.observe("ltx_job_duration_seconds", unix_now_precise() - *job.started_at);
}

void VideoServer::started(const Job& job) {
  const auto stored = store_.start(job.id);
  if (stored)
    metrics_.observe("ltx_queue_wait_seconds",
                     unix_now_precise() - static_cast<double>(stored->created_at));
  after_transition(job.id, stored, false);
}

void VideoServer::progress(const Job& job, int percent, const std::string& stage) {
  {
    std::lock_guard lock(mu_);
    stage_[job.id] = stage;
  }
  after_transition(job.id, store_.set_progress(job.id, percent), false);
}

void VideoServer::completed(const Job& job, const RunOutcome& outcome) {
  const auto stored = store_.complete(job.id, outcome.metrics_json,
                                     std::filesystem::path(outcome.output_file).filename().string());
  if (stored) {
    ended(*stored, "completed");
    const nlohmann::json m = nlohmann::json::parse(outcome.metrics_json, nullptr, false);
    if (m.is_object() && m.contains("time_to_first_step_s") && m["time_to_first_step_s"].is_number())
      metrics_.observe("ltx_time_to_first_step_seconds", m["time_to_first_step_s"].get<double>());
  }
  after_transition(job.id, stored, true);
}

void VideoServer::failed(const Job& job, const JobError& error) {
  const auto stored = store_.fail(job.id, error);
  if (stored) ended(*stored, "failed");
  after_transition(job.id, stored, true);
}

void VideoServer::cancelled(const Job& job) {
  const auto stored = store_.cancel(job.id);
  if (stored) ended(*stored, "cancelled");
  after_transition(job.id, stored, true);
}

void VideoServer::requeued(const Job& job) { after_transition(job.id, store_.requeue(job.id), true); }

}  // namespace ltx::server
