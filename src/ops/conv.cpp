#include "ops/conv.h"

#include <string>
#include <vector>

#include "backend/cpu/conv.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#if LTX_WITH_CUDA
#include "backend/cuda/conv.h"
#include "backend/cuda/conv_cudnn.h"
#endif
#include "ops/shape.h"

namespace ltx::ops {

namespace {

template <size_t R>
ConvSpec make_spec(const ConvArg<R>& stride, const ConvArg<R>& padding, const ConvArg<R>& dilation,
                   int64_t groups) {
  ConvSpec spec;
  spec.rank = static_cast<int>(R);
  spec.groups = groups;
  for (size_t i = 0; i < R; ++i) {
    spec.stride[i] = stride[i];
    spec.padding[i] = padding[i];
    spec.dilation[i] = dilation[i];
  }
  return spec;
}

// The first `rank` entries of one of spec's per-dim arrays, for the errors.
std::string arg_str(const std::array<int64_t, 3>& a, int rank) {
  return Dims(std::vector<int64_t>(a.begin(), a.begin() + rank)).str();
}

// Checks shared by the forward and transposed convs.
void check_common(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
                  const ConvSpec& spec) {
  const int R = spec.rank;
  check_defined(op, {&x, &w});
  // f32 on the CPU; f32 or bf16 on CUDA.
  check_float(op, "input", x);
  check_float(op, "weight", w);
  check_dim(op, "input", x, R + 2);
  check_dim(op, "weight", w, R + 2);
  if (bias.defined()) {
    check_float(op, "bias", bias);
    check_dim(op, "bias", bias, 1);
  }
  LTX_CHECK(spec.groups >= 1, op, ": groups must be >= 1, got ", spec.groups);
  LTX_CHECK(x.size(1) % spec.groups == 0, op, ": input channels of ", x.describe(),
            " are not divisible by groups = ", spec.groups);
  for (int i = 0; i < R; ++i) {
    LTX_CHECK(spec.stride[i] >= 1, op, ": stride ", arg_str(spec.stride, R), " must be >= 1");
    LTX_CHECK(spec.dilation[i] >= 1, op, ": dilation ", arg_str(spec.dilation, R),
              " must be >= 1");
    LTX_CHECK(spec.padding[i] >= 0, op, ": padding ", arg_str(spec.padding, R),
              " must be >= 0 (crop with pad() and negative pads instead)");
    LTX_CHECK(w.size(2 + i) >= 1, op, ": empty kernel in weight ", w.describe());
  }
}

// The checks of a transposed conv beyond check_common.
void check_transposed(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
                      const ConvSpec& spec) {
  LTX_CHECK(w.size(0) == x.size(1), op, ": weight ", w.describe(), " expects ", w.size(0),
            " input channels, but the input is ", x.describe());
  const int64_t O = w.size(1) * spec.groups;
  LTX_CHECK(!bias.defined() || bias.size(0) == O, op, ": bias ", bias.describe(), " must have ", O,
            " entries (weight ", w.describe(), ", groups ", spec.groups, ")");
  for (int i = 0; i < spec.rank; ++i) {
    const int64_t s = spec.stride[i], d = spec.dilation[i], p = spec.padding[i];
    const int64_t op_i = spec.output_padding[i];
    LTX_CHECK(op_i >= 0 && (op_i < s || op_i < d), op, ": output_padding ", op_i,
              " must be >= 0 and smaller than the stride ", s, " or the dilation ", d);
    LTX_CHECK(x.size(2 + i) >= 1, op, ": empty input ", x.describe());
    const int64_t out = (x.size(2 + i) - 1) * s - 2 * p + d * (w.size(2 + i) - 1) + op_i + 1;
    LTX_CHECK(out >= 1, op, ": output length ", out, " is not positive for input ", x.describe(),
              ", weight ", w.describe(), ", padding ", p);
  }
}

#if LTX_WITH_CUDA
// CUDA has no transposed kernel: out[o, i * s - p + k * d] += w[c, o, k] x[c, i] is the forward
// conv, stride 1, dilation d, of x with s - 1 zeros between samples, padded by d (K - 1) - p on
// the left and that plus output_padding on the right (negative = crop), with w transposed per
// group and flipped.
Tensor cuda_conv_transpose(const Tensor& x, const Tensor& w, const Tensor& bias,
                           const ConvSpec& spec) {
  const int R = spec.rank;
  const int64_t N = x.size(0), C = x.size(1), G = spec.groups;
  const int64_t Cg = C / G, Og = w.size(1);
  Shape up_shape = {N, C};
  for (int i = 0; i < R; ++i) up_shape.push_back((x.size(2 + i) - 1) * spec.stride[i] + 1);
  Tensor up = Tensor::zeros(up_shape, x.dtype(), x.device());
  Tensor view = up;
  for (int i = 0; i < R; ++i) view = view.slice(2 + i, 0, up_shape[2 + i], spec.stride[i]);
  view.copy_from(x);
  std::vector<int64_t> pads;  // pad()'s order: last dim first, (left, right) pairs
  ConvSpec fwd;
  fwd.rank = R;
  fwd.groups = G;
  bool any_pad = false;
  for (int i = R - 1; i >= 0; --i) {
    const int64_t edge = spec.dilation[i] * (w.size(2 + i) - 1) - spec.padding[i];
    pads.push_back(edge);
    pads.push_back(edge + spec.output_padding[i]);
    any_pad = any_pad || edge != 0 || spec.output_padding[i] != 0;
  }
  for (int i = 0; i < R; ++i) fwd.dilation[i] = spec.dilation[i];
  if (any_pad) up = pad(up, pads);
  // w [C, Og, *k] -> [G, Cg, Og, *k] -> [G, Og, Cg, *k] -> [O, Cg, *k], flipped spatially.
  Shape wg = {G, Cg, Og};
  Shape wo = {G * Og, Cg};
  std::vector<int64_t> perm = {0, 2, 1}, flip_dims;
  for (int i = 0; i < R; ++i) {
    wg.push_back(w.size(2 + i));
    wo.push_back(w.size(2 + i));
    perm.push_back(3 + i);
    flip_dims.push_back(2 + i);
  }
  const Tensor wf = flip(w.reshape(wg).permute(perm).reshape(wo), flip_dims);
  return cuda::conv_nd(up, wf, bias, fwd);
}
#endif

Tensor run_conv(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
                const ConvSpec& spec, bool transposed) {
  switch (common_device(op, {&x, &w, bias.defined() ? &bias : nullptr}).type) {
    case DeviceType::CPU:
      return transposed ? cpu::conv_transpose_nd(x, w, bias, spec) : cpu::conv_nd(x, w, bias, spec);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return transposed ? cuda_conv_transpose(x, w, bias, spec)
                                          : cuda::conv_nd(x, w, bias, spec),
                        op);
  }
  unreachable_device(op);
}

template <size_t R>
Tensor conv_forward(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const ConvArg<R>& stride, const ConvArg<R>& padding, const ConvArg<R>& dilation,
                    int64_t groups) {
  const ConvSpec spec = make_spec<R>(stride, padding, dilation, groups);
  check_common(op, x, w, bias, spec);
  const int64_t O = w.size(0);
  LTX_CHECK(w.size(1) * groups == x.size(1), op, ": weight ", w.describe(), " expects ", w.size(1),
            " x ", groups, " groups = ", w.size(1) * groups, " input channels, but the input is ",
            x.describe());
  LTX_CHECK(O % groups == 0, op, ": output channels of weight ", w.describe(),
            " are not divisible by groups = ", groups);
  LTX_CHECK(!bias.defined() || bias.size(0) == O, op, ": bias ", bias.describe(), " must have ", O,
            " entries for weight ", w.describe());
  for (size_t i = 0; i < R; ++i) {
    const int64_t span = dilation[i] * (w.size(2 + i) - 1) + 1;
    LTX_CHECK(x.size(2 + i) + 2 * padding[i] >= span, op, ": input ", x.describe(), " padded by ",
              arg_str(spec.padding, spec.rank), " is smaller than the dilated kernel (", span,
              ") of weight ", w.describe(), " in spatial dim ", i);
  }
  return run_conv(op, x, w, bias, spec, false);
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvArg<1>& stride,
              const ConvArg<1>& padding, const ConvArg<1>& dilation, int64_t groups) {
  return conv_forward<1>("conv1d", x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvArg<2>& stride,
              const ConvArg<2>& padding, const ConvArg<2>& dilation, int64_t groups) {
  return conv_forward<2>("conv2d", x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvArg<3>& stride,
              const ConvArg<3>& padding, const ConvArg<3>& dilation, int64_t groups) {
  return conv_forward<3>("conv3d", x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv3d_replicate_time(Tensor x, const Tensor& weight, const Tensor& bias,
                             const ConvArg<3>& stride, const ConvArg<2>& padding,
                             int64_t pad_front, int64_t pad_back, const Tensor& residual) {
  const char* op = "conv3d_replicate_time";
  check_defined(op, {&x, &weight});
  check_dim(op, "input", x, 5);
  LTX_CHECK(pad_front >= 0 && pad_back >= 0, op, ": temporal pads must be >= 0, got front ",
            pad_front, ", back ", pad_back);
  LTX_CHECK(x.size(2) >= 1 || pad_front + pad_back == 0, op, ": cannot replicate frames of the ",
            "empty input ", x.describe());
#if LTX_WITH_CUDA
  if (x.device().is_cuda() && weight.device() == x.device() &&
      (!bias.defined() || bias.device() == x.device())) {
    const ConvSpec spec = make_spec<3>(stride, {0, padding[0], padding[1]}, {1, 1, 1}, 1);
    check_common(op, x, weight, bias, spec);
    if (weight.size(1) == x.size(1) && (!bias.defined() || bias.size(0) == weight.size(0)) &&
        cuda::cudnn_replicate_time_applies(x, weight, bias, spec, pad_front, pad_back)) {
      if (!residual.defined())
        LTX_CUDA_DISPATCH(
            return cuda::cudnn_conv3d_replicate_time(x, weight, bias, spec, pad_front, pad_back),
            op);
      // The bias and the residual in one pass over the conv's output (add_then_add_: the same
      // two roundings as adding them in turn) instead of two.
      Tensor out;
      LTX_CUDA_DISPATCH(
          out = cuda::cudnn_conv3d_replicate_time(x, weight, Tensor(), spec, pad_front, pad_back),
          op);
      if (bias.defined()) {
        add_then_add_(out, bias.view({1, bias.size(0), 1, 1, 1}), residual);
      } else {
        add_(out, residual);
      }
      return out;
    }
  }
#endif
  // The reference composition (and the CPU path): replicate-pad in time, conv with spatial zeros.
  Tensor xp = pad_front + pad_back == 0
                  ? std::move(x)
                  : pad(x, {0, 0, 0, 0, pad_front, pad_back}, PadMode::Replicate);
  x = Tensor();  // the padded copy is all the conv needs
  Tensor out = conv3d(xp, weight, bias, stride, {0, padding[0], padding[1]});
  if (residual.defined()) add_(out, residual);
  return out;
}

Tensor conv_transpose_nd(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const ConvSpec& spec) {
  const char* op = "conv_transpose_nd";
  LTX_CHECK(spec.rank >= 1 && spec.rank <= 3, op, ": spec.rank must be 1, 2 or 3, got ", spec.rank);
  check_common(op, x, weight, bias, spec);
  check_transposed(op, x, weight, bias, spec);
  return run_conv(op, x, weight, bias, spec, true);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvArg<1>& stride, const ConvArg<1>& padding,
                        const ConvArg<1>& output_padding, int64_t groups,
                        const ConvArg<1>& dilation) {
  const char* op = "conv_transpose1d";
  ConvSpec spec = make_spec<1>(stride, padding, dilation, groups);
  spec.output_padding[0] = output_padding[0];
  check_common(op, x, weight, bias, spec);
  check_transposed(op, x, weight, bias, spec);
  return run_conv(op, x, weight, bias, spec, true);
}

}  // namespace ltx::ops
