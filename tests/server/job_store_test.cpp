// The job store: CRUD and transitions, paging, every recovery rule from prepared database and file
// states, retention, many threads at once, and crashes (a forked child that _exits at the named
// points of the write order) after which a reopen loses nothing and leaves no orphan.
#include "server/job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "io/io_test_util.h"

namespace fs = std::filesystem;

namespace ltx::server {
namespace {

using ltx::test::expect_error_containing;
using ltx::test::read_bytes;
using ltx::test::TempDir;
using ltx::test::write_bytes;

Job new_job(const std::string& prompt) {
  Job j;
  j.model = "ltx-demo";
  j.prompt = prompt;
  j.request_json = R"({"prompt":")" + prompt + R"("})";
  j.batch_key = "one_stage/64x64/9/2";
  j.size = "64x64";
  j.seconds = "0.38";
  return j;
}

NewInput input(const std::string& bytes, const std::string& ext, int64_t frame) {
  NewInput in;
  in.image = {bytes, ext};
  in.frame_index = frame;
  in.strength = 0.75;
  return in;
}

// A clock the tests move.
struct FakeClock {
  std::shared_ptr<std::atomic<double>> t = std::make_shared<std::atomic<double>>(1'000'000.0);
  std::function<double()> fn() const {
    return [t = t] { return t->load(); };
  }
  void advance(double s) { t->store(t->load() + s); }
};

// The worker's side of a completion: the output under its final name (as Mp4Writer leaves it).
void write_output(const DataDir& dir, const std::string& id, const std::string& bytes) {
  write_file_atomic(dir.output_path(id), bytes);
}

// Runs a job through to completed with `bytes` as its output.
Job run_to_completion(JobStore& store, const std::string& id, const std::string& bytes) {
  EXPECT_TRUE(store.start(id));
  write_output(store.data_dir(), id, bytes);
  auto done = store.complete(id, R"({"inference_time_s":1.5})");
  EXPECT_TRUE(done);
  return done ? *done : Job{};
}

// No *.tmp anywhere; outputs exist exactly for completed jobs, input folders only for jobs that
// have input rows.
void expect_no_orphans(JobStore& store) {
  DataDir& dir = store.data_dir();
  const DirListing files = dir.listing();
  EXPECT_TRUE(files.temporaries.empty()) << files.temporaries.front();
  std::set<std::string> completed, with_inputs;
  ListQuery all;
  all.limit = 1000;
  const auto page = store.list(all);
  ASSERT_TRUE(page);
  for (const Job& j : page->data) {
    if (j.status == JobStatus::Completed) {
      completed.insert(j.id);
      EXPECT_TRUE(fs::exists(dir.output_path(j.id))) << j.id;
    }
    if (!j.inputs.empty()) with_inputs.insert(j.id);
    for (const auto& in : j.inputs) EXPECT_TRUE(fs::exists(dir.input_path(j.id, in.file))) << j.id;
  }
  for (const auto& id : files.output_ids)
    EXPECT_TRUE(completed.count(id)) << "orphan output " << id;
  for (const auto& id : files.input_ids)
    EXPECT_TRUE(with_inputs.count(id)) << "orphan inputs " << id;
}

class JobStoreTest : public ::testing::Test {
 protected:
  std::string root() const { return tmp_.file("data"); }

