#include "server/job_store.h"

#include <sqlite3.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <type_traits>

#include "core/error.h"
#include "core/log.h"

namespace fs = std::filesystem;

namespace ltx::server {

// A prepared statement, kept for the life of the connection.
struct JobStore::Stmt {
  std::string sql;
  sqlite3_stmt* s = nullptr;
  ~Stmt() { sqlite3_finalize(s); }
};

namespace {

constexpr int kSchemaVersion = 1;

constexpr const char* kSchema = R"sql(
CREATE TABLE jobs(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL CHECK(status IN('queued','in_progress','completed','failed','cancelled')),
  model TEXT NOT NULL, prompt TEXT NOT NULL, request_json TEXT NOT NULL, batch_key TEXT NOT NULL,
  size TEXT NOT NULL, seconds TEXT NOT NULL, progress INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0, error_code TEXT, error_message TEXT,
  created_at INTEGER NOT NULL, started_at REAL, completed_at INTEGER, expires_at INTEGER,
  output_file TEXT, output_bytes INTEGER, output_sha256 TEXT, metrics_json TEXT,
  download_token TEXT NOT NULL, deleting INTEGER NOT NULL DEFAULT 0) STRICT;
CREATE INDEX jobs_status_seq ON jobs(status, seq);
CREATE TABLE inputs(job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  file TEXT NOT NULL, frame_index INTEGER NOT NULL, strength REAL NOT NULL, crf INTEGER,
  PRIMARY KEY(job_id, idx)) STRICT;
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
)sql";

// The columns read_row() reads, in its order.
#define LTX_JOB_COLUMNS                                                                          \
  "seq, id, status, model, prompt, request_json, batch_key, size, seconds, progress, attempts, " \
  "error_code, error_message, created_at, started_at, completed_at, expires_at, output_file, "   \
  "output_bytes, output_sha256, metrics_json, download_token"

// Reads the columns of the current row of a statement.
class Row {
 public:
  explicit Row(sqlite3_stmt* s) : s_(s) {}
  sqlite3_stmt* raw() const { return s_; }
  bool is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
  double f64(int col) const { return sqlite3_column_double(s_, col); }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, col))) : std::string();
  }

 protected:
  sqlite3_stmt* s_;
};

