#pragma once
// One generation from start to file, as `ltx generate` runs it (the reference's pipeline main()s):
//
//   flags -> model paths (or the built-in demo bundle when no model file is named) -> checks of
//   the flags and the files -> prompt encoding (optionally enhanced first) -> transformer (+ LoRAs
//   fused per stage), video encoder, latent upsampler -> the chosen pipeline -> decode -> MP4.
//
// Every model is loaded when its step needs it and freed after, as the reference's blocks do.
// Errors are ltx::Error with the flag or file at fault; the output file only appears on success.
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "generate/components.h"
#include "generate/decode.h"
#include "generate/demo_bundle.h"
#include "generate/model_paths.h"
#include "generate/placement.h"
#include "media/audio.h"
#include "media/hdr.h"
#include "models/transformer/step_cache.h"
#include "pipelines/pipeline.h"

namespace ltx::generate {

class ModelProvider;
class Progress;

// `--image PATH FRAME_IDX STRENGTH [CRF]`, or the image's file content in `bytes` (path empty; a
// server's upload), decoded exactly as a file holding those bytes.
struct ImageFlag {
  std::string path;
  int64_t frame_index = 0;
  double strength = 1.0;
  std::optional<int> crf;
  std::vector<uint8_t> bytes;  // last, so {path, frame, strength, crf} still initialises one
};

// `--video-conditioning PATH STRENGTH` (ic-lora): a reference video and its strength in [0, 1].
struct VideoConditioningFlag {
  std::string path;
  double strength = 1.0;
};


// A LoRA of an Engine's library (generate/engine.h), by name.
struct LibraryLora {
  std::string name;
  double strength = lora::kDefaultStrength;
};

// The guidance flags of the guided pipelines; unset ones keep the preset's values.
struct GuidanceFlags {
  std::optional<double> cfg, stg, rescale, modality;  // modality: --a2v / --v2a-guidance-scale
  std::optional<int64_t> skip_step;
  std::optional<std::vector<int64_t>> stg_blocks;
};

struct GenerateOptions {
  std::string pipeline = "two-stage";
  std::string prompt;
  std::optional<std::string> negative_prompt;  // unset: the reference's default
  std::string output_path;
  std::optional<int64_t> seed, height, width, num_frames, num_inference_steps;
  std::optional<double> frame_rate;
  std::optional<int64_t> max_batch_size;  // guided passes per transformer call (0 = all)
  // --cache, --cache-threshold, --cache-warmup-steps, --cache-first-blocks: step caching in the
  // guided stages (models/transformer/step_cache.h); off by default, refused by the pipelines
  // without a guided stage.
  models::transformer::StepCacheParams step_cache;
  // --device: where every model runs (generate/placement.h): the text encoder, the duration head,
  // the transformer with the denoising loops, the video encoder, the latent upsamplers, the video
  // decoder (convolutional or diffusion) and the audio decoder + vocoder. The CPU computes in f32;
  // a GPU in bf16 (the vocoder in f32, as the reference computes it).
  Device device = Device::cpu();
  // Precision (library only; the CLI runs the reference's): unset = bf16 models on a GPU and bf16
  // latents between the denoising steps, as the reference; F32 = full precision, f32 models on a
  // GPU too and f32 latents between steps (e.g. to compare a GPU run with a CPU run).
  std::optional<DType> dtype;
  // --max-gpu-memory: the most the GPU allocator may hold, in bytes (0: no budget). Set as the
  // device allocator's limit for the rest of the process (generate/memory_budget.h); a run whose
  // largest model cannot fit is refused before anything loads.
  int64_t max_gpu_memory_bytes = 0;
  // --offload: the transformer's blocks and Gemma's layers resident on the GPU or streamed from
  // host memory.
  Offload offload = Offload::None;
  ModelFlags models;
  std::vector<ImageFlag> images;
  // --pipeline retake: the source clip (--video-path) and the window to regenerate
  // (--start-time / --end-time, seconds); the run takes the clip's size, frame count and rate.
  std::string video_path;
  std::optional<double> start_time, end_time;
  GuidanceFlags video_guidance, audio_guidance;
  std::optional<double> distilled_lora_strength_stage_1, distilled_lora_strength_stage_2;
  // LTX-2.5: extra generated keyframes in stage 1 (not dfr); dfr: temporal x2 rounds (0-2).
  std::optional<int64_t> num_generated_keyframes, temporal_upsample_rounds;
  // --auto-duration MIN MAX: the duration head picks the frame count in that range.
  std::optional<std::pair<double, double>> auto_duration;
  bool enhance_prompt = false;
  std::string enhance_system_prompt_file;  // empty: the model's default file
  std::string prompt_enhancer_gemma_root;  // empty: the text encoder enhances
  // Where the demo bundle lives when no model file is given (empty: default_demo_dir()).
  std::string demo_dir;
  // false: no audio track. The audio latent is still denoised with the video (the joint model's
  // video attends to it, so the frames stay exactly those of a run with audio); only its decode
  // (audio decoder + vocoder) and the track are skipped.
  bool audio = true;
  // ic-lora: the reference videos (--video-conditioning), --conditioning-attention-mask PATH
  // STRENGTH (a grayscale mask clip whose values weight the reference's attention, times STRENGTH)
  // and --skip-stage-2 (stage 1's half-size result is decoded). The IC-LoRA itself is --lora.
  std::vector<VideoConditioningFlag> video_conditionings;
  std::optional<std::pair<std::string, double>> conditioning_attention_mask;
  bool skip_stage_2 = false;
  // LoRAs of an Engine's library by name, fused after models.loras (generate::Engine::run only:
  // `ltx generate` names LoRA files with --lora).
  std::vector<LibraryLora> library_loras;
  // a2vid: --audio-path (the soundtrack: any file with an audio stream FFmpeg decodes),
  // --audio-start-time (seconds, default 0) and --audio-max-duration (seconds; unset: the video's
  // duration num_frames / frame_rate, as the reference's CLI). See media::read_audio_clip.
  std::string audio_path;
  std::optional<double> audio_start_time, audio_max_duration;
  // a2vid: the soundtrack already decoded (f32 [C, N] at its rate: a caller that decoded an upload,
  // the tests), instead of audio_path; the start / duration cut applies to it the same way.
  std::optional<media::AudioTrack> audio_input;
  // dubit: --reference-video (a clip with sound: its frame count, rate, motion and voice) and
  // --reference-strength (the video reference's strength; unset: 1). See generate/dubit_inputs.h.
  std::string reference_video;
  std::optional<double> reference_strength;
  // hdr-ic-lora (the reference's hdr_ic_lora.py): --hdr-lora (the HDR IC-LoRA, fused into both
  // stages; its metadata gives the working-space transfer), one --video-conditioning clip (its
  // size and frame rate are the output's), --high-quality (twice the frames generated, every other
  // one kept), --spatial-tile (the VAE decode's spatial tile in pixels; unset: 1280) and
  // --skip-mp4 (the EXR frames only, no sRGB preview). See generate/hdr_output.h.
  std::string hdr_lora;
  bool high_quality = false;
  std::optional<int64_t> spatial_tile;
  bool skip_mp4 = false;
  // hdr-ic-lora: --text-embeddings, the reference script's precomputed text contexts (a
  // safetensors file with "video_context" [1, L, D]; "audio_context" is not used) instead of the
  // prompt's encoding: no --prompt, no text encoder.
  std::string text_embeddings;
  // --output-format: "mp4", "wav" or "png"; empty: from the output path's extension
  // (resolve_output_format).
  std::string output_format;
  // --hdr {SRGB_LINEAR,ACESCG,ACESCCT} (the reference's add_hdr_args; distilled, one-stage,
  // two-stage, two-stage-hq, keyframe-interpolation, a2vid, ic-lora, retake): the colour space of
  // EXR inputs (--image x.exr, an EXR-frame folder as --video-conditioning or --video-path, which
  // then needs --frame-rate) and an HDR output: the decode in f32, the output path an HLG BT.2020
  // 10-bit HEVC master with the audio, <stem>_exr/ beside it with the frames as half-float EXR in
  // that colour space (generate/hdr_output.h). Any EXR input needs it; inputs are all EXR or all
  // SDR.
  std::optional<media::HdrColorSpace> hdr;
};

// The pipelines whose reference scripts take --hdr (their parsers add add_hdr_args and their
// main() applies it). DFR's parser has the flag too but its script never applies it.
bool takes_hdr(pipelines::PipelineKind kind);

// What the output path receives (--output-format, else the output path's extension):
//   Mp4  the video with its audio track (H.264 + AAC): the video pipelines; with --hdr the HLG
//        BT.2020 master (HEVC 10-bit + AAC) and <stem>_exr/ (EXR frames) beside it
//   Wav  16-bit PCM: t2a, the audio-only pipeline
//   Png  the frames as PNG: one frame (--num-frames 1, text-to-image) -> the file at the output
//        path; several -> a folder at the output path without its ".png" ending holding
//        frame_00000.png, frame_00001.png, ...; no audio.
//   Exr  hdr-ic-lora's scene-linear HDR frames: the output path is a folder that receives, as the
//        reference's output dir, <clip>_exr/frame_00000.exr ... (half float, R G B) and the sRGB
//        H.264 preview <clip>.mp4 (unless --skip-mp4), <clip> being the conditioning clip's name
//        without its extension (generate/hdr_output.h).
// A new format adds an entry here and in output_formats() (generate.cpp).
enum class OutputFormat { Mp4, Wav, Png, Exr };
const char* output_format_name(OutputFormat format);  // "mp4", "wav", "png", "exr"
// `flag` (--output-format) when given, else by `output_path`: a path ending in '/' or naming an
// existing folder -> Exr, else its extension (.wav -> Wav, .png -> Png; any other, or none ->
// Mp4). Throws naming the flag for an unknown format, or when the flag and a known extension of
// another format disagree.
OutputFormat resolve_output_format(const std::string& flag, const std::string& output_path);
// Where a Png output goes for `frames` frames (the path itself for one frame, else the folder).
std::string png_output_location(const std::string& output_path, int64_t frames);

struct GenerateResult {
  std::string output_path;  // empty when the media went to a caller's sink
  bool demo = false;
  std::string pipeline;
  std::string prompt;  // after enhancement
  double frame_rate = 0.0;
  DecodeResult decoded;  // frames, size, audio
  // Engine::run only: seconds from the call to the end of the first denoising step (time to
  // first step), the models the run loaded (0 when every one was resident), and each stage's
  // wall time in order.
  double time_to_first_step_s = 0.0;
  int64_t models_loaded = 0;
  std::vector<std::pair<std::string, double>> stage_seconds;
  // The stages that ran with step caching: model calls computed in full and reused.
  std::vector<models::transformer::StepCacheReport> step_cache;
};

// Checks the flags on their own (before any file is read): the pipeline name, the prompt and
// output path, frames 8k + 1, sizes multiples of 32 (one-stage) or 64 (two-stage pipelines),
// positive frame rate and steps, image frame indices and strengths, flags that the chosen
// pipeline does not use (guidance for distilled / dfr, the second-stage files for one-stage, the
// DFR flags for the others), a --device this build or machine cannot use. Throws an ltx::Error
// naming the flag. `to_file`: the output path is checked too (not when a sink takes the media).
void validate_options(const GenerateOptions& options, bool to_file = true);

// Writes the output at options.output_path (an MP4, a WAV for t2a, or PNG frames:
// resolve_output_format).
GenerateResult run_generation(const GenerateOptions& options, Progress& progress);
// The same generation with the decoded frames and audio handed to `sink` (e.g. a MemorySink)
// instead of an MP4 file; options.output_path is not used. hdr-ic-lora hands it scene-linear
// Rec.709 frames (values above 1 kept), cropped to the clip's size, and no audio; with --hdr the
// frames are the ACEScct working-space codes in [0, 1] (media::hdr_exr_frames / hdr_to_linear
// take them to linear).
GenerateResult run_generation(const GenerateOptions& options, Progress& progress, MediaSink& sink);

// The files of one generation, found and checked: run_generation does it on every call, an
// Engine once per pipeline.
struct ResolvedModels {
  ModelPaths paths;
  ComponentReport report;
  bool demo = false;  // the built-in demo bundle (no model file was given)
  std::string hdr_lora;  // hdr-ic-lora: the HDR IC-LoRA (also in paths.loras, fused in both stages)
};
// The demo bundle's files as the model flags of `pipeline` (the spatial upsampler for the
// two-stage pipelines, the distilled LoRA where a stage fuses it, the temporal upsampler when
// asked).
ModelFlags demo_model_flags(const DemoBundle& demo, const std::string& pipeline,
                            bool temporal_upsampler);
// What options' pipeline, images and flags need from the files.
ComponentNeeds component_needs(const GenerateOptions& options);
// options.models (or, when it names no file, the demo bundle at options.demo_dir, written when
// missing) resolved for options.pipeline and checked against `needs` (check_components).
ResolvedModels resolve_models(const GenerateOptions& options, const ComponentNeeds& needs,
                              Progress& progress);
// One generation on resolved models, each taken from `provider` when its step needs it and
// released when the step ends. `options` must have passed validate_options (its `models` are not
// read: `models` says which files). The media go to `sink`.
GenerateResult generate_with(const GenerateOptions& options, const ResolvedModels& models,
                             ModelProvider& provider, Progress& progress, MediaSink& sink);

// What must match for generations to share one denoising run (pipelines::batch_key of the
// request the options make, with `models_key`: the caller's description of the model files, LoRA
// set and placement), or "" when the generation runs alone: a pipeline that does not batch, an
// auto duration or a duration head choosing the frame count (known only after the text
// encoding), an enhanced prompt. `options` must have passed validate_options.
std::string batch_key(const GenerateOptions& options, const ResolvedModels& models,
                      const std::string& models_key);

// One member of a batch: its result, or why it has none (an ltx::Error of its own, or
// Cancelled / DeadlineExceeded when it was stopped).
struct BatchMemberResult {
  GenerateResult result;
  std::exception_ptr error;
};

// Several generations of one batch_key on the same models, as generate_with runs each but with
// one denoising run for all (pipelines::run_pipeline_batch): the text encoding (each its own
// prompt and negative prompt) and the decode (each into its own sink) stay per member. On the CPU
// each member's media are bit for bit those of generate_with alone.
// progress[i] steers member i: its cancel token / deadline and listener. Every member hears the
// shared denoising steps. A member stopped during its text encoding or decode ends there; one
// stopped during the denoising stops hearing steps at once but its sample stays in the run to the
// end (the pipeline joins the states per stage) and is then dropped. The run stops early only
// when every member was stopped. An error in one member's text encoding, images or decode fails
// that member only; an error of the shared denoising throws (every member fails).
std::vector<BatchMemberResult> generate_batch_with(std::span<const GenerateOptions> options,
                                                   const ResolvedModels& models,
                                                   ModelProvider& provider,
                                                   std::span<Progress* const> progress,
                                                   std::span<MediaSink* const> sinks);

// The reference's default negative prompt (DEFAULT_NEGATIVE_PROMPT, a model input: kept verbatim).
extern const char* const kDefaultNegativePrompt;

}  // namespace ltx::generate
