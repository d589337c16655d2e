// The scheduler over a FakeRunner: order, the bounded queue, cancellation, timeouts, failures,
// graceful shutdown and batching, and many threads at once (these tests also run under TSan:
// scripts/test --tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "server/api_error.h"
#include "server/scheduler.h"
#include "server/fake_runner.h"
#include "server/scheduler_test_util.h"

namespace ltx::server::scheduler_test {
namespace {

using namespace std::chrono_literals;
using test::FakeBehaviour;
using test::FakeRunner;
using test::make_job;
using test::RecordingListener;
using test::wait_until;

SchedulerOptions options(size_t max_queue = 64, size_t max_batch = 1) {
  SchedulerOptions o;
  o.max_queue = max_queue;
  o.max_batch = max_batch;
  return o;
}

TEST(Scheduler, RunsJobsInSubmissionOrder) {
  FakeRunner runner;
  RecordingListener listener;
  Scheduler s(options(), {&runner}, listener);
  std::vector<std::string> ids;
  for (int i = 1; i <= 6; ++i) {
    const Job j = make_job(i);
    ids.push_back(j.id);
    s.submit(j);
  }
  s.start();
  ASSERT_TRUE(wait_until([&] { return listener.ended(ids.back()); }));
  EXPECT_EQ(listener.start_order(), ids);
  for (const auto& id : ids) EXPECT_EQ(listener.last(id), "completed") << id;
  EXPECT_EQ(runner.max_active_runs(), 1);
}

TEST(Scheduler, RestoredJobsRunInSeqOrderWhateverTheQueueLimit) {
  FakeRunner runner;
  RecordingListener listener;
  Scheduler s(options(/*max_queue=*/1), {&runner}, listener);
  for (int seq : {5, 2, 9, 1}) s.restore(make_job(seq));
  EXPECT_EQ(s.queue_length(), 4u);
  EXPECT_EQ(s.queue_position(make_job(1).id), 0u);
  EXPECT_EQ(s.queue_position(make_job(9).id), 3u);
  s.start();
  ASSERT_TRUE(listener.wait_ended(make_job(9).id));
  EXPECT_EQ(listener.start_order(),
            (std::vector<std::string>{make_job(1).id, make_job(2).id, make_job(5).id, make_job(9).id}));
}

// A job queued twice would run twice and overwrite its own output (a create during start-up and
// the restore of the store's queued jobs once raced that way).
TEST(Scheduler, AJobIsNeverQueuedTwice) {
  FakeRunner runner;
  RecordingListener listener;
  Scheduler s(options(), {&runner}, listener);
  s.restore(make_job(1));
  EXPECT_THROW(s.submit(make_job(1)), Error);
  EXPECT_THROW(s.restore(make_job(1)), Error);
  EXPECT_EQ(s.queue_length(), 1u);
}

TEST(Scheduler, AFullQueueAnswers429WithRetryAfter) {
  FakeRunner runner;
  runner.hold();
  RecordingListener listener;
  SchedulerOptions o = options(/*max_queue=*/2);
  o.initial_job_seconds = 7;
  Scheduler s(o, {&runner}, listener);
  s.start();
  s.submit(make_job(1));
  ASSERT_TRUE(listener.wait_started(make_job(1).id));  // running: not counted in the queue
  s.submit(make_job(2));
  s.submit(make_job(3));
  EXPECT_EQ(s.queue_length(), 2u);
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (attempt == 0) s.submit(make_job(4));
      else s.check_admission();
      FAIL() << "a full queue took a job";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 429);
      EXPECT_EQ(e.code(), "queue_full");
      EXPECT_EQ(e.type(), "rate_limit_error");
      ASSERT_TRUE(e.retry_after_s);
      EXPECT_EQ(*e.retry_after_s, 14);  // 7 s a job x 2 queued jobs, one worker
      EXPECT_NE(std::string(e.what()).find("--max-queue 2"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(s.queue_position(make_job(4).id), std::nullopt);
  runner.release();
  ASSERT_TRUE(listener.wait_ended(make_job(3).id));
  EXPECT_TRUE(listener.events(make_job(4).id).empty());
  EXPECT_NO_THROW(s.check_admission());
  // Retry-After follows the jobs' measured time (at least 1 s).
  EXPECT_LT(s.mean_job_seconds(), 7.0);
  EXPECT_EQ(s.retry_after_s(), 1);
}

TEST(Scheduler, CancellingAQueuedJobRemovesItAtOnce) {
  FakeRunner runner;
  runner.hold();
  RecordingListener listener;
  Scheduler s(options(), {&runner}, listener);
  s.start();
  const Job a = make_job(1), b = make_job(2), c = make_job(3);
  s.submit(a);
  ASSERT_TRUE(listener.wait_started(a.id));
  s.submit(b);
  s.submit(c);
  EXPECT_EQ(s.cancel(b.id), Scheduler::CancelResult::Removed);
  EXPECT_EQ(listener.events(b.id), std::vector<std::string>{"cancelled"});  // before cancel returned
  EXPECT_EQ(s.queue_position(c.id), 0u);
  EXPECT_EQ(s.cancel(b.id), Scheduler::CancelResult::NotFound);
  EXPECT_EQ(s.cancel(make_job(99).id), Scheduler::CancelResult::NotFound);
  runner.release();
  ASSERT_TRUE(listener.wait_ended(c.id));
  EXPECT_EQ(listener.last(a.id), "completed");
  EXPECT_EQ(listener.last(c.id), "completed");
  EXPECT_EQ(listener.events(b.id), std::vector<std::string>{"cancelled"});
  EXPECT_EQ(runner.steps_done(b.id), 0);
}

TEST(Scheduler, CancellingARunningJobStopsItAtTheNextStep) {
  FakeRunner runner;
  runner.defaults.steps = 1000;
  runner.defaults.step_time = 1ms;
  RecordingListener listener;
  Scheduler s(options(), {&runner}, listener);
  s.start();
  const Job a = make_job(1), b = make_job(2);
  s.submit(a);
  s.submit(b);
  ASSERT_TRUE(wait_until([&] { return runner.steps_done(a.id) >= 3; }));
  // Parked at a step boundary, so the count cannot move under the test's feet.
  runner.hold();
  ASSERT_TRUE(runner.wait_parked(1, 20s));
  const int at_cancel = runner.steps_done(a.id);
  EXPECT_EQ(s.cancel(a.id), Scheduler::CancelResult::Stopping);
  ASSERT_TRUE(listener.wait_ended(a.id));
  EXPECT_EQ(listener.last(a.id), "cancelled");
  EXPECT_EQ(runner.steps_done(a.id), at_cancel);  // not one more step
  // The worker goes on with the next job.
  runner.release();
  ASSERT_TRUE(listener.wait_started(b.id));
  EXPECT_EQ(s.cancel(b.id), Scheduler::CancelResult::Stopping);
  ASSERT_TRUE(listener.wait_ended(b.id));
  EXPECT_EQ(listener.last(b.id), "cancelled");
}

TEST(Scheduler, AJobPastItsTimeoutFailsWithCodeTimeout) {
  FakeRunner runner;
  runner.defaults.steps = 100000;
  runner.defaults.step_time = 1ms;
  RecordingListener listener;
  SchedulerOptions o = options();
  o.job_timeout = 50ms;
  Scheduler s(o, {&runner}, listener);
  s.start();
  s.submit(make_job(1));
  ASSERT_TRUE(listener.wait_ended(make_job(1).id));
  EXPECT_EQ(listener.last(make_job(1).id), "failed timeout");
  EXPECT_NE(listener.error(make_job(1).id).message.find("timeout"), std::string::npos);
  EXPECT_LT(runner.steps_done(make_job(1).id), 100000);
}

TEST(Scheduler, FailuresFailTheJobAndTheWorkerGoesOn) {
  FakeRunner runner;
  runner.by_prompt["outcome"] = {3, 0ms, 2, FakeBehaviour::Failure::Outcome};
  runner.by_prompt["error"] = {3, 0ms, 1, FakeBehaviour::Failure::ThrowError};
  runner.by_prompt["other"] = {3, 0ms, 3, FakeBehaviour::Failure::ThrowOther};
  RecordingListener listener;
  Scheduler s(options(), {&runner}, listener);
  const Job a = make_job(1, "", "outcome"), b = make_job(2, "", "error"),
            c = make_job(3, "", "other"), d = make_job(4);
  for (const Job& j : {a, b, c, d}) s.submit(j);
  s.start();
  ASSERT_TRUE(listener.wait_ended(d.id));
  EXPECT_EQ(listener.last(a.id), "failed generation_error");
  EXPECT_EQ(listener.error(a.id).message, "fake failure at step 2");
  EXPECT_EQ(listener.last(b.id), "failed generation_error");
  EXPECT_EQ(listener.error(b.id).message, "fake failure at step 1");
  // Not an ltx::Error: the details stay in the log.
  EXPECT_EQ(listener.last(c.id), "failed internal_error");
  EXPECT_EQ(listener.error(c.id).message.find("fake"), std::string::npos);
  EXPECT_EQ(listener.last(d.id), "completed");
}

TEST(Scheduler, AJobTheRunnerCannotPlanFailsWithoutStarting) {
  FakeRunner runner;
  runner.by_prompt["no steps"] = {0};  // the standard plan rejects a stage of 0 steps
  RecordingListener listener;
  Scheduler s(options(64, 2), {&runner}, listener);
  const Job a = make_job(1, "k", "no steps"), b = make_job(2, "k");
  s.submit(a);
  s.submit(b);
  s.start();
  ASSERT_TRUE(wait_until([&] { return listener.ended(a.id) && listener.ended(b.id); }));
  EXPECT_EQ(listener.events(a.id), std::vector<std::string>{"failed generation_error"});
  EXPECT_NE(listener.error(a.id).message.find("0 steps"), std::string::npos)
      << listener.error(a.id).message;
  EXPECT_EQ(listener.last(b.id), "completed");  // its batch went on without it
  EXPECT_EQ(runner.batches(), std::vector<std::vector<std::string>>{{b.id}});
}

TEST(Scheduler, DrainLetsTheRunningJobFinishWithinTheGrace) {
  FakeRunner runner;
  runner.defaults.steps = 5;
  runner.defaults.step_time = 5ms;
  RecordingListener listener;
  Scheduler s(options(), {&runner}, listener);
  s.start();
  const Job a = make_job(1), b = make_job(2);
  s.submit(a);
  ASSERT_TRUE(listener.wait_started(a.id));
  s.submit(b);
  s.drain(60s);
  EXPECT_EQ(listener.last(a.id), "completed");
  EXPECT_TRUE(listener.events(b.id).empty());  // stays queued for the next start
  EXPECT_EQ(s.queue_length(), 1u);
  EXPECT_TRUE(s.draining());
  try {
    s.submit(make_job(3));
    FAIL() << "a draining scheduler took a job";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.code(), "draining");
    EXPECT_TRUE(e.retry_after_s);
  }
  s.drain(0ms);  // again: nothing
}

TEST(Scheduler, DrainRequeuesAJobThatOutlivesTheGrace) {
  FakeRunner runner;
  runner.hold();  // the job never finishes on its own
  RecordingListener listener;
  Scheduler s(options(), {&runner}, listener);
  s.start();
  const Job a = make_job(1);
  s.submit(a);
  ASSERT_TRUE(runner.wait_parked(1, 20s));
  s.drain(20ms);
  EXPECT_EQ(listener.events(a.id).front(), "started");
  EXPECT_EQ(listener.last(a.id), "requeued");
  EXPECT_EQ(s.queue_position(a.id), 0u);
  EXPECT_TRUE(s.running().empty());
}

TEST(Scheduler, DestroyingTheSchedulerStopsAndRequeuesTheRunningJob) {
  FakeRunner runner;
  runner.hold();
  RecordingListener listener;
  const Job a = make_job(1);
  {
    Scheduler s(options(), {&runner}, listener);
    s.start();
    s.submit(a);
    ASSERT_TRUE(runner.wait_parked(1, 20s));
  }
  EXPECT_EQ(listener.last(a.id), "requeued");
}

TEST(Scheduler, BatchesGroupOneKeyUpToMaxBatchAndNeverMixKeys) {
  FakeRunner runner;
  runner.hold();
  RecordingListener listener;
  Scheduler s(options(64, /*max_batch=*/3), {&runner}, listener);
  s.start();
  const Job a = make_job(1, "k1");
  s.submit(a);
  ASSERT_TRUE(runner.wait_parked(1, 20s));  // a runs alone: nothing else was queued
  const Job b = make_job(2, "k1"), c = make_job(3, "k2"), d = make_job(4, "k1"),
            e = make_job(5, "k1"), f = make_job(6, "k2"), g = make_job(7, "k1"),
            h = make_job(8, ""), i = make_job(9, "");
  for (const Job& j : {b, c, d, e, f, g, h, i}) s.submit(j);
  runner.release();
  ASSERT_TRUE(wait_until([&] {
    for (const Job& j : {a, b, c, d, e, f, g, h, i})
      if (!listener.ended(j.id)) return false;
    return true;
  }));
  // Led by the oldest job each time; same-key jobs join it up to max_batch; empty keys run alone.
  const std::vector<std::vector<std::string>> want = {
      {a.id}, {b.id, d.id, e.id}, {c.id, f.id}, {g.id}, {h.id}, {i.id}};
  EXPECT_EQ(runner.batches(), want);
  for (const Job& j : {a, b, c, d, e, f, g, h, i}) EXPECT_EQ(listener.last(j.id), "completed");
}

TEST(Scheduler, CancellingOneJobOfABatchDropsOnlyIt) {
  FakeRunner runner;
  runner.defaults.steps = 5;
  RecordingListener listener;
  Scheduler s(options(64, 4), {&runner}, listener);
  runner.hold();
  const Job a = make_job(1, "k"), b = make_job(2, "k"), c = make_job(3, "k");
  for (const Job& j : {a, b, c}) s.submit(j);
  s.start();
  ASSERT_TRUE(runner.wait_parked(1, 20s));
  ASSERT_EQ(runner.batches().size(), 1u);
  EXPECT_EQ(runner.batches()[0].size(), 3u);
  EXPECT_EQ(s.cancel(b.id), Scheduler::CancelResult::Stopping);
  runner.release();
  ASSERT_TRUE(wait_until([&] { return listener.ended(a.id) && listener.ended(b.id) && listener.ended(c.id); }));
  EXPECT_EQ(listener.last(a.id), "completed");
  EXPECT_EQ(listener.last(b.id), "cancelled");
  EXPECT_EQ(listener.last(c.id), "completed");
  EXPECT_EQ(runner.steps_done(b.id), 0);
}

TEST(Scheduler, ProgressRisesTo99AtMostAndTheTerminalCallComesLast) {
  FakeRunner runner;
  runner.defaults.steps = 20;
  RecordingListener listener;
  Scheduler s(options(), {&runner}, listener);
  s.start();
  const Job a = make_job(1);
  s.submit(a);
  ASSERT_TRUE(listener.wait_ended(a.id));
  const auto ev = listener.events(a.id);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.front(), "started");
  EXPECT_EQ(ev.back(), "completed");
  int last = 0;
  for (size_t k = 1; k + 1 < ev.size(); ++k) {
    ASSERT_EQ(ev[k].rfind("progress ", 0), 0u) << ev[k];
    const int p = std::stoi(ev[k].substr(9));
    EXPECT_GT(p, last) << "progress went from " << last << " to " << p;
    EXPECT_LE(p, 99);
    last = p;
  }
  EXPECT_EQ(last, 99);  // decode done: 100 waits for the output to be in place
}

TEST(Scheduler, OneWorkerPerRunnerRunsJobsSideBySide) {
  FakeRunner r1, r2;
  r1.hold();
  r2.hold();
  RecordingListener listener;
  Scheduler s(options(), {&r1, &r2}, listener);
  s.start();
  const Job a = make_job(1), b = make_job(2);
  s.submit(a);
  s.submit(b);
  ASSERT_TRUE(r1.wait_parked(1, 20s));
  ASSERT_TRUE(r2.wait_parked(1, 20s));
  EXPECT_EQ(s.running().size(), 2u);
  r1.release();
  r2.release();
  ASSERT_TRUE(wait_until([&] { return listener.ended(a.id) && listener.ended(b.id); }));
  EXPECT_EQ(r1.max_active_runs(), 1);
  EXPECT_EQ(r2.max_active_runs(), 1);
}

TEST(Scheduler, TwentyThreadsSubmittingAndCancellingLoseNoJob) {
  FakeRunner r1, r2;
  r1.defaults.steps = 3;
  r2.defaults.steps = 3;
  RecordingListener listener;
  Scheduler s(options(/*max_queue=*/40, /*max_batch=*/3), {&r1, &r2}, listener);
  s.start();
  constexpr int kThreads = 20, kPerThread = 10;
  std::mutex mu;
  std::vector<std::string> accepted;
  std::atomic<int> rejected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const Job j = make_job(1 + t * kPerThread + k, "key" + std::to_string(k % 3));
        try {
          s.submit(j);
        } catch (const ApiError& e) {
          EXPECT_EQ(e.status(), 429);
          ++rejected;
          continue;
        }
        {
          std::lock_guard lock(mu);
          accepted.push_back(j.id);
        }
        if (k % 3 == 0) s.cancel(j.id);
        (void)s.queue_position(j.id);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(wait_until([&] {
    for (const auto& id : accepted)
      if (!listener.ended(id)) return false;
    return true;
  }, 60s));
  EXPECT_EQ(static_cast<int>(accepted.size()) + rejected.load(), kThreads * kPerThread);
  std::set<std::string> ran;
  for (const auto* r : {&r1, &r2})
    for (const auto& batch : r->batches())
      for (const auto& id : batch) EXPECT_TRUE(ran.insert(id).second) << id << " ran twice";
  for (const auto& id : accepted) {
    const auto ev = listener.events(id);
    int terminal = 0;
    for (const auto& e : ev) terminal += e == "completed" || e == "cancelled";
    EXPECT_EQ(terminal, 1) << id;
    // A job is either cancelled in the queue (nothing else) or started first.
    if (ev.front() != "started") {
      EXPECT_EQ(ev, std::vector<std::string>{"cancelled"}) << id;
    }
  }
  EXPECT_EQ(s.queue_length(), 0u);
  EXPECT_TRUE(s.running().empty());
}

TEST(Scheduler, BadOptionsAreClearErrors) {
  FakeRunner runner;
  RecordingListener listener;
  EXPECT_THROW(Scheduler(options(0), {&runner}, listener), Error);
  EXPECT_THROW(Scheduler(options(4, 0), {&runner}, listener), Error);
  EXPECT_THROW(Scheduler(options(), {}, listener), Error);
}

}  // namespace
}  // namespace ltx::server::scheduler_test