// Binds parameters in order, steps, reads columns; resets the statement when it goes out of
// scope. Every SQLite error becomes an ltx::Error naming the database file.
class Query : public Row {
 public:
  Query(sqlite3_stmt* s, sqlite3* db, const std::string& db_path)
      : Row(s), db_(db), path_(db_path) {}
  ~Query() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  template <typename T>
  Query& bind(const T& v) {
    ++n_;
    int rc;
    if constexpr (std::is_same_v<T, std::nullopt_t>) {
      rc = sqlite3_bind_null(s_, n_);
    } else if constexpr (std::is_integral_v<T>) {
      rc = sqlite3_bind_int64(s_, n_, static_cast<sqlite3_int64>(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      rc = sqlite3_bind_double(s_, n_, static_cast<double>(v));
    } else {
      const std::string_view t(v);
      rc = sqlite3_bind_text(s_, n_, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
    }
    check(rc, "bind");
    return *this;
  }
  template <typename T>
  Query& bind(const std::optional<T>& v) {
    if (v) return bind(*v);
    return bind(std::nullopt);
  }

  // True when a row is ready, false when the statement is done.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    check(rc, "step");
    return false;
  }
  void run() {
    while (step()) {
    }
  }

 private:
  void check(int rc, const char* what) const {
    if (rc != SQLITE_OK)
      ltx::fail("job store '", path_, "': ", what, " of '", sqlite3_sql(s_),
                "' failed: ", sqlite3_errmsg(db_), " (", sqlite3_errstr(rc), ")");
  }

  sqlite3* db_;
  const std::string& path_;
  int n_ = 0;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back when left by an exception.
class Transaction {
 public:
  explicit Transaction(std::function<void(const char*)> exec) : exec_(std::move(exec)) {
    exec_("BEGIN IMMEDIATE");
  }
  ~Transaction() {
    if (done_) return;
    try {
      exec_("ROLLBACK");
    } catch (const std::exception& e) {
      log_warn(e.what());
    }
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    exec_("COMMIT");
    done_ = true;
  }

 private:
  std::function<void(const char*)> exec_;
  bool done_ = false;
};

std::optional<int64_t> expiry(int64_t completed_at, int64_t keep_s) {
  if (keep_s <= 0) return std::nullopt;
  return completed_at + keep_s;
}

}  // namespace

std::string RecoverySummary::line() const {
  return str("job store recovered: ", queued, " queued (", requeued, " re-queued after a crash), ",
             interrupted, " failed as interrupted, ", input_missing,
             " failed with an input image missing, ", output_missing,
             " failed with the output missing, ", expired, " expired, ", deletions_finished,
             " deletions finished, ", orphans_removed, " orphan files removed, ",
             temporaries_removed, " temporary files removed");
}

JobStore::JobStore(DataDir& dir, JobStoreOptions options)
    : dir_(dir), options_(std::move(options)), db_path_(dir.db_path()) {
  LTX_CHECK(options_.max_attempts >= 1, "job store: max_attempts is ", options_.max_attempts,
            "; give at least 1");
  LTX_CHECK(options_.keep_outputs_for_s >= 0, "job store: keep_outputs_for is ",
            options_.keep_outputs_for_s, " s; give 0 (keep forever) or more");
  const int rc =
      sqlite3_open_v2(db_path_.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    ltx::fail("cannot open the job store '", db_path_, "': ", msg, "; choose another --data-dir");
  }
  try {
    sqlite3_busy_timeout(db_, 5000);
    sqlite3_extended_result_codes(db_, 1);
    {
      Query q(stmt("PRAGMA journal_mode=WAL"), db_, db_path_);
      LTX_CHECK(q.step() && q.text(0) == "wal", "job store '", db_path_,
                "': cannot switch to WAL journaling (the file system may not support it); choose "
                "another --data-dir");
    }
    exec("PRAGMA synchronous=FULL");
    exec("PRAGMA foreign_keys=ON");
    create_or_check_schema();
    recover();
  } catch (...) {
    stmts_.clear();
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

JobStore::~JobStore() {
  stmts_.clear();  // finalize before closing
  if (db_ != nullptr) sqlite3_close(db_);
}

void JobStore::db_fail(const std::string& what) {
  ltx::fail("job store '", db_path_, "': ", what, ": ", sqlite3_errmsg(db_));
}

sqlite3_stmt* JobStore::stmt(const char* sql) {
  for (auto& s : stmts_)
    if (s->sql == sql) return s->s;
  auto s = std::make_unique<Stmt>();
  s->sql = sql;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->s, nullptr) != SQLITE_OK)
    db_fail(str("cannot prepare '", sql, "'"));
  stmts_.push_back(std::move(s));
  return stmts_.back()->s;
}

void JobStore::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    ltx::fail("job store '", db_path_, "': '", sql, "' failed: ", msg);
  }
}

