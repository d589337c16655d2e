// JobEvents: versions, coalescing, wake-ups on change, removal and stop.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "server/fake_runner.h"
#include "server/job_events.h"
#include "server/scheduler.h"
#include "server/scheduler_test_util.h"

namespace ltx::server::job_events_test {
namespace {

using namespace std::chrono_literals;
using test::make_job;
using test::wait_until;

Job with_progress(Job j, int p, JobStatus s = JobStatus::InProgress) {
  j.progress = p;
  j.status = s;
  return j;
}

TEST(JobEvents, PublishBumpsTheVersionAndKeepsOnlyTheLatest) {
  JobEvents ev;
  const Job a = make_job(1), b = make_job(2);
  const uint64_t v1 = ev.publish(a);
  const uint64_t v2 = ev.publish(b);
  EXPECT_GT(v2, v1);
  uint64_t last = v2;
  for (int p = 1; p <= 1000; ++p) {
    const uint64_t v = ev.publish(with_progress(a, p % 100));
    EXPECT_GT(v, last);
    last = v;
  }
  EXPECT_EQ(ev.size(), 2u);  // one snapshot per job, however many changes
  const auto s = ev.latest(a.id);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->version, last);
  EXPECT_EQ(s->job.progress, 1000 % 100);
  EXPECT_FALSE(ev.latest(make_job(3).id));
}

TEST(JobEvents, WaitReturnsAtOnceWhenTheVersionDiffersAndTimesOutWhenNot) {
  JobEvents ev;
  const Job a = make_job(1);
  const uint64_t v = ev.publish(a);
  const auto first = ev.wait_for_change(a.id, 0, 10s);  // 0: the current snapshot, at once
  ASSERT_TRUE(first);
  EXPECT_EQ(first->version, v);
  const auto same = ev.wait_for_change(a.id, v, 5ms);  // nothing changed: the same snapshot
  ASSERT_TRUE(same);
  EXPECT_EQ(same->version, v);
  EXPECT_FALSE(ev.wait_for_change(make_job(2).id, 0, 10s));  // unknown: at once
}

TEST(JobEvents, AWaitingReaderWakesOnPublish) {
  JobEvents ev;
  const Job a = make_job(1);
  const uint64_t v = ev.publish(a);
  std::optional<JobSnapshot> got;
  std::thread reader([&] { got = ev.wait_for_change(a.id, v, 20s); });
  ASSERT_TRUE(wait_until([&] { return ev.waiting() == 1; }));
  ev.publish(with_progress(a, 42));
  reader.join();
  ASSERT_TRUE(got);
  EXPECT_GT(got->version, v);
  EXPECT_EQ(got->job.progress, 42);
}

TEST(JobEvents, RemovalWakesReadersWithNothing) {
  JobEvents ev;
  const Job a = make_job(1);
  const uint64_t v = ev.publish(a);
  std::atomic<int> woke_empty{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i)
    readers.emplace_back([&] {
      if (!ev.wait_for_change(a.id, v, 20s)) ++woke_empty;
    });
  ASSERT_TRUE(wait_until([&] { return ev.waiting() == 3; }));
  ev.remove(a.id);
  for (auto& t : readers) t.join();
  EXPECT_EQ(woke_empty.load(), 3);
  EXPECT_FALSE(ev.latest(a.id));
  EXPECT_FALSE(ev.wait_for_change(a.id, 0, 10s));
}

TEST(JobEvents, StopWakesEveryReaderAndLaterWaitsReturnAtOnce) {
  JobEvents ev;
  const Job a = make_job(1), b = make_job(2);
  const uint64_t va = ev.publish(a), vb = ev.publish(b);
  std::vector<std::thread> readers;
  std::atomic<int> woke{0};
  for (int i = 0; i < 4; ++i)
    readers.emplace_back([&, i] {
      const auto s = ev.wait_for_change(i % 2 ? a.id : b.id, i % 2 ? va : vb, 20s);
      if (s && s->version == (i % 2 ? va : vb)) ++woke;  // unchanged: woken by stop
    });
  ASSERT_TRUE(wait_until([&] { return ev.waiting() == 4; }));
  ev.stop();
  for (auto& t : readers) t.join();
  EXPECT_EQ(woke.load(), 4);
  EXPECT_TRUE(ev.stopped());
  const auto s = ev.wait_for_change(a.id, va, 20s);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->version, va);
}

