#include "models/audio_vae/vocoder.h"

#include <cmath>

#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/shape.h"

namespace ltx::models::audio_vae {

namespace {

constexpr double kVocoderPi = 3.14159265358979323846;

// x [B, C, L] -> [B, C, ratio * L]: replicate pad `pad`, ratio * grouped conv_transpose with
// `filter` [1, 1, K] at stride `ratio`, crop [crop_left, end - crop_right) (UpSample1d.forward).
Tensor upsample_1d(const Tensor& x, const Tensor& filter, int64_t ratio, int64_t pad,
                   int64_t crop_left, int64_t crop_right) {
  const int64_t c = x.size(1), k = filter.size(2);
  Tensor y = ops::pad(x, {pad, pad}, ops::PadMode::Replicate);
  y = ops::conv_transpose1d(y, filter.expand({c, 1, k}), {}, {ratio}, {0}, {0}, c);
  y = ops::mul(y, static_cast<double>(ratio));
  return y.slice(2, crop_left, y.size(2) - crop_right).contiguous();
}

}  // namespace

io::KeyMap vocoder_key_map() {
  io::KeyMap k("VOCODER_COMFY_KEYS_FILTER");
  k.keep("vocoder.");
  k.replace_prefix("vocoder.", "");
  return k;
}

// ------------------------------------------------------------------------------------ Snake

Snake Snake::load(io::WeightMap& w, const std::string& name, int64_t channels, bool beta,
                  const nn::LoadOptions& opt) {
  const Tensor alpha = w.take(name + ".alpha", {channels}, DType::F32);
  const Tensor b = beta ? w.take(name + ".beta", {channels}, DType::F32) : alpha;
  Snake s;
  if (!alpha.defined() || !b.defined()) return s;  // reported by finish()
  // alpha_logscale: exp() of the stored parameters; 1 / (. + eps) as the reference, in float.
  const std::vector<float> av = alpha.to_float_vector(), bv = b.to_float_vector();
  std::vector<float> freq(av.size()), inv(bv.size());
  for (size_t i = 0; i < av.size(); ++i) {
    freq[i] = std::exp(av[i]);
    inv[i] = 1.0f / (std::exp(bv[i]) + 1e-9f);
  }
  s.freq = Tensor::from_vector(freq, {1, channels, 1}).to(opt.device);
  s.inv_scale = Tensor::from_vector(inv, {1, channels, 1}).to(opt.device);
  return s;
}

Tensor Snake::operator()(const Tensor& x) const {
  return ops::add(x, ops::mul(inv_scale, ops::square(ops::sin(ops::mul(x, freq)))));
}

Activation1d Activation1d::load(io::WeightMap& w, const std::string& name, int64_t channels,
                                bool snakebeta, const nn::LoadOptions& opt) {
  Activation1d a;
  a.act = Snake::load(w, name + ".act", channels, snakebeta, opt);
  a.up_filter = w.take(name + ".upsample.filter", {1, 1, kKernel}, opt.dtype, opt.device);
  a.down_filter =
      w.take(name + ".downsample.lowpass.filter", {1, 1, kKernel}, opt.dtype, opt.device);
  return a;
}

Tensor Activation1d::operator()(const Tensor& x) const {
  // UpSample1d(ratio 2, kernel 12): pad = 12 / 2 - 1 = 5, crop 5 * 2 + (12 - 2) / 2 = 15 and
  // 5 * 2 + (12 - 2 + 1) / 2 = 15.
  const Tensor up = upsample_1d(x, up_filter, 2, 5, 15, 15);
  const Tensor y = act(up);
  // LowPassFilter1d(stride 2, kernel 12, even): replicate pad 12 / 2 - 1 = 5 left, 6 right.
  const int64_t c = y.size(1);
  return ops::conv1d(ops::pad(y, {5, 6}, ops::PadMode::Replicate),
                     down_filter.expand({c, 1, kKernel}), {}, {2}, {0}, {1}, c);
}

AMPBlock1 AMPBlock1::load(io::WeightMap& w, const std::string& name, int64_t channels,
                          int64_t kernel, const std::vector<int64_t>& dilation, bool snakebeta,
                          const nn::LoadOptions& opt) {
  AMPBlock1 b;
  for (int i = 0; i < 3; ++i) {
    b.convs1[i] = Conv1d::load(w, str(name, ".convs1.", i), channels, channels, kernel, true, opt);
    b.convs1[i].dilation = dilation.at(i);
    b.convs1[i].padding = (kernel * dilation[i] - dilation[i]) / 2;  // get_padding
    b.convs2[i] = Conv1d::load(w, str(name, ".convs2.", i), channels, channels, kernel, true, opt);
    b.convs2[i].padding = (kernel - 1) / 2;
  }
  for (int i = 0; i < 3; ++i)
    b.acts1[i] = Activation1d::load(w, str(name, ".acts1.", i), channels, snakebeta, opt);
  for (int i = 0; i < 3; ++i)
    b.acts2[i] = Activation1d::load(w, str(name, ".acts2.", i), channels, snakebeta, opt);
  return b;
}

Tensor AMPBlock1::operator()(const Tensor& x_in) const {
  Tensor x = x_in;
  for (int i = 0; i < 3; ++i) {
    const Tensor t = convs2[i](acts2[i](convs1[i](acts1[i](x))));
    x = ops::add(x, t);
  }
  return x;
}

// ------------------------------------------------------------------------------------ Vocoder

Vocoder Vocoder::load(io::WeightMap& w, const GeneratorConfig& cfg, const nn::LoadOptions& opt) {
  Vocoder v;
  v.cfg_ = cfg;
  const int64_t c0 = cfg.upsample_initial_channel;
  // conv_pre is hard-coded to 128 inputs (2 stereo channels x 64 mel bins) in the reference.
  v.conv_pre_ = Conv1d::load(w, "conv_pre", 128, c0, 7, true, opt);
  v.conv_pre_.padding = 3;
  const size_t n = cfg.upsample_rates.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t r = cfg.upsample_rates[i], k = cfg.upsample_kernel_sizes[i];
    ConvTranspose1d up = ConvTranspose1d::load(w, str("ups.", i), c0 >> i, c0 >> (i + 1), k, opt);
    up.stride = r;
    up.padding = (k - r) / 2;
    v.ups_.push_back(std::move(up));
  }
  const bool amp = cfg.is_amp();
  const size_t nk = cfg.resblock_kernel_sizes.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t ch = c0 >> (i + 1);
    for (size_t j = 0; j < nk; ++j) {
      const std::string name = str("resblocks.", i * nk + j);
      const int64_t k = cfg.resblock_kernel_sizes[j];
      if (amp)
        v.amp_.push_back(AMPBlock1::load(w, name, ch, k, cfg.resblock_dilation_sizes[j],
                                         cfg.activation == "snakebeta", opt));
      else
        v.resblocks_.push_back(ResBlock1::load(w, name, ch, k, cfg.resblock_dilation_sizes[j], opt));
    }
  }
  const int64_t final_ch = cfg.final_channels();
  // The reference builds act_post with SnakeBeta whatever `activation` says.
  if (amp) v.act_post_ = Activation1d::load(w, "act_post", final_ch, true, opt);
  v.conv_post_ =
      Conv1d::load(w, "conv_post", final_ch, kVocoderChannels, 7, cfg.use_bias_at_final, opt);
  v.conv_post_.padding = 3;
  return v;
}

