#include "models/audio_vae/audio_vae.h"

#include <cmath>

#include "ops/elementwise.h"
#include "ops/shape.h"

namespace ltx::models::audio_vae {

namespace {

// f32 anywhere; bf16 (the pipelines' precision on a GPU) on CUDA, where every op has a bf16 path.
void require_supported_dtype(const nn::LoadOptions& opt, const char* what) {
  LTX_CHECK(opt.dtype == DType::F32 || (opt.dtype == DType::BF16 && opt.device.is_cuda()), what,
            ": ", dtype_name(opt.dtype), " weights on ", opt.device.str(),
            " are not supported: bf16 runs on CUDA, the CPU computes in f32 (load with f32)");
}

void run_attn(const std::vector<std::optional<AttnBlock>>& attn, size_t j, Tensor& h) {
  if (j < attn.size() && attn[j]) h = (*attn[j])(h);
}

}  // namespace

io::KeyMap encoder_key_map() {
  io::KeyMap k("AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER");
  k.keep("audio_vae.encoder.").keep("audio_vae.per_channel_statistics.");
  k.replace("audio_vae.encoder.", "");
  k.replace("audio_vae.per_channel_statistics.", "per_channel_statistics.");
  return k;
}

io::KeyMap decoder_key_map() {
  io::KeyMap k("AUDIO_VAE_DECODER_COMFY_KEYS_FILTER");
  k.keep("audio_vae.decoder.").keep("audio_vae.per_channel_statistics.");
  k.replace("audio_vae.decoder.", "");
  k.replace("audio_vae.per_channel_statistics.", "per_channel_statistics.");
  return k;
}

Tensor patchify_audio(const Tensor& latent) {
  LTX_CHECK(latent.dim() == 4, "audio patchify: expects [B, C, T, F], got ", latent.describe());
  const int64_t b = latent.size(0), c = latent.size(1), t = latent.size(2), f = latent.size(3);
  return latent.permute({0, 2, 1, 3}).contiguous().reshape({b, t, c * f});
}

Tensor unpatchify_audio(const Tensor& tokens, int64_t channels, int64_t mel_bins) {
  LTX_CHECK(tokens.dim() == 3 && tokens.size(2) == channels * mel_bins,
            "audio unpatchify: expects tokens [B, T, ", channels, " x ", mel_bins, "], got ",
            tokens.describe());
  const int64_t b = tokens.size(0), t = tokens.size(1);
  return tokens.reshape({b, t, channels, mel_bins}).permute({0, 2, 1, 3}).contiguous();
}

PerChannelStatistics PerChannelStatistics::load(io::WeightMap& w, int64_t channels,
                                                const nn::LoadOptions& opt) {
  PerChannelStatistics s;
  s.mean = w.take("per_channel_statistics.mean-of-means", {channels}, opt.dtype, opt.device);
  s.std = w.take("per_channel_statistics.std-of-means", {channels}, opt.dtype, opt.device);
  return s;
}

namespace {
void check_tokens(const PerChannelStatistics& s, const Tensor& tokens) {
  LTX_CHECK(tokens.dim() >= 1 && tokens.size(-1) == s.mean.size(0),
            "audio latent statistics: the latent has ", tokens.size(-1),
            " features per frame (channels x mel bins) but per_channel_statistics has ",
            s.mean.size(0), " entries (ddconfig.ch); they must be equal");
}
}  // namespace

Tensor PerChannelStatistics::normalize(const Tensor& tokens) const {
  check_tokens(*this, tokens);
  return ops::div(ops::sub(tokens, mean), std);
}

Tensor PerChannelStatistics::un_normalize(const Tensor& tokens) const {
  check_tokens(*this, tokens);
  return ops::add(ops::mul(tokens, std), mean);
}

MidBlock MidBlock::load(io::WeightMap& w, int64_t channels, const AudioVaeConfig& cfg,
                        AttentionType attn_type, const nn::LoadOptions& opt) {
  MidBlock m;
  m.block_1 = ResnetBlock::load(w, "mid.block_1", channels, channels, cfg.norm_type,
                                cfg.causality_axis, opt);
  if (cfg.mid_block_add_attention)
    m.attn_1 = make_attn(w, "mid.attn_1", channels, attn_type, cfg.norm_type, opt);
  m.block_2 = ResnetBlock::load(w, "mid.block_2", channels, channels, cfg.norm_type,
                                cfg.causality_axis, opt);
  return m;
}

Tensor MidBlock::operator()(const Tensor& x) const {
  Tensor h = block_1(x);
  if (attn_1) h = (*attn_1)(h);
  return block_2(h);
}

// ------------------------------------------------------------------------------------ encoder

AudioEncoder AudioEncoder::load(io::WeightMap& w, const AudioVaeConfig& cfg,
                                const nn::LoadOptions& opt) {
  AudioEncoder e;
  e.cfg_ = cfg;
  e.stats_ = PerChannelStatistics::load(w, cfg.ch, opt);
  e.conv_in_ = CausalConv2d::load(w, "conv_in", cfg.in_channels, cfg.ch, 3, cfg.causality_axis, opt);
  int64_t block_in = 0;
  e.down_ = load_downsampling_path(w, cfg, opt, &block_in);
  e.mid_ = MidBlock::load(w, block_in, cfg, cfg.attn_type, opt);
  e.norm_out_ = Norm::load(w, "norm_out", block_in, cfg.norm_type, opt);
  const int64_t out = cfg.double_z ? 2 * cfg.z_channels : cfg.z_channels;
  e.conv_out_ = CausalConv2d::load(w, "conv_out", block_in, out, 3, cfg.causality_axis, opt);
  return e;
}

AudioEncoder AudioEncoder::from_file(const std::shared_ptr<const io::SafetensorsFile>& file,
                                     const nn::LoadOptions& opt) {
  require_supported_dtype(opt, "audio VAE encoder");
  const AudioVaeConfig cfg = AudioVaeConfig::from_config(file->metadata_json("config"), file->path());
  io::WeightMap w({file}, encoder_key_map());
  AudioEncoder e = load(w, cfg, opt);
  w.finish(str("audio VAE encoder in ", file->path()));
  return e;
}

AudioProcessor AudioEncoder::processor() const {
  LTX_CHECK(cfg_.mel_bins.has_value(), "audio VAE encoder: the config gives no mel bin count ",
            "(ddconfig.mel_bins, preprocessing.mel.n_mel_channels or variables.mel_bins), so the ",
            "waveform -> mel transform is undefined");
  return AudioProcessor(cfg_.sample_rate, *cfg_.mel_bins, cfg_.mel_hop_length, cfg_.n_fft);
}

Tensor AudioEncoder::forward(const Tensor& mel, const Probe& probe) const {
  LTX_CHECK(mel.dim() == 4 && mel.size(1) == cfg_.in_channels, "audio VAE encoder: expects a ",
            "log-mel [B, ", cfg_.in_channels, ", T, mel_bins] (stereo for the released models; ",
            "mono is not up-mixed), got ", mel.describe());
  // On the weights' device and in their dtype, as the reference (it casts the mel to the encoder's
  // dtype).
  const Tensor& w = conv_in_.conv.weight;
  Tensor h = conv_in_(mel.to(w.device(), w.dtype()));
  observe(probe, "conv_in", h);
  for (size_t l = 0; l < down_.size(); ++l) {
    const DownLevel& lv = down_[l];
    for (size_t j = 0; j < lv.block.size(); ++j) {
      h = lv.block[j](h);
      run_attn(lv.attn, j, h);
    }
    if (lv.downsample) h = (*lv.downsample)(h);
    observe(probe, str("down", l), h);
  }
  h = mid_(h);
  observe(probe, "mid", h);
  h = conv_out_(ops::silu(norm_out_(h)));
  observe(probe, "conv_out", h);
  // torch.chunk(h, 2, dim=1)[0]: the first ceil(C / 2) channels (the means when double_z).
  const int64_t c = h.size(1);
  const Tensor means = h.narrow(1, 0, (c + 1) / 2);
  const Tensor tokens = patchify_audio(means);
  observe(probe, "latent_tokens_raw", tokens);
  return unpatchify_audio(stats_.normalize(tokens), means.size(1), means.size(3));
}

// ------------------------------------------------------------------------------------ decoder

AudioDecoder AudioDecoder::load(io::WeightMap& w, const AudioVaeConfig& cfg,
                                const nn::LoadOptions& opt) {
  AudioDecoder d;
  d.cfg_ = cfg;
  d.stats_ = PerChannelStatistics::load(w, cfg.ch, opt);
  const int64_t base = cfg.ch * cfg.ch_mult.back();
  d.conv_in_ = CausalConv2d::load(w, "conv_in", cfg.z_channels, base, 3, cfg.causality_axis, opt);
  d.mid_ = MidBlock::load(w, base, cfg, AttentionType::Vanilla, opt);
  int64_t final_ch = 0;
  d.up_ = load_upsampling_path(w, cfg, base, opt, &final_ch);
  d.norm_out_ = Norm::load(w, "norm_out", final_ch, cfg.norm_type, opt);
  d.conv_out_ = CausalConv2d::load(w, "conv_out", final_ch, cfg.out_ch, 3, cfg.causality_axis, opt);
  return d;
}

AudioDecoder AudioDecoder::from_file(const std::shared_ptr<const io::SafetensorsFile>& file,
                                     const nn::LoadOptions& opt) {
  require_supported_dtype(opt, "audio VAE decoder");
  const AudioVaeConfig cfg = AudioVaeConfig::from_config(file->metadata_json("config"), file->path());
  io::WeightMap w({file}, decoder_key_map());
  AudioDecoder d = load(w, cfg, opt);
  w.finish(str("audio VAE decoder in ", file->path()));
  return d;
}

Tensor AudioDecoder::forward(const Tensor& latent, const Probe& probe) const {
  LTX_CHECK(latent.dim() == 4 && latent.size(1) == cfg_.z_channels,
            "audio VAE decoder: expects a latent [B, ", cfg_.z_channels, ", T, mel_bins], got ",
            latent.describe());
  const int64_t c = latent.size(1), t = latent.size(2), f = latent.size(3);
  // The activations run in the weights' dtype (bf16 in the pipelines on a GPU, as the
  // reference's AudioDecoder block builds it).
  const Tensor tokens = patchify_audio(latent.to(conv_in_.conv.weight.dtype()));
  observe(probe, "latent_tokens", tokens);
  const Tensor denorm = stats_.un_normalize(tokens);
  observe(probe, "latent_tokens_denorm", denorm);
  const Tensor x = unpatchify_audio(denorm, c, f);
  observe(probe, "latent_denorm", x);

  int64_t target_t = t * kLatentDownsampleFactor;
  if (cfg_.causality_axis != CausalityAxis::None)
    target_t = std::max<int64_t>(target_t - (kLatentDownsampleFactor - 1), 1);
  const int64_t target_f = cfg_.mel_bins.value_or(f);

  Tensor h = conv_in_(x);
  observe(probe, "conv_in", h);
  h = mid_(h);
  observe(probe, "mid", h);
  for (int64_t l = static_cast<int64_t>(up_.size()) - 1; l >= 0; --l) {
    const UpLevel& lv = up_[static_cast<size_t>(l)];
    for (size_t j = 0; j < lv.block.size(); ++j) {
      h = lv.block[j](h);
      run_attn(lv.attn, j, h);
    }
    if (l != 0 && lv.upsample) h = (*lv.upsample)(h);
    observe(probe, str("up", l), h);
  }
  h = conv_out_(ops::silu(norm_out_(h)));
  observe(probe, "conv_out", h);

  // _adjust_output_shape: crop, then zero-pad time / mel bins at the end.
  const int64_t ct = std::min(h.size(2), target_t), cf = std::min(h.size(3), target_f);
  Tensor out = h.narrow(1, 0, std::min(h.size(1), cfg_.out_ch)).narrow(2, 0, ct).narrow(3, 0, cf);
  if (ct < target_t || cf < target_f) out = ops::pad(out, {0, target_f - cf, 0, target_t - ct});
  return out.contiguous();
}

// ------------------------------------------------------------------------------------ pipeline

Tensor encode_audio(const Audio& audio, const AudioEncoder& encoder,
                    const AudioProcessor* processor, const Probe& probe) {
  const Tensor mel = processor != nullptr
                         ? processor->waveform_to_mel(audio, prefixed(probe, "mel."))
                         : encoder.processor().waveform_to_mel(audio, prefixed(probe, "mel."));
  return encoder.forward(mel, prefixed(probe, "encoder."));
}

Audio decode_audio(const Tensor& latent, const AudioDecoder& decoder, const VocoderModel& vocoder,
                   const Probe& probe) {
  const Tensor mel = decoder.forward(latent);
  observe(probe, "mel", mel);
  Tensor wave = vocoder.forward(mel);
  if (wave.size(0) == 1) wave = wave.squeeze(0);
  return {wave, vocoder.output_sampling_rate()};
}

int64_t audio_latent_frames(double seconds, int64_t sample_rate, int64_t hop_length,
                            int64_t downsample_factor) {
  const double per_second = static_cast<double>(sample_rate) / static_cast<double>(hop_length) /
                            static_cast<double>(downsample_factor);
  return static_cast<int64_t>(std::nearbyint(seconds * per_second));  // ties to even
}

int64_t audio_latent_frames_for_video(int64_t num_frames, double fps) {
  LTX_CHECK(fps > 0, "audio latent frames: fps must be positive, got ", fps);
  return audio_latent_frames(static_cast<double>(num_frames) / fps);
}

Tensor conform_latent_length(const Tensor& latent, int64_t frames) {
  LTX_CHECK(latent.dim() >= 3 && frames >= 0, "conform_latent_length: expects [B, C, T, ...] and ",
            "frames >= 0, got ", latent.describe(), " and ", frames);
  const int64_t t = latent.size(2);
  if (t > frames) return latent.narrow(2, 0, frames).contiguous();
  if (t == frames) return latent;
  std::vector<int64_t> pad(static_cast<size_t>(2 * (latent.dim() - 2)), 0);
  pad[pad.size() - 1] = frames - t;  // dim 2, after
  return ops::pad(latent, pad);
}

}  // namespace ltx::models::audio_vae
