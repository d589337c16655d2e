#pragma once
// Reductions over f32 tensors (on CUDA also bf16, with a result of the input's dtype). `dims`
// lists the reduced dims (negative = from the end, no repeats); an empty list reduces over all
// dims. keepdim keeps reduced dims with size 1.
// Sums accumulate in double, so results match a double reference to ~1e-7 relative even for
// millions of elements, independently of the thread count.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "op_types/reduce.h"

namespace ltx::ops {

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Mean over zero elements is NaN (as in torch).
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// NaN-propagating max / min; reducing over an empty dim is an error.
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// Variance sum((x - mean)^2) / max(0, N - correction), two-pass in double; correction = 1 is the
// unbiased estimate (torch's default for var and std). N - correction <= 0 gives inf or NaN.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);

// Index (I64) of the first maximum along `dim`; a NaN counts as the maximum (as in torch).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);

// Numerically stable (the row max is subtracted first) softmax / log-softmax along `dim`.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace ltx::ops
