#pragma once
// Mel -> waveform (reference: model/audio_vae/vocoder.py).
//   LTX-2 (19B): Vocoder with HiFi-GAN ResBlock1 stages, 24 kHz.
//   LTX-2.3 / 2.5: VocoderWithBWE = a BigVGAN-v2 Vocoder (AMP blocks with anti-aliased SnakeBeta
//   activations) at 16 kHz, then a bandwidth extension: a causal log-mel of that waveform (STFT
//   and mel bases loaded from the file) drives a second BigVGAN whose output is added to a x3
//   windowed-sinc upsampling of the 16 kHz waveform, giving 48 kHz.
// The anti-alias filters of the AMP blocks are loaded from the file (they are bf16 values in the
// released files; recomputing them changes the output by percents); only the BWE's x3 resampling
// filter is computed, as the reference does.
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/audio_vae/layers.h"
#include "models/audio_vae/resnet.h"

namespace ltx::models::audio_vae {

// VOCODER_COMFY_KEYS_FILTER: keys under "vocoder.", with exactly one leading "vocoder." removed.
io::KeyMap vocoder_key_map();

// Snake (`alpha` only) or SnakeBeta (`alpha`, `beta`), log-scale parameters per channel:
//   snake:     x + 1 / (e^alpha + 1e-9) * sin^2(x e^alpha)
//   snakebeta: x + 1 / (e^beta + 1e-9) * sin^2(x e^alpha)
struct Snake {
  Tensor freq;       // e^alpha, [1, C, 1]
  Tensor inv_scale;  // 1 / (e^beta + 1e-9) (or e^alpha), [1, C, 1]