  // (Re)opens the data dir and the store; the previous ones close first (the lock).
  JobStore& open(JobStoreOptions options = {}) {
    store_.reset();
    dir_.reset();
    if (!options.now) options.now = clock_.fn();
    dir_ = std::make_unique<DataDir>(root());
    store_ = std::make_unique<JobStore>(*dir_, std::move(options));
    return *store_;
  }
  void close() {
    store_.reset();
    dir_.reset();
  }

  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<DataDir> dir_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(JobStoreTest, InsertsAndReadsAJob) {
  JobStore& store = open();
  const Job j = store.insert(new_job("a cat"), {input("PNG", "png", 0), input("JPG", "jpg", 8)});
  EXPECT_TRUE(is_job_id(j.id));
  EXPECT_GT(j.seq, 0);
  EXPECT_EQ(j.status, JobStatus::Queued);
  EXPECT_EQ(j.prompt, "a cat");
  EXPECT_EQ(j.model, "ltx-demo");
  EXPECT_EQ(j.batch_key, "one_stage/64x64/9/2");
  EXPECT_EQ(j.size, "64x64");
  EXPECT_EQ(j.seconds, "0.38");
  EXPECT_EQ(j.progress, 0);
  EXPECT_EQ(j.attempts, 0);
  EXPECT_EQ(j.created_at, 1'000'000);
  EXPECT_FALSE(j.started_at || j.completed_at || j.expires_at || j.error);
  EXPECT_EQ(j.download_token.size(), 64u);
  ASSERT_EQ(j.inputs.size(), 2u);
  EXPECT_EQ(j.inputs[1].file, "1.jpg");
  EXPECT_EQ(j.inputs[1].frame_index, 8);
  EXPECT_DOUBLE_EQ(j.inputs[1].strength, 0.75);
  EXPECT_FALSE(j.inputs[1].crf);
  EXPECT_EQ(read_bytes(store.data_dir().input_path(j.id, "1.jpg")), "JPG");

  const auto got = store.get(j.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->request_json, j.request_json);
  EXPECT_EQ(got->download_token, j.download_token);
  EXPECT_EQ(got->inputs.size(), 2u);
  EXPECT_FALSE(store.get(new_job_id()));
  EXPECT_FALSE(store.get("../" + j.id));

  Job with_id = new_job("chosen id");
  with_id.id = new_job_id();
  EXPECT_EQ(store.insert(with_id).id, with_id.id);
  // An id in use is refused and its job's files stay.
  Job dup = new_job("duplicate");
  dup.id = j.id;
  expect_error_containing([&] { store.insert(dup); }, {store.data_dir().db_path(), "UNIQUE"});
  EXPECT_THROW(store.insert(dup, {input("other", "jpg", 0)}), Error);
  EXPECT_EQ(read_bytes(store.data_dir().input_path(j.id, "1.jpg")), "JPG");
  EXPECT_EQ(store.get(j.id)->prompt, "a cat");
  // A failed INSERT takes the images it stored with it.
  Job plain = store.insert(new_job("no images"));
  plain.prompt = "duplicate with images";
  EXPECT_THROW(store.insert(plain, {input("I", "png", 0)}), Error);
  EXPECT_FALSE(fs::exists(store.data_dir().inputs_path(plain.id)));
  Job bad = new_job("bad id");
  bad.id = "video_../../etc";
  EXPECT_THROW(store.insert(bad), Error);

  // Reopened, everything is there.
  JobStore& again = open();
  EXPECT_EQ(again.get(j.id)->inputs.size(), 2u);
  EXPECT_EQ(again.counts()[JobStatus::Queued], 3);
}

TEST_F(JobStoreTest, RunsAJobThroughItsTransitions) {
  JobStore& store = open({.keep_outputs_for_s = 3600});
  const Job j = store.insert(new_job("a dog"));
  EXPECT_FALSE(store.set_progress(j.id, 10)) << "not running yet";
  EXPECT_FALSE(store.complete(j.id, "{}")) << "not running yet";
  const auto started = store.start(j.id);
  ASSERT_TRUE(started);
  EXPECT_EQ(started->status, JobStatus::InProgress);
  EXPECT_EQ(started->attempts, 1);
  EXPECT_DOUBLE_EQ(*started->started_at, 1'000'000.0);
  EXPECT_FALSE(store.start(j.id)) << "started twice";
  clock_.advance(0.5);
  EXPECT_EQ(store.set_progress(j.id, 42)->progress, 42);
  EXPECT_THROW(store.set_progress(j.id, 100), Error);
  EXPECT_THROW(store.set_progress(j.id, -1), Error);
  EXPECT_THROW(store.complete(j.id, "{}"), Error) << "no output written";

  clock_.advance(10);
  write_output(store.data_dir(), j.id, "the mp4 bytes");
  const auto done = store.complete(j.id, R"({"inference_time_s":10})");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, JobStatus::Completed);
  EXPECT_EQ(done->progress, 100);
  EXPECT_EQ(done->output_file, j.id + ".mp4");
  EXPECT_EQ(done->output_bytes, 13);
  EXPECT_EQ(done->output_sha256, sha256_hex("the mp4 bytes"));
  EXPECT_EQ(done->metrics_json, R"({"inference_time_s":10})");
  EXPECT_EQ(*done->completed_at, 1'000'010);
  EXPECT_EQ(*done->expires_at, 1'000'010 + 3600);
  EXPECT_FALSE(done->error);
  // Ended: no other transition applies.
  EXPECT_FALSE(store.fail(j.id, {"timeout", "late"}));
  EXPECT_FALSE(store.cancel(j.id));
  EXPECT_FALSE(store.requeue(j.id));
  EXPECT_FALSE(store.start(j.id));
  EXPECT_FALSE(store.complete(j.id, "{}"));
  EXPECT_EQ(store.get(j.id)->status, JobStatus::Completed);
  EXPECT_EQ(read_bytes(store.data_dir().output_path(j.id)), "the mp4 bytes");
}

TEST_F(JobStoreTest, FailCancelRequeueAndRemove) {
  JobStore& store = open();
  DataDir& dir = store.data_dir();
  const Job failing = store.insert(new_job("fails"), {input("I", "png", 0)});
  store.start(failing.id);
  write_bytes(dir.output_path(failing.id) + ".tmp", "partial");
  const auto failed = store.fail(failing.id, {"generation_error", "the sampler diverged"});
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, JobStatus::Failed);
  EXPECT_EQ(failed->error->code, "generation_error");
  EXPECT_EQ(failed->error->message, "the sampler diverged");
  EXPECT_TRUE(failed->completed_at);
  EXPECT_FALSE(failed->expires_at) << "kept forever without retention";
  EXPECT_FALSE(fs::exists(dir.output_path(failing.id) + ".tmp"));

