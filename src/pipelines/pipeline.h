#pragma once
// The generation pipelines (reference: ltx_pipelines/{distilled, ti2vid_one_stage, ti2vid_two_stages,
// ti2vid_two_stages_hq, dfr_pipeline, keyframe_interpolation, retake, a2vid_two_stage,
// t2a_one_stage, ic_lora, dubit}.py): noise + conditioning -> denoising stage(s) -> final latents. Text
// encoding happens before (the caller passes the contexts), VAE / audio decoding after (the caller
// decodes the returned latents); models are loaded by the caller and passed in, not owned.
//
//   auto kind = pipelines::parse_pipeline_kind("two-stage");
//   auto req = pipelines::default_request(kind, model_version);   // the reference's presets
//   req.seed = 42; req.images.push_back(image);                   // an ImageConditioning
//   pipelines::Components comp;                                    // non-owning pointers
//   comp.transformer = &model; comp.video_encoder = &enc; comp.spatial_upsampler = &up;
//   comp.model_version = model_version;
//   pipelines::validate_request(kind, req, comp, &contexts);      // clear errors before any work
//   auto out = pipelines::run_pipeline(kind, req, comp, contexts, progress);
//   // out.video_latent -> video VAE decoder, out.audio_latent -> audio decoder + vocoder
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "media/hdr.h"
#include "models/transformer/step_cache.h"
#include "sampling/guiders.h"
#include "sampling/noise.h"

namespace ltx::models::transformer {
class LTXModel;
}
namespace ltx::models::video_vae {
class VideoEncoder;
struct PerChannelStatistics;
}  // namespace ltx::models::video_vae
namespace ltx::models::upsampler {
class LatentUpsampler;
}
namespace ltx::models::audio_vae {
class AudioEncoder;
}

