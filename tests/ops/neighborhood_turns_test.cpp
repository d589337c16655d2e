// The wgmma neighborhood-attention kernel's Pingpong turn schedule (backend/cuda/
// neighborhood_turns.h) on the host: the schedule's own code, walked with a model of the kernel's
// barrier steps, over every block of many (T, kernel) shapes and both plane sizes (1 and 2 work
// units a plane). Every interleaving of the producer and the two consumers is explored; a missed
// release, a waited phase that is not the plane's (parity aliasing), a double arrival at a named
// barrier, unbalanced arrivals or a state where nobody can move fails the test. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend/cuda/neighborhood_turns.h"
#include "ops/neighborhood_attention.h"

namespace ltx {
namespace {

using cuda::NaTurnOp;
using cuda::NaTurnPlan;

constexpr int kStages = 3;  // the kernel's K/V stages
constexpr int kBlockT = 8, kWgT = 4;

// One barrier step of an agent (agent 0: the producer, 1 + c: consumer c).
struct Step {
  enum Kind { kWaitFull, kReleaseEmpty, kWaitEmpty, kLoad, kSync, kArrive } kind;
  int kv = 0;     // 0: K, 1: V (mbarrier steps)
  int plane = 0;  // mbarrier steps
  int bar = 0;    // named barrier (3 or 4)
};

// Counters of an agent's finished steps: loads (full phases) and releases per (kv, stage), then
// arrivals (sync or arrive) at named barriers 3 and 4.
constexpr int kCounters = 4 * kStages + 2;
int full_counter(int kv, int stage) { return kv * kStages + stage; }
int empty_counter(int kv, int stage) { return 2 * kStages + kv * kStages + stage; }
int named_counter(int bar) { return 4 * kStages + bar - 3; }

// The kernel's consumer c: its schedule with each step's barrier operations (first_turn,
// mid_turn, last_turn, pass and the turn barriers of neighborhood_attention_wgmma.cu).
// drop_pass >= 0: consumer 0 leaves out that plane's pass (a broken schedule, for the test of the
// check itself).
std::vector<Step> consumer_steps(const NaTurnPlan& p, int c, int drop_pass) {
  std::vector<Step> s;
  const auto plane = [&](int u) { return u / p.sub; };
  const auto last_sub = [&](int u) { return u % p.sub == p.sub - 1; };
  const auto wait_full = [&](int kv, int t) { s.push_back({Step::kWaitFull, kv, t, 0}); };
  const auto release = [&](int kv, int t) { s.push_back({Step::kReleaseEmpty, kv, t, 0}); };
  const auto turn = [&](bool last) {
    s.push_back({Step::kSync, 0, 0, 3 + c});
    if (!(last && c == 1)) s.push_back({Step::kArrive, 0, 0, 4 - c});
  };
  cuda::na_consumer_turns(p, c, [&](NaTurnOp op, int x, bool last) {
    switch (op) {
      case NaTurnOp::kPass:
        if (c == 0 && x == drop_pass) break;
        wait_full(0, x);
        release(0, x);
        wait_full(1, x);
        release(1, x);
        break;
      case NaTurnOp::kOpen: s.push_back({Step::kArrive, 0, 0, 3}); break;
      case NaTurnOp::kEmptyTurn: turn(last); break;
      case NaTurnOp::kFirstTurn:
        wait_full(0, plane(x));
        turn(false);
        if (last_sub(x)) release(0, plane(x));
        break;
      case NaTurnOp::kMidTurn:
        wait_full(0, plane(x + 1));
        wait_full(1, plane(x));
        turn(false);
        if (last_sub(x + 1)) release(0, plane(x + 1));
        if (last_sub(x)) release(1, plane(x));
        break;
      case NaTurnOp::kLastTurn:
        wait_full(1, plane(x));
        turn(last);
        release(1, plane(x));
        break;
    }
  });
  return s;
}

std::vector<Step> producer_steps(int planes) {
  std::vector<Step> s;
  for (int t = 0; t < planes; ++t) {
    for (int kv = 0; kv < 2; ++kv) {
      s.push_back({Step::kWaitEmpty, kv, t, 0});
      s.push_back({Step::kLoad, kv, t, 0});
    }
  }
  return s;
}

// Explores every interleaving of the three agents; "" when all of them finish in every one,
// else what went wrong first.
std::string check_schedule(const NaTurnPlan& p, int drop_pass = -1) {
  const std::vector<Step> agents[3] = {producer_steps(p.planes), consumer_steps(p, 0, drop_pass),
                                       consumer_steps(p, 1, -1)};
  // Each consumer releases K and V of every plane once, in order.
  for (int c = 0; c < 2; ++c) {
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<int> released;
      for (const Step& s : agents[1 + c])
        if (s.kind == Step::kReleaseEmpty && s.kv == kv) released.push_back(s.plane);
      std::vector<int> want(static_cast<size_t>(p.planes));
      for (int t = 0; t < p.planes; ++t) want[static_cast<size_t>(t)] = t;
      if (released != want) {
        std::string got;
        for (const int t : released) got += std::to_string(t) + " ";
        return "consumer " + std::to_string(c) + " releases " + (kv ? "V" : "K") + " planes " +
               got + "of " + std::to_string(p.planes);
      }
    }
  }
  // counter(a, i, k): counter k after agent a's first i steps.
  std::vector<int> prefix[3];
  for (int a = 0; a < 3; ++a) {
    prefix[a].assign((agents[a].size() + 1) * kCounters, 0);
    for (size_t i = 0; i < agents[a].size(); ++i) {
      int* row = &prefix[a][(i + 1) * kCounters];
      std::copy(row - kCounters, row, row);
      const Step& s = agents[a][i];
      if (s.kind == Step::kLoad) ++row[full_counter(s.kv, s.plane % kStages)];
      if (s.kind == Step::kReleaseEmpty) ++row[empty_counter(s.kv, s.plane % kStages)];
      if (s.kind == Step::kSync || s.kind == Step::kArrive) ++row[named_counter(s.bar)];
    }
  }
  const auto counter = [&](int a, int i, int k) {
    return prefix[a][static_cast<size_t>(i) * kCounters + static_cast<size_t>(k)];
  };
  const auto pack = [](const int (&pc)[3]) {
    return (static_cast<uint64_t>(pc[0]) << 40) | (static_cast<uint64_t>(pc[1]) << 20) |
           static_cast<uint64_t>(pc[2]);
  };
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> todo = {0};
  while (!todo.empty()) {
    const uint64_t key = todo.back();
    todo.pop_back();
    if (!seen.insert(key).second) continue;
    const int pc[3] = {static_cast<int>(key >> 40), static_cast<int>((key >> 20) & 0xFFFFF),
                       static_cast<int>(key & 0xFFFFF)};
    const auto total = [&](int k) {
      return counter(0, pc[0], k) + counter(1, pc[1], k) + counter(2, pc[2], k);
    };
    bool moved = false, done = true;
    for (int a = 0; a < 3; ++a) {
      if (pc[a] == static_cast<int>(agents[a].size())) continue;
      done = false;
      const Step& s = agents[a][static_cast<size_t>(pc[a])];
      const int phase = s.plane / kStages, stage = s.plane % kStages;
      const auto where = [&] { return "agent " + std::to_string(a) + " step " + std::to_string(pc[a]); };
      bool enabled = true;
      switch (s.kind) {
        case Step::kWaitFull: {  // mbar_wait(full, parity of the plane's phase)
          const int loads = total(full_counter(s.kv, stage));
          enabled = (loads & 1) != (phase & 1);
          if (enabled && loads != phase + 1)
            return where() + ": plane " + std::to_string(s.plane) + " seen at full phase " +
                   std::to_string(loads);
          break;
        }
        case Step::kWaitEmpty: {  // the producer: both consumers released the plane kStages back
          const int phases = total(empty_counter(s.kv, stage)) / 2;
          enabled = (phases & 1) != ((phase & 1) ^ 1);
          if (enabled && phases != phase)
            return where() + ": refill of plane " + std::to_string(s.plane) + " at empty phase " +
                   std::to_string(phases);
          break;
        }
        case Step::kReleaseEmpty:
          if (counter(a, pc[a], empty_counter(s.kv, stage)) != phase ||
              total(empty_counter(s.kv, stage)) / 2 != phase)
            return where() + ": release of plane " + std::to_string(s.plane) + " in another phase";
          break;
        case Step::kLoad: break;
        case Step::kSync:
        case Step::kArrive: {
          const int own = counter(a, pc[a], named_counter(s.bar));
          const int other = total(named_counter(s.bar)) - own;
          if (s.kind == Step::kSync) {
            enabled = other > own;  // the other consumer's arrival for this turn is in
          } else if (own > other) {
            return where() + ": second arrival at named barrier " + std::to_string(s.bar) +
                   " in one phase";
          }
          break;
        }
      }
      if (!enabled) continue;
      moved = true;
      int next[3] = {pc[0], pc[1], pc[2]};
      ++next[a];
      todo.push_back(pack(next));
    }
    if (done) {
      for (int bar = 3; bar <= 4; ++bar) {
        if (counter(1, pc[1], named_counter(bar)) != counter(2, pc[2], named_counter(bar)))
          return "named barrier " + std::to_string(bar) + ": unbalanced arrivals";
      }
    } else if (!moved) {
      return "deadlock at steps " + std::to_string(pc[0]) + ", " + std::to_string(pc[1]) + ", " +
             std::to_string(pc[2]);
    }
  }
  return "";
}

// The plan of block tile `tile` along t (the kernel's derivation, with the CPU op's window rule).
NaTurnPlan block_plan(int len, int kern, int tile, int sub) {
  const auto range = [&](int q0, int n) {  // the union [lo, hi) of queries [q0, q0 + n)'s windows
    const int last = std::min(q0 + n, len) - 1, first = std::min(q0, len - 1);
    return std::pair<int, int>{
        static_cast<int>(ops::neighborhood_window_start(first, len, kern)),
        static_cast<int>(ops::neighborhood_window_start(last, len, kern)) + kern};
  };
  const int q0 = tile * kBlockT;
  const auto [lo, hi] = range(q0, kBlockT);
  const int end0 = range(q0, kWgT).second - lo;
  int first1 = 0, end1 = 0;
  if (q0 + kWgT < len) {
    const auto r = range(q0 + kWgT, kWgT);
    first1 = r.first - lo;
    end1 = r.second - lo;
  }
  return cuda::na_turn_plan(hi - lo, sub, kStages, 0, end0, first1, end1);
}

std::string describe(int len, int kern, int tile, int sub) {
  return "T " + std::to_string(len) + " Kt " + std::to_string(kern) + " tile " +
         std::to_string(tile) + " sub " + std::to_string(sub);
}

// The shapes that hung on an H200 (64- and 104-key planes: one unit a plane; consumer 0's planes
// end before the block's), the 11^3 one that did not, and the stage-2 decoder's 18 x 3x7x7.
TEST(NeighborhoodTurnSchedule, ReportedShapesRunToTheEnd) {
  struct Case {
    int len, kern, sub;
  };
  for (const Case c : {Case{30, 7, 1}, Case{21, 3, 1}, Case{18, 3, 1}, Case{17, 11, 2}}) {
    for (int tile = 0; tile * kBlockT < c.len; ++tile) {
      EXPECT_EQ(check_schedule(block_plan(c.len, c.kern, tile, c.sub)), "")
          << describe(c.len, c.kern, tile, c.sub);
    }
  }
}

// Every block of T 1..40 with Kt 1..13 (<= T), planes of one or two units (blocks with the same
// plan checked once).
TEST(NeighborhoodTurnSchedule, EveryBlockOfManyShapesRunsToTheEnd) {
  std::set<std::array<int, 6>> plans;
  for (int sub = 1; sub <= 2; ++sub) {
    for (int len = 1; len <= 40; ++len) {
      for (int kern = 1; kern <= std::min(len, 13); ++kern) {
        for (int tile = 0; tile * kBlockT < len; ++tile) {
          const NaTurnPlan p = block_plan(len, kern, tile, sub);
          if (!plans.insert({p.planes, p.sub, p.first0, p.end0, p.first1, p.end1}).second) continue;
          ASSERT_EQ(check_schedule(p), "") << describe(len, kern, tile, sub);
        }
      }
    }
  }
  EXPECT_GT(plans.size(), 200u);
}

// The check is able to fail: the schedule that hung (consumer 0 never passing plane end0, its
// first plane past its own), a shift past the ring, turns that do not cover a consumer's units.
TEST(NeighborhoodTurnSchedule, TheCheckFindsBrokenSchedules) {
  const NaTurnPlan p = block_plan(30, 7, 0, 1);
  ASSERT_EQ(check_schedule(p), "");
  ASSERT_LT(p.end0, p.planes);
  EXPECT_NE(check_schedule(p, p.end0), "");
  NaTurnPlan more_turns = p;
  more_turns.turns += 1;  // still balanced: fine
  EXPECT_EQ(check_schedule(more_turns), "");
  NaTurnPlan far = p;
  far.shift = kStages * p.sub;  // consumer 1 waits for a plane that needs consumer 0's next turn
  EXPECT_NE(check_schedule(far), "");
  NaTurnPlan lost = p;
  lost.end0 = p.planes;  // consumer 0's units outrun its turns
  EXPECT_NE(check_schedule(lost), "");
}

}  // namespace
}  // namespace ltx