  const Job queued = store.insert(new_job("cancel me"), {input("I", "png", 0)});
  const auto cancelled = store.cancel(queued.id);
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(cancelled->status, JobStatus::Cancelled);
  EXPECT_TRUE(cancelled->inputs.empty());
  EXPECT_FALSE(fs::exists(dir.inputs_path(queued.id)));
  EXPECT_FALSE(store.cancel(queued.id)) << "already ended";

  const Job running = store.insert(new_job("stopped by a shutdown"));
  store.start(running.id);
  store.set_progress(running.id, 30);
  const auto back = store.requeue(running.id);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, JobStatus::Queued);
  EXPECT_EQ(back->attempts, 0) << "a stop on purpose is no attempt";
  EXPECT_EQ(back->progress, 0);
  EXPECT_FALSE(back->started_at);
  EXPECT_FALSE(store.requeue(running.id)) << "not running";

  const Job done = store.insert(new_job("remove me"), {input("I", "png", 0)});
  run_to_completion(store, done.id, "video");
  write_bytes(dir.thumbnail_path(done.id), "png");
  EXPECT_TRUE(store.remove(done.id));
  EXPECT_FALSE(store.get(done.id));
  EXPECT_FALSE(fs::exists(dir.output_path(done.id)));
  EXPECT_FALSE(fs::exists(dir.thumbnail_path(done.id)));
  EXPECT_FALSE(fs::exists(dir.inputs_path(done.id)));
  EXPECT_FALSE(store.remove(done.id));
  EXPECT_FALSE(store.remove("../x"));

  // The database as another connection sees it: WAL, and the input rows went with their jobs
  // (the cancelled one's explicitly, the removed one's by the foreign key's cascade).
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(dir.db_path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
              SQLITE_OK);
    auto one = [&](const char* sql) {
      sqlite3_stmt* s = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), SQLITE_OK) << sql;
      EXPECT_EQ(sqlite3_step(s), SQLITE_ROW) << sql;
      std::string v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      sqlite3_finalize(s);
      return v;
    };
    EXPECT_EQ(one("PRAGMA journal_mode"), "wal");
    EXPECT_EQ(one("PRAGMA user_version"), "1");
    EXPECT_EQ(one("SELECT group_concat(job_id) FROM inputs"), failing.id);
    sqlite3_close(db);
  }

  const StatusCounts c = store.counts();
  EXPECT_EQ(c[JobStatus::Failed], 1);
  EXPECT_EQ(c[JobStatus::Cancelled], 1);
  EXPECT_EQ(c[JobStatus::Queued], 1);
  EXPECT_EQ(c[JobStatus::Completed], 0);
  EXPECT_EQ(c[JobStatus::InProgress], 0);
  expect_no_orphans(store);
}

TEST_F(JobStoreTest, ACompletionAfterACancelKeepsNoOutput) {
  JobStore& store = open();
  const Job j = store.insert(new_job("raced"));
  store.start(j.id);
  ASSERT_TRUE(store.cancel(j.id));
  // The worker finished its file before it saw the cancel.
  write_output(store.data_dir(), j.id, "too late");
  EXPECT_FALSE(store.complete(j.id, "{}"));
  EXPECT_FALSE(fs::exists(store.data_dir().output_path(j.id)));
  EXPECT_EQ(store.get(j.id)->status, JobStatus::Cancelled);
  EXPECT_FALSE(store.set_progress(j.id, 10));
  expect_no_orphans(store);
}

TEST_F(JobStoreTest, AJobBeingDeletedIsHidden) {
  JobStore& store = open();
  const Job a = store.insert(new_job("a")), b = store.insert(new_job("b"));
  store.start(b.id);
  EXPECT_TRUE(store.mark_deleting(a.id));
  EXPECT_TRUE(store.mark_deleting(b.id));
  EXPECT_FALSE(store.mark_deleting(new_job_id()));
  EXPECT_FALSE(store.get(a.id));
  EXPECT_TRUE(store.queued().empty());
  EXPECT_TRUE(store.list({})->data.empty());
  EXPECT_EQ(store.counts()[JobStatus::Queued], 0);
  EXPECT_FALSE(store.start(a.id));
  // The running one's worker may still report until it stops.
  EXPECT_TRUE(store.set_progress(b.id, 5));
  EXPECT_TRUE(store.remove(a.id));
  EXPECT_TRUE(store.remove(b.id));
}