Tensor Vocoder::forward(const Tensor& mel, const Probe& probe) const {
  LTX_CHECK(mel.dim() == 4 && mel.size(1) == 2,
            "vocoder: expects a stereo log-mel [B, 2, T, mel_bins], got ", mel.describe());
  LTX_CHECK(mel.size(3) * 2 == conv_pre_.weight.size(1), "vocoder: conv_pre takes ",
            conv_pre_.weight.size(1), " channels = 2 x mel bins, but the mel has ", mel.size(3),
            " bins");
  const int64_t b = mel.size(0), t = mel.size(2);
  // (b, s, t, c) -> (b, s, c, t) -> (b, s * c, t): channel = stereo * mel_bins + mel
  Tensor x = mel.to(conv_pre_.weight.dtype()).transpose(2, 3).contiguous().reshape({b, -1, t});
  x = conv_pre_(x);
  observe(probe, "conv_pre", x);
  const bool amp = cfg_.is_amp();
  const size_t nk = cfg_.resblock_kernel_sizes.size();
  for (size_t i = 0; i < ups_.size(); ++i) {
    if (!amp) x = leaky_relu(x, ResBlock1::kSlope);
    x = ups_[i](x);
    observe(probe, str("ups", i), x);
    // torch.stack([...]).mean(0): the blocks' sum in f32 (a bf16 mean accumulates in f32), then
    // / count, rounded once to the blocks' dtype.
    Tensor acc;
    for (size_t j = 0; j < nk; ++j) {
      const Tensor y = amp ? amp_[i * nk + j](x) : resblocks_[i * nk + j](x);
      acc = j == 0 ? y.to(DType::F32) : ops::add(acc, y.to(DType::F32));
    }
    x = ops::div(acc, static_cast<double>(nk)).to(x.dtype());  // the blocks keep x's dtype
  }
  observe(probe, "stage_out", x);
  x = amp ? (*act_post_)(x) : leaky_relu(x, 0.01);  // nn.LeakyReLU() default slope
  x = conv_post_(x);
  observe(probe, "conv_post", x);
  if (cfg_.apply_final_activation)
    x = cfg_.use_tanh_at_final ? ops::tanh(x) : ops::clamp(x, -1.0, 1.0);
  return x;
}

