#include "models/audio_vae/downsample.h"

#include "ops/reduce.h"
#include "ops/shape.h"

namespace ltx::models::audio_vae {

Downsample Downsample::load(io::WeightMap& w, const std::string& name, int64_t channels,
                            bool with_conv, CausalityAxis axis, const nn::LoadOptions& opt) {
  LTX_CHECK(with_conv || axis == CausalityAxis::None, "audio VAE: '", w.prefix(), name,
            "': downsampling without a conv (resamp_with_conv = false) needs causality_axis "
            "null, got \"", causality_axis_name(axis), "\"");
  Downsample d;
  d.with_conv = with_conv;
  d.axis = axis;
  if (with_conv) {
    d.conv = Conv2d::load(w, name + ".conv", channels, channels, 3, opt);
    d.conv.stride = {2, 2};
  }
  return d;
}

Tensor Downsample::operator()(const Tensor& x) const {
  if (!with_conv) {  // avg_pool2d(kernel 2, stride 2): odd trailing rows / columns are dropped
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2) / 2, wd = x.size(3) / 2;
    const Tensor even = x.narrow(2, 0, 2 * h).narrow(3, 0, 2 * wd).contiguous();
    return ops::mean(even.view({n, c, h, 2, wd, 2}), {3, 5});
  }
  std::vector<int64_t> pad;
  switch (axis) {
    case CausalityAxis::None: pad = {0, 1, 0, 1}; break;
    case CausalityAxis::Width: pad = {2, 0, 0, 1}; break;
    case CausalityAxis::Height: pad = {0, 1, 2, 0}; break;
    case CausalityAxis::WidthCompatibility: pad = {1, 0, 0, 1}; break;
  }
  return conv(ops::pad(x, pad));
}

std::optional<AttnBlock> make_attn(io::WeightMap& w, const std::string& name, int64_t channels,
                                   AttentionType type, NormType norm, const nn::LoadOptions& opt) {
  switch (type) {
    case AttentionType::Vanilla: return AttnBlock::load(w, name, channels, norm, opt);
    case AttentionType::None: return std::nullopt;
    case AttentionType::Linear: break;
  }
  fail("audio VAE: '", w.prefix(), name, "': attention type \"linear\" is not supported (the ",
       "reference raises NotImplementedError); use attn_type \"vanilla\" or \"none\", or no ",
       "attention (attn_resolutions [], mid_block_add_attention false)");
}

std::vector<DownLevel> load_downsampling_path(io::WeightMap& w, const AudioVaeConfig& cfg,
                                              const nn::LoadOptions& opt, int64_t* block_out) {
  std::vector<DownLevel> levels;
  const int64_t n = static_cast<int64_t>(cfg.ch_mult.size());
  int64_t res = cfg.resolution;
  int64_t out = cfg.ch;
  for (int64_t l = 0; l < n; ++l) {
    DownLevel lv;
    int64_t in = cfg.ch * (l == 0 ? 1 : cfg.ch_mult[l - 1]);
    out = cfg.ch * cfg.ch_mult[l];
    const std::string base = str("down.", l);
    for (int64_t j = 0; j < cfg.num_res_blocks; ++j) {
      lv.block.push_back(ResnetBlock::load(w, str(base, ".block.", j), in, out, cfg.norm_type,
                                           cfg.causality_axis, opt));
      in = out;
      if (cfg.attn_resolutions.count(res))
        lv.attn.push_back(make_attn(w, str(base, ".attn.", j), out, cfg.attn_type,
                                    cfg.norm_type, opt));
    }
    if (l != n - 1) {
      lv.downsample = Downsample::load(w, base + ".downsample", out, cfg.resamp_with_conv,
                                       cfg.causality_axis, opt);
      res /= 2;
    }
    levels.push_back(std::move(lv));
  }
  *block_out = out;
  return levels;
}

}  // namespace ltx::models::audio_vae