TEST_F(JobStoreTest, PagesThroughTheList) {
  JobStore& store = open();
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(store.insert(new_job("job " + std::to_string(i))).id);
  auto page_ids = [](const ListPage& p) {
    std::vector<std::string> v;
    for (const auto& j : p.data) v.push_back(j.id);
    return v;
  };
  // Newest first.
  auto p = store.list({.limit = 3});
  ASSERT_TRUE(p);
  EXPECT_EQ(page_ids(*p), (std::vector<std::string>{ids[6], ids[5], ids[4]}));
  EXPECT_TRUE(p->has_more);
  p = store.list({.limit = 3, .after = ids[4]});
  EXPECT_EQ(page_ids(*p), (std::vector<std::string>{ids[3], ids[2], ids[1]}));
  EXPECT_TRUE(p->has_more);
  p = store.list({.limit = 3, .after = ids[1]});
  EXPECT_EQ(page_ids(*p), (std::vector<std::string>{ids[0]}));
  EXPECT_FALSE(p->has_more);
  p = store.list({.limit = 1, .after = ids[0]});
  EXPECT_TRUE(p->data.empty());
  EXPECT_FALSE(p->has_more);
  // Oldest first.
  p = store.list({.limit = 4, .ascending = true});
  EXPECT_EQ(page_ids(*p), (std::vector<std::string>{ids[0], ids[1], ids[2], ids[3]}));
  EXPECT_TRUE(p->has_more);
  p = store.list({.limit = 4, .after = ids[3], .ascending = true});
  EXPECT_EQ(page_ids(*p), (std::vector<std::string>{ids[4], ids[5], ids[6]}));
  EXPECT_FALSE(p->has_more);
  // Exactly a page: no more.
  p = store.list({.limit = 7});
  EXPECT_EQ(p->data.size(), 7u);
  EXPECT_FALSE(p->has_more);
  // A removed job's neighbours page on; an unknown `after` is no page.
  store.remove(ids[5]);
  p = store.list({.limit = 2, .after = ids[6]});
  EXPECT_EQ(page_ids(*p), (std::vector<std::string>{ids[4], ids[3]}));
  EXPECT_FALSE(store.list({.limit = 2, .after = ids[5]}));
  EXPECT_FALSE(store.list({.limit = 2, .after = "video_nope"}));
  EXPECT_THROW(store.list({.limit = 0}), Error);
  // The queue is in creation order.
  store.start(ids[0]);
  const auto q = store.queued();
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q.front().id, ids[1]);
  EXPECT_EQ(q.back().id, ids[6]);
}

TEST_F(JobStoreTest, RecoveryRemovesTemporaries) {
  const Job j = open().insert(new_job("x"));
  close();
  {
    DataDir dir(root());
    write_bytes(dir.output_path(j.id) + ".tmp", "half an mp4");
    write_bytes(dir.thumbnail_path(j.id) + ".tmp", "half a jpeg");
    fs::create_directories(dir.inputs_path(new_job_id()) + ".tmp");
  }
  JobStore& again = open();
  EXPECT_EQ(again.recovery().temporaries_removed, 3);
  EXPECT_EQ(again.recovery().queued, 1);
  expect_no_orphans(again);
}

TEST_F(JobStoreTest, RecoveryRequeuesARunningJobWhileAttemptsAreLeft) {
  JobStore& store = open();
  const Job j = store.insert(new_job("x"), {input("I", "png", 0)});
  store.start(j.id);
  store.set_progress(j.id, 60);
  write_output(store.data_dir(), j.id, "a stale output");
  JobStore& second = open();
  EXPECT_EQ(second.recovery().requeued, 1);
  EXPECT_EQ(second.recovery().queued, 1);
  auto got = second.get(j.id);
  EXPECT_EQ(got->status, JobStatus::Queued);
  EXPECT_EQ(got->attempts, 1);
  EXPECT_EQ(got->progress, 0);
  EXPECT_FALSE(got->started_at);
  EXPECT_EQ(got->inputs.size(), 1u);
  EXPECT_FALSE(fs::exists(second.data_dir().output_path(j.id)));
  ASSERT_EQ(second.queued().size(), 1u);
  // Its second run is cut short too: the attempts are used up.
  EXPECT_EQ(second.start(j.id)->attempts, 2);
  JobStore& third = open();
  EXPECT_EQ(third.recovery().interrupted, 1);
  EXPECT_EQ(third.recovery().queued, 0);
  got = third.get(j.id);
  EXPECT_EQ(got->status, JobStatus::Failed);
  EXPECT_EQ(got->error->code, "interrupted");
  EXPECT_NE(got->error->message.find("2 times"), std::string::npos) << got->error->message;
  EXPECT_TRUE(got->completed_at);
  expect_no_orphans(third);
}

