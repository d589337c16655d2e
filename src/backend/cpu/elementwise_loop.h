#pragma once
// The one strided/broadcast loop shared by every CPU elementwise op.
//
// map_into(out, {&a, &b, ...}, f) computes out[i] = f(a[i], b[i], ...) over out's shape, with
// the inputs broadcast NumPy-style (stride 0 on expanded dims). Dims are coalesced first (size-1
// dims dropped, adjacent dims merged when every operand steps through them as one dim), so the
// common cases collapse to a single long row. Rows of the innermost dim are split over the thread
// pool; a row whose output is dense and whose inputs are dense or constant (stride 0) runs a
// specialised loop the compiler can vectorise, anything else a plain strided loop. The element
// type is f32 (every op) or f64 (the float64 binary ops), the same for all operands.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "backend/common/strided_layout.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace ltx::cpu {

// Elements per parallel task, so small tensors run inline.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

// Calls row(ptrs, inner_strides, n) for every innermost row of the loop, in parallel.
template <int N, typename T, typename RowFn>
void for_each_row(const StridedLoop<N>& L, const std::array<T*, N>& base, RowFn&& row) {
  const int nd = L.ndim;
  const int64_t inner = L.size[nd - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < nd; ++d) rows *= L.size[d];
  std::array<int64_t, N> is;
  for (int k = 0; k < N; ++k) is[k] = L.stride[k][nd - 1];
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1));
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    // Multi-index of row r0 over the outer dims; later rows advance it like an odometer.
    std::array<int64_t, kMaxDims> idx{};
    int64_t rem = r0;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = rem % L.size[d];
      rem /= L.size[d];
    }
    std::array<T*, N> p;
    for (int k = 0; k < N; ++k) {
      int64_t off = 0;
      for (int d = 0; d + 1 < nd; ++d) off += idx[d] * L.stride[k][d];
      p[k] = base[k] + off;
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(p, is, inner);
      if (r + 1 == r1) break;
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < L.size[d]) {
          for (int k = 0; k < N; ++k) p[k] += L.stride[k][d];
          break;
        }
        idx[d] = 0;
        for (int k = 0; k < N; ++k) p[k] -= L.stride[k][d] * (L.size[d] - 1);
      }
    }
  });
}

namespace detail {

template <bool Constant, typename T>
inline T load(const T* p, int64_t i) {
  if constexpr (Constant) {
    return *p;
  } else {
    return p[i];
  }
}

// Dense output; input k is dense unless bit k of Mask says it is constant along the row.
template <unsigned Mask, int N, typename T, typename F, size_t... I>
inline void dense_row(const std::array<T*, N>& p, int64_t n, F& f, std::index_sequence<I...>) {
  // No __restrict: in-place ops pass the output as an input too; gcc versions the loop instead.
  T* out = p[0];
  for (int64_t i = 0; i < n; ++i) out[i] = f(load<((Mask >> I) & 1u) != 0>(p[I + 1], i)...);
}

template <int N, typename T, typename F, size_t... I>
inline void strided_row(const std::array<T*, N>& p, const std::array<int64_t, N>& s, int64_t n,
                        F& f, std::index_sequence<I...>) {
  for (int64_t i = 0; i < n; ++i) p[0][i * s[0]] = f(p[I + 1][i * s[I + 1]]...);
}

// Calls g(std::integral_constant<unsigned, mask>) for a runtime mask < 2^K.
template <int K, unsigned M = 0, typename G>
inline void dispatch_mask(unsigned mask, G&& g) {
  if constexpr (M < (1u << K)) {
    if (mask == M) {
      g(std::integral_constant<unsigned, M>{});
    } else {
      dispatch_mask<K, M + 1>(mask, std::forward<G>(g));
    }
  }
}

}  // namespace detail

// out[i] = f(ins[0][i], ins[1][i], ...) with each input broadcast to out's shape. All tensors are
// CPU tensors of element type T (f32 or f64, checked by the caller); `out` may itself be a strided
// view and may also appear among the inputs (in-place ops) as long as positions coincide exactly.
template <int K, typename T = float, typename F>
void map_into(const Tensor& out, const std::array<const Tensor*, K>& ins, F f) {
  constexpr int N = K + 1;
  if (out.numel() == 0) return;
  const Shape& shape = out.shape();
  std::array<Strides, N> strides;
  std::array<T*, N> base;
  strides[0] = out.strides();
  base[0] = out.data<T>();
  for (int k = 0; k < K; ++k) {
    const Tensor& in = *ins[k];
    strides[k + 1] = broadcast_strides(in, shape);
    base[k + 1] = in.data<T>();
  }
  const StridedLoop<N> L = coalesce<N>(shape, strides);
  for_each_row<N, T>(L, base, [&](const std::array<T*, N>& p, const std::array<int64_t, N>& s,
                               int64_t n) {
    bool dense = s[0] == 1;
    unsigned mask = 0;
    for (int k = 1; k < N && dense; ++k) {
      if (s[k] == 0) {
        mask |= 1u << (k - 1);
      } else if (s[k] != 1) {
        dense = false;
      }
    }
    if (dense) {
      detail::dispatch_mask<K>(mask, [&](auto m) {
        detail::dense_row<decltype(m)::value, N, T>(p, n, f, std::make_index_sequence<K>{});
      });
    } else {
      detail::strided_row<N, T>(p, s, n, f, std::make_index_sequence<K>{});
    }
  });
}

}  // namespace ltx::cpu
