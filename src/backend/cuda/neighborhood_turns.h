#pragma once
// The consumers' turn schedule of the wgmma neighborhood-attention kernel's Pingpong variant
// (neighborhood_attention_wgmma.cu), as plain host/device code: the kernel walks it with its
// barrier and MMA steps, and a host test (tests/ops/neighborhood_turns_test.cpp) walks it with a
// model of those barriers, checking over many shapes that every plane is released once by each
// consumer, the named barriers' arrivals match their waits, and no interleaving deadlocks.
//
// A block's K/V planes [0, planes) pass through a ring of `stages` shared-memory stages; plane t
// is `sub` work units (sub-tiles) t * sub .. t * sub + sub - 1. Consumer c computes planes
// [first, end) (none when first >= end) and must release every other plane too
// (wait for it, release it: "pass"), once, so that the producer's stage phases stay in step.
//
// Turn j of a consumer belongs to unit j: S of unit j and P V of unit j - 1 (its first turn,
// u0 = first * sub, has S only, its last, u1 = end * sub, P V only), or an empty turn. A plane
// the consumer does not compute is passed after the turn of its last unit (before the first turn
// or after the last where that falls outside the consumer's turns). Consumer 0 takes turns
// [0, turns), consumer 1 turns [shift, shift + turns): the same number, so named barrier 3 + c
// (consumer c's turn) sees one arrival of the other consumer per wait (consumer 1 opens with an
// arrival at 3 and skips its last hand-over).
#include <climits>

#include "core/dtype_bits.h"  // LTX_HOST_DEVICE

namespace ltx::cuda {

struct NaTurnPlan {
  int planes = 0;             // the block's K/V planes
  int sub = 1;                // work units per plane
  int first0 = 0, end0 = 0;   // consumer 0 computes planes [first0, end0)
  int first1 = 0, end1 = 0;   // consumer 1 [first1, end1) (none when first1 >= end1)
  int shift = 0;              // consumer 1's first turn
  int turns = 0;              // turns per consumer
};

// shift = consumer 1's first unit (its units start later: its queries' windows along t), capped
// at (stages - 1) sub so that both consumers work on planes within the ring.
LTX_HOST_DEVICE inline NaTurnPlan na_turn_plan(int planes, int sub, int stages, int first0,
                                               int end0, int first1, int end1) {
  NaTurnPlan p;
  p.planes = planes;
  p.sub = sub;
  p.first0 = first0;
  p.end0 = end0;
  p.first1 = first1;
  p.end1 = end1;
  const bool has1 = end1 > first1;
  const int d = (first1 - first0) * sub, cap = (stages - 1) * sub;
  p.shift = has1 ? (d < cap ? d : cap) : 0;
  const int n0 = end0 * sub + 1, n1 = has1 ? end1 * sub + 1 - p.shift : 0;
  p.turns = n0 > n1 ? n0 : n1;
  return p;
}

// The steps of consumer c's schedule, in order, through step(op, x, last): kPass (plane x),
// kOpen (consumer 1's opening arrival at consumer 0's barrier), kEmptyTurn, kFirstTurn (S of unit
// x), kMidTurn (P V of unit x, S of x + 1), kLastTurn (P V of unit x); `last`: the consumer's last
// turn. The kernel's step is inlined with constant ops, so the switch costs nothing there.
enum class NaTurnOp { kPass, kOpen, kEmptyTurn, kFirstTurn, kMidTurn, kLastTurn };

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Step>
LTX_HOST_DEVICE inline void na_consumer_turns(const NaTurnPlan& p, int c, Step&& step) {
  // (No arrays indexed by c: the kernel would keep them in local memory.)
  const int first = c == 0 ? p.first0 : p.first1, end = c == 0 ? p.end0 : p.end1;
  const bool work = first < end;
  const int u0 = first * p.sub, u1 = end * p.sub;
  const int j0 = c == 0 ? 0 : p.shift, j_end = j0 + p.turns;
  // Passes the planes not computed whose last unit is <= j (the planes below `next` are done):
  // one cursor over all planes, so none is skipped whatever the turns (the plan keeps the units
  // inside them: j0 <= u0, u1 < j_end). The last turn, u1, is plane `end`'s first unit and, with
  // one unit a plane, its last: that plane is passed right after it. (The schedule once passed
  // planes per empty turn only and forgot plane `end` there; consumer 0, whose planes end before
  // the block's, never released it, and the producer waited for it forever: the Pingpong hang of
  // 64- and 104-key planes.)
  int next = 0;
  const auto pass_through = [&](int j) {
    for (; next < p.planes && (next + 1) * p.sub - 1 <= j; ++next)
      if (next < first || next >= end) step(NaTurnOp::kPass, next, false);
  };
  pass_through(j0 - 1);
  if (c == 1) step(NaTurnOp::kOpen, 0, false);
  int j = j0;
  for (; j < (work ? u0 : j_end); ++j) {
    step(NaTurnOp::kEmptyTurn, j, j == j_end - 1);
    pass_through(j);
  }
  if (work) {
    step(NaTurnOp::kFirstTurn, u0, false);
    for (int u = u0; u + 1 < u1; ++u) step(NaTurnOp::kMidTurn, u, false);
    step(NaTurnOp::kLastTurn, u1 - 1, u1 == j_end - 1);
    pass_through(u1);
    j = u1 + 1;
  }
  for (; j < j_end; ++j) {
    step(NaTurnOp::kEmptyTurn, j, j == j_end - 1);
    pass_through(j);
  }
  pass_through(INT_MAX - 1);
}

}  // namespace ltx::cuda