TEST_F(JobStoreTest, RecoveryFailsAQueuedJobWhoseInputIsGone) {
  JobStore& store = open();
  const Job lost = store.insert(new_job("lost"), {input("A", "png", 0), input("B", "png", 8)});
  const Job running = store.insert(new_job("running"), {input("A", "png", 0)});
  const Job fine = store.insert(new_job("fine"), {input("A", "png", 0)});
  store.start(running.id);
  fs::remove(store.data_dir().input_path(lost.id, "1.png"));
  fs::remove(store.data_dir().input_path(running.id, "0.png"));
  JobStore& again = open();
  EXPECT_EQ(again.recovery().input_missing, 2);
  EXPECT_EQ(again.recovery().requeued, 1);
  EXPECT_EQ(again.recovery().queued, 1);
  for (const auto& id : {lost.id, running.id}) {
    const auto j = again.get(id);
    EXPECT_EQ(j->status, JobStatus::Failed);
    EXPECT_EQ(j->error->code, "input_missing");
  }
  EXPECT_NE(again.get(lost.id)->error->message.find("1.png"), std::string::npos);
  EXPECT_EQ(again.get(fine.id)->status, JobStatus::Queued);
  EXPECT_FALSE(fs::exists(again.data_dir().inputs_path(lost.id)));
  expect_no_orphans(again);
}

TEST_F(JobStoreTest, RecoveryFailsACompletedJobWhoseOutputIsGone) {
  JobStore& store = open();
  const Job gone = store.insert(new_job("gone"));
  const Job cut = store.insert(new_job("cut"));
  const Job kept = store.insert(new_job("kept"));
  run_to_completion(store, gone.id, "0123456789");
  run_to_completion(store, cut.id, "0123456789");
  const Job kept_done = run_to_completion(store, kept.id, "0123456789");
  write_bytes(store.data_dir().thumbnail_path(gone.id), "jpeg");
  fs::remove(store.data_dir().output_path(gone.id));
  fs::resize_file(store.data_dir().output_path(cut.id), 4);
  JobStore& again = open();
  EXPECT_EQ(again.recovery().output_missing, 2);
  for (const auto& id : {gone.id, cut.id}) {
    const auto j = again.get(id);
    EXPECT_EQ(j->status, JobStatus::Failed);
    EXPECT_EQ(j->error->code, "output_missing");
    EXPECT_TRUE(j->output_file.empty());
    EXPECT_FALSE(fs::exists(again.data_dir().output_path(id)));
    EXPECT_FALSE(fs::exists(again.data_dir().thumbnail_path(id)));
  }
  const auto k = again.get(kept.id);
  EXPECT_EQ(k->status, JobStatus::Completed);
  EXPECT_EQ(k->output_sha256, kept_done.output_sha256);
  EXPECT_EQ(sha256_hex_of_file(again.data_dir().output_path(kept.id)), kept_done.output_sha256);
  expect_no_orphans(again);
}

// A WAV (t2a) or PNG (one frame) output is recorded under its own name, kept by recovery while
// whole, failed as output_missing when gone, and removed with the job.
TEST_F(JobStoreTest, AWavOrPngOutputIsRecordedByItsName) {
  JobStore& store = open();
  const Job wav = store.insert(new_job("rain"));
  const Job png = store.insert(new_job("a still"));
  for (const auto& [job, ext] : {std::pair{wav, std::string("wav")}, std::pair{png, std::string("png")}}) {
    ASSERT_TRUE(store.start(job.id));
    write_file_atomic(store.data_dir().output_path(job.id, ext), "RIFF....WAVE" + ext);
    const auto done = store.complete(job.id, "{}", job.id + "." + ext);
    ASSERT_TRUE(done);
    EXPECT_EQ(done->output_file, job.id + "." + ext);
    EXPECT_EQ(done->output_bytes, 15);
    EXPECT_EQ(done->output_sha256, sha256_hex("RIFF....WAVE" + ext));
  }
  const DirListing files = store.data_dir().listing();
  EXPECT_EQ(files.output_ids.size(), 2u);
  // a restart keeps both; a lost WAV fails its job
  EXPECT_EQ(open().recovery().output_missing, 0);
  EXPECT_EQ(store_->get(wav.id)->status, JobStatus::Completed);
  fs::remove(dir_->output_path(wav.id, "wav"));
  JobStore& again = open();
  EXPECT_EQ(again.recovery().output_missing, 1);
  EXPECT_EQ(again.get(wav.id)->error->code, "output_missing");
  EXPECT_EQ(again.get(png.id)->status, JobStatus::Completed);
  ASSERT_TRUE(again.remove(png.id));
  EXPECT_FALSE(fs::exists(again.data_dir().output_path(png.id, "png")));
  // a name that is not one of the job's outputs is refused
  const Job other = again.insert(new_job("other"));
  ASSERT_TRUE(again.start(other.id));
  write_file_atomic(again.data_dir().output_path(other.id), "mp4");
  EXPECT_THROW(again.complete(other.id, "{}", "../../etc/passwd"), Error);
  EXPECT_THROW(again.complete(other.id, "{}", wav.id + ".mp4"), Error);
}