double JobStore::now() const {
  if (options_.now) return options_.now();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void JobStore::create_or_check_schema() {
  int64_t version = 0, tables = 0;
  {
    Query q(stmt("PRAGMA user_version"), db_, db_path_);
    if (q.step()) version = q.i64(0);
  }
  if (version == kSchemaVersion) return;
  LTX_CHECK(version == 0, "job store '", db_path_, "' has schema version ", version,
            " and this ltx reads version ", kSchemaVersion,
            " (made by a newer ltx?); use that ltx or another --data-dir");
  {
    Query q(stmt("SELECT count(*) FROM sqlite_schema"), db_, db_path_);
    if (q.step()) tables = q.i64(0);
  }
  LTX_CHECK(tables == 0, "'", db_path_,
            "' is an SQLite database but not an ltx serve job store; move it away or choose "
            "another --data-dir");
  Transaction tx([this](const char* s) { exec(s); });
  exec(kSchema);
  {
    Query q(stmt("INSERT INTO meta(key, value) VALUES('created_by', 'ltx serve')"), db_, db_path_);
    q.run();
  }
  exec(str("PRAGMA user_version=", kSchemaVersion).c_str());
  tx.commit();
}

Job JobStore::read_row(sqlite3_stmt* s) {
  const Row q(s);
  Job j;
  j.seq = q.i64(0);
  j.id = q.text(1);
  const auto status = job_status_from(q.text(2));
  if (!status)
    ltx::fail("job store '", db_path_, "': job ", j.id, " has the unknown status '", q.text(2),
              "'");
  j.status = *status;
  j.model = q.text(3);
  j.prompt = q.text(4);
  j.request_json = q.text(5);
  j.batch_key = q.text(6);
  j.size = q.text(7);
  j.seconds = q.text(8);
  j.progress = static_cast<int>(q.i64(9));
  j.attempts = static_cast<int>(q.i64(10));
  if (!q.is_null(11)) j.error = JobError{q.text(11), q.text(12)};
  j.created_at = q.i64(13);
  if (!q.is_null(14)) j.started_at = q.f64(14);
  if (!q.is_null(15)) j.completed_at = q.i64(15);
  if (!q.is_null(16)) j.expires_at = q.i64(16);
  j.output_file = q.text(17);
  j.output_bytes = q.is_null(18) ? 0 : q.i64(18);
  j.output_sha256 = q.text(19);
  j.metrics_json = q.text(20);
  j.download_token = q.text(21);
  return j;
}

void JobStore::load_inputs(Job& job) {
  Query q(
      stmt(
          "SELECT idx, file, frame_index, strength, crf FROM inputs WHERE job_id = ? ORDER BY idx"),
      db_, db_path_);
  q.bind(job.id);
  job.inputs.clear();
  while (q.step()) {
    JobInput in;
    in.idx = static_cast<int>(q.i64(0));
    in.file = q.text(1);
    in.frame_index = q.i64(2);
    in.strength = q.f64(3);
    if (!q.is_null(4)) in.crf = static_cast<int>(q.i64(4));
    job.inputs.push_back(std::move(in));
  }
}

std::optional<Job> JobStore::load(const std::string& id, bool include_deleting) {
  if (!is_job_id(id)) return std::nullopt;
  std::optional<Job> job;
  {
    Query q(stmt("SELECT " LTX_JOB_COLUMNS " FROM jobs WHERE id = ? AND (deleting = 0 OR ?)"), db_,
            db_path_);
    q.bind(id).bind(include_deleting ? 1 : 0);
    if (!q.step()) return std::nullopt;
    job = read_row(q.raw());
  }
  load_inputs(*job);
  return job;
}

Job JobStore::insert(Job job, const std::vector<NewInput>& inputs) {
  if (job.id.empty())
    job.id = new_job_id();
  else
    LTX_CHECK(is_job_id(job.id), "job store: '", job.id, "' is not a job id");
  job.download_token = new_token();
  std::vector<InputImage> images;
  images.reserve(inputs.size());
  for (const auto& in : inputs) images.push_back(in.image);
  const std::vector<std::string> names = dir_.store_inputs(job.id, images);
  crash_point("inputs_stored");
  // Only folders this insert made are removed on failure (an id already in use keeps its files).
  const bool stored_inputs = !names.empty();
  try {
    std::lock_guard lock(mu_);
    Transaction tx([this](const char* s) { exec(s); });
    {
      Query q(stmt("INSERT INTO jobs(id, status, model, prompt, request_json, batch_key, size, "
                   "seconds, progress, attempts, created_at, download_token) "
                   "VALUES(?, 'queued', ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)"),
              db_, db_path_);
      q.bind(job.id).bind(job.model).bind(job.prompt).bind(job.request_json).bind(job.batch_key);
      q.bind(job.size).bind(job.seconds).bind(static_cast<int64_t>(now())).bind(job.download_token);
      q.run();
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      Query q(stmt("INSERT INTO inputs(job_id, idx, file, frame_index, strength, crf) "
                   "VALUES(?, ?, ?, ?, ?, ?)"),
              db_, db_path_);
      q.bind(job.id).bind(static_cast<int64_t>(i)).bind(names[i]).bind(inputs[i].frame_index);
      q.bind(inputs[i].strength).bind(inputs[i].crf);
      q.run();
    }
    tx.commit();
  } catch (...) {
    if (stored_inputs) dir_.remove_job_inputs(job.id);
    throw;
  }
  crash_point("inserted");
  std::lock_guard lock(mu_);
  auto stored = load(job.id, true);
  LTX_CHECK(stored.has_value(), "job store '", db_path_, "': job ", job.id,
            " vanished after its insert");
  return *stored;
}

std::optional<Job> JobStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  return load(id, false);
}

