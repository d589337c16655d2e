// The audio pipelines on the tiny LTX-2.3 model set: text-to-audio (t2a) and audio-to-video
// (a2vid) against the reference's T2AOneStagePipeline / A2VidPipelineTwoStage run on the same files
// (tools/parity/gen_e2e.py --pipelines one_stage,t2a,a2vid: e2e_t2a.io / e2e_a2vid.io, skipped
// until committed), plus what holds without them: the frozen input-audio latent, audio-only
// output, determinism, the input checks.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/vocoder.h"
#include "pipelines/a2vid.h"
#include "pipelines/e2e_fixture.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx::audio_pipelines_e2e_test {
namespace {

using namespace e2e_fixture;  // NOLINT(google-build-using-namespace): the shared fixture's names
namespace av = models::audio_vae;

constexpr double kFinalLatentTol = 1e-5;  // issue 33: final latents relative L2
constexpr double kWaveMinPsnrDb = 40.0;   // issue 33: waveforms, full scale 1

bool have(const std::string& name) { return std::ifstream(test::fixture(name)).good(); }

// PSNR of a waveform against the reference's, full scale 1 ([-1, 1] samples).
double wave_psnr_db(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_double_vector(), y = b.to_double_vector();
  EXPECT_EQ(x.size(), y.size());
  double se = 0.0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) se += (x[i] - y[i]) * (x[i] - y[i]);
  const double mse = se / static_cast<double>(std::max<size_t>(1, x.size()));
  return mse == 0.0 ? 200.0 : 10.0 * std::log10(1.0 / mse);
}

const av::AudioEncoder& audio_encoder() {
  static const av::AudioEncoder e = av::AudioEncoder::from_file(io::SafetensorsFile::open(e2e("ltx23_tiny.safetensors")));
  return e;
}

// A deterministic stereo waveform [2, n]: two tones and a slow sweep, peak below 0.8.
Tensor test_waveform(int64_t n, int64_t rate, double phase = 0.0) {
  std::vector<float> v(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(rate);
    v[static_cast<size_t>(i)] = static_cast<float>(0.5 * std::sin(2 * M_PI * 220.0 * t + phase) +
                                                   0.2 * std::sin(2 * M_PI * (300.0 + 400.0 * t) * t));
    v[static_cast<size_t>(n + i)] = static_cast<float>(0.4 * std::sin(2 * M_PI * 330.0 * t + 2 * phase));
  }
  return Tensor::from_vector(v, Shape{2, n});
}

pipelines::GenerationRequest t2a_request() {
  pipelines::GenerationRequest r = pipelines::default_request(PipelineKind::T2A, "2.3.0");
  r.seed = 42;
  r.num_frames = 9;
  r.frame_rate = 24.0;
  r.num_inference_steps = 4;
  r.audio_guider.stg_blocks = {1};
  r.dtype = DType::F32;
  r.max_batch_size = 1;  // as the reference ran it
  return r;
}

pipelines::Components t2a_components() {
  pipelines::Components c;
  c.transformer = &models_().transformer;
  c.model_version = "2.3.0";
  return c;
}

pipelines::GenerationRequest a2vid_request(const Tensor& waveform, int64_t rate) {
  pipelines::GenerationRequest r = e2e_request(PipelineKind::A2Vid);
  r.max_batch_size = 1;
  r.input_audio = waveform;
  r.input_audio_rate = rate;
  return r;
}

pipelines::Components a2vid_components() {
  pipelines::Components c = models_().components(/*lora_in_stage_2=*/true);
  c.audio_encoder = &audio_encoder();
  return c;
}

// ---- against the reference

TEST(AudioPipelinesE2E, T2AMatchesTheReferencePipeline) {
  const std::string name = "e2e_t2a.io.safetensors";
  if (!have(name)) GTEST_SKIP() << name << " not generated yet";
  const Reference ref(name);
  pipelines::TextContexts ctx = models_().contexts;  // the io file has its own when it was generated alone
  if (ref.f->contains("out.text.positive.audio_encoding")) {
    ctx.audio_positive = ref.t("out.text.positive.audio_encoding");
    ctx.audio_negative = ref.t("out.text.negative.audio_encoding");
  }
  const auto out = pipelines::run_pipeline(PipelineKind::T2A, t2a_request(), t2a_components(), ctx);
  EXPECT_FALSE(out.video_latent.defined());
  const Tensor latent = ref.t("out.audio.latent");
  ASSERT_EQ(out.audio_latent.shape(), latent.shape());
  std::printf("t2a: final audio latent rel L2 vs the reference %.3g\n", rel_l2(out.audio_latent, latent));
  EXPECT_LE(rel_l2(out.audio_latent, latent), kFinalLatentTol);

  // Decoded as the pipeline's AudioDecoder block does: audio VAE decoder + vocoder (BWE).
  const auto file = io::SafetensorsFile::open(e2e("ltx23_tiny.safetensors"));
  const av::AudioDecoder decoder = av::AudioDecoder::from_file(file);
  const av::VocoderModel vocoder = av::VocoderModel::from_file(file);
  const av::Audio audio = av::decode_audio(out.audio_latent, decoder, vocoder);
  const Tensor wave = ref.t("out.audio.waveform");
  ASSERT_EQ(audio.waveform.shape(), wave.shape());
  std::printf("t2a: waveform PSNR vs the reference %.1f dB\n", wave_psnr_db(audio.waveform, wave));
  EXPECT_GE(wave_psnr_db(audio.waveform, wave), kWaveMinPsnrDb);
  EXPECT_EQ(audio.sampling_rate, ref.f->metadata_json("request")["audio_sampling_rate"].get<int64_t>());
}

