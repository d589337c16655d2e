#pragma once
// The reductions' vocabulary, shared by the dispatch layer (ops/reduce.h) and both backends.
#include <cstdint>

namespace ltx::ops {

enum class ReduceOp : uint8_t { Sum, Mean, Amax, Amin };

}  // namespace ltx::ops