// ------------------------------------------------------------------------------------ BWE

MelSTFT MelSTFT::load(io::WeightMap& w, const BweConfig& cfg, const nn::LoadOptions& opt) {
  MelSTFT m;
  m.n_fft = cfg.n_fft;
  m.hop = cfg.hop_length;
  const int64_t nb = cfg.n_fft / 2 + 1;
  m.forward_basis = w.take("stft_fn.forward_basis", {2 * nb, 1, cfg.n_fft}, opt.dtype, opt.device);
  // The inverse basis is part of the module (and the file) but unused by the forward pass.
  (void)w.take("stft_fn.inverse_basis", {2 * nb, 1, cfg.n_fft}, opt.dtype, opt.device);
  m.mel_basis = w.take("mel_basis", {cfg.num_mels, nb}, opt.dtype, opt.device);
  return m;
}

Tensor MelSTFT::log_mel(const Tensor& y) const {
  LTX_CHECK(y.dim() == 2, "MelSTFT: expects waveforms [N, L], got ", y.describe());
  const int64_t nb = forward_basis.size(0) / 2;
  // Causal: all of the padding (win_length - hop, win_length = n_fft) on the left.
  const Tensor x = ops::pad(y.unsqueeze(1), {std::max<int64_t>(0, n_fft - hop), 0});
  const Tensor spec = ops::conv1d(x, forward_basis, {}, {hop});  // [N, 2 nb, frames]
  const Tensor re = spec.narrow(1, 0, nb), im = spec.narrow(1, nb, nb);
  const Tensor mag = ops::sqrt(ops::add(ops::square(re), ops::square(im)));
  const Tensor mel = ops::matmul(mel_basis, mag);  // [n_mels, nb] @ [N, nb, T] -> [N, n_mels, T]
  return ops::log(ops::clamp(mel, 1e-5, INFINITY));
}

Tensor bwe_resampler_filter(int64_t ratio) {
  LTX_CHECK(ratio >= 1, "BWE resampler: ratio must be >= 1, got ", ratio);
  // UpSample1d(window_type="hann"): rolloff 0.99, lowpass_filter_width 6, width ceil(6 / 0.99).
  constexpr float kRolloff = 0.99f;
  constexpr int64_t kLowpassWidth = 6;
  const int64_t width = static_cast<int64_t>(std::ceil(6.0 / 0.99));
  const int64_t k = 2 * width * ratio + 1;
  const float fpi = static_cast<float>(kVocoderPi);
  std::vector<float> h(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    // Float steps of the reference: (arange(k) / ratio - width) * rolloff, ...
    const float t = (static_cast<float>(i) / static_cast<float>(ratio) -
                     static_cast<float>(width)) * kRolloff;
    const float tc = std::min(std::max(t, -static_cast<float>(kLowpassWidth)),
                              static_cast<float>(kLowpassWidth));
    const float c = static_cast<float>(
        std::cos(static_cast<double>(tc * fpi / static_cast<float>(kLowpassWidth) / 2.0f)));
    const float window = c * c;
    float sinc = 1.0f;  // torch.sinc: sin(pi t) / (pi t), with pi t rounded to float
    if (t != 0.0f) {
      const float p = fpi * t;
      sinc = static_cast<float>(std::sin(static_cast<double>(p))) / p;
    }
    h[i] = sinc * window * kRolloff / static_cast<float>(ratio);
  }
  return Tensor::from_vector(h, {1, 1, k});
}

