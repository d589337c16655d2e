#pragma once
// ops::Summed (an operand given as the sum a + b that the consuming op forms per element) is
// declared with the op vocabulary, op_types/summed.h; this header adds what needs the ops.
#include "core/tensor.h"
#include "op_types/summed.h"

namespace ltx::ops {

// The materialised operand: ops::add(a, expand_runs(b, run_ends)) (with runs formed per run,
// then expanded: the same values), or a. The unfused reference, and the CPU path.
Tensor materialize(const Summed& s);

}  // namespace ltx::ops