TEST(AudioPipelinesE2E, A2VidMatchesTheReferencePipeline) {
  const std::string name = "e2e_a2vid.io.safetensors";
  if (!have(name)) GTEST_SKIP() << name << " not generated yet";
  const Reference ref(name);
  const nlohmann::json req = ref.f->metadata_json("request");
  const int64_t rate = req["audio_sampling_rate_in"].get<int64_t>();
  const double start = req["audio_start_time"].get<double>(), max_duration = req["audio_max_duration"].get<double>();
  // The file's samples cut as decode_audio_from_file does (media::read_audio_clip's rule).
  const Tensor full = ref.t("in.audio.waveform");
  const int64_t skip = static_cast<int64_t>(std::nearbyint(start * static_cast<double>(rate)));
  const int64_t keep = std::min<int64_t>(full.size(1) - skip,
                                         static_cast<int64_t>(std::nearbyint(max_duration * static_cast<double>(rate))));
  const Tensor input = full.narrow(1, skip, keep).contiguous();
  EXPECT_EQ(test::max_abs_diff(input.unsqueeze(0), ref.t("inter.audio.decoded_waveform")), 0.0);

  pipelines::TextContexts ctx = models_().contexts;
  if (ref.f->contains("out.text.positive.video_encoding")) {
    ctx.video_positive = ref.t("out.text.positive.video_encoding");
    ctx.audio_positive = ref.t("out.text.positive.audio_encoding");
    ctx.video_negative = ref.t("out.text.negative.video_encoding");
    ctx.audio_negative = ref.t("out.text.negative.audio_encoding");
  }
  const pipelines::GenerationRequest r = a2vid_request(input, rate);

  // The conditioning latent: resample + log-mel + encoder, then the cut to the video's duration.
  const Tensor mel = audio_encoder().processor().waveform_to_mel({input.unsqueeze(0), rate});
  // The resampler (torchaudio's sinc kernel, 22050 -> 16000 Hz) and the log-mel, measured.
  const double mel_err = rel_l2(mel, ref.t("inter.audio.encoder_mel"));
  std::printf("a2vid: encoder log-mel (resampled input) rel L2 vs the reference %.3g\n", mel_err);
  EXPECT_LE(mel_err, kFinalLatentTol);
  const Tensor encoded = ref.t("inter.audio.encoded_latent");
  const Tensor cond = pipelines::encode_input_audio(r, audio_encoder(), DType::F32);
  ASSERT_EQ(cond.shape(), ref.t("out.stage2.audio_latent").shape());
  EXPECT_LE(rel_l2(cond, encoded.narrow(2, 0, cond.size(2)).contiguous()), kFinalLatentTol);

  const auto out = pipelines::run_pipeline(PipelineKind::A2Vid, r, a2vid_components(), ctx);
  ASSERT_EQ(out.video_latent.shape(), ref.t("out.video.latent").shape());
  std::printf("a2vid: final video latent rel L2 %.3g, audio latent rel L2 %.3g vs the reference\n",
              rel_l2(out.video_latent, ref.t("out.video.latent")), rel_l2(out.audio_latent, ref.t("out.stage2.audio_latent")));
  EXPECT_LE(rel_l2(out.video_latent, ref.t("out.video.latent")), kFinalLatentTol);
  EXPECT_LE(rel_l2(out.audio_latent, ref.t("out.stage2.audio_latent")), kFinalLatentTol);
  const Tensor frames = decode_frames(out.video_latent), ref_frames = ref.t("out.video.frames");
  ASSERT_EQ(frames.shape(), ref_frames.shape());
  std::printf("a2vid: decoded frames PSNR vs the reference %.1f dB\n", psnr_db(frames, ref_frames));
  EXPECT_GE(psnr_db(frames, ref_frames), kFramesMinPsnrDb);
  // The output audio is the input itself.
  EXPECT_GE(wave_psnr_db(input, ref.t("out.audio.waveform")), kWaveMinPsnrDb);
  EXPECT_EQ(req["audio_samples_out"].get<int64_t>(), input.size(1));
}

