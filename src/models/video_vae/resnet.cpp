#include "models/video_vae/resnet.h"

#include "ops/elementwise.h"
#include "ops/norm.h"

namespace ltx::models::video_vae {

Tensor pixel_norm(const Tensor& x, double eps) { return ops::rms_norm_dim(x, 1, eps); }

Norm Norm::load(io::WeightMap& w, const std::string& name, NormLayer type, int64_t channels,
                int64_t groups, double eps, const nn::LoadOptions& opt) {
  Norm n;
  n.type = type;
  n.groups = groups;
  n.eps = eps;
  if (type == NormLayer::GroupNorm) {
    LTX_CHECK(channels % groups == 0, "video VAE: GroupNorm(", groups, ") over ", channels,
              " channels (", name, "): channels must be divisible by the groups");
    n.weight = w.take(name + ".weight", {channels}, opt.dtype, opt.device);
    n.bias = w.take(name + ".bias", {channels}, opt.dtype, opt.device);
  }
  return n;
}

Tensor Norm::operator()(const Tensor& x) const {
  if (type == NormLayer::PixelNorm) return pixel_norm(x);
  return ops::group_norm(x, groups, weight, bias, eps);
}

Tensor Norm::then_silu(Tensor x, const Tensor& pre_bias) const {
  if (type == NormLayer::PixelNorm)
    return ops::rms_norm_dim_silu(std::move(x), 1, kPixelNormEps, pre_bias);
  if (pre_bias.defined()) x = ops::add(x, pre_bias.view({1, pre_bias.size(0), 1, 1, 1}));
  x = (*this)(x);
  return ops::silu(x);
}

ResnetBlock3D ResnetBlock3D::load(io::WeightMap& w, int64_t in_channels, int64_t out_channels,
                                  NormLayer norm, double eps, int64_t groups,
                                  bool timestep_conditioning, PaddingMode padding,
                                  const nn::LoadOptions& opt) {
  ResnetBlock3D b;
  b.norm1 = Norm::load(w, "norm1", norm, in_channels, groups, eps, opt);
  b.conv1 = CausalConv3d::load(w, "conv1", in_channels, out_channels, 3, {1, 1, 1}, padding, opt);
  b.norm2 = Norm::load(w, "norm2", norm, out_channels, groups, eps, opt);
  b.conv2 = CausalConv3d::load(w, "conv2", out_channels, out_channels, 3, {1, 1, 1}, padding, opt);
  if (in_channels != out_channels) {
    b.norm3 = Norm::load(w, "norm3", NormLayer::GroupNorm, in_channels, 1, eps, opt);
    b.conv_shortcut = PointwiseConv3d::load(w, "conv_shortcut", in_channels, out_channels, opt);
  }
  b.timestep_conditioning = timestep_conditioning;
  if (timestep_conditioning)
    b.scale_shift_table = w.take("scale_shift_table", {4, in_channels}, opt.dtype, opt.device);
  return b;
}

Tensor ResnetBlock3D::operator()(Tensor x, bool causal, const Tensor& timestep_embed) const {
  return forward({std::move(x), Tensor()}, causal, timestep_embed, nullptr).x;
}

bool ResnetBlock3D::hands_on(const Norm* next, bool next_modulated) const {
  return next != nullptr && next->type == NormLayer::PixelNorm && !next_modulated && !norm3 &&
         !conv_shortcut;
}

ResnetStep ResnetBlock3D::forward(ResnetStep in, bool causal, const Tensor& timestep_embed,
                                  const Norm* next) const {
  Tensor x = std::move(in.x);
  Tensor shift1, scale1, shift2, scale2;
  if (timestep_conditioning) {
    LTX_CHECK(timestep_embed.defined(), "ResnetBlock3D: the timestep embedding is required when "
              "timestep_conditioning is on");
    const int64_t batch = x.size(0), c = scale_shift_table.size(1);
    LTX_CHECK(timestep_embed.numel() == batch * 4 * c, "ResnetBlock3D: timestep embedding ",
              timestep_embed.describe(), " does not hold 4 x ", c, " values per sample");
    // table[None, :, :, None, None, None] + embed.reshape(B, 4, C, 1, 1, 1), rows unbound.
    Tensor ada = ops::add(scale_shift_table.view({1, 4, c, 1, 1, 1}),
                          timestep_embed.reshape({batch, 4, c, 1, 1, 1}));
    shift1 = ada.select(1, 0);
    scale1 = ada.select(1, 1);
    shift2 = ada.select(1, 2);
    scale2 = ada.select(1, 3);
  }
  // norm -> [modulate] -> silu, each step releasing its input; without the modulation the norm
  // and the silu are one pass.
  const auto norm_silu = [&](const Norm& norm, Tensor h, const Tensor& scale, const Tensor& shift) {
    if (!timestep_conditioning) return norm.then_silu(std::move(h));
    h = norm(h);
    h = ops::modulate(h, scale, shift);
    return ops::silu(h);
  };
  // norm1's activation: handed in by the block before, or formed here.
  Tensor h = std::move(in.h);
  if (timestep_conditioning) {
    if (!h.defined()) h = norm_silu(norm1, x, scale1, shift1);
    h = conv1(std::move(h), causal);
    h = norm_silu(norm2, std::move(h), scale2, shift2);
  } else {
    // conv1's bias goes into norm2's pass (the same sum, rounded as the conv's bias add rounds
    // it): one read and write of the activation fewer on CUDA.
    if (!h.defined()) h = norm1.then_silu(x);
    h = conv1.unbiased(std::move(h), causal);
    h = norm2.then_silu(std::move(h), conv1.bias);
  }
  // An identity shortcut goes into conv2 (its bias and the skip added in one pass on CUDA; the
  // same sums), and with `next` that pass also forms the next PixelNorm + SiLU. A projected one is
  // made after conv2, as before, so that it is not held beside conv2's input and output.
  if (hands_on(next, false)) {
    Tensor out = conv2.unbiased(std::move(h), causal);
    Tensor next_h = ops::add_then_add_rms_norm_dim_silu_(out, conv2.bias, x, 1, kPixelNormEps);
    return {std::move(out), std::move(next_h)};
  }
  if (!norm3 && !conv_shortcut) return {conv2(std::move(h), causal, x), Tensor()};
  h = conv2(std::move(h), causal);
  Tensor shortcut = std::move(x);
  if (norm3) shortcut = (*norm3)(shortcut);
  if (conv_shortcut) shortcut = (*conv_shortcut)(shortcut);
  // h is fresh, so the residual is added in place (input + hidden, the same sum either way).
  ops::add_(h, shortcut);
  return {std::move(h), Tensor()};
}

UNetMidBlock3D UNetMidBlock3D::load(io::WeightMap& w, int64_t channels, int64_t num_layers,
                                    NormLayer norm, bool timestep_conditioning,
                                    PaddingMode padding, const nn::LoadOptions& opt) {
  UNetMidBlock3D m;
  if (timestep_conditioning) {
    io::WeightMap te = w.scoped("time_embedder.");
    m.time_embedder =
        transformer::PixArtAlphaCombinedTimestepSizeEmbeddings::load(te, 4 * channels, opt);
  }
  for (int64_t j = 0; j < num_layers; ++j) {
    io::WeightMap rw = w.scoped(str("res_blocks.", j, "."));
    m.res_blocks.push_back(ResnetBlock3D::load(rw, channels, channels, norm, 1e-6, 32,
                                               timestep_conditioning, padding, opt));
  }
  return m;
}

Tensor UNetMidBlock3D::operator()(Tensor x, bool causal, const Tensor& scaled_timestep) const {
  return forward(std::move(x), causal, scaled_timestep, nullptr).x;
}

ResnetStep UNetMidBlock3D::forward(Tensor x, bool causal, const Tensor& scaled_timestep,
                                   const Norm* next) const {
  Tensor embed;
  if (time_embedder) {
    LTX_CHECK(scaled_timestep.defined(), "UNetMidBlock3D: a timestep is required when "
              "timestep_conditioning is on");
    embed = (*time_embedder)(scaled_timestep.flatten());
  }
  ResnetStep step{std::move(x), Tensor()};
  for (size_t j = 0; j < res_blocks.size(); ++j) {
    const bool last = j + 1 == res_blocks.size();
    const Norm* after = last ? next : &res_blocks[j + 1].norm1;
    const bool after_modulated = !last && res_blocks[j + 1].timestep_conditioning;
    const ResnetBlock3D& r = res_blocks[j];
    step = r.forward(std::move(step), causal, embed, r.hands_on(after, after_modulated) ? after : nullptr);
  }
  return step;
}

}  // namespace ltx::models::video_vae
