// The progress plan: the standard weights, and a tracker that only rises and stops at 99.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/progress_plan.h"

namespace ltx::server {
namespace {

double weight(const ProgressPlan& p, const std::string& name) {
  for (const auto& s : p.stages())
    if (s.name == name) return s.weight;
  return -1;
}

TEST(ProgressPlan, StandardWeightsFollowTheDesign) {
  // Two-stage: stage 1 at half resolution (1/4 of the tokens), 30 steps; stage 2: 3 steps.
  const ProgressPlan p =
      standard_progress_plan({1.0, {{"stage 1", 30, 1000}, {"stage 2", 3, 4000}}, true});
  std::vector<std::string> names;
  double total = 0;
  for (const auto& s : p.stages()) {
    names.push_back(s.name);
    total += s.weight;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"text encoding", "model loading", "stage 1",
                                             "upsample", "stage 2", "video decode"}));
  EXPECT_DOUBLE_EQ(total, 100.0);
  EXPECT_DOUBLE_EQ(weight(p, "model loading"), 5);
  EXPECT_DOUBLE_EQ(weight(p, "text encoding"), 5);
  EXPECT_DOUBLE_EQ(weight(p, "upsample"), 2);
  EXPECT_DOUBLE_EQ(weight(p, "video decode"), 10);
  // The other 78 by steps x tokens: 30000 : 12000.
  EXPECT_NEAR(weight(p, "stage 1"), 78.0 * 30 / 42, 1e-9);
  EXPECT_NEAR(weight(p, "stage 2"), 78.0 * 12 / 42, 1e-9);
}

TEST(ProgressPlan, ResidentModelsLeaveNoLoadingStage) {
  const ProgressPlan none = standard_progress_plan({0.0, {{"stage 1", 8, 100}}, false});
  EXPECT_EQ(weight(none, "model loading"), -1);
  EXPECT_DOUBLE_EQ(weight(none, "stage 1"), 85);
  const ProgressPlan half = standard_progress_plan({0.5, {{"stage 1", 8, 100}}, false});
  EXPECT_DOUBLE_EQ(weight(half, "model loading"), 2.5);
}

TEST(ProgressPlan, AudioSplitsTheDecodeInTheEnginesOrder) {
  const ProgressPlan p = standard_progress_plan({0.0, {{"stage 1", 8, 100}}, false, true});
  std::vector<std::string> names;
  for (const auto& s : p.stages()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"text encoding", "stage 1", "audio decode",
                                             "video decode"}));
  EXPECT_DOUBLE_EQ(weight(p, "audio decode"), 2);
  EXPECT_DOUBLE_EQ(weight(p, "video decode"), 8);
  EXPECT_DOUBLE_EQ(weight(p, "stage 1"), 85);
}

TEST(ProgressPlan, BadPlansAreErrors) {
  EXPECT_THROW(ProgressPlan({}), Error);
  EXPECT_THROW(ProgressPlan({{"a", 0}}), Error);
  EXPECT_THROW(ProgressPlan({{"a", -1}}), Error);
  EXPECT_THROW(standard_progress_plan({1.0, {}, false}), Error);
  EXPECT_THROW(standard_progress_plan({1.0, {{"stage 1", 0, 10}}, false}), Error);
  EXPECT_THROW(standard_progress_plan({1.5, {{"stage 1", 1, 10}}, false}), Error);
}

TEST(ProgressTracker, RisesThroughTheStagesAndStopsAt99) {
  ProgressTracker t(standard_progress_plan({1.0, {{"stage 1", 4, 1000}, {"stage 2", 2, 4000}}, true}));
  std::vector<int> seen;
  const auto feed = [&](const std::string& stage, int64_t done, int64_t total) {
    if (const auto p = t.update(stage, done, total)) seen.push_back(*p);
  };
  feed("text encoding", 0, 0);
  feed("text encoding", 1, 1);
  feed("model loading", 0, 3);
  feed("model loading", 3, 3);
  for (int i = 0; i <= 4; ++i) feed("stage 1", i, 4);
  feed("upsample", 0, 0);
  for (int i = 0; i <= 2; ++i) feed("stage 2", i, 2);
  for (int i = 0; i <= 5; ++i) feed("video decode", i, 5);
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i], seen[i - 1]);
  EXPECT_EQ(seen.front(), 5);  // text encoded
  EXPECT_EQ(seen.back(), 99);  // everything done: 100 is set with the output in place
  EXPECT_EQ(t.percent(), 99);
  // Stage 1 ended where its weight ends: 5 + 5 + 78 * 4000 / 12000 = 36.
  EXPECT_NE(std::find(seen.begin(), seen.end(), 36), seen.end());
}

TEST(ProgressTracker, EventsThatWouldGoBackOrNameNoStageChangeNothing) {
  ProgressTracker t(ProgressPlan({{"a", 50}, {"b", 50}}));
  EXPECT_EQ(t.update("b", 1, 2), 75);
  EXPECT_EQ(t.update("a", 2, 2), std::nullopt);  // earlier stage: ignored
  EXPECT_EQ(t.update("unknown", 1, 1), std::nullopt);
  EXPECT_EQ(t.update("b", 0, 2), std::nullopt);
  EXPECT_EQ(t.percent(), 75);
  EXPECT_EQ(t.update("b", 5, 2), 99);  // done past total: clamped
}

TEST(ProgressTracker, ARepeatedStageNameIsMatchedInOrder) {
  // DFR: two rounds of "stage 2".
  ProgressTracker t(ProgressPlan({{"stage 1", 20}, {"stage 2", 40}, {"stage 2", 40}}));
  EXPECT_EQ(t.update("stage 1", 1, 1), 20);
  EXPECT_EQ(t.update("stage 2", 0, 2), std::nullopt);  // 20: the start of the first round
  EXPECT_EQ(t.update("stage 2", 0, 2), std::nullopt);  // re-reported start: still the first
  EXPECT_EQ(t.update("stage 2", 2, 2), 60);
  EXPECT_EQ(t.update("stage 2", 0, 2), std::nullopt);  // count went back: the second round (60)
  EXPECT_EQ(t.update("stage 2", 1, 2), 80);
}

}  // namespace
}  // namespace ltx::server
