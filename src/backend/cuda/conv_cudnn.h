#pragma once
// Forward convolution through cuDNN's convolution API (cudnnConvolutionForward), the fast path of
// cuda::conv_nd for bf16 (tensor cores, f32 accumulation). 1-3 spatial dims (fewer than 3 are run
// as 3-D with size-1 dims), any stride / padding / dilation / groups; NC(D)HW tensors in any
// layout (see cudnn_conv_nd for which are used without a copy). One cuDNN handle per device; the algorithm
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
// [N, O, *out_spatial]. Layouts: cuDNN runs channels-last ([N, *spatial, C] memory, filters
// [O, *kernel, C / groups]); x and w that already are dense channels-last (Tensor::
// is_channels_last) and 16-byte aligned are used as they are, others are copied. The result is
// channels-last when x is (the bias added in place), else contiguous NC(D)HW (written by the bias
// add, or a copy), as before channels-last inputs existed.
Tensor cudnn_conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const cpu::ConvSpec& spec);

// The replicate-time fold of ops::conv3d_replicate_time: applies to bf16 3-D convs that cuDNN
// takes (cudnn_conv_applies) with groups 1, temporal stride and dilation 1, no temporal padding in
// `spec` and pad_front == pad_back == k_t / 2 >= 1.
bool cudnn_replicate_time_applies(const Tensor& x, const Tensor& w, const Tensor& bias,
                                  const cpu::ConvSpec& spec, int64_t pad_front, int64_t pad_back);
// conv3d(pad(x, time front/back by replicating frames), w, bias, spec) without the padded copy:
// one cuDNN conv with zero temporal padding k_t / 2, then the taps that read replicated frames
// as 1-frame convs of frame 0 / frame T - 1 with the summed weight slices (made per call: one
// small copy per side for k_t = 3), accumulated onto the boundary output frames (cuDNN beta = 1), then the bias once.
// Not bit-identical to the composition (the boundary frames round once more); layouts as
// cudnn_conv_nd. Throws unless cudnn_replicate_time_applies.
Tensor cudnn_conv3d_replicate_time(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   const cpu::ConvSpec& spec, int64_t pad_front, int64_t pad_back);

}  // namespace ltx::cuda
