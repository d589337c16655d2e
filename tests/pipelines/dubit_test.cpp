// The DubIt pipeline on the tiny LTX-2.3 model set: against the reference's DubItPipeline run on
// the same files (tools/parity/gen_e2e.py --pipelines dubit: e2e_dubit.io.safetensors, the recorded
// reference clip's frames and audio track in; final latents rel L2 <= 1e-5, decoded frames and
// waveform PSNR >= 40 dB out, and each reference conditioning's inputs on the way), plus what holds
// without the recording: the audio reference's token times, the clip's frame count and rate, the
// input checks, the stage-1 audio as the result.
#include <cmath>
#include <cstdio>
#include <string>

#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/vocoder.h"
#include "models/tiling.h"
#include "ops/elementwise.h"
#include "pipelines/dubit.h"
#include "pipelines/e2e_fixture.h"
#include "pipelines/ic_lora.h"
#include "pipelines/pipeline.h"
#include "sampling/latent.h"
#include "support/test_support.h"

namespace ltx::dubit_test {
namespace {

using namespace e2e_fixture;  // NOLINT(google-build-using-namespace): the shared fixture's names
namespace av = models::audio_vae;

constexpr double kFinalLatentTol = 1e-5;  // issue 33: final latents relative L2
constexpr double kWaveMinPsnrDb = 40.0;   // issue 33: waveforms, full scale 1
const char* const kRecording = "e2e_dubit.io.safetensors";

const av::AudioEncoder& audio_encoder() {
  static const av::AudioEncoder e = av::AudioEncoder::from_file(io::SafetensorsFile::open(e2e("ltx23_tiny.safetensors")));
  return e;
}

// The IC-LoRA fused the reference's way: DubIt runs it in both stages.
const mt::LTXModel& dubit_transformer() {
  static const mt::LTXModel m =
      load_with_lora(e2e("ltx23_tiny.safetensors"), e2e("ltx23_tiny_ic_lora.safetensors"), 1.0);
  return m;
}

pipelines::Components dubit_components() {
  pipelines::Components c = models_().components();
  c.transformer = &dubit_transformer();
  c.audio_encoder = &audio_encoder();
  return c;
}

// A stereo waveform [2, n]: two tones under a slow envelope, peak below 0.8.
Tensor voice(int64_t n, int64_t rate) {
  std::vector<float> v(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(rate);
    const double env = 0.5 + 0.5 * std::sin(2 * M_PI * 3.0 * t);
    v[static_cast<size_t>(i)] = static_cast<float>(env * 0.5 * std::sin(2 * M_PI * 180.0 * t));
    v[static_cast<size_t>(n + i)] = static_cast<float>(env * 0.4 * std::sin(2 * M_PI * 240.0 * t + 0.3));
  }
  return Tensor::from_vector(v, Shape{2, n});
}

// The recording's request: 256x128, seed 42, f32; the IC-LoRA's reference_downscale_factor (2).
pipelines::GenerationRequest dubit_request(const Tensor& frames, double fps, const Tensor& waveform, int64_t rate,
                                           double strength = 1.0) {
  pipelines::GenerationRequest r = pipelines::default_request(PipelineKind::DubIt, "2.3.0");
  r.seed = 42;
  r.height = 256;
  r.width = 128;
  r.dtype = DType::F32;
  r.reference_downscale_factor =
      pipelines::ic_lora::read_lora_factor(e2e("ltx23_tiny_ic_lora.safetensors"), "reference_downscale_factor", 1);
  pipelines::DubItReference ref;
  ref.frames = frames;
  ref.frame_rate = fps;
  ref.waveform = waveform;
  ref.sample_rate = rate;
  ref.strength = strength;
  ref.path = "clip.mp4";
  r.dubit = ref;
  return r;
}

Tensor synthetic_clip(int64_t frames) { return test::random_tensor({frames, 48, 30, 3}, 51, 0.f, 255.f).to(DType::U8); }

// ---- against the reference

TEST(DubItE2E, ReferenceConditioningsMatchTheReference) {
  const Reference ref(kRecording);
  const nlohmann::json req = ref.f->metadata_json("request");
  EXPECT_EQ(req["reference_downscale_factor"].get<int64_t>(), 2);
  const Tensor frames = ref.t("in.reference.frames");
  const int64_t num_frames = req["num_frames"].get<int64_t>();
  EXPECT_EQ(pipelines::with_dubit_shape(dubit_request(frames, 24.0, Tensor(), 0)).num_frames, num_frames);
  // The video reference of each stage: preprocessed at stage size / 2, tiled-encoded (one tile).
  const int64_t sizes[2][2] = {{64, 32}, {128, 64}};
  for (int s = 0; s < 2; ++s) {
    SCOPED_TRACE(s == 0 ? "stage 1" : "stage 2");
    const Tensor pixels =
        pipelines::ic_lora::preprocess_reference_video(frames, sizes[s][0], sizes[s][1], num_frames, DType::F32);
    const Tensor want = ref.t(str("inter.dubit.reference_pixels", s));
    ASSERT_EQ(pixels.shape(), want.shape());
    EXPECT_LE(test::max_abs_diff(pixels, want), 1e-6);
    const Tensor latent = models_().encoder.tiled_encode(pixels, models::tiling::TileSizeConfig::default_config());
    EXPECT_LE(rel_l2(latent, ref.t(str("inter.dubit.reference_latent", s))), kFinalLatentTol);
  }
  // The voice: the whole 48 kHz track resampled, log-mel, encoded.
  const Tensor track = ref.t("in.reference.waveform");
  const int64_t rate = req["reference_audio"]["sampling_rate"].get<int64_t>();
  const Tensor mel = audio_encoder().processor().waveform_to_mel({track, rate});
  const double mel_err = rel_l2(mel, ref.t("inter.dubit.audio_reference_mel"));
  std::printf("dubit: reference log-mel rel L2 vs the reference %.3g\n", mel_err);
  EXPECT_LE(mel_err, kFinalLatentTol);
  const Tensor encoded = av::encode_audio({track, rate}, audio_encoder());
  EXPECT_LE(rel_l2(encoded, ref.t("inter.dubit.audio_reference_latent")), kFinalLatentTol);
  // Its tokens and times, from the recorded latents (the clip's, then stage 1's).
  const Tensor stage1_audio = ref.t("out.stage1.audio_latent");
  const Tensor latents[2] = {ref.t("inter.dubit.audio_reference_latent"), stage1_audio};
  for (int i = 0; i < 2; ++i) {
    const auto [tokens, positions] = pipelines::patchify_dubit_audio_reference_latent(latents[i]);
    EXPECT_EQ(test::max_abs_diff(tokens, ref.t(str("inter.dubit.audio_reference", i, ".tokens"))), 0.0);
    const Tensor want = ref.t(str("inter.dubit.audio_reference", i, ".positions"));
    ASSERT_EQ(positions.shape(), want.shape());
    EXPECT_LE(test::max_abs_diff(positions, want), 1e-6);
  }
}

TEST(DubItE2E, BothStagesMatchTheReferencePipeline) {
  const Reference ref(kRecording);
  const nlohmann::json req = ref.f->metadata_json("request");
  pipelines::TextContexts ctx = models_().contexts;
  if (ref.f->contains("out.text.positive.video_encoding")) {
    ctx.video_positive = ref.t("out.text.positive.video_encoding");
    ctx.audio_positive = ref.t("out.text.positive.audio_encoding");
  }
  const pipelines::GenerationRequest r =
      dubit_request(ref.t("in.reference.frames"), req["frame_rate"].get<double>(), ref.t("in.reference.waveform"),
                    req["reference_audio"]["sampling_rate"].get<int64_t>(), req["reference_strength"].get<double>());
  const auto out = pipelines::run_pipeline(PipelineKind::DubIt, r, dubit_components(), ctx);
  EXPECT_EQ(out.num_frames, req["num_frames"].get<int64_t>());
  ASSERT_EQ(out.video_latent.shape(), ref.t("out.video.latent").shape());
  ASSERT_EQ(out.audio_latent.shape(), ref.t("out.audio.latent").shape());
  const double video = rel_l2(out.video_latent, ref.t("out.video.latent"));
  const double audio = rel_l2(out.audio_latent, ref.t("out.audio.latent"));
  const Tensor frames = decode_frames(out.video_latent), ref_frames = ref.t("out.video.frames");
  ASSERT_EQ(frames.shape(), ref_frames.shape());
  const double frames_db = psnr_db(frames, ref_frames);
  const auto file = io::SafetensorsFile::open(e2e("ltx23_tiny.safetensors"));
  const av::Audio decoded = av::decode_audio(out.audio_latent, av::AudioDecoder::from_file(file),
                                             av::VocoderModel::from_file(file));
  const Tensor wave = ref.t("out.audio.waveform");
  ASSERT_EQ(decoded.waveform.shape(), wave.shape());
  const double wave_db = psnr_db(decoded.waveform, wave);  // full scale 1
  std::printf("dubit: final video latent rel L2 %.3g, audio latent rel L2 %.3g, frames PSNR %.1f dB, waveform PSNR "
              "%.1f dB vs the reference\n", video, audio, frames_db, wave_db);
  EXPECT_LE(video, kFinalLatentTol);
  EXPECT_LE(audio, kFinalLatentTol);
  EXPECT_GE(frames_db, kFramesMinPsnrDb);
  EXPECT_GE(wave_db, kWaveMinPsnrDb);
}

// ---- without the reference

TEST(DubIt, AudioReferenceTokensEndBeforeTimeZero) {
  const Tensor latent = test::random_tensor({1, 2, 5, 16}, 7);
  const auto [tokens, positions] = pipelines::patchify_dubit_audio_reference_latent(latent);
  EXPECT_EQ(test::max_abs_diff(tokens, sampling::patchify_audio(latent)), 0.0);
  const Tensor times = sampling::audio_patch_grid_bounds(1, 5);
  ASSERT_EQ(positions.shape(), times.shape());
  const std::vector<float> p = positions.to_float_vector(), t = times.to_float_vector();
  // Shifted as a whole by the last token's end time + 0.04 s: the last end lands at -0.04.
  const float shift = t.back() + 0.04f;
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], t[i] - shift, 1e-6) << i;
  EXPECT_NEAR(p.back(), -0.04f, 1e-6);
  EXPECT_LT(p.back(), 0.0f);
}

