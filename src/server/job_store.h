#pragma once
// The job store: every job of `ltx serve` as a row of DATA/ltx-serve.db (SQLite: WAL,
// synchronous=FULL, so a committed change survives a crash or a power cut) and its files in the
// data dir (server/data_dir.h). After a crash or kill -9 the store is reopened and `recover` puts
// it back in order (see RecoverySummary): nothing a client was told about is lost, and no
// temporary or orphan file stays.
//
// Write order, so that a crash at any point leaves a state recovery can finish:
// - create: the input images (tmp folder → fsync → rename), then the INSERT. A crash before the
//   INSERT leaves an inputs folder without a row: an orphan, deleted at the next start.
// - complete: the worker writes outputs/<id>.mp4, then its thumbnail outputs/<id>.png (each as
//   .tmp, renamed when whole); `complete` fsyncs the MP4 and its folder, then UPDATEs the row. A
//   crash before the UPDATE leaves the job in_progress: it is re-queued (its stale outputs
//   deleted) or failed as interrupted.
// - remove: the row goes first, then the files (orphans if a crash comes between). A running job is
//   first marked `deleting` (hidden from get/list/queued) until its worker stops; recovery finishes
//   marked rows.
//
// Times: created_at, completed_at, expires_at are unix seconds; started_at has fractions.
// `completed_at` is set when a job ends in any terminal status (completed, failed, cancelled), and
// with retention (`keep_outputs_for_s` > 0) `expires_at` = completed_at + keep_outputs_for_s.
// Retention removes an expired job entirely (row and files, as a DELETE would): a later GET is a
// 404, the disk and the database stay bounded. The current setting applies to every ended job,
// also to those that ended under another one.
//
// Thread safety: every method may be called from any thread (one connection behind a mutex).
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/data_dir.h"
#include "server/job.h"
#include "server/video_service.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ltx::server {

struct JobStoreOptions {
  // Runs a job may start; a run cut short by a crash counts. A job found in_progress at start-up
  // is re-queued while attempts < max_attempts, else failed with code "interrupted".
  int max_attempts = 2;
  // Seconds a job is kept after it ended; 0 keeps jobs forever.
  int64_t keep_outputs_for_s = 0;
  // The clock (unix seconds); tests set it to check retention.
  std::function<double()> now;
  // Tests only: called at the named points of the write order ("inputs_stored" after the inputs
  // rename and before the INSERT, "inserted" after the INSERT, "output_synced" in complete() after
  // the output's fsync and before the UPDATE, "row_deleted" in remove() between the DELETE and the
  // files), so a forked child can _exit there.
  std::function<void(std::string_view point)> crash_point;
};

// A conditioning image of a new job: the bytes to keep and where it conditions.
struct NewInput {
  InputImage image;
  int64_t frame_index = 0;
  double strength = 1.0;
  std::optional<int> crf;
};

// What recovery did at open; the server logs line().
struct RecoverySummary {
  int temporaries_removed = 0;  // *.tmp leftovers of interrupted writes
  int requeued = 0;             // in_progress → queued
  int interrupted = 0;          // in_progress → failed/interrupted (attempts used up)
  int input_missing = 0;        // queued without an input image → failed/input_missing
  int output_missing = 0;       // completed → failed/output_missing
  int deletions_finished = 0;   // rows marked deleting, removed
  int orphans_removed = 0;      // outputs and inputs folders without a row that needs them
  int expired = 0;              // jobs past their retention, removed
  int queued = 0;               // jobs queued after recovery
  std::string line() const;
};

// Jobs per status (rows being deleted excluded), indexed by JobStatus.
struct StatusCounts {
  std::array<int64_t, 5> by_status{};
  int64_t operator[](JobStatus s) const { return by_status[static_cast<size_t>(s)]; }
};