  static Snake load(io::WeightMap& w, const std::string& name, int64_t channels, bool beta,
                    const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// Activation1d: UpSample1d(2) with the stored 12-tap kaiser filter `.upsample.filter`
// (replicate pad 5, 2 * conv_transpose stride 2, crop 15 / 15) -> Snake `.act` ->
// LowPassFilter1d with `.downsample.lowpass.filter` (replicate pad 5 / 6, stride 2).
struct Activation1d {
  Snake act;
  Tensor up_filter, down_filter;  // [1, 1, 12]

  static constexpr int64_t kKernel = 12;
  static Activation1d load(io::WeightMap& w, const std::string& name, int64_t channels,
                           bool snakebeta, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// BigVGAN AMPBlock1: three times x = x + conv2(act2(conv1(act1(x)))) with conv1 dilated by
// dilation[i] (padding d (k - 1) / 2), conv2 undilated.
struct AMPBlock1 {
  std::array<Conv1d, 3> convs1, convs2;
  std::array<Activation1d, 3> acts1, acts2;

  static AMPBlock1 load(io::WeightMap& w, const std::string& name, int64_t channels,
                        int64_t kernel, const std::vector<int64_t>& dilation, bool snakebeta,
                        const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// Every vocoder's waveform is stereo: the reference hard-codes conv_post's two outputs.
inline constexpr int64_t kVocoderChannels = 2;

// The reference's Vocoder (one generator): stereo log-mel [B, 2, T, 64] -> [B, 2, T * prod(rates)].
class Vocoder {
 public:
  static Vocoder load(io::WeightMap& w, const GeneratorConfig& cfg, const nn::LoadOptions& opt);
  // Probes: conv_pre, ups{i} (transposed-conv outputs), stage_out (input of act_post),
  // conv_post (before the final activation).
  Tensor forward(const Tensor& mel, const Probe& probe = {}) const;
  const GeneratorConfig& config() const { return cfg_; }

 private:
  GeneratorConfig cfg_;
  Conv1d conv_pre_, conv_post_;
  std::vector<ConvTranspose1d> ups_;
  std::vector<ResBlock1> resblocks_;  // HiFi-GAN ("1")
  std::vector<AMPBlock1> amp_;        // BigVGAN ("AMP1")
  std::optional<Activation1d> act_post_;  // AMP only; HiFi-GAN uses leaky_relu(0.01)
};

// MelSTFT: causal log-mel with bases from the file: left zero-pad n_fft - hop, conv1d with
// `stft_fn.forward_basis` [2 (n_fft/2 + 1), 1, n_fft] (real rows then imaginary rows) at stride
// hop, magnitude, `mel_basis` [n_mels, n_fft/2 + 1] @ magnitude, log(clamp(., 1e-5)).
struct MelSTFT {
  Tensor forward_basis, mel_basis;
  int64_t n_fft = 0, hop = 0;

  static MelSTFT load(io::WeightMap& w, const BweConfig& cfg, const nn::LoadOptions& opt);
  // y [N, L] -> [N, n_mels, 1 + L / hop] (for L a multiple of hop: L / hop frames).
  Tensor log_mel(const Tensor& y) const;
};

// The x(out/in) "hann" UpSample1d of VocoderWithBWE (torchaudio-resample-equivalent sinc),
// computed in float32 as the reference computes it at construction: [1, 1, 2 * 7 * ratio + 1].
Tensor bwe_resampler_filter(int64_t ratio);

// The dtype the pipelines run a vocoder in (the reference's AudioDecoder block), for a pipeline
// of `pipeline_dtype`: the BWE vocoder (2.3 / 2.5) in f32 whatever the weights (VocoderWithBWE
// autocasts to f32 over bf16-stored weights); the plain HiFi-GAN (19B) in the pipeline's dtype,
// as built (no autocast: in a bf16 pipeline every conv, activation and residual rounds to bf16).
DType vocoder_dtype(const VocoderConfig& cfg, DType pipeline_dtype);
// The same for the vocoder of `file` (its config.vocoder).
DType vocoder_dtype(const io::SafetensorsFile& file, DType pipeline_dtype);

// What the reference's VocoderConfigurator builds from config.vocoder: a plain Vocoder or a
// VocoderWithBWE.
class VocoderModel {
 public:
  static VocoderModel load(io::WeightMap& w, const VocoderConfig& cfg, const nn::LoadOptions& opt);
  // Reads config.vocoder from the file's metadata, binds `vocoder.*` and reports every missing,
  // misshaped or unused tensor in one error. f32 weights on the CPU or CUDA (the bf16 file's
  // values load exactly), or bf16 on CUDA for the plain vocoder only: `opt.dtype` must be what
  // vocoder_dtype gives for the pipeline.
  static VocoderModel from_file(const std::shared_ptr<const io::SafetensorsFile>& file,
                                const nn::LoadOptions& opt = {});

  // log-mel [B, 2, T, mel_bins] -> waveform [B, 2, N] at output_sampling_rate(), computed in the
  // weights' dtype and returned in the mel's dtype (the reference casts the BWE waveform back to
  // its input's dtype: a bf16 audio decoder gives a bf16-rounded waveform).
  // Probes: "vocoder.*" (the main generator, see Vocoder::forward); with BWE also
  // "bwe_generator.*", "bwe.low_rate" (main output), "bwe.resampler_in" (it padded to whole
  // hops), "bwe.mel" (generator input [B, 2, T', 64]), "bwe.residual", "bwe.skip" (resampled).
  Tensor forward(const Tensor& mel, const Probe& probe = {}) const;

  const VocoderConfig& config() const { return cfg_; }
  bool has_bwe() const { return cfg_.has_bwe; }
  int64_t output_sampling_rate() const { return cfg_.output_sampling_rate(); }
  const Tensor& resampler_filter() const { return resampler_filter_; }  // BWE only

 private:
  VocoderConfig cfg_;
  Vocoder vocoder_;
  std::optional<Vocoder> bwe_generator_;
  std::optional<MelSTFT> mel_stft_;
  Tensor resampler_filter_;
};

}  // namespace ltx::models::audio_vae