TEST(DubIt, FrameCountAndRateComeFromTheClip) {
  for (const auto& [frames, want] : {std::pair{11, 9}, std::pair{9, 9}, std::pair{17, 17}, std::pair{8, 1}}) {
    const auto r = pipelines::with_dubit_shape(dubit_request(synthetic_clip(frames), 25.0, voice(8000, 16000), 16000));
    EXPECT_EQ(r.num_frames, want) << frames;
    EXPECT_EQ(r.frame_rate, 25.0);
  }
}

TEST(DubIt, BadReferencesAreRefusedNamingTheFlag) {
  const pipelines::Components c = dubit_components();
  const auto base = [] { return dubit_request(synthetic_clip(9), 24.0, voice(8000, 16000), 16000); };
  auto r = base();
  r.dubit->waveform = Tensor();
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::DubIt, r, c), "--reference-video 'clip.mp4' has no audio track");
  r = base();
  r.dubit->strength = 1.5;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::DubIt, r, c), "--reference-strength 1.5 must be in [0, 1]");
  r = base();
  r.dubit->waveform = voice(8000, 16000).narrow(0, 0, 1).contiguous();
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::DubIt, r, c), "the audio track has 1 channel");
  r = base();
  r.dubit->frame_rate = 0.0;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::DubIt, r, c), "no usable frame rate");
  r = base();
  pipelines::ImageConditioning image;
  image.path = "frame.png";
  r.images.push_back(image);
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::DubIt, r, c), "--image");
  r = base();
  r.reference_temporal_scale_factor = 2;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::DubIt, r, c), "uses every frame of --reference-video");
  r = base();
  r.dubit.reset();
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::DubIt, r, c), "pass --reference-video");
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::IcLora, base(), c), "is a DubIt option");
  pipelines::Components no_audio_encoder = c;
  no_audio_encoder.audio_encoder = nullptr;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::DubIt, base(), no_audio_encoder), "audio VAE encoder");
  EXPECT_NO_THROW(pipelines::validate_request(PipelineKind::DubIt, base(), c));
}

