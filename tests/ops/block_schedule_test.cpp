// The order of a block-streaming pass (backend/common/block_schedule.h): which slot each block
// uses, which blocks load before the first compute and which load after each compute.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "backend/common/block_schedule.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using backend::BlockSchedule;

// Simulates a pass: the slot's content at each compute must be that block, and a block may only
// be loaded into a slot whose previous block has been computed.
void expect_valid_pass(int64_t blocks, int64_t slots) {
  SCOPED_TRACE(str(blocks, " blocks, ", slots, " slots"));
  const BlockSchedule s(blocks, slots);
  std::vector<std::optional<int64_t>> holds(static_cast<size_t>(slots));
  std::vector<bool> computed(static_cast<size_t>(blocks), false);
  int64_t loads = 0;
  const auto load = [&](int64_t b) {
    const auto slot = static_cast<size_t>(s.slot_of(b));
    if (holds[slot]) {
      EXPECT_TRUE(computed[static_cast<size_t>(*holds[slot])])
          << "block " << b << " overwrites block " << *holds[slot] << " before its compute";
    }
    holds[slot] = b;
    ++loads;
  };
  for (int64_t b : s.initial_loads()) load(b);
  for (int64_t b = 0; b < blocks; ++b) {
    EXPECT_EQ(holds[static_cast<size_t>(s.slot_of(b))], std::optional<int64_t>(b));
    computed[static_cast<size_t>(b)] = true;
    if (const auto next = s.load_after(b)) {
      EXPECT_EQ(s.slot_of(*next), s.slot_of(b)) << "a load goes into the slot just released";
      load(*next);
    }
  }
  EXPECT_EQ(loads, blocks) << "every block is loaded exactly once per pass";
}

TEST(BlockSchedule, EveryBlockIsLoadedOnceBeforeItsComputeAndAfterItsSlotsLastUse) {
  for (int64_t slots : {2, 3, 4})
    for (int64_t blocks : {1, 2, 3, 5, 48}) expect_valid_pass(blocks, slots);
}

TEST(BlockSchedule, BlocksGoRoundTheSlots) {
  const BlockSchedule s(7, 3);
  EXPECT_EQ(s.slots(), 3);
  EXPECT_EQ(s.initial_loads(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(s.slot_of(0), 0);
  EXPECT_EQ(s.slot_of(4), 1);
  EXPECT_EQ(s.slot_of(6), 0);
  EXPECT_EQ(s.load_after(0), std::optional<int64_t>(3));
  EXPECT_EQ(s.load_after(3), std::optional<int64_t>(6));
  EXPECT_EQ(s.load_after(4), std::nullopt);
  EXPECT_EQ(s.load_after(6), std::nullopt);
}

TEST(BlockSchedule, NoMoreSlotsThanBlocksAreUsed) {
  const BlockSchedule s(2, 3);
  EXPECT_EQ(s.slots(), 2);
  EXPECT_EQ(s.initial_loads(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.load_after(0), std::nullopt);
}

TEST(BlockSchedule, BadSizesAreErrors) {
  EXPECT_ERROR_HAS(BlockSchedule(4, 1), "at least 2");
  EXPECT_ERROR_HAS(BlockSchedule(0, 2), "0 blocks");
  EXPECT_ERROR_HAS(BlockSchedule(4, 2).slot_of(4), "block 4 of 4");
}

}  // namespace
}  // namespace ltx
