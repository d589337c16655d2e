// The op observer seam (core/op_observer.h) that op profiling hooks into from outside the engine.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/op_observer.h"

namespace ltx {
namespace {

struct RecordingObserver final : OpObserver {
  std::vector<std::string> events;
  void begin(const char* op) override { events.push_back(std::string("begin ") + op); }
  void detail(const std::string& text) override { events.push_back("detail " + text); }
  void end() override { events.push_back("end"); }
};

// Installs an observer for the scope and takes it out again.
struct Installed {
  explicit Installed(OpObserver* o) { set_op_observer(o); }
  ~Installed() { set_op_observer(nullptr); }
};

TEST(OpObserver, NoneByDefault) {
  EXPECT_EQ(op_observer(), nullptr);
  const OpScope scope("matmul");
  EXPECT_FALSE(scope.observed());
  scope.detail("ignored");  // no observer: nothing to tell
}

TEST(OpObserver, ScopesReportBeginDetailAndEndInOrderAndNest) {
  RecordingObserver rec;
  {
    const Installed installed(&rec);
    const OpScope outer("attention");
    EXPECT_TRUE(outer.observed());
    outer.detail("2x8x64");
    {
      const OpScope inner("matmul");
    }
  }
  const std::vector<std::string> want = {"begin attention", "detail 2x8x64", "begin matmul", "end",
                                         "end"};
  EXPECT_EQ(rec.events, want);
}

TEST(OpObserver, AScopeEndsWithTheObserverItBeganWith) {
  RecordingObserver first, second;
  set_op_observer(&first);
  {
    const OpScope scope("copy");
    set_op_observer(&second);
  }
  set_op_observer(nullptr);
  EXPECT_EQ(first.events, (std::vector<std::string>{"begin copy", "end"}));
  EXPECT_TRUE(second.events.empty());
}

}  // namespace
}  // namespace ltx