namespace ltx::pipelines {

// The reference's pipelines.
enum class PipelineKind {
  Distilled,   // DistilledPipeline: distilled model, 8 sigmas at half size + upsample + 3 refine steps
  OneStage,    // TI2VidOneStagePipeline: LTX2Scheduler + guided Euler at full size
  TwoStage,    // TI2VidTwoStagesPipeline: guided Euler at half size, upsample, distilled-LoRA refine
  TwoStageHQ,  // TI2VidTwoStagesHQPipeline: as TwoStage with res_2s in both stages
  Dfr,         // DFRPipeline (2.5): keyframe slots at half size, detailing pass, 0-2 temporal x2 rounds
  KeyframeInterpolation,  // KeyframeInterpolationPipeline: as TwoStage, every image a guiding keyframe
  Retake,      // RetakePipeline: regenerates a time window of a source clip (distilled, one stage)
  A2Vid,       // A2VidPipelineTwoStage: TwoStage with the input audio's latent frozen in both stages (a2vid.h)
  T2A,         // T2AOneStagePipeline: audio only, LTX2Scheduler + audio-guided Euler (t2a.h)
  IcLora,      // ICLoraPipeline: distilled two-stage, reference videos + IC-LoRA in stage 1 (ic_lora.h)
  DubIt,       // DubItPipeline: distilled two-stage, a reference clip's video and voice, IC-LoRA in both stages (dubit.h)
  // HDRICLoraPipeline: an SDR clip to scene-linear HDR frames through an HDR IC-LoRA, video only.
  // Its result needs the LoRA's HDR metadata and an HDR decode: it runs through
  // hdr_ic_lora::run_hdr_ic_lora (hdr_ic_lora.h), not run_pipeline.
  HdrIcLora,
};
// "distilled", "one-stage", "two-stage", "two-stage-hq", "dfr", "keyframe-interpolation", "retake",
// "a2vid", "t2a", "ic-lora", "dubit", "hdr-ic-lora".
const char* pipeline_name(PipelineKind kind);
// Accepts the names above (and '_' for '-'); throws ltx::Error listing the valid names.
PipelineKind parse_pipeline_kind(const std::string& name);
std::vector<std::string> pipeline_names();
bool is_two_stage(PipelineKind kind);  // all but OneStage, Retake and T2A (sizes multiple of 64, not 32)
// OneStage / TwoStage / TwoStageHQ / KeyframeInterpolation / A2Vid / T2A: negatives used (not
// Distilled, Dfr, Retake, IcLora, DubIt, HdrIcLora).
bool uses_guidance(PipelineKind kind);
// Whether the pipeline makes video (all but T2A, which makes audio only).
bool makes_video(PipelineKind kind);

// Denoising stages, for per-stage transformer weights (LoRA fusion) and progress. Temporal: the DFR
// pipeline's temporal x2 rounds, which run the stage-1 weights (base + distilled LoRA, no detailing
// LoRA) as the reference does.
enum class Stage { One = 1, Two = 2, Temporal = 3 };

// One conditioning image (the reference's ImageConditioningInput). It is prepared per stage at that
// stage's resolution: CRF re-encode (once) -> resize + center crop -> [-1, 1] -> video encoder.
// An EXR still (a path ending in .exr, or floating pixels) is HDR: no CRF, and the request's `hdr`
// colour space takes it into the VAE working space (media::prepare_hdr_frames, center crop).
// Frame 0 replaces the first latent frame (VideoConditionByLatentIndex); any other frame index adds
// guiding keyframe tokens at that pixel frame (VideoConditionByKeyframeIndex).
struct ImageConditioning {
  std::string path;          // read (media::read_image, or read_exr for .exr) when `image` is undefined
  Tensor image;              // optional: u8 [H, W, 3] already read (not yet CRF re-encoded), or f32 EXR pixels
  int64_t frame_index = 0;   // pixel frame in [0, num_frames)
  double strength = 1.0;     // 1 = kept exactly (denoise mask 1 - strength)
  std::optional<int> crf;    // nullopt: the model generation's default (33; 18 from 2.4 on); 0 = none
};

// Retake's source clip, decoded (the reference's video_latent_from_file / audio_latent_from_file
// inputs), and the window [start_time, end_time) in seconds to regenerate. The request's
// frame_rate is the clip's; its height, width and num_frames are taken from `frames`.
struct RetakeSource {
  // u8 [F, H, W, 3] RGB, frame i at time i / frame_rate; F = 8k + 1, H, W multiples of 32. Or an
  // EXR folder's frames, f32 (the request's `hdr` colour space; no audio then).
  Tensor frames;
  Tensor waveform;    // f32 [C, N] (or [1, C, N]) from time 0; undefined: the clip has no audio track
  int64_t sample_rate = 0;
  double start_time = 0.0, end_time = 0.0;
};

// One IC-LoRA reference video (--video-conditioning PATH STRENGTH): its decoded frames, at most
// num_frames of them (the pipeline uses the first num_frames).
struct VideoConditioning {
  Tensor frames;          // u8 [F, H, W, 3], or an EXR folder's f32 frames (the request's `hdr` colour space)
  double strength = 1.0;  // 1 = the reference tokens stay clean (denoise mask 1 - strength)
  std::string path;       // for messages
};

// DubIt's reference clip (--reference-video), decoded: its frames give the frame count (snapped
// down to 8k + 1) and its rate the request's; its audio track is the voice the dub keeps.
struct DubItReference {
  Tensor frames;          // u8 [F, H, W, 3] RGB, every frame of the clip
  double frame_rate = 0.0;
  Tensor waveform;        // f32 [C, N] (or [1, C, N]), the whole track; undefined: the clip has no audio
  int64_t sample_rate = 0;
  double strength = 1.0;  // --reference-strength: the video reference's conditioning strength
  std::string path;       // for messages
};

struct GenerationRequest {
  int64_t seed = 10;
  int64_t height = 1024;       // output size in pixels (stage 2 size for two-stage pipelines)
  int64_t width = 1536;
  int64_t num_frames = 121;    // 8k + 1
  double frame_rate = 24.0;
  // Stage-1 steps of the guided pipelines (LTX2Scheduler); the distilled pipeline ignores it.
  int64_t num_inference_steps = 30;
  // Guidance of the guided pipelines' first stage (the distilled pipeline and every stage 2 run
  // the conditioned pass only).
  sampling::GuiderParams video_guider;
  sampling::GuiderParams audio_guider;
  std::vector<ImageConditioning> images;
  // --hdr: the colour space of the EXR conditionings (stills, IC-LoRA reference folders, a retake's
  // folder), which enter the VAE in its ACEScct working space; nullopt = SDR (EXR inputs are then
  // refused). The HDR output (EXR frames + HLG master) is the decode's (generate/hdr_output.h).
  std::optional<media::HdrColorSpace> hdr;
  bool audio = true;  // false: video only (no audio latent, the transformer's audio stream unused)
  // Distilled-LoRA strengths per stage (informational for Components::stage_transformer; see
  // distilled_lora_strength()). TwoStage: {unused, --distilled-lora strength}; HQ: {0.25, 0.5}.
  std::array<double, 2> distilled_lora_strengths = {0.0, 1.0};
  // Sigma overrides (float32 values, last 0): stage 1 (default: LTX2Scheduler or the distilled
  // list) and stage 2 (default: the distilled stage-2 list).
  std::optional<std::vector<float>> stage_1_sigmas;
  std::optional<std::vector<float>> stage_2_sigmas;
  // Guided stages: at most this many samples per transformer call (the reference's
  // --max-batch-size; its default 1 runs the passes one by one); 0 = all passes in one call.
  int64_t max_batch_size = 0;
  // --cache: step caching in the guided stages (stage 1 of the guided pipelines; never in the
  // distilled ones or a distilled stage 2, whose few steps leave nothing to skip:
  // validate_request refuses it there). Off by default.
  models::transformer::StepCacheParams step_cache;
  // Latent dtype between steps (the reference runs in bf16; F32 for full-precision runs).
  DType dtype = DType::BF16;
  // Generated keyframes (LTX-2.5; the transformer config must set use_keyframes_abs_pos_embedding):
  // stage 1 of the distilled / one-stage / two-stage / HQ pipelines appends keyframe slots at
  // `generated_keyframe_positions` (pixel frames; sorted, duplicates dropped) or, when that is
  // empty, at `num_generated_keyframes` evenly spaced interior frames (0 = off). Not for DFR, which
  // places its own slots on its segment grid.
  int64_t num_generated_keyframes = 0;
  std::vector<int64_t> generated_keyframe_positions;
  // DFR: temporal x2 rounds after the detailing pass (0, 1 or 2; needs Components::temporal_upsampler);
  // the result has (num_frames - 1) * 2^rounds + 1 frames at frame_rate * 2^rounds.
  int64_t temporal_upsample_rounds = 0;
  // DFR: the detailing IC-LoRA's strength when one is fused into the Stage::Two transformer (the
  // caller fuses it); nullopt = no detailing LoRA, so stage 2 gets no reference latent.
  std::optional<double> detailing_lora_strength;
  // DFR: target / reference size ratio of the detailing LoRA (read_detailing_downscale_factor()).
  int64_t detailing_downscale_factor = 2;
  // Retake: the source clip and the window (required by, and only for, PipelineKind::Retake).
  std::optional<RetakeSource> retake;
  // A2Vid: the input audio as the reference's decode_audio_from_file returns it (already cut to
  // --audio-start-time / --audio-max-duration): f32 [C, N] (C = the audio encoder's channels) at
  // input_audio_rate Hz, resampled by the encoder's AudioProcessor.
  Tensor input_audio;
  int64_t input_audio_rate = 0;
  // IC-LoRA (PipelineKind::IcLora, ic_lora.h): the reference videos, prepared at stage 1's size /
  // reference_downscale_factor and appended to stage 1; the attention strength between them and
  // the generated tokens in [0, 1], optionally times a pixel mask [1, 1, F, H / 2, W / 2] in [0, 1]
  // (f32, or bf16 as a --conditioning-attention-mask clip gives it); skip_stage_2 returns stage 1's latents at half size.
  // The factors come from the IC-LoRA's metadata (ic_lora::read_reference_scale_factors).
  std::vector<VideoConditioning> video_conditionings;
  double conditioning_attention_strength = 1.0;
  Tensor conditioning_attention_mask;
  bool skip_stage_2 = false;
  int64_t reference_downscale_factor = 1;
  int64_t reference_temporal_scale_factor = 1;
  // DubIt (PipelineKind::DubIt, dubit.h): the reference clip; required by, and only for, DubIt. The
  // IC-LoRA's reference_downscale_factor above sizes its video reference.
  std::optional<DubItReference> dubit;
  // Optional replacement for the seeded torch-CPU generator of the initial / stage-2 noise (e.g.
  // noise recorded from the reference); not owned, must outlive run_pipeline.
  sampling::NoiseSource* noise = nullptr;
};

// The reference's defaults for `kind` and a checkpoint's `model_version` metadata (detect_params;
// the HQ pipeline always uses its own preset): seed 10, 121 frames at 24 fps; size 512x768
// (one-stage), 1024x1536 (two-stage, distilled), 1088x1920 (HQ); steps and guider params of the
// preset. Callers override fields from the command line afterwards.
GenerationRequest default_request(PipelineKind kind, const std::string& model_version = "");

// The distilled LoRA's strength for a stage, or nullopt when the stage runs without it:
// TwoStage, KeyframeInterpolation: stage 2 only; TwoStageHQ: both stages; Dfr: every stage (Temporal at the stage-1
// strength); Distilled / OneStage: never.
std::optional<double> distilled_lora_strength(PipelineKind kind, Stage stage, const GenerationRequest& request);
// The detailing IC-LoRA's strength for a stage: Dfr stage 2 when request.detailing_lora_strength is
// set, else nullopt (fused on top of the distilled LoRA).
std::optional<double> detailing_lora_strength(PipelineKind kind, Stage stage, const GenerationRequest& request);

// Models, loaded by the caller (non-owning; they must outlive run_pipeline).
struct Components {
  // The transformer for every stage, unless `stage_transformer` is set.
  const models::transformer::LTXModel* transformer = nullptr;
  // Optional: called once before each denoising stage; returns the transformer for that stage
  // (e.g. after fusing that stage's LoRAs in place, or a second model instance).
  std::function<const models::transformer::LTXModel&(Stage)> stage_transformer;
  // Encodes conditioning images; its per-channel statistics also serve the spatial upsampler.
  const models::video_vae::VideoEncoder* video_encoder = nullptr;
  // The statistics alone (upsampler::load_video_latent_statistics) when there is no encoder.
  const models::video_vae::PerChannelStatistics* latent_statistics = nullptr;
  // Two-stage pipelines: the x2 spatial latent upsampler.
  const models::upsampler::LatentUpsampler* spatial_upsampler = nullptr;
  // DFR with temporal rounds: the temporal x2 latent upsampler (F -> 2F - 1).
  const models::upsampler::LatentUpsampler* temporal_upsampler = nullptr;
  // Retake of a clip with an audio track, and A2Vid: encodes the source / input audio.
  const models::audio_vae::AudioEncoder* audio_encoder = nullptr;
  // The transformer checkpoint's `model_version` metadata ("" when absent): selects the image CRF
  // default and, for the distilled pipeline from 2.5 on, the ancestral stage-1 sampler.
  std::string model_version;
  // The device every model above lives on (the caller loads them there): the denoising loops, the
  // image encoding and the latent upsampling run there. The text contexts are moved there once;
  // each stage's state is built on the CPU (seeded noise, conditionings) and moved there once,
  // and each stage's, encoding's and upsampling's result comes back to the CPU (the results too).
  Device device = Device::cpu();
};

// The precomputed text contexts ([1, L, D] each, from the prompt encoder). The negative ones are
// needed by the guided pipelines when a guider runs its unconditional pass (cfg != 1).
struct TextContexts {
  Tensor video_positive, audio_positive;
  Tensor video_negative, audio_negative;
};

// Progress: `stage` is "stage 1", "stage 2", "image conditioning" or "upsample" (DFR also
// "temporal upsample" and "temporal round R tile T"); step counts the completed steps out of `total`
// (called with 0 when a stage starts and after every step).
using ProgressCallback = std::function<void(const std::string& stage, int64_t step, int64_t total)>;

// Step caching's per-stage counts and their log line (models/transformer/step_cache.h).
using models::transformer::StepCacheReport;
using models::transformer::format_step_cache;

// Latents in the request's dtype (bf16 by default), on the CPU.
struct GenerationResult {
  // [1, C, F', H/32, W/32] normalised latent, the video decoder's input; undefined for T2A.
  Tensor video_latent;
  // [1, 8, T, 16] audio latent, the audio decoder's input; undefined if off. A2Vid: the input
  // audio's latent (frozen); the reference writes the input waveform itself, not this decoded.
  Tensor audio_latent;
  int64_t height = 0, width = 0, num_frames = 0;
  double frame_rate = 0.0;  // playback rate of the video (DFR: frame_rate * 2^rounds)
  // > 0: the audio latent covers more than the video (DFR pads its canvas); cut the decoded
  // waveform to audio_samples_to_keep() samples.
  double audio_max_seconds = 0.0;
  // Generated keyframes, when slots were requested: [1, C, K, h, w] (decode each as a one-frame
  // clip) at these pixel frames. Stage 1's for the standard pipelines; for DFR the last stage's
  // carried keyframes (full size, positions on the final frame grid, possibly past num_frames
  // when the canvas was padded).
  Tensor generated_keyframes;
  std::vector<int64_t> generated_keyframe_positions;
  // The stages that ran with step caching (request.step_cache on), in order.
  std::vector<StepCacheReport> step_cache;
};

// Samples of a decoded waveform to keep: min(total, round(audio_max_seconds * sample_rate)) when
// audio_max_seconds > 0 (the reference's DFR audio cut), else total.
int64_t audio_samples_to_keep(const GenerationResult& result, int64_t total_samples, double sample_rate);

// Throws ltx::Error with what is wrong and how to fix it: num_frames not 8k + 1, sizes not a
// multiple of 32 (one-stage) / 64 (two-stage), bad image frame indices / strengths, a missing
// component the pipeline needs (transformer, spatial upsampler, video encoder for images, latent
// statistics), missing contexts (when given), audio requested from a video-only model, generated
// keyframes on a transformer without the keyframe embedding; DFR: rounds outside 0-2, rounds
// without a temporal upsampler, generated-keyframe requests (DFR places its own); step caching on
// a pipeline without guided stages (uses_guidance false) or with max_batch_size set.
void validate_request(PipelineKind kind, const GenerationRequest& request, const Components& components,
                      const TextContexts* contexts = nullptr);

// Runs the pipeline (validate_request first). Deterministic for a given request and components.
// HdrIcLora is refused: it runs through hdr_ic_lora::run_hdr_ic_lora.
GenerationResult run_pipeline(PipelineKind kind, const GenerationRequest& request, const Components& components,
                              const TextContexts& contexts, const ProgressCallback& progress = {});

// Batching (the server runs queued jobs of one shape as one denoising run): whether `kind` can
// run several requests together. Distilled, one-stage and two-stage can; HQ (its res_2s noise
// has one fixed seed, not the sample's) and DFR (a canvas per request) run one at a time.
bool supports_batching(PipelineKind kind);

// What must match for requests to share a denoising run: the pipeline, size, frames, fps, steps,
// sigma overrides, latent dtype, audio on / off, the guidance passes each modality runs (CFG / STG
// / isolated-modality on or off, stg_blocks, skip_step; the scales themselves stay per request),
// the images' frame indices and strengths (their token layout and denoise mask), the generated
// keyframes, the distilled-LoRA strengths and the step cache. `models` is the caller's description
// of the model files and the user LoRA set (Components' identity), appended as is. Equal keys: the
// requests may be given to run_pipeline_batch together.
std::string batch_key(PipelineKind kind, const GenerationRequest& request, const std::string& models = "");

// Runs several requests of one batch_key in one denoising run per stage (text encoding before
// and decoding after stay per request, by the caller): each request keeps its own seed (noise),
// contexts, guidance scales and conditioning images, and on the CPU its result has the bits
// run_pipeline gives it alone. One result per request, in order. Throws (before any work) when
// the keys differ, a request is invalid (validate_request) or the pipeline does not batch; a
// single request runs as run_pipeline, whatever the pipeline. Request 0's max_batch_size bounds the
// joined transformer calls (samples x guidance passes). Auto-duration jobs know their frame count
// only after text encoding: key them after it. On a GPU the results are close to, not bit for
// bit, the solo runs' (the GEMM tilings there depend on the row count).
std::vector<GenerationResult> run_pipeline_batch(PipelineKind kind, std::span<const GenerationRequest> requests,
                                                 const Components& components, std::span<const TextContexts> contexts,
                                                 const ProgressCallback& progress = {});

}  // namespace ltx::pipelines