TEST_F(JobStoreTest, RecoveryRemovesOrphansAndFinishesDeletions) {
  JobStore& store = open();
  DataDir& dir = store.data_dir();
  const Job done = store.insert(new_job("done"), {input("I", "png", 0)});
  run_to_completion(store, done.id, "video");
  write_bytes(dir.thumbnail_path(done.id), "png");
  const Job cancelled = store.insert(new_job("cancelled"));
  store.cancel(cancelled.id);
  const Job deleting = store.insert(new_job("deleting"), {input("I", "png", 0)});
  run_to_completion(store, deleting.id, "video");
  store.mark_deleting(deleting.id);
  const Job queued = store.insert(new_job("queued"), {input("I", "png", 0)});
  // Files no row needs: of an unknown job, an output of a queued job, inputs of a cancelled one.
  const std::string stranger = new_job_id();
  write_bytes(dir.output_path(stranger), "video");
  write_bytes(dir.thumbnail_path(stranger), "png");
  dir.store_inputs(stranger, {{"I", "png"}});
  write_bytes(dir.output_path(queued.id), "stale");
  dir.store_inputs(cancelled.id, {{"I", "png"}});
  write_bytes(dir.outputs_dir() + "/README.txt", "not ours");

  JobStore& again = open();
  DataDir& dir2 = again.data_dir();
  const RecoverySummary& r = again.recovery();
  EXPECT_EQ(r.deletions_finished, 1);
  // stranger's outputs and inputs, deleting's outputs and inputs, queued's output, cancelled's
  // inputs
  EXPECT_EQ(r.orphans_removed, 6);
  EXPECT_FALSE(again.get(deleting.id));
  EXPECT_FALSE(fs::exists(dir2.output_path(deleting.id)));
  EXPECT_FALSE(fs::exists(dir2.inputs_path(deleting.id)));
  EXPECT_FALSE(fs::exists(dir2.output_path(stranger)));
  EXPECT_FALSE(fs::exists(dir2.thumbnail_path(stranger)));
  EXPECT_FALSE(fs::exists(dir2.inputs_path(stranger)));
  EXPECT_FALSE(fs::exists(dir2.output_path(queued.id)));
  EXPECT_FALSE(fs::exists(dir2.inputs_path(cancelled.id)));
  // What rows need stays, and so does what is not ours.
  EXPECT_TRUE(fs::exists(dir2.output_path(done.id)));
  EXPECT_TRUE(fs::exists(dir2.thumbnail_path(done.id)));
  EXPECT_TRUE(fs::exists(dir2.input_path(done.id, "0.png")));
  EXPECT_TRUE(fs::exists(dir2.input_path(queued.id, "0.png")));
  EXPECT_TRUE(fs::exists(dir2.outputs_dir() + "/README.txt"));
  EXPECT_EQ(again.get(queued.id)->status, JobStatus::Queued);
  expect_no_orphans(again);
  const std::string line = r.line();
  EXPECT_NE(line.find("1 queued"), std::string::npos) << line;
  EXPECT_NE(line.find("6 orphan files removed"), std::string::npos) << line;
}

