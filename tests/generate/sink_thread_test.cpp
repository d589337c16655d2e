#include "generate/sink_thread.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "support/test_support.h"

namespace ltx {
namespace {

// Records every call with the thread it came on; throws at the call numbered `fail_at` (0: never).
class RecordingSink final : public generate::MediaSink {
 public:
  explicit RecordingSink(int fail_at = 0) : fail_at_(fail_at) {}
  void begin(const generate::MediaFormat& f) override { note("begin " + std::to_string(f.frames)); }
  void write_frames(const Tensor& t) override { note("frames " + std::to_string(t.size(0))); }
  void write_audio(const Tensor& t) override { note("audio " + std::to_string(t.size(-1))); }
  void finish() override { note("finish"); }

  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_;
  }

 private:
  int fail_at_;
  mutable std::mutex mu_;
  std::vector<std::string> calls_;
  std::vector<std::thread::id> threads_;
  void note(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(what);
    threads_.push_back(std::this_thread::get_id());
    if (static_cast<int>(calls_.size()) == fail_at_) fail("test sink: the disk is full at ", what);
  }
};

generate::MediaFormat format_of(int64_t frames) {
  generate::MediaFormat f;
  f.frames = frames;
  return f;
}

TEST(SinkThread, CallsArriveInOrderOnItsOwnThread) {
  RecordingSink inner;
  {
    generate::SinkThread sink(inner);
    sink.begin(format_of(6));
    sink.write_frames(Tensor::zeros({2, 4, 4, 3}));
    sink.write_frames(Tensor::zeros({3, 4, 4, 3}));
    sink.write_frames(Tensor::zeros({1, 4, 4, 3}));
    sink.write_audio(Tensor::zeros({2, 100}));
    sink.finish();
    // finish() returned: every call ran.
    EXPECT_EQ(inner.calls(), (std::vector<std::string>{"begin 6", "frames 2", "frames 3", "frames 1",
                                                       "audio 100", "finish"}));
    EXPECT_GE(sink.busy_seconds(), 0.0);
  }
  for (const std::thread::id id : inner.threads()) {
    EXPECT_NE(id, std::this_thread::get_id());
    EXPECT_EQ(id, inner.threads().front());
  }
}

TEST(SinkThread, ItsErrorEndsTheCallersNextCallAndDropsWhatFollows) {
  RecordingSink inner(/*fail_at=*/2);  // the first chunk fails
  generate::SinkThread sink(inner);
  sink.begin(format_of(4));
  sink.write_frames(Tensor::zeros({2, 4, 4, 3}));
  // The next chunk waits for the first, whose error it then ends with.
  EXPECT_ERROR_HAS(sink.write_frames(Tensor::zeros({2, 4, 4, 3})), "the disk is full at frames 2");
  EXPECT_ERROR_HAS(sink.write_audio(Tensor::zeros({2, 10})), "the disk is full");
  EXPECT_ERROR_HAS(sink.finish(), "the disk is full");
  EXPECT_EQ(inner.calls(), (std::vector<std::string>{"begin 4", "frames 2"}));
}

TEST(SinkThread, AnErrorInFinishReachesTheCaller) {
  RecordingSink inner(/*fail_at=*/3);
  generate::SinkThread sink(inner);
  sink.begin(format_of(1));
  sink.write_frames(Tensor::zeros({1, 4, 4, 3}));
  EXPECT_ERROR_HAS(sink.finish(), "the disk is full at finish");
}

TEST(SinkThread, DroppedWithoutFinishNeverFinishesItsSink) {
  RecordingSink inner;
  {
    generate::SinkThread sink(inner);
    sink.begin(format_of(4));
    sink.write_frames(Tensor::zeros({2, 4, 4, 3}));
    sink.write_frames(Tensor::zeros({2, 4, 4, 3}));
  }
  const std::vector<std::string> calls = inner.calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.front(), "begin 4");
  for (const std::string& c : calls) EXPECT_NE(c, "finish");
}

}  // namespace
}  // namespace ltx