std::optional<ListPage> JobStore::list(const ListQuery& query) {
  LTX_CHECK(query.limit >= 1, "job store: list limit ", query.limit, "; give 1 or more");
  std::lock_guard lock(mu_);
  int64_t after_seq = query.ascending ? 0 : std::numeric_limits<int64_t>::max();
  if (!query.after.empty()) {
    if (!is_job_id(query.after)) return std::nullopt;
    Query q(stmt("SELECT seq FROM jobs WHERE id = ?"), db_, db_path_);
    q.bind(query.after);
    if (!q.step()) return std::nullopt;
    after_seq = q.i64(0);
  }
  ListPage page;
  {
    Query q(stmt(query.ascending
                     ? "SELECT " LTX_JOB_COLUMNS
                       " FROM jobs WHERE deleting = 0 AND seq > ? ORDER BY seq ASC LIMIT ?"
                     : "SELECT " LTX_JOB_COLUMNS
                       " FROM jobs WHERE deleting = 0 AND seq < ? ORDER BY seq DESC LIMIT ?"),
            db_, db_path_);
    q.bind(after_seq).bind(static_cast<int64_t>(query.limit) + 1);
    while (q.step()) page.data.push_back(read_row(q.raw()));
  }
  if (page.data.size() > static_cast<size_t>(query.limit)) {
    page.has_more = true;
    page.data.pop_back();
  }
  for (auto& j : page.data) load_inputs(j);
  return page;
}

std::vector<Job> JobStore::queued() {
  std::lock_guard lock(mu_);
  std::vector<Job> jobs;
  {
    Query q(stmt("SELECT " LTX_JOB_COLUMNS
                 " FROM jobs WHERE status = 'queued' AND deleting = 0 ORDER BY seq"),
            db_, db_path_);
    while (q.step()) jobs.push_back(read_row(q.raw()));
  }
  for (auto& j : jobs) load_inputs(j);
  return jobs;
}

StatusCounts JobStore::counts() {
  std::lock_guard lock(mu_);
  StatusCounts c;
  Query q(stmt("SELECT status, count(*) FROM jobs WHERE deleting = 0 GROUP BY status"), db_,
          db_path_);
  while (q.step())
    if (const auto s = job_status_from(q.text(0))) c.by_status[static_cast<size_t>(*s)] = q.i64(1);
  return c;
}

std::optional<Job> JobStore::start(const std::string& id) {
  std::lock_guard lock(mu_);
  Query q(stmt("UPDATE jobs SET status = 'in_progress', attempts = attempts + 1, started_at = ?, "
               "progress = 0 WHERE id = ? AND status = 'queued' AND deleting = 0"),
          db_, db_path_);
  q.bind(now()).bind(id).run();
  if (sqlite3_changes(db_) == 0) return std::nullopt;
  return load(id, true);
}

std::optional<Job> JobStore::set_progress(const std::string& id, int progress) {
  LTX_CHECK(progress >= 0 && progress <= 99, "job store: progress ", progress, " for job ", id,
            " (0..99 while running; complete() sets 100)");
  std::lock_guard lock(mu_);
  Query q(stmt("UPDATE jobs SET progress = ? WHERE id = ? AND status = 'in_progress'"), db_,
          db_path_);
  q.bind(progress).bind(id).run();
  if (sqlite3_changes(db_) == 0) return std::nullopt;
  return load(id, true);
}

