#pragma once
// The pipelines' shared stages (reference: ltx_pipelines/utils/blocks.py DiffusionStage,
// ImageConditioner, VideoUpsampler; utils/helpers.py combined_image_conditionings). Each stage is a
// function of tensors and models; pipeline.cpp composes them into the four pipelines.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "media/hdr.h"
#include "media/preprocess.h"
#include "pipelines/pipeline.h"
#include "sampling/conditioning.h"
#include "sampling/latent.h"
#include "sampling/loops.h"
#include "sampling/params.h"
#include "sampling/schedulers.h"

namespace ltx::models::transformer {
struct LTXModelConfig;
}

namespace ltx::pipelines {

// Latent widths of a transformer (the reference hard-codes the production ones; they follow from
// the checkpoint): video channels = in_channels; audio = audio_in_channels / 16 channels x 16 mel
// bins (128 and 8 x 16 on every published checkpoint).
struct LatentWidths {
  int64_t video_channels = 128;
  int64_t audio_channels = 8;
  int64_t audio_mel_bins = 16;
};
LatentWidths latent_widths(const models::transformer::LTXModelConfig& config);

// A conditioning image after the resolution-independent part of its preparation (read + CRF
// re-encode, done once per run): u8 [H, W, 3], or an EXR still's f32 pixels with its colour space.
struct PreparedImage {
  Tensor pixels;
  int64_t frame_index = 0;
  double strength = 1.0;
  std::optional<media::HdrColorSpace> hdr;  // the request's --hdr (used by EXR pixels)
};
// Reads (when needed) and CRF re-encodes each image; `default_crf` fills an unset crf. EXR stills
// (a path ending in .exr, or floating pixels) are read with media::read_exr and not re-encoded;
// they need `hdr` (the reference: "EXR input requires --hdr ...").
std::vector<PreparedImage> prepare_images(const std::vector<ImageConditioning>& images, int default_crf,
                                          std::optional<media::HdrColorSpace> hdr = std::nullopt);

// Pixels of a conditioning for the video encoder at height x width, [1, 3, F, height, width] in
// `dtype`: u8 frames [F, H, W, 3] (or an image [H, W, 3]) resized and center-cropped, then
// normalised to [-1, 1] (SDR); floating frames (EXR) through media::prepare_hdr_frames with `fit`
// in the colour space `hdr`, which they need (`who` names the input in that error).
Tensor conditioning_pixels(const Tensor& frames, int64_t height, int64_t width, DType dtype,
                           const std::optional<media::HdrColorSpace>& hdr, media::ResizeMode fit,
                           const std::string& who);

// One image as both conditionings take it: resized + center-cropped to height x width, in [-1, 1],
// encoded on `device`; the latent on the host in `dtype`.
Tensor encode_image(const PreparedImage& image, int64_t height, int64_t width,
                    const models::video_vae::VideoEncoder& encoder, DType dtype, Device device);

// combined_image_conditionings at one stage's size: resize + center crop to height x width,
// [-1, 1] rounded through `dtype` (the reference prepares images in the pipeline dtype), encode on
// `device` (the encoder's; the pixels go there once), latent cast to `dtype` on the CPU, where the
// states are built; frame 0 -> VideoConditionByLatentIndex(latent, strength, 0), any other
// frame -> VideoConditionByKeyframeIndex(latent, frame, strength).
sampling::ConditioningItems image_conditionings(const std::vector<PreparedImage>& images, int64_t height,
                                                int64_t width, const models::video_vae::VideoEncoder& encoder,
                                                DType dtype, Device device = Device::cpu());

// upsample_video on `device` (the upsampler's and the statistics'): the latent goes there once and
// the result comes back to the CPU in `dtype` (the next stage builds its state there).
Tensor upsample_on_device(const Tensor& latent, const models::video_vae::PerChannelStatistics& stats,
                          const models::upsampler::LatentUpsampler& upsampler, DType dtype, Device device);

// Generated keyframe positions of a request: the explicit positions (sorted, duplicates dropped,
// each in [0, num_frames)) or `count` evenly spaced interior frames; empty = off.
std::vector<int64_t> resolve_generated_keyframes(int64_t count, const std::vector<int64_t>& explicit_positions,
                                                 int64_t num_frames);
// Throws unless the transformer config sets use_keyframes_abs_pos_embedding: keyframe slots on a
// model without the learned marker would be denoised as unmarked tokens (the reference refuses).
void require_keyframe_embedding(const models::transformer::LTXModelConfig& config, const std::string& pipeline);

// The transformer of a stage: Components::stage_transformer when set, else Components::transformer.
const models::transformer::LTXModel& stage_model(const Components& components, Stage stage);
// A request's sigma override, or the pipeline's default list.
sampling::Sigmas sigmas_or(const std::optional<std::vector<float>>& override_sigmas, sampling::Sigmas fallback);

// How one modality enters a stage (the reference's ModalitySpec).
struct ModalityInput {
  sampling::ConditioningItems conditionings;
  double noise_scale = 1.0;  // stage 2: its first sigma
  Tensor initial_latent;     // unpatchified [B, C, F, H, W] / [B, C, T, mel]; undefined: zeros
  // Held fixed (the reference's ModalitySpec.frozen): the denoise mask zeroed after the noising
  // and the modality's sigma forced to 0 in the transformer; the latent stays the initial one.
  bool frozen = false;
};

// A modality held fixed at `latent` (the reference's ModalitySpec(frozen=True, noise_scale=0.0,
// initial_latent=latent)): no conditionings yet.
ModalityInput frozen_modality(const Tensor& latent);

enum class Sampler {
  Euler,           // euler_denoising_loop + EulerDiffusionStep
  EulerAncestral,  // euler_ancestral_denoising_loop (eta 1, s_noise 1), its own generator
  Res2s,           // res2s_audio_video_denoising_loop with the default noise seed (-1)
};

struct StageConfig {
  std::string name = "stage 1";  // for progress
  int64_t height = 0, width = 0, num_frames = 0;  // pixel size of this stage
  double frame_rate = 24.0;
  sampling::Sigmas sigmas;
  Sampler sampler = Sampler::Euler;
  int64_t ancestral_seed = 0;  // EulerAncestral: the loop generator's seed
  double ancestral_eta = sampling::kAncestralEta;  // EulerAncestral: 1, DFR's temporal rounds 0.5
  DType dtype = DType::BF16;   // latent dtype between steps
  LatentWidths widths;
  sampling::SpatioTemporalScaleFactors scale;
  // Where the denoising loop runs (the transformer's device): the states are created on the host
  // (seeded noise, conditionings), moved there once, and the stage output comes back to the CPU.
  Device device = Device::cpu();
};

// The video VAE's latent scale factors (time, height, width) when the encoder is loaded, else the
// defaults (the published VAEs': 8, 32, 32).
sampling::SpatioTemporalScaleFactors latent_scale_factors(const Components& components);
// The per-channel latent statistics the upsamplers normalise with: Components::latent_statistics,
// else the video encoder's.
const models::video_vae::PerChannelStatistics& latent_statistics(const Components& components);

// Stage 1 of a pipeline at `height` x `width` pixels and `num_frames` frames: the request's frame
// rate and dtype, the components' device, `model`'s latent widths and the VAE's scale factors.
// The caller sets the sigmas and the sampler.
StageConfig first_stage_config(const GenerationRequest& request, const Components& components,
                               const models::transformer::LTXModel& model, int64_t height, int64_t width,
                               int64_t num_frames);

// The refinement stage after the x2 spatial upsample (stage 2 of the two-stage pipelines, DFR's
// detailing pass): `first`'s config ("stage 2") at the request's full size with `model`'s latent
// widths and the stage-2 sigmas (the request's override, else the distilled stage-2 list); the
// video starts from `upscaled`, the audio (when the request has audio) from stage 1's
// `first_audio`, both renoised to the first sigma. The caller adds the video conditionings.
struct RefinementStage {
  StageConfig config;
  ModalityInput video;
  std::optional<ModalityInput> audio;
};
RefinementStage refinement_stage(const StageConfig& first, const GenerationRequest& request,
                                 const models::transformer::LTXModel& model, const Tensor& upscaled,
                                 const Tensor& first_audio);

struct StageOutput {
  Tensor video_latent;  // unpatchified, conditioning cleared; undefined without video
  Tensor audio_latent;  // unpatchified; undefined without audio
  // The denoised generated keyframe slots [B, C, K, H, W] when the video conditionings had
  // VideoGeneratedKeyframeSlots (their pixel frames in generated_keyframe_positions).
  Tensor generated_keyframes;
  std::vector<int64_t> generated_keyframe_positions;
};

// One sample of a batched stage: how its modalities enter and where its noise comes from.
struct StageSample {
  std::optional<ModalityInput> video, audio;
  sampling::NoiseSource* noise = nullptr;  // its own generator (not owned): the initial noise
  int64_t ancestral_seed = 0;              // EulerAncestral: its loop generator's seed
};

// run_diffusion_stage over several samples in one denoising run: each sample's states are built
// alone (its conditionings, its noise drawn from its own generator), joined along the batch for
// the loop (EulerAncestral: each sample's step noise from its own generator), then split and
// finished alone. On the CPU each output has the bits of that sample's solo run (the ops are
// batch invariant; tests/pipelines/batch_test.cpp); the denoiser must treat the samples in order.
// Every sample needs the same modalities and token layout. Res2s: one sample only (its step noise
// comes from one fixed seed, not the sample's).
std::vector<StageOutput> run_diffusion_stage_batch(const StageConfig& config, const std::vector<StageSample>& samples,
                                                   const sampling::Denoiser& denoiser,
                                                   const ProgressCallback& progress = {});

// DiffusionStage.__call__: video state (tools on the stage's latent grid) then audio state, each
// = initial latent -> conditionings -> GaussianNoiser(noise_scale) drawing from `noise`; the loop
// of `config.sampler` with `denoiser` on config.device; conditioning cleared; unpatchified. The
// output is on the CPU (the upsamplers, the next stage's conditioning and the decoders take it
// from there).
StageOutput run_diffusion_stage(const StageConfig& config, const std::optional<ModalityInput>& video,
                                const std::optional<ModalityInput>& audio, const sampling::Denoiser& denoiser,
                                sampling::NoiseSource& noise, const ProgressCallback& progress = {});

}  // namespace ltx::pipelines