VocoderModel VocoderModel::load(io::WeightMap& w, const VocoderConfig& cfg,
                                const nn::LoadOptions& opt) {
  VocoderModel m;
  m.cfg_ = cfg;
  if (!cfg.has_bwe) {
    m.vocoder_ = Vocoder::load(w, cfg.vocoder, opt);
    return m;
  }
  io::WeightMap main = w.scoped("vocoder.");
  m.vocoder_ = Vocoder::load(main, cfg.vocoder, opt);
  io::WeightMap gen = w.scoped("bwe_generator.");
  m.bwe_generator_ = Vocoder::load(gen, cfg.bwe_generator, opt);
  io::WeightMap stft = w.scoped("mel_stft.");
  m.mel_stft_ = MelSTFT::load(stft, cfg.bwe, opt);
  m.resampler_filter_ =
      bwe_resampler_filter(cfg.bwe.output_sampling_rate / cfg.bwe.input_sampling_rate)
          .to(opt.device);
  return m;
}

DType vocoder_dtype(const VocoderConfig& cfg, DType pipeline_dtype) {
  return cfg.has_bwe ? DType::F32 : pipeline_dtype;
}

DType vocoder_dtype(const io::SafetensorsFile& file, DType pipeline_dtype) {
  return vocoder_dtype(VocoderConfig::from_config(file.metadata_json("config"), file.path()),
                       pipeline_dtype);
}

VocoderModel VocoderModel::from_file(const std::shared_ptr<const io::SafetensorsFile>& file,
                                     const nn::LoadOptions& opt) {
  const VocoderConfig cfg = VocoderConfig::from_config(file->metadata_json("config"), file->path());
  LTX_CHECK(opt.dtype == DType::F32 || (opt.dtype == DType::BF16 && !cfg.has_bwe && opt.device.is_cuda()),
            "vocoder of ", file->path(), ": ", dtype_name(opt.dtype), " on ", opt.device.str(),
            " is not a way the pipelines run it; ",
            cfg.has_bwe ? "the BWE vocoder computes in f32 (the reference's autocast): load it in f32"
                        : "the plain vocoder runs in f32, or in bf16 on CUDA (the CPU computes in f32)");
  io::WeightMap w({file}, vocoder_key_map());
  VocoderModel m = load(w, cfg, opt);
  w.finish(str("vocoder (", cfg.has_bwe ? "BigVGAN + BWE" : "HiFi-GAN", ") in ", file->path()));
  return m;
}

Tensor VocoderModel::forward(const Tensor& mel, const Probe& probe) const {
  Tensor x = vocoder_.forward(mel, prefixed(probe, "vocoder."));
  if (!cfg_.has_bwe) return x.to(mel.dtype());
  observe(probe, "bwe.low_rate", x);
  const BweConfig& bwe = cfg_.bwe;
  const int64_t b = x.size(0), c = x.size(1), length = x.size(2);
  const int64_t out_length = length * bwe.output_sampling_rate / bwe.input_sampling_rate;
  if (length % bwe.hop_length != 0)  // pad to whole STFT hops
    x = ops::pad(x, {0, bwe.hop_length - length % bwe.hop_length});
  const int64_t padded = x.size(2);
  observe(probe, "bwe.resampler_in", x);
  Tensor mel_b = mel_stft_->log_mel(x.reshape({b * c, padded}));  // [B*C, n_mels, frames]
  mel_b = mel_b.reshape({b, c, mel_b.size(1), mel_b.size(2)}).transpose(2, 3).contiguous();
  observe(probe, "bwe.mel", mel_b);
  const Tensor residual = bwe_generator_->forward(mel_b, prefixed(probe, "bwe_generator."));
  observe(probe, "bwe.residual", residual);
  // UpSample1d(ratio, "hann"): pad = width = 7, crop 2 * width * ratio and kernel - ratio.
  const int64_t ratio = bwe.output_sampling_rate / bwe.input_sampling_rate;
  const int64_t k = resampler_filter_.size(2), width = (k - 1) / (2 * ratio);
  const Tensor skip = upsample_1d(x, resampler_filter_, ratio, width, 2 * width * ratio, k - ratio);
  observe(probe, "bwe.skip", skip);
  LTX_CHECK(residual.shape() == skip.shape(), "vocoder BWE: the generator's residual ",
            residual.describe(), " and the resampled waveform ", skip.describe(),
            " differ in shape");
  const Tensor wave = ops::clamp(ops::add(residual, skip), -1.0, 1.0).narrow(2, 0, out_length);
  return wave.to(mel.dtype()).contiguous();
}

}  // namespace ltx::models::audio_vae
