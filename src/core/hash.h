#pragma once
// Deterministic 64-bit mixing used to derive seeds and values from names (synthetic weights of the
// demo bundle and the benchmarks): FNV-1a of a string and one SplitMix64 step.
#include <cstdint>
#include <string_view>

namespace ltx {

inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Advances `state` and returns the next SplitMix64 output.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace ltx
