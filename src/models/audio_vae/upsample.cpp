#include "models/audio_vae/upsample.h"

#include "models/audio_vae/downsample.h"
#include "ops/resample.h"

namespace ltx::models::audio_vae {

Upsample Upsample::load(io::WeightMap& w, const std::string& name, int64_t channels,
                        CausalityAxis axis, const nn::LoadOptions& opt) {
  Upsample u;
  u.axis = axis;
  u.conv = CausalConv2d::load(w, name + ".conv", channels, channels, 3, axis, opt);
  return u;
}

Tensor Upsample::operator()(const Tensor& x) const {
  Tensor y = conv(ops::interpolate_scale(x, {2.0, 2.0}, ops::InterpMode::Nearest));
  switch (axis) {
    case CausalityAxis::Height: return y.slice(2, 1, y.size(2)).contiguous();
    case CausalityAxis::Width: return y.slice(3, 1, y.size(3)).contiguous();
    case CausalityAxis::None:
    case CausalityAxis::WidthCompatibility: break;
  }
  return y;
}

std::vector<UpLevel> load_upsampling_path(io::WeightMap& w, const AudioVaeConfig& cfg,
                                          int64_t initial_channels, const nn::LoadOptions& opt,
                                          int64_t* block_out) {
  const int64_t n = static_cast<int64_t>(cfg.ch_mult.size());
  std::vector<UpLevel> levels(static_cast<size_t>(n));
  int64_t in = initial_channels;
  int64_t res = cfg.resolution >> (n - 1);
  for (int64_t l = n - 1; l >= 0; --l) {
    UpLevel& lv = levels[static_cast<size_t>(l)];
    const int64_t out = cfg.ch * cfg.ch_mult[l];
    const std::string base = str("up.", l);
    for (int64_t j = 0; j < cfg.num_res_blocks + 1; ++j) {
      lv.block.push_back(ResnetBlock::load(w, str(base, ".block.", j), in, out, cfg.norm_type,
                                           cfg.causality_axis, opt));
      in = out;
      if (cfg.attn_resolutions.count(res))  // the decoder always builds vanilla attention
        lv.attn.push_back(make_attn(w, str(base, ".attn.", j), out, AttentionType::Vanilla,
                                    cfg.norm_type, opt));
    }
    if (l != 0) {
      lv.upsample = Upsample::load(w, base + ".upsample", out, cfg.causality_axis, opt);
      res *= 2;
    }
  }
  *block_out = in;
  return levels;
}

}  // namespace ltx::models::audio_vae