std::optional<Job> JobStore::complete(const std::string& id, const std::string& metrics_json,
                                      const std::string& output_file) {
  {
    std::lock_guard lock(mu_);
    const auto job = load(id, true);
    if (!job || job->status != JobStatus::InProgress) {
      // A cancel, a failure or a delete came first: the file belongs to no completed job (a
      // completed job's own output stays).
      if (!job || job->status != JobStatus::Completed) dir_.remove_job_outputs(id);
      return std::nullopt;
    }
  }
  // The file work runs outside the lock: hashing a large output must not stall the API.
  const std::string path =
      output_file.empty() ? dir_.output_path(id) : dir_.output_file_path(id, output_file);
  const std::string ext = fs::path(path).extension().string().substr(1);
  dir_.sync_output(id, ext);
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(fs::file_size(path, ec));
  LTX_CHECK(!ec, "job ", id, ": cannot read the size of '", path, "': ", ec.message());
  const std::string sha = sha256_hex_of_file(path);
  crash_point("output_synced");
  std::lock_guard lock(mu_);
  const auto completed_at = static_cast<int64_t>(now());
  {
    Query q(stmt("UPDATE jobs SET status = 'completed', progress = 100, completed_at = ?, "
                 "expires_at = ?, output_file = ?, output_bytes = ?, output_sha256 = ?, "
                 "metrics_json = ?, error_code = NULL, error_message = NULL "
                 "WHERE id = ? AND status = 'in_progress'"),
            db_, db_path_);
    q.bind(completed_at).bind(expiry(completed_at, options_.keep_outputs_for_s));
    q.bind(fs::path(path).filename().string()).bind(bytes).bind(sha);
    q.bind(metrics_json.empty() ? std::optional<std::string>() : metrics_json).bind(id).run();
  }
  if (sqlite3_changes(db_) == 0) {
    // Cancelled or removed meanwhile: the output belongs to no completed job.
    dir_.remove_job_outputs(id);
    return std::nullopt;
  }
  return load(id, true);
}

std::optional<Job> JobStore::fail(const std::string& id, const JobError& error) {
  std::optional<Job> job;
  {
    std::lock_guard lock(mu_);
    const auto ended = static_cast<int64_t>(now());
    Query q(stmt("UPDATE jobs SET status = 'failed', error_code = ?, error_message = ?, "
                 "completed_at = ?, expires_at = ? "
                 "WHERE id = ? AND status IN ('queued', 'in_progress')"),
            db_, db_path_);
    q.bind(error.code).bind(error.message).bind(ended);
    q.bind(expiry(ended, options_.keep_outputs_for_s)).bind(id).run();
    if (sqlite3_changes(db_) == 0) return std::nullopt;
    job = load(id, true);
  }
  dir_.remove_job_outputs(id);
  return job;
}

std::optional<Job> JobStore::cancel(const std::string& id) {
  std::optional<Job> job;
  {
    std::lock_guard lock(mu_);
    Transaction tx([this](const char* s) { exec(s); });
    const auto ended = static_cast<int64_t>(now());
    {
      Query q(stmt("UPDATE jobs SET status = 'cancelled', completed_at = ?, expires_at = ? "
                   "WHERE id = ? AND status IN ('queued', 'in_progress')"),
              db_, db_path_);
      q.bind(ended).bind(expiry(ended, options_.keep_outputs_for_s)).bind(id).run();
      if (sqlite3_changes(db_) == 0) return std::nullopt;
    }
    {
      Query q(stmt("DELETE FROM inputs WHERE job_id = ?"), db_, db_path_);
      q.bind(id).run();
    }
    tx.commit();
    job = load(id, true);
  }
  dir_.remove_job_files(id);
  return job;
}

