#pragma once
// Division of 32-bit indices by a divisor fixed at launch: a multiply-high, an add and a shift
// instead of the ~20-instruction sequence of a runtime integer division. Index-bound kernels
// (one row's coordinates per handful of loaded bytes) were issue-limited by their divisions.
// Method: Granlund and Montgomery, "Division by invariant integers using multiplication" (1994),
// with a 33-bit multiplier whose top bit is the explicit `+ n`.
#include <cstdint>
#include <type_traits>

namespace ltx::cuda {

struct FastDivU32 {
  uint32_t divisor = 1, magic = 0, shift = 0;

  FastDivU32() = default;
  // divisor in [1, 2^31]; quotients are exact for every dividend n < 2^31.
  explicit FastDivU32(uint32_t d) : divisor(d) {
    while (shift < 31 && (uint32_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  // The device's arithmetic on the host (tests check it against true division).
  uint32_t div_host(uint32_t n) const {
    const uint64_t hi = (static_cast<uint64_t>(n) * magic) >> 32;
    return static_cast<uint32_t>((hi + n) >> shift);
  }

#if defined(__CUDACC__)
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    return (__umulhi(n, magic) + n) >> shift;
  }
  // n / divisor, and n % divisor in *rem.
  __device__ __forceinline__ uint32_t divmod(uint32_t n, uint32_t* rem) const {
    const uint32_t q = div(n);
    *rem = n - q * divisor;
    return q;
  }
#endif
};

#if defined(__CUDACC__)
// n / d, and n % d in *rem: through fd (d's FastDivU32) when Index is 32-bit, else a plain
// division (the kernels' 64-bit index path).
template <typename Index>
__device__ __forceinline__ Index divmod_index(Index n, int64_t d, const FastDivU32& fd, Index* rem) {
  if constexpr (std::is_same_v<Index, uint32_t>) {
    return fd.divmod(n, rem);
  } else {
    const Index dd = static_cast<Index>(d);
    *rem = n % dd;
    return n / dd;
  }
}
#endif

// Whether FastDivU32 serves every index of a launch: dividends and divisors below 2^31.
inline bool fast_div_fits(int64_t max_index) { return max_index >= 0 && max_index < (int64_t{1} << 31); }

}  // namespace ltx::cuda
