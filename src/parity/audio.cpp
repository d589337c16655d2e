// `ltx parity audio --weights audio_<case>.weights.safetensors --inputs audio_<case>.io.safetensors`
// (shared/golden/README-audio.md): the audio VAE decoder and encoder, the vocoder (with BWE for
// 2.3 / 2.5), the pipeline decode (latent tokens -> waveform), waveform -> mel at every rate in
// the io file, encode_audio and the pipeline encodes (A2V trim, conform to a video length).
//
// `out.<x>_f64.<y>` outputs get this build's float32 result widened to float64 (the numbers are
// then the float32 port's error against the reference's float64 run). `inter.*` tensors are
// emitted when the io file has them, cut to the stored part (batch element 0, channel 0).
#include <cmath>
#include <regex>
#include <string>

#include "core/log.h"
#include "models/audio_vae/audio_vae.h"
#include "parity/parity.h"

namespace ltx::parity {

namespace av = ltx::models::audio_vae;
using json = nlohmann::json;

namespace {

// Emits `value` under `name` when the io file has that name, narrowed to the stored shape (the
// reference keeps batch element 0 of its intermediates).
void emit_inter(Run& run, const std::string& name, const Tensor& value) {
  if (!run.has(name)) return;
  const Shape ref = run.io().info(name).shape;
  Tensor v = value;
  if (v.dim() == ref.size())
    for (int d = 0; d < v.dim(); ++d)
      if (ref[d] < v.size(d)) v = v.narrow(d, 0, ref[d]);
  run.emit(name, v);
}

// Emits an output and, when the io file has it, its `_f64` twin (out.a.b -> out.a_f64.b).
void emit_out(Run& run, const std::string& name, const Tensor& value) {
  run.emit(name, value);
  const size_t dot = name.find('.', 4);  // after "out."
  if (dot == std::string::npos) return;
  const std::string twin = name.substr(0, dot) + "_f64" + name.substr(dot);
  if (run.has(twin)) run.emit(twin, value.to(DType::F64));
}

bool wants(const Run& run, const std::string& name) {
  const size_t dot = name.find('.', 4);
  return run.has(name) ||
         (dot != std::string::npos && run.has(name.substr(0, dot) + "_f64" + name.substr(dot)));
}

// The rate of `in.<wave>.waveform` from its name ("wave44k" = 44.1 kHz), checked against
// samples / sizes.wave_seconds when the metadata has it.
int64_t wave_rate(const std::string& wave, int64_t samples, const json& meta) {
  int64_t rate = 0;
  std::smatch m;
  if (std::regex_search(wave, m, std::regex("([0-9]+)k"))) {
    const int64_t k = std::stoll(m[1].str());
    switch (k) {
      case 11: rate = 11025; break;
      case 22: rate = 22050; break;
      case 44: rate = 44100; break;
      case 88: rate = 88200; break;
      default: rate = k * 1000;
    }
  }
  const json* secs = meta.contains("sizes") && meta["sizes"].is_object() &&
                             meta["sizes"].contains("wave_seconds") &&
                             meta["sizes"]["wave_seconds"].is_number()
                         ? &meta["sizes"]["wave_seconds"]
                         : nullptr;
  if (secs != nullptr && secs->get<double>() > 0) {
    const double est = static_cast<double>(samples) / secs->get<double>();
    if (rate == 0 || std::fabs(est - static_cast<double>(rate)) > 0.01 * static_cast<double>(rate))
      rate = static_cast<int64_t>(std::llround(est));
  }
  LTX_CHECK(rate > 0, "parity audio: cannot tell the sampling rate of in.", wave,
            ".waveform (name it wave<kHz>k or give sizes.wave_seconds in the metadata)");
  return rate;
}

// [frames, fps] of a video from metadata sizes.<key>, else from the `calls` text.
bool video_geometry(const json& meta, const char* key, const char* call, const std::regex& re,
                    double* frames, double* fps) {
  if (meta.contains("sizes") && meta["sizes"].is_object() && meta["sizes"].contains(key)) {
    const json& v = meta["sizes"][key];
    if (v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number()) {
      *frames = v[0].get<double>();
      *fps = v[1].get<double>();
      return true;
    }
  }
  if (meta.contains("calls") && meta["calls"].is_object() && meta["calls"].contains(call) &&
      meta["calls"][call].is_string()) {
    const std::string text = meta["calls"][call].get<std::string>();
    std::smatch m;
    if (std::regex_search(text, m, re)) {
      *frames = std::stod(m[1].str());
      *fps = std::stod(m[2].str());
      return true;
    }
  }
  return false;
}

}  // namespace

void run_audio_parity(Run& run) {
  // --device cuda: the decoder, the encoder and the vocoder run on the GPU (waveform -> mel stays
  // on the CPU, where the waveforms are). --dtype bf16: the audio VAE in bf16 weights and
  // activations, the vocoder as the pipelines run it (the reference's AudioDecoder block): the
  // BWE one in f32, the plain (19B) one in bf16 (av::vocoder_dtype).
  const Device dev = run.args().device;
  LTX_CHECK(run.args().weights.size() == 1,
            "parity audio: pass exactly one --weights (audio_<case>.weights.safetensors)");
  const auto file = io::SafetensorsFile::open(run.args().weights[0]);
  const json meta = run.io().metadata_json();
  const nn::LoadOptions opt{run.args().dtype, dev};
  const av::AudioDecoder decoder = av::AudioDecoder::from_file(file, opt);
  const av::AudioEncoder encoder = av::AudioEncoder::from_file(file, opt);
  const DType vocoder_dt = av::vocoder_dtype(*file, run.args().dtype);
  const av::VocoderModel vocoder = av::VocoderModel::from_file(file, nn::LoadOptions{vocoder_dt, dev});
  log_info("parity audio: vocoder ", vocoder.has_bwe() ? "BigVGAN + BWE" : "HiFi-GAN", ", ",
           vocoder.output_sampling_rate(), " Hz, ", dtype_name(vocoder_dt));

  // Audio VAE decoder.
  if (run.has("in.decoder.latent")) {
    const Tensor mel = decoder.forward(run.tensor("in.decoder.latent").to(dev),
                                       [&](const std::string& n, const Tensor& t) {
                                         emit_inter(run, "inter.decoder." + n, t);
                                       });
    emit_out(run, "out.decoder.mel", mel);
  }

  // Vocoder (+ BWE).
  if (vocoder.has_bwe()) emit_inter(run, "inter.bwe.resampler_filter", vocoder.resampler_filter());
  if (run.has("in.vocoder.mel")) {
    const Tensor wave = vocoder.forward(run.tensor("in.vocoder.mel").to(dev),
                                        [&](const std::string& n, const Tensor& t) {
                                          emit_inter(run, n == "bwe.low_rate"
                                                              ? std::string("inter.bwe.wave16k")
                                                              : "inter." + n,
                                                     t);
                                        });
    emit_out(run, "out.vocoder.waveform", wave);
  }

  // Pipeline decode: latent tokens [1, T, z * F] -> latent -> decode_audio.
  if (run.has("in.pipeline.latent_tokens")) {
    const Tensor tokens = run.tensor("in.pipeline.latent_tokens").to(dev);
    const int64_t z = decoder.config().z_channels;
    LTX_CHECK(tokens.dim() == 3 && tokens.size(2) % z == 0, "parity audio: in.pipeline.",
              "latent_tokens ", tokens.describe(), " is not [1, T, ", z, " x mel_bins]");
    const Tensor latent = av::unpatchify_audio(tokens, z, tokens.size(2) / z);
    emit_inter(run, "inter.pipeline.latent", latent);
    const av::Audio audio = av::decode_audio(latent, decoder, vocoder,
                                             [&](const std::string& n, const Tensor& t) {
                                               emit_inter(run, "inter.pipeline." + n, t);
                                             });
    emit_out(run, "out.pipeline.waveform", audio.waveform);
    emit_out(run, "out.pipeline.sampling_rate",
             Tensor::from_vector(std::vector<int64_t>{audio.sampling_rate}, {1}));
  }

  // Audio VAE encoder.
  if (run.has("in.encoder.mel")) {
    const Tensor latent = encoder.forward(run.tensor("in.encoder.mel"),
                                          [&](const std::string& n, const Tensor& t) {
                                            emit_inter(run, "inter.encoder." + n, t);
                                          });
    emit_out(run, "out.encoder.latent", latent);
  }

  // Waveform -> mel at every rate, and encode_audio.
  const av::AudioProcessor proc = encoder.processor();
  emit_inter(run, "inter.mel.fb", proc.filterbank());
  emit_inter(run, "inter.mel.window", proc.window());
  for (const std::string& name : run.names_with_prefix("in.")) {
    const std::string suffix = ".waveform";
    if (name.size() <= 3 + suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string wave = name.substr(3, name.size() - 3 - suffix.size());
    const Tensor w = run.tensor(name);
    const av::Audio audio{w, wave_rate(wave, w.size(-1), meta)};
    const std::string inter = "inter.mel_" + wave + ".";
    if (wants(run, "out.mel_" + wave + ".mel")) {
      const Tensor mel = proc.waveform_to_mel(audio, [&](const std::string& n, const Tensor& t) {
        emit_inter(run, inter + (n == "spec_magnitude" ? std::string("spec_magnitude_ch0") : n), t);
      });
      emit_out(run, "out.mel_" + wave + ".mel", mel);
    }
    if (wants(run, "out.encode_" + wave + ".latent"))
      emit_out(run, "out.encode_" + wave + ".latent", av::encode_audio(audio, encoder));
  }

  // Pipeline encodes (AudioConditioner + encode_audio, then the pipelines' length handling).
  if (wants(run, "out.pipeline_encode_a2v.latent") ||
      wants(run, "out.pipeline_encode_conform.latent")) {
    std::string wave = "wave48k";
    if (meta.contains("calls") && meta["calls"].is_object() &&
        meta["calls"].contains("pipeline_encode_a2v") &&
        meta["calls"]["pipeline_encode_a2v"].is_string()) {
      const std::string text = meta["calls"]["pipeline_encode_a2v"].get<std::string>();
      std::smatch m;
      if (std::regex_search(text, m, std::regex(R"(Audio\(in\.([A-Za-z0-9_]+)\.waveform)")))
        wave = m[1].str();
    }
    const Tensor w = run.tensor("in." + wave + ".waveform");
    const Tensor latent = av::encode_audio({w, wave_rate(wave, w.size(-1), meta)}, encoder);
    double frames = 0, fps = 0;
    if (wants(run, "out.pipeline_encode_a2v.latent") &&
        video_geometry(meta, "a2v_video", "pipeline_encode_a2v",
                       std::regex(R"(duration=([0-9.]+)/([0-9.]+))"), &frames, &fps)) {
      const int64_t n = av::audio_latent_frames(frames / fps);
      emit_out(run, "out.pipeline_encode_a2v.latent",
               latent.narrow(2, 0, std::min(n, latent.size(2))));
    }
    if (wants(run, "out.pipeline_encode_conform.latent") &&
        video_geometry(meta, "conform_video", "pipeline_encode_conform",
                       std::regex(R"(frames=([0-9]+), fps=([0-9.]+))"), &frames, &fps)) {
      const int64_t n = av::audio_latent_frames_for_video(static_cast<int64_t>(frames), fps);
      emit_out(run, "out.pipeline_encode_conform.latent", av::conform_latent_length(latent, n));
    }
  }
}

}  // namespace ltx::parity