TEST(DubIt, RunsAtTheClipsLengthAndReturnsTheStage1Audio) {
  // 11 frames at 25 fps -> 9 frames; 0.6 s of voice at 16 kHz (longer than the video: the whole
  // track is the reference, the generated audio is the video's length).
  const auto r = dubit_request(synthetic_clip(11), 25.0, voice(9600, 16000), 16000, 0.9);
  const auto out = pipelines::run_pipeline(PipelineKind::DubIt, r, dubit_components(), models_().contexts);
  EXPECT_EQ(out.num_frames, 9);
  EXPECT_EQ(out.frame_rate, 25.0);
  EXPECT_EQ(out.video_latent.shape(), (Shape{1, 16, 2, 8, 4}));
  // AudioLatentShape.from_video_pixel_shape: 9 / 25 s at 25 latents per second (the reference
  // tokens are cleared from the result).
  EXPECT_EQ(out.audio_latent.shape(), (Shape{1, 2, av::audio_latent_frames_for_video(9, 25.0), 16}));
  const auto again = pipelines::run_pipeline(PipelineKind::DubIt, r, dubit_components(), models_().contexts);
  EXPECT_EQ(test::max_abs_diff(out.video_latent, again.video_latent), 0.0);
  EXPECT_EQ(test::max_abs_diff(out.audio_latent, again.audio_latent), 0.0);
  // The voice conditions the result: another track, another dub.
  auto other = r;
  other.dubit->waveform = ops::mul(voice(9600, 16000), -0.5);
  const auto changed = pipelines::run_pipeline(PipelineKind::DubIt, other, dubit_components(), models_().contexts);
  EXPECT_GT(test::max_abs_diff(out.audio_latent, changed.audio_latent), 1e-4);
}

}  // namespace
}  // namespace ltx::dubit_test