TEST_F(JobStoreTest, RetentionRemovesEndedJobs) {
  JobStore& store = open({.keep_outputs_for_s = 100});
  const Job done = store.insert(new_job("done"), {input("I", "png", 0)});
  const Job failed = store.insert(new_job("failed"));
  const Job running = store.insert(new_job("running"));
  run_to_completion(store, done.id, "video");
  write_bytes(store.data_dir().thumbnail_path(done.id), "png");
  store.fail(failed.id, {"generation_error", "boom"});
  store.start(running.id);
  EXPECT_EQ(*store.get(done.id)->expires_at, 1'000'100);
  clock_.advance(99);
  EXPECT_EQ(store.expire(), 0);
  clock_.advance(1);
  EXPECT_EQ(store.expire(), 2);
  EXPECT_FALSE(store.get(done.id));
  EXPECT_FALSE(store.get(failed.id));
  EXPECT_FALSE(fs::exists(store.data_dir().output_path(done.id)));
  EXPECT_FALSE(fs::exists(store.data_dir().thumbnail_path(done.id)));
  EXPECT_FALSE(fs::exists(store.data_dir().inputs_path(done.id)));
  EXPECT_TRUE(store.get(running.id)) << "a running job never expires";
  write_output(store.data_dir(), running.id, "video");
  ASSERT_TRUE(store.complete(running.id, "{}"));

  // Without retention nothing expires; the setting at open applies to every ended job.
  clock_.advance(1'000'000);
  JobStore& forever = open();
  EXPECT_EQ(forever.expire(), 0);
  EXPECT_FALSE(forever.get(running.id)->expires_at);
  clock_.advance(-1'000'000 + 50);
  JobStore& keep_10 = open({.keep_outputs_for_s = 10});
  EXPECT_EQ(keep_10.recovery().expired, 1);
  EXPECT_FALSE(keep_10.get(running.id));
  expect_no_orphans(keep_10);
}

TEST_F(JobStoreTest, BadDatabasesAreClearErrors) {
  {
    DataDir dir(root());
    write_bytes(dir.db_path(), std::string(4096, 'x'));
    expect_error_containing([&] { JobStore s(dir); }, {dir.db_path()});
    fs::remove(dir.db_path());
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.db_path().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE other(x); ", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    expect_error_containing([&] { JobStore s(dir); },
                            {dir.db_path(), "not an ltx serve job store"});
    fs::remove(dir.db_path());
    { JobStore fresh(dir); }
    ASSERT_EQ(sqlite3_open(dir.db_path().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=2", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    expect_error_containing([&] { JobStore s(dir); }, {dir.db_path(), "schema version 2"});
    expect_error_containing([&] { JobStore s(dir, {.max_attempts = 0}); }, {"max_attempts"});
  }
}

TEST_F(JobStoreTest, EightThreadsAtOnce) {
  JobStore& store = open({.keep_outputs_for_s = 0});
  constexpr int kThreads = 8, kJobs = 25;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < kJobs; ++i) {
          const std::string name = std::to_string(t) + "/" + std::to_string(i);
          std::vector<NewInput> ins;
          if (i % 2 == 0) ins.push_back(input("image " + name, "png", 0));
          const Job j = store.insert(new_job(name), ins);
          if (i % 7 == 3) {
            if (!store.cancel(j.id)) ++errors;
            continue;
          }
          if (!store.start(j.id)) ++errors;
          for (int p = 10; p < 100; p += 30)
            if (!store.set_progress(j.id, p)) ++errors;
          write_output(store.data_dir(), j.id, "video " + name);
          const auto done = store.complete(j.id, "{}");
          if (!done || done->output_sha256 != sha256_hex("video " + name)) ++errors;
          if (!store.list({.limit = 5})) ++errors;
          if (store.get(j.id)->prompt != name) ++errors;
          if (i % 5 == 4 && !store.remove(j.id)) ++errors;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++errors;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  // Per thread: i % 7 == 3 → cancelled (i = 3, 10, 17, 24); of the rest, i % 5 == 4 removed
  // (i = 4, 9, 14, 19); the others completed.
  const StatusCounts c = store.counts();
  EXPECT_EQ(c[JobStatus::Cancelled], kThreads * 4);
  EXPECT_EQ(c[JobStatus::Completed], kThreads * (kJobs - 4 - 4));
  EXPECT_EQ(c[JobStatus::Queued] + c[JobStatus::InProgress] + c[JobStatus::Failed], 0);
  std::set<std::string> seen;
  std::string after;
  for (;;) {
    const auto page = store.list({.limit = 7, .after = after});
    ASSERT_TRUE(page);
    for (const auto& j : page->data) EXPECT_TRUE(seen.insert(j.id).second) << "listed twice";
    if (!page->has_more) break;
    after = page->data.back().id;
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), c[JobStatus::Cancelled] + c[JobStatus::Completed]);
  expect_no_orphans(store);
}

// ---- crashes: a forked child runs the store and _exits at a named point.

constexpr int kCrashed = 42;

class JobStoreCrashTest : public JobStoreTest {
 protected:
  // A completed job made before each crash: it must come through every crash unchanged.
  void SetUp() override {
    JobStore& store = open();
    keeper_ = store.insert(new_job("keeper"), {input("keeper image", "png", 0)});
    keeper_ = run_to_completion(store, keeper_.id, "keeper video");
    close();
  }

  // Runs `body` in a child with the store open and a hook that _exits at `point` (or the body
  // _exits itself); expects the child to have died there.
  void crash_in_child(const std::string& point, const std::function<void(JobStore&)>& body) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      try {
        DataDir dir(root());
        JobStoreOptions o;
        o.crash_point = [point](std::string_view p) {
          if (p == point) ::_exit(kCrashed);
        };
        JobStore store(dir, o);
        body(store);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(1);  // the point was never reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), kCrashed) << "1: never reached '" << point << "'; 2: threw";
  }