class JobStore {
 public:
  // Opens (or creates) dir.db_path(), checks the schema version and runs recover(). Throws
  // ltx::Error naming the database file. `dir` must outlive the store.
  JobStore(DataDir& dir, JobStoreOptions options = {});
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // What the recovery at open did.
  const RecoverySummary& recovery() const { return recovery_; }
  DataDir& data_dir() { return dir_; }

  // Stores a new queued job with its input images. From `job` it takes model, prompt,
  // request_json, batch_key, size, seconds (and id when set: it must be a job id); it sets id (a
  // new one when empty), download_token, status queued, progress 0, attempts 0, created_at, seq and
  // inputs. Returns the job as stored.
  Job insert(Job job, const std::vector<NewInput>& inputs = {});

  // A job by id (nullopt when unknown, not a job id, or being deleted).
  std::optional<Job> get(const std::string& id);
  // A page of jobs in creation order (newest first unless ascending), starting after the job
  // `query.after` (in that order). Nullopt when `after` names no job.
  std::optional<ListPage> list(const ListQuery& query);
  // Queued jobs, oldest first: the scheduler's queue after a start.
  std::vector<Job> queued();
  StatusCounts counts();

  // Transitions. Each returns the job after the change, or nullopt when the job is unknown or not
  // in a status the transition starts from (the caller lost a race with a cancel or a delete).
  // queued → in_progress: attempts + 1, started_at now, progress 0.
  std::optional<Job> start(const std::string& id);
  // in_progress: progress 0..99 (100 comes with complete()).
  std::optional<Job> set_progress(const std::string& id, int progress);
  // in_progress → completed: the output (outputs/<id>.mp4, .wav or .png) must be in place; it is fsync'd (with its folder),
  // hashed and recorded with `metrics_json`, progress 100, completed_at and expires_at. When the
  // job is no longer running (a cancel or a delete came first), its output is deleted instead.
  // `output_file`: the output's name under outputs/ (DataDir::output_path's, e.g. <id>.wav);
  // empty: <id>.mp4.
  std::optional<Job> complete(const std::string& id, const std::string& metrics_json,
                              const std::string& output_file = "");
  // queued | in_progress → failed with the error; its output (if any) is deleted.
  std::optional<Job> fail(const std::string& id, const JobError& error);
  // queued | in_progress → cancelled; its files and input rows go, the row stays. For a running
  // job, call it once the worker stopped (it deletes the files the worker writes).
  std::optional<Job> cancel(const std::string& id);
  // in_progress → queued, for a run stopped on purpose (shutdown): the attempt does not count,
  // started_at and progress are cleared, a partial output is deleted.
  std::optional<Job> requeue(const std::string& id);

  // Hides a job from get/list/queued until remove(); for a running job whose worker must stop
  // first. False when there is no such job.
  bool mark_deleting(const std::string& id);
  // Deletes the row (inputs with it), then the files. False when there is no such row.
  bool remove(const std::string& id);

  // Removes the jobs whose retention passed (row and files); returns how many. The janitor calls
  // it; open does too.
  int expire();

 private:
  struct Stmt;
  sqlite3_stmt* stmt(const char* sql);  // prepared once, kept for the connection's life
  double now() const;
  void exec(const char* sql);
  void create_or_check_schema();
  void recover();
  std::optional<Job> load(const std::string& id, bool include_deleting);
  void load_inputs(Job& job);
  Job read_row(sqlite3_stmt* s);
  [[noreturn]] void db_fail(const std::string& what);
  void crash_point(std::string_view point) const {
    if (options_.crash_point) options_.crash_point(point);
  }
  // Deletes the rows past retention (the caller holds the lock) and returns their ids.
  std::vector<std::string> expire_rows();

  DataDir& dir_;
  JobStoreOptions options_;
  std::string db_path_;
  sqlite3* db_ = nullptr;
  std::mutex mu_;
  std::vector<std::unique_ptr<Stmt>> stmts_;
  RecoverySummary recovery_;
};

}  // namespace ltx::server
