// `ltx generate --prompt TEXT --output-path OUT.mp4 [--pipeline NAME] [model files] [options]`:
// text (+ images, + a soundtrack) to video with audio, or text to audio (t2a, a WAV), as the
// reference's pipeline scripts (ltx_pipelines.distilled, ti2vid_one_stage, ti2vid_two_stages,
// ti2vid_two_stages_hq, dfr_pipeline, a2vid_two_stage, t2a_one_stage) with their flag names.
// Without any model file the built-in demo bundle (tiny, random weights) runs. Progress and a
// timing summary go to stderr; the MP4 appears only when everything succeeded.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "core/cancel.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "generate/generate.h"
#include "generate/progress.h"
#include "hub/presets.h"
#include "media/hdr.h"
#include "pipelines/pipeline.h"

namespace ltx::cli {

namespace {

// The options bind straight into GenerateOptions (CLI11 fills std::optional fields only when the
// flag is given); the multi-value flags are parsed after.
struct GenerateCli {
  generate::GenerateOptions o;
  ModelFlagsCli model;
  std::vector<std::vector<std::string>> images;
  std::vector<std::vector<std::string>> video_conditionings;
  std::vector<std::string> conditioning_attention_mask;
  std::string input;  // hdr-ic-lora: the reference script's name for its clip
  std::optional<std::string> hdr;
  std::string cache = "none";
};

// SIGINT / SIGTERM during a generation: the token stops it at the next stage or step boundary,
// where it unwinds like an error (no output file, no temporary left) and exits 128 + the signal.
// The first one puts both signals back to their default action, so a second (either) ends the
// process at once; nothing is at the output path then either (outputs are renamed into place
// only when complete; a leftover "<output>.tmp" is removed by the next run writing that path).
// Two signals sent back to back can both reach this handler (on two threads, or the second
// before the first one's handler body ran): the count makes the second one a default-action exit
// too, re-raised to take effect when this handler returns.
CancelToken g_interrupt;
std::atomic<int> g_stop_signals{0};
static_assert(std::atomic<int>::is_always_lock_free);  // async-signal-safe
extern "C" void request_stop(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGINT, &dfl, nullptr);  // async-signal-safe
  sigaction(SIGTERM, &dfl, nullptr);
  if (g_stop_signals.fetch_add(1) > 0) {
    raise(sig);
    return;
  }
  g_interrupt.request(sig);
}

class StopOnSignals {
 public:
  StopOnSignals() {
    struct sigaction sa {};
    sa.sa_handler = request_stop;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);  // neither interrupts the handler
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopOnSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

int run_generate(GenerateCli& c) {
  generate::GenerateOptions o = c.o;
  const hub::Preset* preset = model_preset(c.model);
  if (preset && c.model.sub->count("--pipeline") == 0) o.pipeline = preset->default_pipeline;
  o.device = resolved_device(c.model);
  o.offload = resolved_offload(c.model);
  o.models = resolved_models(c.model);
  o.max_gpu_memory_bytes = resolved_gpu_budget(c.model);
  if (c.hdr) o.hdr = media::parse_hdr_color_space(*c.hdr, "--hdr");
  o.step_cache.mode = models::transformer::parse_step_cache_mode(c.cache);
  if (!o.step_cache.enabled())
    for (const char* flag : {"--cache-threshold", "--cache-warmup-steps", "--cache-first-blocks"})
      LTX_CHECK(c.model.sub->count(flag) == 0, flag, " applies to a step cache; add --cache fbcache");
  for (const auto& v : c.images) {
    LTX_CHECK(v.size() == 3 || v.size() == 4, "--image takes PATH FRAME_IDX STRENGTH [CRF], got ",
              v.size(), " values");
    generate::ImageFlag im;
    im.path = v[0];
    im.frame_index = parse_integer(v[1], str("--image ", v[0], " FRAME_IDX"));
    im.strength = parse_number(v[2], str("--image ", v[0], " STRENGTH"));
    if (v.size() == 4)
      im.crf = static_cast<int>(parse_integer(v[3], str("--image ", v[0], " CRF")));
    o.images.push_back(im);
  }

  // hdr-ic-lora takes the clip alone (the reference's --input, strength 1).
  const bool hdr = !o.pipeline.empty() &&
                   pipelines::parse_pipeline_kind(o.pipeline) == pipelines::PipelineKind::HdrIcLora;
  for (const auto& v : c.video_conditionings) {
    LTX_CHECK(v.size() == 2 || (hdr && v.size() == 1), "--video-conditioning takes PATH STRENGTH",
              hdr ? " or PATH" : "", ", got ", v.size(), " values");
    o.video_conditionings.push_back(
        {v[0], v.size() == 1 ? 1.0 : parse_number(v[1], str("--video-conditioning ", v[0], " STRENGTH"))});
  }
  if (!c.input.empty()) {
    LTX_CHECK(hdr, "--input is a flag of --pipeline hdr-ic-lora (its SDR clip)");
    LTX_CHECK(c.video_conditionings.empty(), "--input and --video-conditioning both name the clip; give one");
    o.video_conditionings.push_back({c.input, 1.0});
  }
  if (!c.conditioning_attention_mask.empty()) {
    const auto& v = c.conditioning_attention_mask;
    LTX_CHECK(v.size() == 2, "--conditioning-attention-mask takes MASK_PATH STRENGTH, got ", v.size(), " values");
    o.conditioning_attention_mask =
        std::pair{v[0], parse_number(v[1], str("--conditioning-attention-mask ", v[0], " STRENGTH"))};
  }

  if (preset) {
    // The preset's files this pipeline uses, downloaded first when missing.
    const generate::ComponentNeeds needs = generate::component_needs(o);
    try {
      resolve_preset_files(c.model, o.models, &needs);
    } catch (const Cancelled& e) {
      std::fprintf(stderr, "ltx: stopped by %s: %s\n",
                   e.reason() == SIGINT ? "SIGINT" : e.reason() == SIGTERM ? "SIGTERM" : "a signal",
                   e.what());
      return 128 + e.reason();
    }
  }

  generate::Progress progress(stderr, log_level() > LogLevel::Info
                                          ? generate::Progress::Mode::Off
                                          : generate::Progress::Mode::Auto);
  const StopOnSignals stop_on_signals;
  progress.set_cancel_token(&g_interrupt);
  generate::GenerateResult r;
  try {
    r = generate::run_generation(o, progress);
  } catch (const Cancelled& e) {
    progress.end_stage();
    std::fprintf(stderr, "ltx: stopped by %s: %s; no output was written\n",
                 e.reason() == SIGINT ? "SIGINT" : e.reason() == SIGTERM ? "SIGTERM" : "a signal",
                 e.what());
    return 128 + e.reason();
  }
  progress.end_stage();
  const generate::DecodeResult& d = r.decoded;
  if (d.frames == 0)
    log_info("wrote ", r.output_path, ": ", d.audio_samples, " samples of audio at ", d.audio_sample_rate,
             " Hz", r.demo ? " (DEMO: random weights)" : "");
  else
    log_info("wrote ", r.output_path, ": ", d.frames, " frames of ", d.width, "x", d.height, " at ",
             r.frame_rate, " fps",
             d.audio_samples > 0 && generate::resolve_output_format(o.output_format, o.output_path) ==
                                        generate::OutputFormat::Mp4
                 ? str(", audio ", d.audio_sample_rate, " Hz")
                 : std::string(),
             r.demo ? " (DEMO: random weights)" : "");
  log_info(progress.summary());
  return 0;
}

void add_guidance(CLI::App* sub, generate::GuidanceFlags& g, const std::string& m,
                  const char* modality_flag, const char* modality_what) {
  const std::string M = m == "video" ? "Video" : "Audio";
  sub->add_option("--" + m + "-cfg-guidance-scale", g.cfg,
                  M + " classifier-free guidance scale (1 = off; default: the preset's)");
  sub->add_option("--" + m + "-stg-guidance-scale", g.stg,
                  M + " spatio-temporal guidance scale (0 = off)");
  sub->add_option("--" + m + "-rescale-scale", g.rescale,
                  M + " guidance rescale toward the conditioned std (0 = off)");
  sub->add_option("--" + m + "-stg-blocks", g.stg_blocks,
                  "Transformer blocks whose self-attention the " + m + " STG pass skips")
      ->expected(1, 1 << 20);
  sub->add_option(modality_flag, g.modality,
                  std::string(modality_what) + " guidance scale (1 = off)");
  sub->add_option("--" + m + "-skip-step", g.skip_step,
                  "Guide only every (N + 1)-th " + m + " step (0 = every step)");
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "generate",
      "Generate a video with audio from a prompt (and images or a clip to retake); without model files, runs the "
      "built-in demo (tiny random weights)");
  auto c = std::make_shared<GenerateCli>();
  generate::GenerateOptions& o = c->o;
  std::string pipelines;
  for (const auto& n : pipelines::pipeline_names()) pipelines += (pipelines.empty() ? "" : "|") + n;