  // Reopens after the crash: the keeper is whole and nothing is orphaned.
  JobStore& reopen() {
    JobStore& store = open();
    const auto k = store.get(keeper_.id);
    EXPECT_TRUE(k);
    if (k) {
      EXPECT_EQ(k->status, JobStatus::Completed);
      EXPECT_EQ(sha256_hex_of_file(store.data_dir().output_path(keeper_.id)),
                keeper_.output_sha256);
      EXPECT_EQ(read_bytes(store.data_dir().input_path(keeper_.id, "0.png")), "keeper image");
    }
    expect_no_orphans(store);
    return store;
  }

  Job keeper_;
};

TEST_F(JobStoreCrashTest, AfterTheUploadRename) {
  const std::string id = new_job_id();
  crash_in_child("inputs_stored", [&](JobStore& s) {
    Job j = new_job("never inserted");
    j.id = id;
    s.insert(j, {input("I", "png", 0)});
  });
  ASSERT_TRUE(fs::exists(tmp_.file("data/inputs/" + id))) << "the crash came after the rename";
  JobStore& store = reopen();
  EXPECT_FALSE(store.get(id)) << "the client never got this id";
  EXPECT_EQ(store.recovery().orphans_removed, 1);
  EXPECT_FALSE(fs::exists(store.data_dir().inputs_path(id)));
}

TEST_F(JobStoreCrashTest, AfterTheInsert) {
  const std::string id = new_job_id();
  crash_in_child("inserted", [&](JobStore& s) {
    Job j = new_job("inserted");
    j.id = id;
    s.insert(j, {input("first", "png", 0), input("second", "jpg", 4)});
  });
  JobStore& store = reopen();
  const auto j = store.get(id);
  ASSERT_TRUE(j) << "a job the client may have been told about is kept";
  EXPECT_EQ(j->status, JobStatus::Queued);
  ASSERT_EQ(j->inputs.size(), 2u);
  EXPECT_EQ(read_bytes(store.data_dir().input_path(id, "1.jpg")), "second");
  ASSERT_EQ(store.queued().size(), 1u);
  run_to_completion(store, id, "it ran after the restart");
}

TEST_F(JobStoreCrashTest, MidOutputWrite) {
  const std::string id = new_job_id();
  crash_in_child("mid_output", [&](JobStore& s) {
    Job j = new_job("running");
    j.id = id;
    s.insert(j);
    s.start(id);
    s.set_progress(id, 80);
    write_bytes(s.data_dir().output_path(id) + ".tmp", "the first half of an mp4");
    ::_exit(kCrashed);
  });
  JobStore& store = reopen();
  EXPECT_EQ(store.recovery().temporaries_removed, 1);
  EXPECT_EQ(store.recovery().requeued, 1);
  const auto j = store.get(id);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, JobStatus::Queued);
  EXPECT_EQ(j->attempts, 1);
  EXPECT_EQ(store.queued().size(), 1u);
}

TEST_F(JobStoreCrashTest, BetweenTheOutputRenameAndTheUpdate) {
  const std::string id = new_job_id();
  crash_in_child("output_synced", [&](JobStore& s) {
    Job j = new_job("almost done");
    j.id = id;
    s.insert(j);
    s.start(id);
    write_output(s.data_dir(), id, "a whole mp4");
    s.complete(id, "{}");
  });
  ASSERT_TRUE(fs::exists(tmp_.file("data/outputs/" + id + ".mp4")));
  JobStore& store = reopen();
  const auto j = store.get(id);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, JobStatus::Queued) << "the run is repeated: its row never said completed";
  EXPECT_FALSE(fs::exists(store.data_dir().output_path(id)));
  run_to_completion(store, id, "the second run's mp4");
}

TEST_F(JobStoreCrashTest, BetweenTheDeleteAndTheFiles) {
  crash_in_child("row_deleted", [&](JobStore& s) { s.remove(keeper_.id); });
  ASSERT_TRUE(fs::exists(tmp_.file("data/outputs/" + keeper_.id + ".mp4")));
  JobStore& store = open();
  EXPECT_FALSE(store.get(keeper_.id)) << "the delete happened";
  EXPECT_EQ(store.recovery().orphans_removed, 2);  // the output and the inputs folder
  EXPECT_FALSE(fs::exists(store.data_dir().output_path(keeper_.id)));
  EXPECT_FALSE(fs::exists(store.data_dir().inputs_path(keeper_.id)));
  expect_no_orphans(store);
}

}  // namespace
}  // namespace ltx::server
