#include "server/job.h"

namespace ltx::server {

const char* to_string(JobStatus s) {
  switch (s) {
    case JobStatus::Queued: return "queued";
    case JobStatus::InProgress: return "in_progress";
    case JobStatus::Completed: return "completed";
    case JobStatus::Failed: return "failed";
    case JobStatus::Cancelled: return "cancelled";
  }
  return "unknown";
}

std::optional<JobStatus> job_status_from(const std::string& s) {
  for (JobStatus v : {JobStatus::Queued, JobStatus::InProgress, JobStatus::Completed,
                      JobStatus::Failed, JobStatus::Cancelled})
    if (s == to_string(v)) return v;
  return std::nullopt;
}

bool is_job_id(const std::string& id) {
  static constexpr size_t kPrefix = 6, kHex = 32;
  if (id.size() != kPrefix + kHex || id.compare(0, kPrefix, "video_") != 0) return false;
  for (size_t i = kPrefix; i < id.size(); ++i) {
    const char c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace ltx::server
