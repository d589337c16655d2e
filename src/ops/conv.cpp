#include "ops/conv.h"

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
std::string arg_str(const ConvArg<R>& a) {
  return Dims(std::vector<int64_t>(a.begin(), a.end())).str();
}

// Checks shared by the forward and transposed convs; returns the CPU spec.
template <size_t R>
cpu::ConvSpec check_common(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
                           const ConvArg<R>& stride, const ConvArg<R>& padding,
                           const ConvArg<R>& dilation, int64_t groups) {
  check_defined(op, {&x, &w});
  // f32 on the CPU; f32 or bf16 on CUDA.
  check_float(op, "input", x);
  check_float(op, "weight", w);
  check_dim(op, "input", x, static_cast<int>(R) + 2);
  check_dim(op, "weight", w, static_cast<int>(R) + 2);
  if (bias.defined()) {
    check_float(op, "bias", bias);
    check_dim(op, "bias", bias, 1);
  }
  LTX_CHECK(groups >= 1, op, ": groups must be >= 1, got ", groups);
  LTX_CHECK(x.size(1) % groups == 0, op, ": input channels of ", x.describe(),
            " are not divisible by groups = ", groups);
  cpu::ConvSpec spec;
  spec.rank = static_cast<int>(R);
  spec.groups = groups;
  for (size_t i = 0; i < R; ++i) {
    LTX_CHECK(stride[i] >= 1, op, ": stride ", arg_str(stride), " must be >= 1");
    LTX_CHECK(dilation[i] >= 1, op, ": dilation ", arg_str(dilation), " must be >= 1");
    LTX_CHECK(padding[i] >= 0, op, ": padding ", arg_str(padding), " must be >= 0 (crop with ",
              "pad() and negative pads instead)");
    LTX_CHECK(w.size(2 + i) >= 1, op, ": empty kernel in weight ", w.describe());
    spec.stride[i] = stride[i];
    spec.padding[i] = padding[i];
    spec.dilation[i] = dilation[i];
  }
  return spec;
}

Tensor run_conv(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
                const cpu::ConvSpec& spec, bool transposed) {
  switch (common_device(op, {&x, &w, bias.defined() ? &bias : nullptr}).type) {
    case DeviceType::CPU:
      return transposed ? cpu::conv_transpose_nd(x, w, bias, spec) : cpu::conv_nd(x, w, bias, spec);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return transposed ? cuda::conv_transpose_nd(x, w, bias, spec)
                                          : cuda::conv_nd(x, w, bias, spec),
                        op);
  }
  unreachable_device(op);
}

template <size_t R>
Tensor conv_forward(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const ConvArg<R>& stride, const ConvArg<R>& padding, const ConvArg<R>& dilation,
                    int64_t groups) {
  const cpu::ConvSpec spec = check_common<R>(op, x, w, bias, stride, padding, dilation, groups);
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
              arg_str(padding), " is smaller than the dilated kernel (", span, ") of weight ",
              w.describe(), " in spatial dim ", i);
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
    const cpu::ConvSpec spec = check_common<3>(op, x, weight, bias, stride,
                                               {0, padding[0], padding[1]}, {1, 1, 1}, 1);
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

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvArg<1>& stride, const ConvArg<1>& padding,
                        const ConvArg<1>& output_padding, int64_t groups,
                        const ConvArg<1>& dilation) {
  const char* op = "conv_transpose1d";
  cpu::ConvSpec spec = check_common<1>(op, x, weight, bias, stride, padding, dilation, groups);
  LTX_CHECK(weight.size(0) == x.size(1), op, ": weight ", weight.describe(), " expects ",
            weight.size(0), " input channels, but the input is ", x.describe());
  const int64_t O = weight.size(1) * groups;
  LTX_CHECK(!bias.defined() || bias.size(0) == O, op, ": bias ", bias.describe(), " must have ", O,
            " entries (weight ", weight.describe(), ", groups ", groups, ")");
  LTX_CHECK(
      output_padding[0] >= 0 && (output_padding[0] < stride[0] || output_padding[0] < dilation[0]),
      op, ": output_padding ", output_padding[0], " must be >= 0 and smaller than the ", "stride ",
      stride[0], " or the dilation ", dilation[0]);
  LTX_CHECK(x.size(2) >= 1, op, ": empty input ", x.describe());
  const int64_t out = (x.size(2) - 1) * stride[0] - 2 * padding[0] +
                      dilation[0] * (weight.size(2) - 1) + output_padding[0] + 1;
  LTX_CHECK(out >= 1, op, ": output length ", out, " is not positive for input ", x.describe(),
            ", weight ", weight.describe(), ", padding ", padding[0]);
  spec.output_padding[0] = output_padding[0];
  return run_conv(op, x, weight, bias, spec, true);
}

}  // namespace ltx::ops