// Readers that chase a writer see versions only rise and always get the final state: no change
// is lost between a reader's wake-up and its next wait.
TEST(JobEvents, ReadersNeverMissTheLastChange) {
  JobEvents ev;
  const Job a = make_job(1);
  ev.publish(with_progress(a, 0, JobStatus::Queued));
  constexpr int kReaders = 8, kChanges = 2000;
  std::atomic<int> ok{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r)
    readers.emplace_back([&] {
      uint64_t seen = 0;
      int last_progress = -1;
      bool monotone = true;
      const auto end = std::chrono::steady_clock::now() + 30s;
      while (std::chrono::steady_clock::now() < end) {
        const auto s = ev.wait_for_change(a.id, seen, 1s);
        if (!s) return;
        if (s->version < seen) monotone = false;
        if (s->job.progress < last_progress) monotone = false;
        seen = s->version;
        last_progress = s->job.progress;
        if (s->job.status == JobStatus::Completed) {
          if (monotone && s->job.progress == kChanges) ++ok;
          return;
        }
      }
    });
  std::thread writer([&] {
    for (int p = 1; p < kChanges; ++p) ev.publish(with_progress(a, p));
    ev.publish(with_progress(a, kChanges, JobStatus::Completed));
  });
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), kReaders);
}

// The server's listener in miniature: every state change becomes a published snapshot.
class PublishingListener : public SchedulerListener {
 public:
  explicit PublishingListener(JobEvents& ev) : ev_(ev) {}
  void started(const Job& job) override { set(job, JobStatus::InProgress, 0); }
  void progress(const Job& job, int percent, const std::string&) override {
    set(job, JobStatus::InProgress, percent);
  }
  void completed(const Job& job, const RunOutcome&) override { set(job, JobStatus::Completed, 100); }
  void failed(const Job& job, const JobError&) override { set(job, JobStatus::Failed, -1); }
  void cancelled(const Job& job) override { set(job, JobStatus::Cancelled, -1); }
  void requeued(const Job& job) override { set(job, JobStatus::Queued, 0); }

 private:
  JobEvents& ev_;
  std::mutex mu_;
  std::map<std::string, Job> jobs_;
  void set(const Job& job, JobStatus status, int progress) {
    std::lock_guard lock(mu_);
    Job& j = jobs_.try_emplace(job.id, job).first->second;
    j.status = status;
    if (progress >= 0) j.progress = progress;
    ev_.publish(j);
  }
};

// A reader following a job the way GET /v1/videos/{id}/events does sees it queued, then running
// with rising progress, then completed at 100 as the last event.
TEST(JobEvents, AReaderFollowsAJobThroughTheScheduler) {
  JobEvents ev;
  PublishingListener listener(ev);
  test::FakeRunner runner;
  runner.defaults.steps = 30;
  runner.defaults.step_time = 1ms;
  Scheduler s(SchedulerOptions{}, {&runner}, listener);
  const Job a = make_job(1);
  ev.publish(a);  // stored as queued
  s.submit(a);
  std::vector<JobSnapshot> seen;
  std::thread reader([&] {
    uint64_t version = 0;
    const auto end = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < end) {
      const auto snap = ev.wait_for_change(a.id, version, 1s);
      if (!snap) return;
      if (snap->version == version) continue;  // a quiet interval (an SSE ping)
      version = snap->version;
      seen.push_back(*snap);
      if (is_terminal(snap->job.status)) return;
    }
  });
  // Asleep: it has taken the queued snapshot (a later start could be coalesced with it).
  ASSERT_TRUE(wait_until([&] { return ev.waiting() == 1; }));
  s.start();
  reader.join();
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen.front().job.status, JobStatus::Queued);
  EXPECT_EQ(seen.back().job.status, JobStatus::Completed);
  EXPECT_EQ(seen.back().job.progress, 100);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GT(seen[i].version, seen[i - 1].version);
    EXPECT_GE(seen[i].job.progress, seen[i - 1].job.progress);
    if (i + 1 < seen.size()) {
      EXPECT_LE(seen[i].job.progress, 99);
    }
  }
}

}  // namespace
}  // namespace ltx::server::job_events_test