  sub->add_option("--prompt", o.prompt,
                  "What the video shows and sounds like (required, but for hdr-ic-lora with --text-embeddings)");
  sub->add_option("--output-path", o.output_path,
                  "The file to write: an MP4; a WAV for --pipeline t2a; or with --output-format png "
                  "(or a .png path) a PNG for one frame and a folder of numbered PNG frames (the "
                  "path without .png) for more; hdr-ic-lora: a folder that gets <clip>_exr/ (EXR "
                  "frames) and <clip>.mp4 (sRGB preview)")
      ->required();
  sub->add_option("--output-format", o.output_format,
                  "mp4: video + audio (the video pipelines); wav: 16-bit PCM (t2a); png: frames as "
                  "PNG, no audio (--num-frames 1 writes one image: text-to-image). Default: from "
                  "the --output-path extension (.wav: wav, .png: png, else mp4); exr: hdr-ic-lora's EXR "
                  "frames + sRGB preview in a folder (the default for a folder path)");
  sub->add_option("--pipeline", o.pipeline,
                  "distilled: distilled checkpoint, 8 + 3 steps, no guidance; one-stage: guided, "
                  "one resolution; two-stage: guided at half size, x2 upsample, distilled-LoRA "
                  "refinement; two-stage-hq: two-stage with the res_2s sampler; dfr: LTX-2.5 "
                  "keyframe canvas, detailing pass and temporal rounds; keyframe-interpolation: "
                  "two-stage with every --image as a guiding keyframe; retake: regenerate "
                  "--start-time..--end-time of --video-path; a2vid: two-stage video generated to "
                  "--audio-path's soundtrack; t2a: text to audio, one stage, writes a WAV; ic-lora: "
                  "video-to-video control with an IC-LoRA (--lora) on --video-conditioning clips; dubit: a new "
                  "video and speech that keep --reference-video's motion and voice (the DubIt IC-LoRA as "
                  "--lora); hdr-ic-lora: an SDR --video-conditioning clip to scene-linear HDR EXR frames with "
                  "--hdr-lora (" +
                      pipelines + ", default two-stage)");
  sub->add_option("--negative-prompt", o.negative_prompt,
                  "What to steer away from (guided pipelines; default: the "
                  "reference's list of artifacts)");
  sub->add_option("--seed", o.seed, "Random seed (default 10)");
  sub->add_option("--height", o.height,
                  "Video height in pixels: a multiple of 32 (one-stage) or 64");
  sub->add_option("--width", o.width, "Video width in pixels: a multiple of 32 (one-stage) or 64");
  sub->add_option("--num-frames", o.num_frames, "Frame count, 8k + 1 (default 121)");
  sub->add_option("--frame-rate", o.frame_rate,
                  "Frames per second (default 24; retake: only for an EXR-frame folder as --video-path)");
  sub->add_option("--num-inference-steps", o.num_inference_steps,
                  "Denoising steps of the guided first stage (default: the preset's, "
                  "30 for LTX-2.3)");
  add_model_flags(sub, c->model);
  sub->add_option("--max-batch-size", o.max_batch_size,
                  "Guided stages: at most N guidance passes per transformer call "
                  "(default: all in one call)");
  sub->add_option("--cache", c->cache,
                  "{none,fbcache}: step caching in the guided stages (not the distilled pipelines or "
                  "stage 2): fbcache runs the first blocks every step and reuses the rest's residual "
                  "from the last computed step while the first blocks' residual changed by less "
                  "than --cache-threshold (default none)");
  sub->add_option("--cache-threshold", c->o.step_cache.threshold,
                  "fbcache: relative L1 change below which a step reuses (default 0.08; 0: never; "
                  "higher is faster and less exact)");
  sub->add_option("--cache-warmup-steps", c->o.step_cache.warmup_steps,
                  "fbcache: the first N steps always computed in full, as is the last (default 8)");
  sub->add_option("--cache-first-blocks", c->o.step_cache.first_blocks,
                  "fbcache: transformer blocks that always run and give the signal (default 1)");

