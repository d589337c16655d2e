#pragma once
// A video job as the server keeps it: the row of the job store, the object the API returns
// (server/api_json.h), what the scheduler runs. Ids are "video_" + 32 lowercase hex digits from the
// system's random source; a request's id is checked against that form before any lookup, and no file
// path is ever built from request text (server/data_dir.h builds them from checked ids).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ltx::server {

enum class JobStatus { Queued, InProgress, Completed, Failed, Cancelled };
const char* to_string(JobStatus s);                       // "queued", "in_progress", ...
std::optional<JobStatus> job_status_from(const std::string& s);  // nullopt for any other text
inline bool is_terminal(JobStatus s) {
  return s == JobStatus::Completed || s == JobStatus::Failed || s == JobStatus::Cancelled;
}

// Why a job failed: a stable code (`generation_error`, `out_of_memory`, `internal_error`, `timeout`,
// `interrupted`, `output_missing`, ...) and a message for people.
struct JobError {
  std::string code, message;
};

// A conditioning image of a job: its bytes live at `file` (a name under the job's inputs folder).
struct JobInput {
  int idx = 0;
  std::string file;
  int64_t frame_index = 0;
  double strength = 1.0;
  std::optional<int> crf;
};

struct Job {
  int64_t seq = 0;  // creation order (the store's primary key): FIFO order and list paging
  std::string id;
  JobStatus status = JobStatus::Queued;
  std::string model;
  std::string prompt;
  std::string request_json;  // the validated request (server/video_request.h), what a worker runs
  std::string batch_key;     // jobs with equal keys may run as one batch
  std::string size;          // "WxH" that is generated
  std::string seconds;       // the duration that is generated, e.g. "1.04"
  int progress = 0;          // 0..100; 100 only once the output is in place
  int attempts = 0;          // runs started (a run cut short by a crash counts)
  std::optional<JobError> error;
  int64_t created_at = 0;  // unix seconds
  std::optional<double> started_at;
  std::optional<int64_t> completed_at, expires_at;
  std::string output_file;  // a name under the data dir's outputs folder, once completed
  int64_t output_bytes = 0;
  std::string output_sha256;
  std::string metrics_json;    // {"inference_time_s", "peak_memory_mb", "stages": [...], ...}
  std::string download_token;  // lets <video src> / EventSource fetch this job's content and events
  std::vector<JobInput> inputs;
};

// True when `id` has the form of a job id ("video_" + 32 lowercase hex digits).
bool is_job_id(const std::string& id);

}  // namespace ltx::server
