#pragma once
// Forward convolution through cuDNN, the fast path of cuda::conv_nd for bf16 (tensor cores, f32
// accumulation). 1-3 spatial dims (fewer than 3 are run as 3-D with size-1 dims), any stride /
// padding / dilation / groups; NC(D)HW tensors in any layout (see cudnn_conv_nd for which are used
// without a copy). One cuDNN handle per device; the workspace comes from the caching allocator on
// the current stream.
//
// Two cuDNN APIs, chosen once per (device, shapes, spec, beta) and cached:
//   - legacy (cudnnConvolutionForward): the algorithm cudnnFindConvolutionForwardAlgorithm
//     measures fastest; always prepared, it is the fallback;
//   - backend (graph API execution plans; groups 1): the first 8 engine configs of cuDNN's
//     heuristics (modes A, then B) that need no runtime compilation (seconds of NVRTC), are
//     deterministic and fit the workspace limit. Their tuned knobs beat the legacy algorithms on
//     the H200 by 2.6-2.8x on the VAE's 1-frame boundary convs, 1.09x over its decode
//     (tools/bench/cudnn_conv_engines_probe.cpp, bench/RESULTS.md).
// The first call of a geometry times the legacy algorithm and each plan (on a scratch output) and
// keeps a plan only when it ran faster, so it is never slower than the legacy path; a plan that
// cuDNN refuses, now or later, sends the geometry to the legacy path for good. During CUDA graph
// capture nothing is timed: a geometry without a decision runs the legacy path, undecided.
// LTX_CUDNN_BACKEND=0 keeps the legacy path only. LTX_CUDNN_STATS=1 prints, at exit, every
// geometry's calls, the path it took and the measured times. The timed decisions (cudnnFind's
// pick, and the backend-or-legacy choice with the plan's engine config) are kept on disk by
// conv_tuning_cache.h, so a later process on the same GPU and cuDNN rebuilds them untimed.
#include "core/tensor.h"
#include "op_types/conv.h"

namespace ltx::cuda {

// Whether cuDNN takes this case: bf16 x, w and bias (the only dtype routed here), a cuDNN library
// that loads on this machine, and shapes within cuDNN's int32 limits.
bool cudnn_conv_applies(const Tensor& x, const Tensor& w, const Tensor& bias,
                        const ops::ConvSpec& spec);

// x [N, C, *spatial], w [O, C / groups, *kernel], bias [O] or undefined (added to the bf16 result
// by the elementwise op, i.e. rounded twice: conv result, then + bias). Returns bf16
// [N, O, *out_spatial]. Layouts: cuDNN runs channels-last ([N, *spatial, C] memory, filters
// [O, *kernel, C / groups]); x and w that already are dense channels-last (Tensor::
// is_channels_last) and 16-byte aligned are used as they are, others are copied. The result is
// channels-last when x is (the bias added in place), else contiguous NC(D)HW (written by the bias
// add, or a copy), as before channels-last inputs existed.
Tensor cudnn_conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const ops::ConvSpec& spec);

// The replicate-time fold of ops::conv3d_replicate_time: applies to bf16 3-D convs that cuDNN
// takes (cudnn_conv_applies) with groups 1, temporal stride and dilation 1, no temporal padding in
// `spec` and pad_front == pad_back == k_t / 2 >= 1.
bool cudnn_replicate_time_applies(const Tensor& x, const Tensor& w, const Tensor& bias,
                                  const ops::ConvSpec& spec, int64_t pad_front, int64_t pad_back);
// conv3d(pad(x, time front/back by replicating frames), w, bias, spec) without the padded copy:
// one cuDNN conv with zero temporal padding k_t / 2, then the taps that read replicated frames
// as 1-frame convs of frame 0 / frame T - 1 with the summed weight slices (made per call: one
// small copy per side for k_t = 3), accumulated onto the boundary output frames (cuDNN beta = 1), then the bias once.
// Not bit-identical to the composition (the boundary frames round once more); layouts as
// cudnn_conv_nd. Throws unless cudnn_replicate_time_applies.
Tensor cudnn_conv3d_replicate_time(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   const ops::ConvSpec& spec, int64_t pad_front, int64_t pad_back);

// Which cuDNN API the convolutions above use (process-wide; for tests and benchmarks). Decisions
// are cached per mode, so switching never reuses another mode's choice.
enum class CudnnBackendMode {
  kDefault,  // from LTX_CUDNN_BACKEND (read once): "0" is kOff, anything else (or unset) kTimed
  kOff,      // the legacy API only
  kTimed,    // a backend plan where it measured faster than the legacy algorithm
  kForced,   // the fastest backend plan even where slower (tests: runs the backend path); the
             // legacy API only where no plan runs
};
void set_cudnn_backend_mode(CudnnBackendMode mode);
// Convolutions run through a backend plan so far (process-wide; tests).
int64_t cudnn_backend_executions();
// Timed searches so far (cudnnFind calls and backend timing passes; process-wide; tests).
int64_t cudnn_conv_timed_searches();
// Tests: drop this process's decisions, so the next call of a geometry decides again (from the
// tuning cache when it holds one).
void forget_cudnn_conv_choices_for_tests();

}  // namespace ltx::cuda