  sub->add_option("--distilled-lora-strength-stage-1", o.distilled_lora_strength_stage_1,
                  "two-stage-hq: distilled LoRA strength in stage 1 (default 0.25)");
  sub->add_option("--distilled-lora-strength-stage-2", o.distilled_lora_strength_stage_2,
                  "two-stage-hq: distilled LoRA strength in stage 2 (default 0.5)");
  sub->add_option("--image", c->images,
                  "PATH FRAME_IDX STRENGTH [CRF]: condition on an image at a frame: PNG/JPEG (SDR) or a "
                  "scene-linear .exr still (HDR, with --hdr) (repeatable; CRF default: the model's; EXR is "
                  "not re-encoded)")
      ->expected(1, 4);  // counted by run_generate, for an error that names the arguments
  sub->add_option("--video-path", o.video_path,
                  "retake: the source video to retake (its size, frame count and frame rate are "
                  "kept; 8k + 1 frames, sizes multiples of 32), or a folder of scene-linear *.exr frames "
                  "(HDR retake: needs --hdr and --frame-rate)");
  sub->add_option("--hdr", c->hdr,
                  "{SRGB_LINEAR,ACESCG,ACESCCT}: the colour space of EXR inputs (--image x.exr, EXR-frame "
                  "folders) and an HDR output: --output-path becomes an HLG BT.2020 10-bit HEVC master and "
                  "<stem>_exr/ beside it gets the frames as half-float EXR. Required with any EXR input; "
                  "default SDR. Pipelines: distilled, one-stage, two-stage, two-stage-hq, "
                  "keyframe-interpolation, a2vid, ic-lora, retake");
  sub->add_option("--start-time", o.start_time, "retake: start of the window to regenerate (seconds)");
  sub->add_option("--end-time", o.end_time, "retake: end of the window to regenerate (seconds)");
  sub->add_option("--num-generated-keyframes", o.num_generated_keyframes,
                  "LTX-2.5 keyframe checkpoints: N extra generated keyframes at evenly spaced "
                  "interior frames in stage 1 (not written out, as the reference)");
  sub->add_option("--audio-path", o.audio_path,
                  "a2vid: the audio file to condition the video generation on (any format FFmpeg "
                  "decodes; its audio is written into the MP4)");
  sub->add_option("--audio-start-time", o.audio_start_time,
                  "a2vid: start time in seconds to read the audio from (default 0)");
  sub->add_option("--audio-max-duration", o.audio_max_duration,
                  "a2vid: at most this many seconds of audio (default: the video's duration, "
                  "num-frames / frame-rate)");
  sub->add_option("--video-conditioning", c->video_conditionings,
                  "ic-lora: PATH STRENGTH of a reference (control) video, e.g. a depth or pose clip, "
                  "or a folder of *.exr frames (with --hdr), read up to --num-frames frames (repeatable); "
                  "hdr-ic-lora: PATH [STRENGTH] of the SDR "
                  "clip (its size and frame rate are kept)")
      ->expected(1, 2);  // counted by run_generate, for an error that names the arguments
  sub->add_option("--conditioning-attention-mask", c->conditioning_attention_mask,
                  "ic-lora: MASK_PATH STRENGTH: a grayscale mask video whose values in [0, 1] weight "
                  "the attention to the reference per region, times STRENGTH (default: full)")
      ->expected(1, 2);
  sub->add_option("--reference-video", o.reference_video,
                  "dubit: reference video file (video + audio); the frame count (snapped down to 8k + 1), "
                  "frame rate and voice come from it; EXR folders are not supported");
  sub->add_option("--reference-strength", o.reference_strength,
                  "dubit: strength of the IC-LoRA video reference conditioning, in [0, 1] (default 1.0)");
  sub->add_option("--input", c->input,
                  "hdr-ic-lora: the SDR clip, or a folder of .mp4 / .mov clips run one after another, as the "
                  "reference's script names it (--video-conditioning PATH 1.0)");
  sub->add_option("--text-embeddings", o.text_embeddings,
                  "hdr-ic-lora: precomputed text contexts (.safetensors with video_context, as the reference's "
                  "script takes them) instead of --prompt; no text encoder is then loaded");
  sub->add_option("--hdr-lora", o.hdr_lora,
                  "hdr-ic-lora: the HDR IC-LoRA .safetensors file (its metadata names the HDR transfer); "
                  "fused into both stages");
  sub->add_flag("--high-quality", o.high_quality,
                "hdr-ic-lora: generate twice the frames and keep every other one (smoother, ~2x slower)");
  sub->add_option("--spatial-tile", o.spatial_tile,
                  "hdr-ic-lora: spatial tile of the VAE decode in pixels, a multiple of 32 above 256 "
                  "(default 1280; smaller needs less memory)");
  sub->add_flag("--skip-mp4", o.skip_mp4, "hdr-ic-lora: write the EXR frames only, no sRGB H.264 preview");
  sub->add_flag("--skip-stage-2", o.skip_stage_2,
                "ic-lora: stop after stage 1; the output is at half the height and width");
  sub->add_option("--temporal-upsample-rounds", o.temporal_upsample_rounds,
                  "dfr: temporal x2 refine rounds, 0-2 (frame rate x 2 per round)");
  add_guidance(sub, o.video_guidance, "video", "--a2v-guidance-scale", "Audio-to-video");
  add_guidance(sub, o.audio_guidance, "audio", "--v2a-guidance-scale", "Video-to-audio");
  sub->add_flag("--enhance-prompt", o.enhance_prompt,
                "Rewrite the prompt with the Gemma text encoder first (needs its t2v system "
                "prompt file, see --enhance-system-prompt)");
  sub->add_option("--prompt-enhancer-gemma-root", o.prompt_enhancer_gemma_root,
                  "A separate Gemma (gemma3 or dense gemma4) for --enhance-prompt (needed when the "
                  "text encoder cannot generate, e.g. LTX-2.5's)");
  sub->add_option(
      "--auto-duration", o.auto_duration,
      "MIN_SECONDS MAX_SECONDS: let the checkpoint's duration head pick the frame count "
      "(LTX-2.5; --num-frames wins)");
  sub->add_option("--enhance-system-prompt", o.enhance_system_prompt_file,
                  "System prompt file for --enhance-prompt (default: gemma3_t2v_system_prompt.txt "
                  "next to the text encoder)");
  return {sub, [c]() -> int { return run_generate(*c); }};
}

}  // namespace ltx::cli
