#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/env_settings.h"

namespace ltx {

namespace {

thread_local bool t_inside_pool = false;

int default_threads() {
  if (const std::optional<int> n = env::settings().num_threads) return *n;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

// One job at a time. Each job is its own object, so a worker waking late for an old job finds it
// exhausted instead of stealing chunk indices from the next one.
struct Job {
  const std::function<void(int64_t)>* task = nullptr;
  int64_t chunks = 0;
  std::atomic<int64_t> next{0};
  int64_t done = 0;  // guarded by Pool::m_
  std::exception_ptr error;
};

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }  // + the calling thread

  void resize(int n) {
    std::lock_guard<std::mutex> job_lock(job_mutex_);
    stop();
    stopping_ = false;
    for (int i = 0; i + 1 < n; ++i) workers_.emplace_back([this] { worker(); });
  }

  void run(int64_t chunks, const std::function<void(int64_t)>& task) {
    std::lock_guard<std::mutex> job_lock(job_mutex_);  // serialise concurrent callers
    auto job = std::make_shared<Job>();
    job->task = &task;
    job->chunks = chunks;
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = job;
      ++generation_;
    }
    cv_.notify_all();
    work(*job);  // the caller helps
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [&] { return job->done == job->chunks; });
    job_.reset();
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  void work(Job& job) {
    const bool was_inside = t_inside_pool;
    t_inside_pool = true;
    int64_t finished = 0;
    for (;;) {
      const int64_t i = job.next.fetch_add(1);
      if (i >= job.chunks) break;
      try {
        (*job.task)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(m_);
        if (!job.error) job.error = std::current_exception();
      }
      ++finished;
    }
    t_inside_pool = was_inside;
    if (finished) {
      std::lock_guard<std::mutex> lk(m_);
      job.done += finished;
      if (job.done == job.chunks) done_cv_.notify_all();
    }
  }

  void worker() {
    uint64_t seen = 0;
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return stopping_ || (generation_ != seen && job_ != nullptr); });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      work(*job);
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex job_mutex_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::shared_ptr<Job> job_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

Pool& pool() {
  static Pool p(default_threads());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }

// A range that parallel_for runs inline on its caller (one thread, one chunk) is no pool job: the
// caller holds nothing of the pool's then, so it is not counted.
bool inside_parallel_for() { return t_inside_pool; }

void set_num_threads(int n) { pool().resize(std::max(1, n)); }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t n = end - begin;
  const int threads = t_inside_pool ? 1 : num_threads();
  int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, static_cast<int64_t>(threads) * 4);
  if (chunks <= 1 || threads == 1) {
    fn(begin, end);
    return;
  }
  const int64_t per = (n + chunks - 1) / chunks;
  chunks = (n + per - 1) / per;
  pool().run(chunks, [&](int64_t c) {
    const int64_t b = begin + c * per;
    fn(b, std::min(end, b + per));
  });
}

}  // namespace ltx