// ---- without the reference

TEST(AudioPipelinesE2E, T2AGivesAudioOnlyDeterministically) {
  auto r = t2a_request();
  r.num_inference_steps = 2;
  const auto a = pipelines::run_pipeline(PipelineKind::T2A, r, t2a_components(), models_().contexts);
  const auto b = pipelines::run_pipeline(PipelineKind::T2A, r, t2a_components(), models_().contexts);
  EXPECT_FALSE(a.video_latent.defined());
  // 9 frames at 24 fps = 0.375 s = round(9.375) latent frames of 2 channels x 16 mel bins.
  EXPECT_EQ(a.audio_latent.shape(), (Shape{1, 2, 9, 16}));
  EXPECT_EQ(test::max_abs_diff(a.audio_latent, b.audio_latent), 0.0);
  r.seed = 43;
  const auto c = pipelines::run_pipeline(PipelineKind::T2A, r, t2a_components(), models_().contexts);
  EXPECT_GT(test::max_abs_diff(a.audio_latent, c.audio_latent), 1e-3);
  // The video guidance preset does not apply; modality guidance is off (no video).
  EXPECT_EQ(r.video_guider, sampling::GuiderParams{});
  EXPECT_EQ(r.audio_guider.modality_scale, 1.0);
}

TEST(AudioPipelinesE2E, T2ARefusesVideoInputs) {
  auto r = t2a_request();
  pipelines::ImageConditioning im;
  im.path = "frame.png";
  r.images.push_back(im);
  EXPECT_ERROR_HAS(pipelines::run_pipeline(PipelineKind::T2A, r, t2a_components(), models_().contexts),
                   "audio only");
  pipelines::TextContexts no_negative = models_().contexts;
  no_negative.audio_negative = Tensor();
  EXPECT_ERROR_HAS(pipelines::run_pipeline(PipelineKind::T2A, t2a_request(), t2a_components(), no_negative),
                   "negative prompt");
}

TEST(AudioPipelinesE2E, A2VidKeepsTheInputAudioFrozenAndFollowsIt) {
  const int64_t rate = 22050;
  auto r = a2vid_request(test_waveform(rate / 2, rate), rate);
  r.num_inference_steps = 1;
  const pipelines::Components c = a2vid_components();
  const auto out = pipelines::run_pipeline(PipelineKind::A2Vid, r, c, models_().contexts);
  EXPECT_EQ(out.video_latent.shape(), (Shape{1, 16, 2, 4, 2}));
  // Both stages hold the audio: the result is the encoded input, cut to 0.375 s (9 latent frames).
  const Tensor cond = pipelines::encode_input_audio(r, audio_encoder(), DType::F32);
  EXPECT_EQ(cond.shape(), (Shape{1, 2, 9, 16}));
  EXPECT_EQ(test::max_abs_diff(out.audio_latent, cond), 0.0);
  const auto again = pipelines::run_pipeline(PipelineKind::A2Vid, r, c, models_().contexts);
  EXPECT_EQ(test::max_abs_diff(out.video_latent, again.video_latent), 0.0);
  // Another soundtrack, another video.
  auto other = a2vid_request(test_waveform(rate / 2, rate, 1.0), rate);
  other.num_inference_steps = 1;
  const auto moved = pipelines::run_pipeline(PipelineKind::A2Vid, other, c, models_().contexts);
  EXPECT_GT(test::max_abs_diff(out.video_latent, moved.video_latent), 1e-4);
}

TEST(AudioPipelinesE2E, A2VidChecksItsInputAudio) {
  const int64_t rate = 16000;
  const pipelines::Components c = a2vid_components();
  // 0.2 s of audio for a 0.375 s video.
  EXPECT_ERROR_HAS(pipelines::run_pipeline(PipelineKind::A2Vid, a2vid_request(test_waveform(3200, rate), rate), c,
                                           models_().contexts),
                   "--audio-path: the audio gives");
  // Mono into a stereo encoder.
  EXPECT_ERROR_HAS(pipelines::run_pipeline(PipelineKind::A2Vid,
                                           a2vid_request(test_waveform(8000, rate).narrow(0, 0, 1).contiguous(), rate),
                                           c, models_().contexts),
                   "1 channel");
  EXPECT_ERROR_HAS(pipelines::run_pipeline(PipelineKind::A2Vid, a2vid_request(Tensor(), rate), c, models_().contexts),
                   "--audio-path");
  pipelines::Components no_encoder = c;
  no_encoder.audio_encoder = nullptr;
  EXPECT_ERROR_HAS(pipelines::run_pipeline(PipelineKind::A2Vid, a2vid_request(test_waveform(8000, rate), rate),
                                           no_encoder, models_().contexts),
                   "audio VAE encoder");
}

}  // namespace
}  // namespace ltx::audio_pipelines_e2e_test