std::optional<Job> JobStore::requeue(const std::string& id) {
  std::optional<Job> job;
  {
    std::lock_guard lock(mu_);
    Query q(stmt("UPDATE jobs SET status = 'queued', attempts = max(attempts - 1, 0), "
                 "started_at = NULL, progress = 0 WHERE id = ? AND status = 'in_progress'"),
            db_, db_path_);
    q.bind(id).run();
    if (sqlite3_changes(db_) == 0) return std::nullopt;
    job = load(id, true);
  }
  dir_.remove_job_outputs(id);
  return job;
}

bool JobStore::mark_deleting(const std::string& id) {
  if (!is_job_id(id)) return false;
  std::lock_guard lock(mu_);
  Query q(stmt("UPDATE jobs SET deleting = 1 WHERE id = ?"), db_, db_path_);
  q.bind(id).run();
  return sqlite3_changes(db_) > 0;
}

bool JobStore::remove(const std::string& id) {
  if (!is_job_id(id)) return false;
  {
    std::lock_guard lock(mu_);
    Query q(stmt("DELETE FROM jobs WHERE id = ?"), db_, db_path_);
    q.bind(id).run();
    if (sqlite3_changes(db_) == 0) return false;
  }
  crash_point("row_deleted");
  dir_.remove_job_files(id);
  return true;
}

int JobStore::expire() {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    Transaction tx([this](const char* sql) { exec(sql); });
    ids = expire_rows();
    tx.commit();
  }
  for (const auto& id : ids) dir_.remove_job_files(id);
  return static_cast<int>(ids.size());
}

std::vector<std::string> JobStore::expire_rows() {
  if (options_.keep_outputs_for_s <= 0) return {};
  const auto cutoff = static_cast<int64_t>(now()) - options_.keep_outputs_for_s;
  std::vector<std::string> ids;
  {
    Query q(stmt("SELECT id FROM jobs WHERE status IN ('completed', 'failed', 'cancelled') AND "
                 "completed_at IS NOT NULL AND completed_at <= ?"),
            db_, db_path_);
    q.bind(cutoff);
    while (q.step()) ids.push_back(q.text(0));
  }
  for (const auto& id : ids) {
    Query q(stmt("DELETE FROM jobs WHERE id = ?"), db_, db_path_);
    q.bind(id).run();
  }
  return ids;
}

