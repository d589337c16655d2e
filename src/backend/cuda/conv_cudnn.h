#pragma once
// Forward convolution through cuDNN's convolution API (cudnnConvolutionForward), the fast path of
// cuda::conv_nd for bf16 (tensor cores, f32 accumulation). 1-3 spatial dims (fewer than 3 are run
// as 3-D with size-1 dims), any stride / padding / dilation / groups; NC(D)HW tensors in any
// strides cuDNN accepts (contiguous copies otherwise). One cuDNN handle per device; the algorithm
// per (device, shapes, spec, dtype) is chosen once by cudnnFindConvolutionForwardAlgorithm and
// cached; the workspace comes from the caching allocator on the current stream.
#include "backend/cpu/conv.h"
#include "core/tensor.h"

namespace ltx::cuda {

// Whether cuDNN takes this case: bf16 x, w and bias (the only dtype routed here), a cuDNN library
// that loads on this machine, and shapes within cuDNN's int32 limits.
bool cudnn_conv_applies(const Tensor& x, const Tensor& w, const Tensor& bias,
                        const cpu::ConvSpec& spec);

// x [N, C, *spatial], w [O, C / groups, *kernel], bias [O] or undefined (added to the bf16 result
// by the elementwise op, i.e. rounded twice: conv result, then + bias). Returns bf16
// [N, O, *out_spatial].
Tensor cudnn_conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const cpu::ConvSpec& spec);

}  // namespace ltx::cuda