void JobStore::recover() {
  std::lock_guard lock(mu_);
  RecoverySummary& r = recovery_;
  r.temporaries_removed = dir_.remove_temporaries();
  const auto ended = static_cast<int64_t>(now());
  const auto expires = expiry(ended, options_.keep_outputs_for_s);
  Transaction tx([this](const char* s) { exec(s); });

  // Deletions a crash interrupted: the row goes; its files go with the orphans below.
  {
    Query q(stmt("DELETE FROM jobs WHERE deleting = 1"), db_, db_path_);
    q.run();
    r.deletions_finished = sqlite3_changes(db_);
  }

  // Jobs that were running: queued again while they have attempts left.
  std::vector<std::pair<std::string, int64_t>> running;
  {
    Query q(stmt("SELECT id, attempts FROM jobs WHERE status = 'in_progress' ORDER BY seq"), db_,
            db_path_);
    while (q.step()) running.emplace_back(q.text(0), q.i64(1));
  }
  for (const auto& [id, attempts] : running) {
    if (attempts < options_.max_attempts) {
      Query q(
          stmt("UPDATE jobs SET status = 'queued', started_at = NULL, progress = 0 WHERE id = ?"),
          db_, db_path_);
      q.bind(id).run();
      ++r.requeued;
    } else {
      Query q(stmt("UPDATE jobs SET status = 'failed', error_code = 'interrupted', "
                   "error_message = ?, completed_at = ?, expires_at = ? WHERE id = ?"),
              db_, db_path_);
      q.bind(str("the server stopped while this job ran, ", attempts, " times (at most ",
                 options_.max_attempts, " runs)"));
      q.bind(ended).bind(expires).bind(id).run();
      ++r.interrupted;
    }
  }

  // Queued jobs (re-queued ones included) that cannot run: an input image is gone. Their other
  // images go too, so that every input row keeps its file.
  std::vector<std::pair<std::string, std::string>> lost_inputs;  // job id, file
  {
    Query q(
        stmt("SELECT inputs.job_id, inputs.file FROM inputs JOIN jobs ON jobs.id = inputs.job_id "
             "WHERE jobs.status = 'queued' ORDER BY jobs.seq, inputs.idx"),
        db_, db_path_);
    while (q.step()) {
      const std::string id = q.text(0), file = q.text(1);
      if (!lost_inputs.empty() && lost_inputs.back().first == id) continue;
      std::error_code ec;
      if (!fs::is_regular_file(dir_.input_path(id, file), ec)) lost_inputs.emplace_back(id, file);
    }
  }
  for (const auto& [id, file] : lost_inputs) {
    Query q(stmt("UPDATE jobs SET status = 'failed', error_code = 'input_missing', "
                 "error_message = ?, completed_at = ?, expires_at = ? WHERE id = ?"),
            db_, db_path_);
    q.bind(str("its input image ", file, " was missing when the server started"));
    q.bind(ended).bind(expires).bind(id).run();
    Query d(stmt("DELETE FROM inputs WHERE job_id = ?"), db_, db_path_);
    d.bind(id).run();
    ++r.input_missing;
  }

  // Completed jobs whose output is gone or not whole.
  std::vector<std::string> missing;
  {
    Query q(stmt("SELECT id, output_bytes, output_file FROM jobs WHERE status = 'completed'"),
            db_, db_path_);
    while (q.step()) {
      const std::string id = q.text(0);
      const std::string file = q.text(2);
      std::error_code ec;
      std::string path;
      try {
        path = file.empty() ? dir_.output_path(id) : dir_.output_file_path(id, file);
      } catch (const Error&) {
        missing.push_back(id);  // a name no server writes
        continue;
      }
      const auto size = fs::file_size(path, ec);
      if (ec || q.is_null(1) || static_cast<int64_t>(size) != q.i64(1)) missing.push_back(id);
    }
  }
  for (const auto& id : missing) {
    Query q(stmt("UPDATE jobs SET status = 'failed', error_code = 'output_missing', "
                 "error_message = 'the output file of this job was missing or incomplete when the "
                 "server started', output_file = NULL, output_bytes = NULL, output_sha256 = NULL, "
                 "progress = 0 WHERE id = ?"),
            db_, db_path_);
    q.bind(id).run();
    ++r.output_missing;
  }

  // Retention as set now applies to every job that ended.
  {
    Query q(stmt("UPDATE jobs SET expires_at = CASE WHEN ? > 0 THEN completed_at + ? ELSE NULL END "
                 "WHERE completed_at IS NOT NULL"),
            db_, db_path_);
    q.bind(options_.keep_outputs_for_s).bind(options_.keep_outputs_for_s).run();
  }
  // Their files go with the orphans below.
  r.expired = static_cast<int>(expire_rows().size());
  tx.commit();
  for (const auto& lost : lost_inputs) dir_.remove_job_inputs(lost.first);

  // Files no row needs: outputs of jobs not completed, inputs of jobs gone or cancelled.
  std::set<std::string> completed, with_inputs;
  {
    Query q(stmt("SELECT id, status FROM jobs"), db_, db_path_);
    while (q.step()) {
      const std::string status = q.text(1);
      if (status == "completed") completed.insert(q.text(0));
      if (status != "cancelled") with_inputs.insert(q.text(0));
    }
  }
  const DirListing files = dir_.listing();
  for (const auto& id : files.output_ids)
    if (!completed.count(id)) {
      dir_.remove_job_outputs(id);
      ++r.orphans_removed;
    }
  for (const auto& id : files.input_ids)
    if (!with_inputs.count(id)) {
      dir_.remove_job_inputs(id);
      ++r.orphans_removed;
    }
  {
    Query q(stmt("SELECT count(*) FROM jobs WHERE status = 'queued'"), db_, db_path_);
    if (q.step()) r.queued = static_cast<int>(q.i64(0));
  }
}

}  // namespace ltx::server

// Local to this file (unity builds compile it together with others).
#undef LTX_JOB_COLUMNS
