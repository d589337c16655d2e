#include "generate/generate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <variant>

#include "backend/device_query.h"
#include "core/error.h"
#include "core/log.h"
#include "generate/components.h"
#include "generate/decode.h"
#include "generate/demo_bundle.h"
#include "generate/dubit_inputs.h"
#include "generate/hdr_output.h"
#include "generate/memory_budget.h"
#include "generate/model_provider.h"
#include "generate/offload_plan.h"
#include "generate/placement.h"
#include "generate/progress.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "media/exr.h"
#include "media/image.h"
#include "media/temp_output.h"
#include "media/video_reader.h"
#include "models/audio_vae/audio_vae.h"
#include "models/duration_head/duration_head.h"
#include "models/duration_head/duration_predictor.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/text/gemma/enhance.h"
#include "models/text/prompt_encoder.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/dfr.h"
#include "pipelines/dubit.h"
#include "pipelines/hdr_ic_lora.h"
#include "pipelines/ic_lora.h"
#include "pipelines/pipeline.h"
#include "pipelines/retake.h"
#include "quantization/file_format.h"

namespace ltx::generate {

const char* const kDefaultNegativePrompt =
    "has_subtitles, has_blurbox, transition from black, transition to black, speech_ending_short, "
    "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive "
    "noise, grainy texture, poor lighting, flickering, motion blur, distorted proportions, "
    "unnatural skin tones, deformed facial features, asymmetrical face, missing facial features, "
    "extra limbs, disfigured hands, wrong hand count, artifacts around text, inconsistent "
    "perspective, camera shake, incorrect depth of field, background too sharp, background "
    "clutter, distracting reflections, harsh shadows, inconsistent lighting direction, color "
    "banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny valley effect, "
    "incorrect ethnicity, wrong gender, exaggerated expressions, wrong gaze direction, mismatched "
    "lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, "
    "off-sync audio, incorrect dialogue, added dialogue, repetitive speech, jittery movement, "
    "awkward pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, "
    "flat lighting, inconsistent tone, cinematic oversaturation, stylized filters, or AI "
    "artifacts.";

namespace {

namespace fs = std::filesystem;
namespace tf = models::transformer;
namespace duration_head = models::duration_head;
using pipelines::PipelineKind;

// The reference's HDR decode tiling (hdr_ic_lora.py _make_tiling_config defaults): 1280-pixel
// spatial tiles (--spatial-tile) with a 256-pixel overlap, 32-frame tiles with a 16-frame overlap.
constexpr int64_t kHdrSpatialTile = 1280, kHdrSpatialOverlap = 256;
constexpr int64_t kHdrTemporalTile = 32, kHdrTemporalOverlap = 16;

void apply_guidance(const GuidanceFlags& f, sampling::GuiderParams& p) {
  if (f.cfg) p.cfg_scale = *f.cfg;
  if (f.stg) p.stg_scale = *f.stg;
  if (f.rescale) p.rescale_scale = *f.rescale;
  if (f.modality) p.modality_scale = *f.modality;
  if (f.skip_step) p.skip_step = static_cast<int>(*f.skip_step);
  if (f.stg_blocks) p.stg_blocks.assign(f.stg_blocks->begin(), f.stg_blocks->end());
}

bool guidance_given(const GuidanceFlags& f) {
  return f.cfg || f.stg || f.rescale || f.modality || f.skip_step || f.stg_blocks;
}

// The pipelines that fuse the distilled LoRA into some stage (the reference requires the flag).
bool needs_distilled_lora(PipelineKind kind) {
  return kind == PipelineKind::TwoStage || kind == PipelineKind::TwoStageHQ ||
         kind == PipelineKind::Dfr || kind == PipelineKind::KeyframeInterpolation ||
         kind == PipelineKind::A2Vid;
}

// The retake flags (the reference's video_editing_arg_parser: the clip gives the size, frame count
// and rate; distilled, so no guidance, steps or second-stage files).
void validate_retake_options(const GenerateOptions& o) {
  const bool retake = pipelines::parse_pipeline_kind(o.pipeline) == PipelineKind::Retake;
  for (const auto& [given, flag] :
       {std::pair{!o.video_path.empty(), "--video-path"}, std::pair{o.start_time.has_value(), "--start-time"},
        std::pair{o.end_time.has_value(), "--end-time"}})
    LTX_CHECK(!given || retake, flag, " is a flag of --pipeline retake");
  if (!retake) return;
  LTX_CHECK(!o.video_path.empty(), "--pipeline retake needs --video-path CLIP (the video to retake)");
  std::error_code ec;
  // An EXR-frame folder (HDR retake, validate_media_paths) or a video file.
  const bool exr = media::is_exr_folder(o.video_path);
  LTX_CHECK(exr || fs::is_regular_file(o.video_path, ec), "--video-path '", o.video_path, "': no such file");
  LTX_CHECK(o.start_time && o.end_time,
            "--pipeline retake needs --start-time and --end-time (the window to regenerate, in seconds)");
  LTX_CHECK(std::isfinite(*o.start_time) && *o.start_time >= 0, "--start-time ", *o.start_time, " must be >= 0");
  LTX_CHECK(std::isfinite(*o.end_time) && *o.end_time > *o.start_time, "--end-time ", *o.end_time,
            " must be greater than --start-time ", *o.start_time);
  for (const auto& [given, flag] :
       {std::pair{o.height.has_value(), "--height"}, std::pair{o.width.has_value(), "--width"},
        std::pair{o.num_frames.has_value(), "--num-frames"}, std::pair{o.frame_rate.has_value() && !exr, "--frame-rate"},
        std::pair{o.auto_duration.has_value(), "--auto-duration"}})
    LTX_CHECK(!given, flag, ": the retake pipeline takes the size, frame count and frame rate of --video-path");
  LTX_CHECK(o.images.empty(), "--image: the retake pipeline conditions on --video-path, not on images");
  LTX_CHECK(!o.num_inference_steps && !o.negative_prompt && !guidance_given(o.video_guidance) &&
                !guidance_given(o.audio_guidance),
            "the retake pipeline runs the distilled schedule without guidance: --num-inference-steps, "
            "--negative-prompt and the guidance scale flags do not apply to it");
  LTX_CHECK(!o.models.distilled_lora && o.models.spatial_upsampler_path.empty(),
            "the retake pipeline has one stage: --distilled-lora and --spatial-upsampler-path do not apply "
            "to it (a full checkpoint takes the distilled LoRA through --lora)");
}

// The output formats: name, the file extensions that select it, whether it holds video.
struct OutputFormatInfo {
  OutputFormat format;
  const char* name;
  std::vector<std::string> extensions;
};
const std::vector<OutputFormatInfo>& output_formats() {
  static const std::vector<OutputFormatInfo> formats = {
      {OutputFormat::Mp4, "mp4", {".mp4"}},
      {OutputFormat::Wav, "wav", {".wav"}},
      {OutputFormat::Png, "png", {".png"}},
      {OutputFormat::Exr, "exr", {}},  // a folder: chosen by the flag or a folder path
  };
  return formats;
}

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext;
}

// The pipeline's output kind against the format: audio-only pipelines write WAV, the video ones MP4.
void check_output_format(PipelineKind kind, OutputFormat format) {
  if (kind == PipelineKind::HdrIcLora)
    LTX_CHECK(format == OutputFormat::Exr, "--pipeline hdr-ic-lora writes EXR frames and an sRGB preview "
              "into a folder: name a folder as --output-path (e.g. out/) or pass --output-format exr "
              "(not ", output_format_name(format), ")");
  else
    LTX_CHECK(format != OutputFormat::Exr, "--output-format exr (or a folder as --output-path) is the "
              "hdr-ic-lora pipeline's output (--pipeline hdr-ic-lora); the ", pipelines::pipeline_name(kind),
              " pipeline writes ", pipelines::makes_video(kind) ? "an MP4 file" : "a WAV file");
  if (!pipelines::makes_video(kind))
    LTX_CHECK(format == OutputFormat::Wav, "--pipeline ", pipelines::pipeline_name(kind),
              " generates audio only: name a .wav --output-path or pass --output-format wav");
  else
    LTX_CHECK(format != OutputFormat::Wav, "--output-format wav holds audio only: it is the t2a "
              "pipeline's output (--pipeline t2a); the ", pipelines::pipeline_name(kind),
              " pipeline writes an MP4");
}

constexpr pipelines::Stage kStages[] = {pipelines::Stage::One, pipelines::Stage::Two,
                                        pipelines::Stage::Temporal};
size_t stage_index(pipelines::Stage s) { return static_cast<size_t>(s) - 1; }

// Each stage's LoRA set (user LoRAs, then the distilled LoRA at that stage's strength, then DFR's
// detailing LoRA: the reference's fusion order), in kStages order.
std::vector<lora::LoraSet> stage_lora_sets(const ModelPaths& paths, PipelineKind kind,
                                           const pipelines::GenerationRequest& request,
                                           ModelProvider& provider) {
  std::map<std::string, std::shared_ptr<const lora::LoraFile>> opened;  // a file named twice: once
  const auto file = [&](const std::string& path) {
    auto& f = opened[path];
    if (!f) f = provider.lora_file(path);
    return f;
  };
  lora::LoraSet user;
  for (const LoraSpec& spec : paths.loras) user.push_back({file(spec.path), spec.strength});
  std::shared_ptr<const lora::LoraFile> distilled, detailing;
  if (paths.distilled_lora) distilled = file(paths.distilled_lora->path);
  if (paths.detailing_lora) detailing = file(paths.detailing_lora->path);
  std::vector<lora::LoraSet> sets;
  for (const pipelines::Stage stage : kStages) {
    // ic-lora: the IC-LoRA (--lora) shapes stage 1 only; its refinement runs the base weights.
    lora::LoraSet set = kind == PipelineKind::IcLora && stage != pipelines::Stage::One ? lora::LoraSet{} : user;
    if (const auto s = pipelines::distilled_lora_strength(kind, stage, request); s && distilled)
      set.push_back({distilled, *s});
    if (const auto s = pipelines::detailing_lora_strength(kind, stage, request); s && detailing)
      set.push_back({detailing, *s});
    sets.push_back(std::move(set));
  }
  return sets;
}

// A conditioning clip named by `flag`: the file exists, its strength is in [0, 1], FFmpeg finds a
// video stream in it (the frames are decoded later, after the checks).
void check_clip_flag(const char* flag, const std::string& path, double strength) {
  std::error_code ec;
  LTX_CHECK(fs::is_regular_file(path, ec), flag, " '", path, "': no such file");
  LTX_CHECK(strength >= 0.0 && strength <= 1.0, flag, " '", path, "': STRENGTH ", strength,
            " must be in [0, 1]");
  media::MediaInfo info;
  try {
    info = media::probe_media(path);
  } catch (const Error& e) {
    fail(flag, " '", path, "': cannot read the video (", e.what(), "); give a video file FFmpeg decodes "
         "(e.g. H.264 MP4)");
  }
  LTX_CHECK(std::any_of(info.streams.begin(), info.streams.end(),
                        [](const media::StreamInfo& st) { return st.type == "video"; }),
            flag, " '", path, "': cannot read the video (the file has no video stream); give a video file");
}

// hdr-ic-lora's --text-embeddings: the file's "video_context" as f32 [1, L, D] on the host.
Tensor read_text_embeddings(const std::string& path) {
  std::error_code ec;
  LTX_CHECK(fs::is_regular_file(path, ec), "--text-embeddings '", path, "': no such file");
  Tensor ctx;
  try {
    const auto file = io::SafetensorsFile::open(path);
    LTX_CHECK(file->contains("video_context"), "it has no video_context tensor (the reference's script "
              "writes video_context and audio_context)");
    // A copy: the mapped tensor lives only as long as the file.
    ctx = file->tensor("video_context").to(Device::cpu(), DType::F32).clone();
  } catch (const Error& e) {
    fail("--text-embeddings '", path, "': ", e.what());
  }
  if (ctx.dim() == 2) ctx = ctx.unsqueeze(0);
  LTX_CHECK(ctx.dim() == 3 && ctx.size(0) == 1 && ctx.size(1) > 0 && ctx.size(2) > 0, "--text-embeddings '",
            path, "': video_context must be [1, tokens, dim]; got ", ctx.shape().str());
  return ctx;
}

// hdr-ic-lora's clips (the reference's _collect_videos): the file itself, or a folder's .mp4 /
// .mov files (any case) sorted by name.
std::vector<std::string> hdr_clips(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<std::string> clips;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    const std::string ext = lower_extension(e.path().string());
    if (e.is_regular_file(ec) && (ext == ".mp4" || ext == ".mov")) clips.push_back(e.path().string());
  }
  std::sort(clips.begin(), clips.end());
  LTX_CHECK(!clips.empty(), "--input '", path, "': the folder holds no .mp4 or .mov clip");
  return clips;
}

bool is_exr_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && lower_extension(path) == ".exr";
}

// A flag that takes a video file or an EXR-frame folder (the reference's _verify_sequence_path).
void check_sequence_path(const char* flag, const std::string& path) {
  std::error_code ec;
  LTX_CHECK(!is_exr_file(path), flag, " '", path, "' is a single .exr file; pass a directory of *.exr frames.");
  LTX_CHECK(!fs::is_directory(path, ec) || media::is_exr_folder(path), flag, " '", path,
            "' is a directory without *.exr frames.");
}

// --hdr and the shapes of the media paths, as the reference's _verify_media_path_args: --image is
// a still (.exr or PNG / JPEG), never a folder; --video-conditioning / --video-path a video file
// or an EXR-frame folder; --image and --video-conditioning all EXR or all SDR; any EXR input
// needs --hdr; retake's --frame-rate only (and always) with an EXR folder; DubIt's
// --reference-video a video file. hdr-ic-lora's clip is SDR.
void validate_media_paths(const GenerateOptions& o, PipelineKind kind) {
  const char* name = pipelines::pipeline_name(kind);
  if (o.hdr)
    LTX_CHECK(takes_hdr(kind), "--hdr is not a flag of --pipeline ", name,
              kind == PipelineKind::Dfr ? " (the reference's dfr script parses it but never applies it)"
              : kind == PipelineKind::HdrIcLora
                  ? " (it makes HDR from an SDR clip through --hdr-lora; its reference script refuses --hdr)"
              : kind == PipelineKind::DubIt ? " (DubIt is SDR only, as the reference)"
                                            : " (it generates audio only)");
  std::error_code ec;
  struct Input {
    std::string flag, path;
    bool exr;
  };
  std::vector<Input> inputs;
  for (const ImageFlag& im : o.images) {
    if (im.path.empty()) continue;  // bytes (a server's upload): PNG / JPEG
    LTX_CHECK(!fs::is_directory(im.path, ec), "--image '", im.path, "' is a directory; pass a still file (.exr or "
              "PNG/JPEG). For an EXR sequence use --video-conditioning or --video-path.");
    inputs.push_back({"--image", im.path, is_exr_file(im.path)});
  }
  if (kind == PipelineKind::HdrIcLora) {
    for (const VideoConditioningFlag& v : o.video_conditionings)
      LTX_CHECK(!is_exr_file(v.path) && !media::is_exr_folder(v.path), "--video-conditioning '", v.path,
                "': the hdr-ic-lora pipeline takes SDR video clips (.mp4 / .mov, or a folder of them), not EXR "
                "frames");
  } else {
    for (const VideoConditioningFlag& v : o.video_conditionings) {
      check_sequence_path("--video-conditioning", v.path);
      inputs.push_back({"--video-conditioning", v.path, media::is_exr_folder(v.path)});
    }
  }
  bool exr = false, sdr = false;
  for (const Input& in : inputs) (in.exr ? exr : sdr) = true;
  if (exr && sdr) {
    std::string detail;
    for (const Input& in : inputs)
      detail += str(detail.empty() ? "" : ", ", in.flag, " '", in.path, "' (", in.exr ? "EXR" : "SDR", ")");
    fail("--image / --video-conditioning must be all EXR or all SDR; got mixed: ", detail,
         ". (--conditioning-attention-mask is always SDR and is ignored here.)");
  }
  if (!o.reference_video.empty()) {
    LTX_CHECK(!is_exr_file(o.reference_video) && !media::is_exr_folder(o.reference_video), "--reference-video '",
              o.reference_video, "' must be a video file with an audio track; EXR is not supported (fps and "
              "audio identity come from the container).");
    LTX_CHECK(!fs::is_directory(o.reference_video, ec), "--reference-video '", o.reference_video,
              "' is a directory; pass a video file (fps and audio identity come from the container).");
  }
  if (!o.video_path.empty() && kind == PipelineKind::Retake) {
    check_sequence_path("--video-path", o.video_path);
    if (media::is_exr_folder(o.video_path)) {
      exr = true;
      LTX_CHECK(o.frame_rate, "--video-path '", o.video_path, "' is an EXR-frame folder; --frame-rate is required "
                "(EXR sequences have no container fps).");
    } else {
      LTX_CHECK(!o.frame_rate, "--frame-rate is only valid when --video-path is an EXR-frame folder; for video "
                "files the container fps is used.");
    }
  }
  LTX_CHECK(!exr || o.hdr, "EXR input requires --hdr ", media::hdr_color_space_choices(),
            " to declare the source colour space.");
}

// The hdr-ic-lora flags (the reference's hdr_ic_lora.py CLI: one clip whose size and frame rate
// the output keeps, the HDR IC-LoRA on a distilled checkpoint, no guidance).
void validate_hdr_options(const GenerateOptions& o, PipelineKind kind, bool to_file) {
  const bool hdr = kind == PipelineKind::HdrIcLora;
  for (const auto& [given, flag] :
       {std::pair{!o.hdr_lora.empty(), "--hdr-lora"}, std::pair{o.high_quality, "--high-quality"},
        std::pair{o.spatial_tile.has_value(), "--spatial-tile"}, std::pair{o.skip_mp4, "--skip-mp4"}})
    LTX_CHECK(!given || hdr, flag, " is a flag of --pipeline hdr-ic-lora");
  LTX_CHECK(o.text_embeddings.empty() || hdr, "--text-embeddings is a flag of --pipeline hdr-ic-lora");
  if (!hdr) return;
  if (!o.text_embeddings.empty()) {
    LTX_CHECK(o.prompt.empty(), "--prompt and --text-embeddings both give the text; pass one of them");
    read_text_embeddings(o.text_embeddings);  // the file and its video_context, before any model
  }
  LTX_CHECK(o.video_conditionings.size() == 1,
            "--pipeline hdr-ic-lora needs one SDR clip: pass --video-conditioning PATH [STRENGTH] once (got ",
            o.video_conditionings.size(), ")");
  const VideoConditioningFlag& clip = o.video_conditionings.front();
  // One clip, or a folder of clips each run in turn (the reference's --input folder).
  const std::vector<std::string> clips = hdr_clips(clip.path);
  for (const std::string& c : clips) check_clip_flag("--video-conditioning", c, clip.strength);
  if (o.hdr_lora.empty()) {
    LTX_CHECK(o.models.empty(), "--pipeline hdr-ic-lora needs its HDR IC-LoRA: pass --hdr-lora PATH "
              "(a LoRA whose metadata names its HDR transfer)");
  } else {
    std::error_code ec;
    LTX_CHECK(fs::is_regular_file(o.hdr_lora, ec), "--hdr-lora '", o.hdr_lora, "': no such file");
    pipelines::hdr_ic_lora::read_hdr_lora_config(o.hdr_lora, "--hdr-lora");  // its HDR metadata
  }
  if (o.spatial_tile)
    LTX_CHECK(*o.spatial_tile > kHdrSpatialOverlap && *o.spatial_tile % 32 == 0, "--spatial-tile ",
              *o.spatial_tile, " must be a multiple of 32 above the decode tiles' ", kHdrSpatialOverlap,
              "-pixel overlap (e.g. 768 or 1280)");
  for (const auto& [given, flag] :
       {std::pair{o.height.has_value(), "--height"}, std::pair{o.width.has_value(), "--width"},
        std::pair{o.frame_rate.has_value(), "--frame-rate"}})
    LTX_CHECK(!given, flag, ": the hdr-ic-lora pipeline keeps the size and frame rate of --video-conditioning");
  LTX_CHECK(!o.auto_duration, "--auto-duration does not apply to --pipeline hdr-ic-lora; pass --num-frames");
  LTX_CHECK(o.images.empty(), "--image: the hdr-ic-lora pipeline conditions on --video-conditioning only");
  LTX_CHECK(!guidance_given(o.video_guidance) && !guidance_given(o.audio_guidance) && !o.negative_prompt &&
                !o.num_inference_steps,
            "the hdr-ic-lora pipeline runs the distilled schedules without guidance: --negative-prompt, "
            "--num-inference-steps and the guidance scale flags do not apply to it");
  LTX_CHECK(!o.models.distilled_lora && o.models.loras.empty(),
            "--distilled-lora / --lora: the hdr-ic-lora pipeline runs a distilled checkpoint with the HDR "
            "IC-LoRA alone (--hdr-lora)");
  LTX_CHECK(!o.enhance_prompt, "--enhance-prompt does not apply to --pipeline hdr-ic-lora");
  if (to_file)
    for (const std::string& c : clips) check_hdr_output(hdr_output_paths(o.output_path, c), o.skip_mp4, "--output-path");
  else
    LTX_CHECK(clips.size() == 1 && clips.front() == clip.path, "--video-conditioning '", clip.path,
              "': a folder of clips writes one output per clip; run the clips one by one");
}

// The ic-lora flags: each names a clip that must exist; strengths in [0, 1].
void validate_ic_lora_options(const GenerateOptions& o, PipelineKind kind) {
  const bool ic = kind == PipelineKind::IcLora;
  LTX_CHECK(o.video_conditionings.empty() || ic || kind == PipelineKind::HdrIcLora,
            "--video-conditioning is a flag of --pipeline ic-lora and --pipeline hdr-ic-lora");
  for (const auto& [given, flag] :
       {std::pair{o.conditioning_attention_mask.has_value(), "--conditioning-attention-mask"},
        std::pair{o.skip_stage_2, "--skip-stage-2"}})
    LTX_CHECK(!given || ic, flag, " is a flag of --pipeline ic-lora");
  if (!ic) return;
  LTX_CHECK(!o.video_conditionings.empty(),
            "--pipeline ic-lora needs a reference video: pass --video-conditioning PATH STRENGTH");
  std::vector<std::pair<std::string, double>> clips;
  for (const VideoConditioningFlag& v : o.video_conditionings) clips.emplace_back(v.path, v.strength);
  if (o.conditioning_attention_mask) clips.push_back(*o.conditioning_attention_mask);
  for (size_t i = 0; i < clips.size(); ++i) {
    const char* flag = i < o.video_conditionings.size() ? "--video-conditioning" : "--conditioning-attention-mask";
    if (i < o.video_conditionings.size() && media::is_exr_folder(clips[i].first))
      LTX_CHECK(clips[i].second >= 0.0 && clips[i].second <= 1.0, flag, " '", clips[i].first, "': STRENGTH ",
                clips[i].second, " must be in [0, 1]");  // an EXR-frame folder: read after the checks
    else
      check_clip_flag(flag, clips[i].first, clips[i].second);
  }
  LTX_CHECK(!o.auto_duration, "--auto-duration does not apply to --pipeline ic-lora: the reference "
            "video is read up to --num-frames frames; pass --num-frames");
  LTX_CHECK(!guidance_given(o.video_guidance) && !guidance_given(o.audio_guidance) && !o.negative_prompt &&
                !o.num_inference_steps,
            "the ic-lora pipeline runs the distilled 8 + 3 steps without guidance: --negative-prompt, "
            "--num-inference-steps and the guidance scale flags do not apply to it");
  LTX_CHECK(!o.models.distilled_lora, "--distilled-lora: the ic-lora pipeline runs a distilled checkpoint "
            "and fuses only the IC-LoRA (--lora)");
}

// The frames of a clip named by `flag`, at most max_frames (-1: all); an unreadable file or one
// without a decodable video stream fails with one line naming the flag.
Tensor read_clip(const std::string& path, int64_t max_frames, const char* flag) {
  try {
    return media::decode_video_frames(path, max_frames);
  } catch (const Error& e) {
    fail(flag, " '", path, "': cannot read the video (", e.what(), "); give a video file FFmpeg decodes "
         "(e.g. H.264 MP4)");
  }
}

// An EXR still named by --image (scene-linear f32 [H, W, 3]); errors name the flag.
Tensor read_exr_still(const std::string& path) {
  try {
    return media::read_exr(path);
  } catch (const Error& e) {
    fail("--image '", path, "': ", e.what());
  }
}

}  // namespace

bool takes_hdr(PipelineKind kind) {
  switch (kind) {
    case PipelineKind::Distilled:
    case PipelineKind::OneStage:
    case PipelineKind::TwoStage:
    case PipelineKind::TwoStageHQ:
    case PipelineKind::KeyframeInterpolation:
    case PipelineKind::A2Vid:
    case PipelineKind::IcLora:
    case PipelineKind::Retake:
      return true;
    default:
      return false;
  }
}

const char* output_format_name(OutputFormat format) {
  for (const OutputFormatInfo& f : output_formats())
    if (f.format == format) return f.name;
  return "?";
}

OutputFormat resolve_output_format(const std::string& flag, const std::string& output_path) {
  const std::string ext = lower_extension(output_path);
  const OutputFormatInfo* by_ext = nullptr;
  for (const OutputFormatInfo& f : output_formats())
    for (const std::string& e : f.extensions)
      if (e == ext) by_ext = &f;
  std::error_code ec;
  const bool folder = !output_path.empty() && (output_path.back() == '/' || fs::is_directory(output_path, ec));
  if (flag.empty()) return folder ? OutputFormat::Exr : by_ext ? by_ext->format : OutputFormat::Mp4;
  std::string names;
  for (const OutputFormatInfo& f : output_formats()) {
    names += (names.empty() ? "" : ", ") + std::string(f.name);
    if (flag != f.name) continue;
    if (f.format == OutputFormat::Exr) {
      LTX_CHECK(by_ext == nullptr, "--output-path '", output_path, "' ends in ", ext,
                " but --output-format exr writes into a folder; name a folder (e.g. out/)");
      return f.format;
    }
    LTX_CHECK(!folder || f.format == OutputFormat::Png, "--output-path '", output_path,
              "' is a folder but --output-format is ", f.name, "; name the file to write");
    LTX_CHECK(by_ext == nullptr || by_ext->format == f.format, "--output-path '", output_path,
              "' ends in ", ext, " but --output-format is ", f.name, "; name it ",
              fs::path(output_path).replace_extension(f.extensions.front()).string(), " or drop one of them");
    return f.format;
  }
  fail("--output-format '", flag, "' is not a known format: expected one of ", names);
}

namespace {

// The format of `o`'s output: resolve_output_format, except that for hdr-ic-lora, which writes a
// folder, a path without an extension names that folder too.
OutputFormat output_format_of(const GenerateOptions& o) {
  const OutputFormat f = resolve_output_format(o.output_format, o.output_path);
  if (o.output_format.empty() && f == OutputFormat::Mp4 && lower_extension(o.output_path).empty() &&
      pipelines::parse_pipeline_kind(o.pipeline) == PipelineKind::HdrIcLora)
    return OutputFormat::Exr;
  return f;
}

}  // namespace

std::string png_output_location(const std::string& output_path, int64_t frames) {
  if (frames == 1) return output_path;
  fs::path dir(output_path);
  if (lower_extension(output_path) == ".png") dir.replace_extension();
  return dir.string();
}

void validate_options(const GenerateOptions& o, bool to_file) {
  const PipelineKind kind = pipelines::parse_pipeline_kind(o.pipeline);
  const char* name = pipelines::pipeline_name(kind);
  backend::check_device(o.device, "--device");  // CUDA compiled in, the GPU index exists
  LTX_CHECK(o.max_gpu_memory_bytes >= 0, "--max-gpu-memory must be more than 0 GiB");
  LTX_CHECK(o.max_gpu_memory_bytes == 0 || !o.device.is_cpu(),
            "--max-gpu-memory budgets GPU memory; it does not apply to --device cpu (drop it, or "
            "add --device cuda)");
  block_streaming(o.offload, o.device);         // --offload on the CPU
  LTX_CHECK(!o.prompt.empty() || !o.text_embeddings.empty(), "--prompt is empty: describe the video to generate");
  validate_media_paths(o, kind);
  const OutputFormat format = output_format_of(o);
  if (to_file) {
    LTX_CHECK(!o.output_path.empty(), "--output-path is empty: name the MP4 file to write");
    std::error_code ec;
    LTX_CHECK(!fs::is_directory(o.output_path, ec) || format == OutputFormat::Png ||
                  format == OutputFormat::Exr, "--output-path '",
              o.output_path, "' is a folder: name the MP4 file to write");
    if (format == OutputFormat::Png) {
      // A one-frame run writes the file, a longer one the folder (only known after the text
      // encoding when a duration head picks the count): both must be creatable.
      LTX_CHECK(!fs::is_directory(o.output_path, ec) || fs::path(o.output_path).extension() != ".png",
                "--output-path '", o.output_path, "' is a folder: name the PNG file to write");
      const std::string dir = png_output_location(o.output_path, 2);
      LTX_CHECK(!fs::exists(dir, ec) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)), "--output-path '",
                o.output_path, "': the PNG frames go to the folder '", dir,
                "', which exists and is not an empty folder; remove it or pick another path");
      media::check_output_location(dir, "--output-path");
    }
    // Before any model loads (an EXR folder: validate_hdr_options checks what goes into it).
    if (format != OutputFormat::Exr) media::check_output_location(o.output_path, "--output-path");
    check_output_format(kind, format);
  } else if (!o.output_format.empty()) {
    check_output_format(kind, resolve_output_format(o.output_format, ""));
  }
  if (o.hdr) {
    LTX_CHECK(format == OutputFormat::Mp4, "--hdr writes an HLG BT.2020 master MP4 with the EXR frames beside it; ",
              "--output-format ", output_format_name(format), " does not apply: name a .mp4 --output-path");
    if (to_file) check_hdr_master_output(hdr_master_paths(o.output_path), "--output-path");
  }
  validate_hdr_options(o, kind, to_file);
  const bool a2vid = kind == PipelineKind::A2Vid, t2a = kind == PipelineKind::T2A;
  if (!a2vid)
    LTX_CHECK(o.audio_path.empty() && !o.audio_input && !o.audio_start_time && !o.audio_max_duration,
              "--audio-path, --audio-start-time and --audio-max-duration are flags of --pipeline a2vid");
  if (a2vid) {
    LTX_CHECK(!o.audio_path.empty() || o.audio_input,
              "--pipeline a2vid needs --audio-path: the soundtrack to generate the video to");
    LTX_CHECK(o.audio_path.empty() || !o.audio_input,
              "--audio-path: give the soundtrack as a file or decoded, not both");
    std::error_code ec;
    if (!o.audio_path.empty())
      LTX_CHECK(fs::is_regular_file(o.audio_path, ec), "--audio-path '", o.audio_path, "': no such file");
    if (o.audio_start_time)
      LTX_CHECK(*o.audio_start_time >= 0 && std::isfinite(*o.audio_start_time), "--audio-start-time ",
                *o.audio_start_time, " must be a number of seconds >= 0");
    if (o.audio_max_duration)
      LTX_CHECK(*o.audio_max_duration > 0 && std::isfinite(*o.audio_max_duration),
                "--audio-max-duration ", *o.audio_max_duration, " must be a positive number of seconds");
    LTX_CHECK(!o.auto_duration, "--auto-duration does not apply to --pipeline a2vid (its frame count "
              "comes from --num-frames, as the reference's)");
  }
  if (t2a) {
    LTX_CHECK(o.images.empty(), "--image: the t2a pipeline generates audio only");
    LTX_CHECK(!o.height && !o.width, "--height / --width: the t2a pipeline generates audio only (its "
              "length is --num-frames / --frame-rate seconds)");
    LTX_CHECK(!guidance_given(o.video_guidance) && !o.audio_guidance.modality,
              "the video guidance flags and --v2a-guidance-scale do not apply to --pipeline t2a "
              "(audio only, no video); use the --audio-* guidance flags");
    LTX_CHECK(!o.models.distilled_lora && o.models.spatial_upsampler_path.empty(),
              "the t2a pipeline has one stage: --distilled-lora and --spatial-upsampler-path do not "
              "apply to it");
    LTX_CHECK(o.audio, "--pipeline t2a generates audio: it cannot run with the audio off");
    LTX_CHECK(!o.num_generated_keyframes, "--num-generated-keyframes: the t2a pipeline generates audio only");
  }
  LTX_CHECK(!o.dtype || *o.dtype == DType::BF16 || *o.dtype == DType::F32, "generate: dtype ",
            o.dtype ? dtype_name(*o.dtype) : "", " is not supported (bf16 or f32)");
  if (o.num_frames)
    LTX_CHECK(*o.num_frames >= 1 && (*o.num_frames - 1) % 8 == 0, "--num-frames ", *o.num_frames,
              " must be 8k + 1 (1, 9, 17, ..., 121), e.g. ",
              std::max<int64_t>(1, (*o.num_frames - 1) / 8 * 8 + 1));
  const int64_t div = pipelines::is_two_stage(kind) ? 64 : 32;
  for (const auto& [value, flag] : {std::pair{o.height, "--height"}, std::pair{o.width, "--width"}})
    if (value)
      LTX_CHECK(*value > 0 && *value % div == 0, flag, " ", *value,
                " must be a positive multiple of ", div, " for the ", name, " pipeline",
                div == 64 ? " (its first stage runs at half size)" : "", ", e.g. ",
                std::max<int64_t>(div, (*value + div / 2) / div * div));
  if (o.max_batch_size)
    LTX_CHECK(*o.max_batch_size >= 1, "--max-batch-size ", *o.max_batch_size,
              " must be at least 1");
  o.step_cache.validate();
  if (o.step_cache.enabled()) {
    const char* mode = models::transformer::step_cache_mode_name(o.step_cache.mode);
    LTX_CHECK(pipelines::uses_guidance(kind), "--cache ", mode, ": the ", name,
              " pipeline runs only distilled stages (8 steps or fewer), where step caching has "
              "nothing to skip; it applies to the guided pipelines (one-stage, two-stage, "
              "two-stage-hq, keyframe-interpolation, a2vid, t2a): use --cache none");
    LTX_CHECK(!o.max_batch_size, "--cache ", mode, " decides once per step for all guidance "
              "passes, which needs them in one transformer call; drop --max-batch-size or use "
              "--cache none");
    LTX_CHECK(o.offload == Offload::None, "--cache ", mode, " needs the transformer's blocks "
              "resident (a streamed pass runs every block); use --offload none or --cache none");
  }
  if (o.frame_rate)
    LTX_CHECK(*o.frame_rate > 0 && std::isfinite(*o.frame_rate), "--frame-rate ", *o.frame_rate,
              " must be a positive number");
  if (o.auto_duration)
    LTX_CHECK(o.auto_duration->first >= 0 && o.auto_duration->first <= o.auto_duration->second,
              "--auto-duration ", o.auto_duration->first, " ", o.auto_duration->second,
              ": MIN_SECONDS must be >= 0 and <= MAX_SECONDS");
  if (o.num_inference_steps) {
    LTX_CHECK(*o.num_inference_steps >= 1, "--num-inference-steps ", *o.num_inference_steps,
              " must be at least 1");
    LTX_CHECK(kind != PipelineKind::Distilled,
              "--num-inference-steps: the distilled pipeline runs "
              "its fixed 8 + 3 step schedules; drop the flag or pick another --pipeline");
  }
  if (kind == PipelineKind::Distilled) {
    LTX_CHECK(!guidance_given(o.video_guidance) && !guidance_given(o.audio_guidance) &&
                  !o.negative_prompt,
              "the distilled pipeline runs without guidance: --negative-prompt and the guidance "
              "scale flags do not apply to it");
    LTX_CHECK(!o.models.distilled_lora,
              "--distilled-lora: the distilled pipeline does not use a "
              "distilled LoRA (its checkpoint is distilled); use --pipeline two-stage for it");
  }
  validate_retake_options(o);
  if (kind == PipelineKind::OneStage)
    LTX_CHECK(!o.models.distilled_lora && o.models.spatial_upsampler_path.empty(),
              "the one-stage pipeline has no second stage: --distilled-lora and "
              "--spatial-upsampler-path do not apply to it");
  LTX_CHECK(
      o.models.distilled_checkpoint_path.empty() || kind == PipelineKind::Distilled ||
          kind == PipelineKind::HdrIcLora,
      "--distilled-checkpoint-path is for --pipeline distilled and hdr-ic-lora; use --checkpoint-path for the ",
      name, " pipeline");
  if (o.distilled_lora_strength_stage_1 || o.distilled_lora_strength_stage_2)
    LTX_CHECK(kind == PipelineKind::TwoStageHQ ||
                  (kind == PipelineKind::TwoStage && !o.distilled_lora_strength_stage_1),
              "--distilled-lora-strength-stage-1/2 are flags of --pipeline two-stage-hq (the "
              "two-stage pipeline takes the strength after --distilled-lora PATH)");
  for (size_t i = 0; i < o.images.size(); ++i) {
    const ImageFlag& im = o.images[i];
    const std::string flag = im.path.empty() ? str("image ", i + 1, " (given as bytes)")
                                             : str("--image '", im.path, "'");
    if (im.path.empty()) {
      LTX_CHECK(!im.bytes.empty(), "image ", i + 1, ": neither a file nor the image's bytes given");
    } else {
      LTX_CHECK(im.bytes.empty(), flag, ": give the image as a file or as bytes, not both");
      std::error_code ec;
      LTX_CHECK(fs::is_regular_file(im.path, ec), flag, ": no such file");
    }
    LTX_CHECK(im.frame_index >= 0, flag, ": FRAME_IDX ", im.frame_index, " must be >= 0");
    if (o.num_frames)
      LTX_CHECK(im.frame_index < *o.num_frames, flag, ": FRAME_IDX ", im.frame_index,
                " is past the last frame (", *o.num_frames - 1, ")");
    LTX_CHECK(im.strength >= 0.0 && im.strength <= 1.0, flag, ": STRENGTH ", im.strength,
              " must be in [0, 1]");
    LTX_CHECK(!im.crf || (*im.crf >= 0 && *im.crf <= 51), flag, ": CRF ", *im.crf,
              " must be in [0, 51]");
  }
  validate_ic_lora_options(o, kind);
  validate_dubit_options(o, kind);
  const bool dfr = kind == PipelineKind::Dfr;
  for (const auto& [given, flag] :
       {std::pair{o.temporal_upsample_rounds.has_value(), "--temporal-upsample-rounds"},
        std::pair{!o.models.temporal_upsampler_path.empty(), "--temporal-upsampler-path"},
        std::pair{o.models.detailing_lora.has_value(), "--detailing-lora"}})
    LTX_CHECK(!given || dfr, flag, " is a flag of --pipeline dfr");
  if (o.temporal_upsample_rounds) {
    LTX_CHECK(*o.temporal_upsample_rounds >= 0 && *o.temporal_upsample_rounds <= 2,
              "--temporal-upsample-rounds ", *o.temporal_upsample_rounds, " must be 0, 1 or 2");
    LTX_CHECK(*o.temporal_upsample_rounds == 0 || !o.models.temporal_upsampler_path.empty() ||
                  o.models.empty(),
              "--temporal-upsample-rounds ", *o.temporal_upsample_rounds,
              " needs the temporal x2 upsampler: pass --temporal-upsampler-path");
  }
  if (o.num_generated_keyframes) {
    LTX_CHECK(!dfr, "--num-generated-keyframes: the dfr pipeline places its own keyframes");
    LTX_CHECK(*o.num_generated_keyframes >= 0, "--num-generated-keyframes ",
              *o.num_generated_keyframes, " must be >= 0");
  }
  LTX_CHECK(o.enhance_prompt ||
                (o.enhance_system_prompt_file.empty() && o.prompt_enhancer_gemma_root.empty()),
            "--enhance-system-prompt / --prompt-enhancer-gemma-root only apply with "
            "--enhance-prompt");
}

ModelFlags demo_model_flags(const DemoBundle& demo, const std::string& pipeline,
                            bool temporal_upsampler) {
  const PipelineKind kind = pipelines::parse_pipeline_kind(pipeline);
  ModelFlags flags;
  flags.checkpoint_path = demo.checkpoint;
  flags.text_encoder_path = demo.text_encoder;
  if (pipelines::is_two_stage(kind)) flags.spatial_upsampler_path = demo.spatial_upsampler;
  if (needs_distilled_lora(kind)) flags.distilled_lora = LoraSpec{demo.distilled_lora, 1.0};
  if (temporal_upsampler) flags.temporal_upsampler_path = demo.temporal_upsampler;
  if (kind == PipelineKind::IcLora || kind == PipelineKind::DubIt) flags.loras.push_back(LoraSpec{demo.ic_lora, 1.0});
  if (kind == PipelineKind::HdrIcLora) flags.loras.push_back(LoraSpec{demo.hdr_lora, 1.0});
  return flags;
}

ComponentNeeds component_needs(const GenerateOptions& options) {
  const PipelineKind kind = pipelines::parse_pipeline_kind(options.pipeline);
  ComponentNeeds needs;
  needs.pipeline = pipelines::pipeline_name(kind);
  needs.spatial_upsampler = pipelines::is_two_stage(kind);
  needs.video_encoder = needs.spatial_upsampler || !options.images.empty() || kind == PipelineKind::Retake;
  needs.distilled_lora = needs_distilled_lora(kind);
  needs.temporal_upsampler = options.temporal_upsample_rounds.value_or(0) > 0;
  needs.text_encoder = options.text_embeddings.empty();
  return needs;
}

ResolvedModels resolve_models(const GenerateOptions& options, const ComponentNeeds& needs,
                              Progress& progress) {
  ResolvedModels r;
  ModelFlags flags = options.models;
  r.demo = flags.empty();
  if (r.demo) {
    progress.stage("demo bundle");
    const DemoBundle demo =
        ensure_demo_bundle(options.demo_dir.empty() ? default_demo_dir() : options.demo_dir);
    progress.end_stage();
    log_warn(
        "no model files given: running the built-in DEMO bundle (tiny model with RANDOM "
        "weights, from ",
        demo.dir,
        "); the output is noise, not a real video. Pass "
        "--checkpoint-path and --text-encoder-path (or --gemma-root), or --model PRESET (`ltx "
        "models` lists them), for real results.");
    flags = demo_model_flags(demo, options.pipeline, needs.temporal_upsampler);
    flags.quantization = options.models.quantization;
    if (pipelines::parse_pipeline_kind(options.pipeline) == PipelineKind::HdrIcLora) {
      // --hdr-lora replaces the demo's (it must then fit the demo transformer).
      r.hdr_lora = options.hdr_lora.empty() ? demo.hdr_lora : options.hdr_lora;
      flags.loras = {LoraSpec{r.hdr_lora, 1.0}};
    }
  } else if (pipelines::parse_pipeline_kind(options.pipeline) == PipelineKind::HdrIcLora) {
    // The HDR IC-LoRA shapes both stages, at full strength as the reference fuses it.
    LTX_CHECK(!options.hdr_lora.empty(), "--pipeline hdr-ic-lora needs its HDR IC-LoRA: pass --hdr-lora PATH");
    flags.loras.push_back(LoraSpec{options.hdr_lora, 1.0});
    r.hdr_lora = options.hdr_lora;
  }
  r.paths = resolve_model_paths(flags);
  // Before any model loads: a quantization mode that cannot read the transformer's file.
  if (r.paths.transformer.given() && fs::is_regular_file(r.paths.transformer.path))
    quantization::check_mode_fits(r.paths.transformer.path, r.paths.quantization);
  r.report = check_components(r.paths, needs);
  for (const std::string& w : r.report.warnings) log_warn(w);
  // Image-aware enhancement with the text encoder itself needs its vision tower, which a
  // llama.cpp GGUF does not hold (llama.cpp keeps it in a separate mmproj file).
  LTX_CHECK(!(options.enhance_prompt && !options.images.empty() &&
              options.prompt_enhancer_gemma_root.empty() && r.paths.text_encoder.given() &&
              io::is_gguf_file(r.paths.text_encoder.path)),
            "--enhance-prompt with an image: ", r.paths.text_encoder.flag, " '",
            r.paths.text_encoder.path,
            "' is a llama.cpp Gemma 3 GGUF, which holds no vision tower (llama.cpp keeps it in a "
            "separate mmproj file, which ltx does not read); pass a Gemma 3 root folder or "
            "single-file text encoder as --prompt-enhancer-gemma-root for image-aware "
            "enhancement, or drop --enhance-prompt");
  log_info("model: ",
           r.demo ? std::string("built-in demo (tiny, LTX-2.3 layout, random weights)")
                  : r.report.version_name,
           " (", r.paths.layout_name(), "), pipeline ", needs.pipeline);
  return r;
}

namespace {

// Retake's source clip: its size, frame count and rate from the container (as the reference's
// get_videostream_metadata), and, when `decode`, its frames (RGB as PyAV's to_rgb) and its first
// audio track. Unreadable media fail naming --video-path.
void read_retake_source(const GenerateOptions& options, bool decode, pipelines::GenerationRequest& req) {
  const std::string& path = options.video_path;
  if (media::is_exr_folder(path)) {
    // An EXR-frame folder (get_videostream_metadata's EXR branch): the frames' count and the first
    // one's size, --frame-rate as the rate, no audio.
    req.frame_rate = options.frame_rate.value_or(req.frame_rate);
    const Tensor first = media::read_exr_frames(path, 0, 1, "--video-path");
    req.height = first.size(1);
    req.width = first.size(2);
    req.num_frames = static_cast<int64_t>(media::exr_frame_paths(path).size());
    if (!decode) return;
    pipelines::RetakeSource src;
    src.frames = media::read_exr_frames(path, 0, 0, "--video-path");
    src.start_time = options.start_time.value_or(0.0);
    src.end_time = options.end_time.value_or(0.0);
    req.retake = std::move(src);
    return;
  }
  try {
    const media::MediaInfo info = media::probe_media(path);
    const media::StreamInfo* video = &media::first_video_stream(info);
    const bool audio = media::has_audio_stream(info);
    req.frame_rate = video->fps;
    req.height = video->height;
    req.width = video->width;
    if (video->frames > 0) req.num_frames = video->frames;
    if (!decode) return;
    pipelines::RetakeSource src;
    src.frames = media::decode_video_frames(path);
    LTX_CHECK(src.frames.dim() == 4 && src.frames.size(0) > 0, "no video frames could be decoded");
    req.num_frames = src.frames.size(0);
    if (audio) {
      const media::AudioTrack track = media::decode_audio(path);
      src.waveform = track.waveform;
      src.sample_rate = track.sample_rate;
    }
    src.start_time = options.start_time.value_or(0.0);
    src.end_time = options.end_time.value_or(0.0);
    req.retake = std::move(src);
  } catch (const Error& e) {
    fail("--video-path '", path, "': cannot read the clip: ", e.what());
  }
}

// hdr-ic-lora: the clip's size and frame rate (the reference's get_videostream_metadata), the
// frame count (--num-frames, else the preset's), video only; when `read`, its first num_frames
// frames as the reference video (high quality repeats the first half of them itself).
void add_hdr_clip(const GenerateOptions& options, const ResolvedModels& models, bool read,
                  pipelines::GenerationRequest& req) {
  const VideoConditioningFlag& clip = options.video_conditionings.at(0);
  media::MediaInfo info;
  try {
    info = media::probe_media(clip.path);
  } catch (const Error& e) {
    fail("--video-conditioning '", clip.path, "': cannot read the video (", e.what(), ")");
  }
  const media::StreamInfo* video = nullptr;
  for (const media::StreamInfo& st : info.streams)
    if (st.type == "video" && !video) video = &st;
  LTX_CHECK(video && video->width > 0 && video->height > 0 && video->fps > 0, "--video-conditioning '",
            clip.path, "': the video stream has no size or frame rate");
  req.height = video->height;
  req.width = video->width;
  req.frame_rate = video->fps;
  if (options.num_frames) req.num_frames = *options.num_frames;
  else if (models.demo) req.num_frames = kDemoNumFrames;
  req.audio = false;
  pipelines::VideoConditioning vc;
  vc.path = clip.path;
  vc.strength = clip.strength;
  vc.frames = read ? read_clip(clip.path, req.num_frames, "--video-conditioning")
                   : Tensor::zeros({1, 1, 1, 3}, DType::U8);
  req.video_conditionings.push_back(std::move(vc));
}

// The request of one generation: the reference's preset for the model, then the options. Images
// are read (an unreadable one fails here, before the models) only when `read_images`; otherwise
// they keep their frame index and strength alone (enough for a batch key).
pipelines::GenerationRequest make_request(const GenerateOptions& options,
                                          const ResolvedModels& models, bool read_images) {
  const PipelineKind kind = pipelines::parse_pipeline_kind(options.pipeline);
  const ModelPaths& paths = models.paths;
  pipelines::GenerationRequest req = pipelines::default_request(kind, models.report.model_version);
  if (options.dtype) req.dtype = *options.dtype;  // the latents between the steps
  if (models.demo) {
    req.height = kDemoHeight;
    req.width = kDemoWidth;
    req.num_frames = kDemoNumFrames;
  }
  if (options.seed) req.seed = *options.seed;
  req.hdr = options.hdr;
  if (options.height) req.height = *options.height;
  if (options.width) req.width = *options.width;
  if (options.frame_rate) req.frame_rate = *options.frame_rate;
  if (options.num_inference_steps) req.num_inference_steps = *options.num_inference_steps;
  if (options.max_batch_size) req.max_batch_size = *options.max_batch_size;
  req.step_cache = options.step_cache;
  apply_guidance(options.video_guidance, req.video_guider);
  apply_guidance(options.audio_guidance, req.audio_guider);
  // The strength after --distilled-lora PATH: two-stage's stage 2, every dfr stage (two-stage-hq
  // takes its per-stage flags below, as the reference).
  if (paths.distilled_lora && kind == PipelineKind::TwoStage)
    req.distilled_lora_strengths[1] = paths.distilled_lora->strength;
  if (paths.distilled_lora && kind == PipelineKind::TwoStageHQ &&
      paths.distilled_lora->strength != lora::kDefaultStrength)
    log_warn(
        "two-stage-hq sets the distilled LoRA's strength per stage "
        "(--distilled-lora-strength-stage-1/2); the strength after --distilled-lora PATH is "
        "ignored, as in the reference");
  if (paths.distilled_lora && kind == PipelineKind::Dfr)
    req.distilled_lora_strengths = {paths.distilled_lora->strength, paths.distilled_lora->strength};
  if (paths.detailing_lora) {
    req.detailing_lora_strength = paths.detailing_lora->strength;
    req.detailing_downscale_factor =
        pipelines::dfr::read_detailing_downscale_factor(paths.detailing_lora->path);
  }
  if (options.temporal_upsample_rounds)
    req.temporal_upsample_rounds = *options.temporal_upsample_rounds;
  if (options.num_generated_keyframes)
    req.num_generated_keyframes = *options.num_generated_keyframes;
  if (options.distilled_lora_strength_stage_1)
    req.distilled_lora_strengths[0] = *options.distilled_lora_strength_stage_1;
  if (options.distilled_lora_strength_stage_2)
    req.distilled_lora_strengths[1] = *options.distilled_lora_strength_stage_2;
  if (kind == PipelineKind::IcLora) {
    LTX_CHECK(!paths.loras.empty(), "--pipeline ic-lora needs its IC-LoRA: pass --lora PATH [STRENGTH] (the "
              "control LoRA the reference videos are for)");
    std::vector<std::string> lora_paths;
    for (const LoraSpec& l : paths.loras) lora_paths.push_back(l.path);
    const pipelines::ic_lora::ReferenceScaleFactors f =
        pipelines::ic_lora::combine_reference_scale_factors(lora_paths, "--lora");
    req.reference_downscale_factor = f.downscale;
    req.reference_temporal_scale_factor = f.temporal;
    if (read_images)
      log_info("IC-LoRA reference: ", req.height / 2 / f.downscale, "x", req.width / 2 / f.downscale,
               " (reference_downscale_factor ", f.downscale, f.downscale == 1 ? ", 1 when the metadata has none" : "",
               "), every ", f.temporal == 1 ? std::string("frame") : str(f.temporal, "th frame after the first"));
    req.skip_stage_2 = options.skip_stage_2;
    for (const VideoConditioningFlag& v : options.video_conditionings) {
      pipelines::VideoConditioning vc;
      vc.path = v.path;
      vc.strength = v.strength;
      // An EXR-frame folder: its first num_frames frames, scene-linear (the request's --hdr space).
      vc.frames = !read_images ? Tensor::zeros({1, 1, 1, 3}, DType::U8)
                  : media::is_exr_folder(v.path)
                      ? media::read_exr_frames(v.path, 0, req.num_frames, "--video-conditioning")
                      : read_clip(v.path, req.num_frames, "--video-conditioning");
      req.video_conditionings.push_back(std::move(vc));
    }
    if (options.conditioning_attention_mask) {
      const auto& [path, strength] = *options.conditioning_attention_mask;
      req.conditioning_attention_strength = strength;
      // As the reference: the mask clip at stage 1's size, num_frames frames at most.
      if (read_images)
        req.conditioning_attention_mask = pipelines::ic_lora::mask_from_frames(
            read_clip(path, req.num_frames, "--conditioning-attention-mask"), req.height / 2, req.width / 2,
            req.num_frames);
    }
  }
  for (size_t i = 0; i < options.images.size(); ++i) {
    const ImageFlag& im = options.images[i];
    pipelines::ImageConditioning c;
    c.path = im.path;
    if (read_images)
      c.image = im.path.empty()         ? media::decode_image(im.bytes.data(), im.bytes.size(), str("image ", i + 1))
                : is_exr_file(im.path) ? read_exr_still(im.path)
                                        : media::read_image(im.path);
    c.frame_index = im.frame_index;
    c.strength = im.strength;
    c.crf = im.crf;
    req.images.push_back(std::move(c));
  }
  if (kind == PipelineKind::Retake) read_retake_source(options, read_images, req);
  if (kind == PipelineKind::DubIt) add_dubit_reference(options, paths, read_images, req);
  if (kind == PipelineKind::HdrIcLora) add_hdr_clip(options, models, read_images, req);
  return req;
}

// a2vid: the input audio as the reference decodes it, cut to --audio-start-time and
// --audio-max-duration (unset: req's num_frames / frame_rate seconds).
void read_input_audio(const GenerateOptions& options, pipelines::GenerationRequest& req) {
  const double max_duration = options.audio_max_duration.value_or(static_cast<double>(req.num_frames) / req.frame_rate);
  const double start = options.audio_start_time.value_or(0.0);
  const media::AudioTrack track =
      options.audio_input ? media::cut_audio_clip(*options.audio_input, start, max_duration, "the input audio")
                          : media::read_audio_clip(options.audio_path, start, max_duration);
  log_info("input audio: ", track.waveform.size(1), " samples x ", track.waveform.size(0), " channels at ",
           track.sample_rate, " Hz");
  req.input_audio = track.waveform;
  req.input_audio_rate = track.sample_rate;
}

// The frame count's source: --num-frames, or the duration head's prediction after the prompt
// encoding (--auto-duration, or LTX-2.5 checkpoints without --num-frames, as the reference).
// Without a duration head and without either flag the preset's count is used (the reference
// requires --num-frames then).
duration_head::NumFramesRequest frames_request_of(
    const GenerateOptions& options, const pipelines::GenerationRequest& req,
    const duration_head::DurationHead* head) {
  duration_head::NumFramesRequest frames_request = req.num_frames;
  // Retake's and DubIt's frame count is their clip's.
  const PipelineKind kind = pipelines::parse_pipeline_kind(options.pipeline);
  if (kind == PipelineKind::Retake || kind == PipelineKind::DubIt || kind == PipelineKind::HdrIcLora)
    return frames_request;
  if (options.num_frames || options.auto_duration || head) {
    std::optional<duration_head::AutoDuration> range;
    if (options.auto_duration)
      range =
          duration_head::AutoDuration(options.auto_duration->first, options.auto_duration->second);
    frames_request = duration_head::num_frames_request(options.num_frames, range);
    duration_head::require_num_frames_source(frames_request, head);
  }
  return frames_request;
}

// Encodes the prompt (after enhancement, when asked) and, when the guidance runs an unconditional
// pass, the negative prompt into `contexts` (f32 on the CPU); sets req.num_frames. Returns the
// prompt used.
std::string encode_text(const GenerateOptions& options, text::PromptEncoder& encoder,
                        const duration_head::DurationHead* head,
                        const duration_head::NumFramesRequest& frames_request,
                        const nn::LoadOptions& where, pipelines::GenerationRequest& req,
                        pipelines::TextContexts& contexts, Progress& progress) {
  const PipelineKind kind = pipelines::parse_pipeline_kind(options.pipeline);
  std::string prompt = options.prompt;
  if (options.enhance_prompt) {
    progress.stage("prompt enhancement");
    text::EnhanceOptions eo;
    eo.system_prompt_file = options.enhance_system_prompt_file;
    eo.seed = static_cast<uint64_t>(req.seed);  // the pipelines pass --seed
    // With images, the first one makes it an image-aware enhancement (the reference's
    // enhance_prompt_image = images[0]); Gemma 3 with its vision tower only.
    if (!req.images.empty())
      eo.image = req.images.front().image.defined() ? req.images.front().image
                                                    : media::read_image(req.images.front().path);
    // A separate enhancer model, or the text encoder itself (Gemma 3; it stays loaded for the
    // encoding that follows).
    prompt = options.prompt_enhancer_gemma_root.empty()
                 ? encoder.enhance(prompt, eo)
                 : text::enhance_prompt(options.prompt_enhancer_gemma_root, prompt, eo, where);
    log_info("enhanced prompt: ", prompt);
    progress.stage("text encoding");
  }
  std::vector<std::string> prompts = {prompt};
  const bool negative =
      pipelines::uses_guidance(kind) &&
      (sampling::MultiModalGuider(req.video_guider).do_unconditional_generation() ||
       sampling::MultiModalGuider(req.audio_guider).do_unconditional_generation());
  if (negative) prompts.push_back(options.negative_prompt.value_or(kDefaultNegativePrompt));
  std::vector<text::PromptContext> ctx = encoder.encode(prompts);
  req.num_frames = duration_head::resolve_num_frames(frames_request, head, ctx[0].video,
                                                     ctx[0].audio, req.frame_rate);
  for (text::PromptContext& c : ctx) {
    c.video = c.video.to(Device::cpu(), DType::F32);
    if (c.audio.defined()) c.audio = c.audio.to(Device::cpu(), DType::F32);
    if (c.mask.defined()) c.mask = c.mask.to(Device::cpu());
  }
  if (std::holds_alternative<duration_head::AutoDuration>(frames_request))
    log_info("duration head: ", req.num_frames, " frames at ", req.frame_rate, " fps");
  contexts.video_positive = ctx[0].video;
  contexts.audio_positive = ctx[0].audio;
  if (negative) {
    contexts.video_negative = ctx[1].video;
    contexts.audio_negative = ctx[1].audio;
  }
  return prompt;
}

// The denoising models of a generation (held while they are leased) and the pipeline's view of
// them.
struct DiffusionModels {
  std::shared_ptr<StageTransformer> transformer;
  std::shared_ptr<const models::audio_vae::AudioEncoder> audio_encoder;
  std::shared_ptr<const models::video_vae::VideoEncoder> video_encoder;
  std::shared_ptr<const models::upsampler::LatentUpsampler> upsampler, temporal_upsampler;
  pipelines::Components comp;
};

// Takes the transformer (with each stage's LoRA set) and the encoder / upsamplers `req` needs
// from `provider`. `images`: some request conditions on images (the video encoder is needed).
DiffusionModels load_diffusion(PipelineKind kind, const ResolvedModels& models,
                               const pipelines::GenerationRequest& req, bool images,
                               const nn::LoadOptions& where,
                               const models::BlockStreaming& streaming, ModelProvider& provider) {
  const ModelPaths& paths = models.paths;
  DiffusionModels m;
  log_placement("transformer (denoising loops)", transformer_placement(where, paths.quantization));
  std::vector<lora::LoraSet> sets = stage_lora_sets(paths, kind, req, provider);
  m.transformer = provider.transformer(paths, sets, where, streaming);
  if (pipelines::is_two_stage(kind) || images) {
    log_placement(images ? "video encoder (image conditioning)"
                         : "video encoder (latent statistics)",
                  where);
    m.video_encoder = provider.video_encoder(paths.video_vae.path, where);
  }
  if (pipelines::is_two_stage(kind)) {
    log_placement("spatial latent upsampler", where);
    m.upsampler = provider.latent_upsampler(paths.spatial_upsampler.path, where);
  }
  if (req.temporal_upsample_rounds > 0) {
    log_placement("temporal latent upsampler", where);
    m.temporal_upsampler = provider.latent_upsampler(paths.temporal_upsampler.path, where);
  }
  // The audio encoder: a2vid's input audio, the audio track of a retake's source clip, DubIt's
  // reference voice.
  if (kind == PipelineKind::A2Vid || kind == PipelineKind::DubIt || (req.retake && req.retake->waveform.defined())) {
    log_placement(kind == PipelineKind::A2Vid   ? "audio encoder (input audio)"
                  : kind == PipelineKind::DubIt ? "audio encoder (reference voice)"
                                                : "audio encoder (source audio)",
                  where);
    m.audio_encoder = std::make_shared<const models::audio_vae::AudioEncoder>(
        models::audio_vae::AudioEncoder::from_file(io::SafetensorsFile::open(paths.audio_vae.path), where));
  }

  pipelines::Components& comp = m.comp;
  comp.transformer = m.transformer->model.get();
  if (m.transformer->fuser) {
    // Every stage applies its set, identity included: a fuser that outlives this generation (a
    // resident model) may still hold the last one's.
    comp.stage_transformer = [st = m.transformer.get(),
                              sets = std::move(sets)](pipelines::Stage stage) -> const tf::LTXModel& {
      const lora::LoraSet& set = sets[stage_index(stage)];
      if (!set.empty()) log_info("LoRAs of this stage: ", lora::describe(set));
      st->fuser->apply(set);
      return *st->model;
    };
  } else {
    for (const lora::LoraSet& set : sets)
      LTX_CHECK(lora::is_identity(set), "generate: the transformer was loaded without a LoRA "
                                        "fuser, but a stage applies ", lora::describe(set));
  }
  comp.video_encoder = m.video_encoder.get();
  comp.spatial_upsampler = m.upsampler.get();
  comp.temporal_upsampler = m.temporal_upsampler.get();
  comp.audio_encoder = m.audio_encoder.get();
  comp.model_version = models.report.model_version;
  comp.device = where.device;
  return m;
}

DecodeResult decode_output(const GenerateOptions& options, const ResolvedModels& models,
                           const pipelines::GenerationRequest& req,
                           const pipelines::GenerationResult& out, ModelProvider& provider,
                           MediaSink& sink, Progress& progress) {
  if (out.generated_keyframes.defined())
    log_info("the ", out.generated_keyframe_positions.size(),
             " generated keyframes are not written (as the reference's scripts)");
  DecodeOptions dec;
  dec.device = options.device;
  dec.dtype = options.dtype;
  dec.fps = out.frame_rate;
  if (options.hdr) {
    dec.dtype = DType::F32;  // vae_dtype_for_hdr: the HDR decode runs with f32 weights
    // The reference's retake hands its encoder int(fps).
    if (pipelines::parse_pipeline_kind(options.pipeline) == PipelineKind::Retake) dec.fps = std::floor(dec.fps);
  }
  dec.noise_seed = req.seed;
  dec.audio_max_seconds = out.audio_max_seconds;
  Tensor audio_latent = options.audio ? out.audio_latent : Tensor();
  if (pipelines::parse_pipeline_kind(options.pipeline) == PipelineKind::A2Vid) {
    // The reference muxes the input audio itself, not a decode of its latent.
    audio_latent = Tensor();
    if (options.audio)
      dec.audio_track = media::AudioTrack{req.input_audio, static_cast<int>(req.input_audio_rate)};
  }
  return provider.decode(out.video_latent, audio_latent, models.paths, sink, dec, &progress);
}

}  // namespace

namespace {

// hdr-ic-lora from the loaded models on: the generation (run_hdr_ic_lora), then the decode in f32
// with the reference's fixed decode tiling (--spatial-tile; 32 frames, 16 overlap) through
// LinearHdrSink (crop, high-quality subsampling, the LoRA's transfer to scene-linear) into `sink`.
void run_hdr(const GenerateOptions& options, const ResolvedModels& models,
             const pipelines::GenerationRequest& req, const pipelines::TextContexts& contexts,
             DiffusionModels dm, ModelProvider& provider, Progress& progress, MediaSink& sink,
             GenerateResult& result) {
  namespace hdr = pipelines::hdr_ic_lora;
  hdr::HdrIcLoraOptions ho;
  ho.lora = hdr::read_hdr_lora_config(models.hdr_lora, "--hdr-lora");
  ho.high_quality = options.high_quality;
  log_info("HDR IC-LoRA: ", media::hdr_transfer_display_name(ho.lora.transfer), " working space, reference "
           "downscale factor ", ho.lora.reference_downscale_factor, options.high_quality ? ", high quality" : "");
  if (!options.text_embeddings.empty() && dm.comp.transformer) {
    // Precomputed contexts must have been made for this model: their width is the transformer's
    // context width (its caption projection's input where it has one).
    const models::transformer::LTXModelConfig& cfg = dm.comp.transformer->config();
    const int64_t want = cfg.caption_projection ? cfg.caption_channels : cfg.cross_attention_dim;
    LTX_CHECK(contexts.video_positive.size(2) == want, "--text-embeddings '", options.text_embeddings,
              "': video_context is ", contexts.video_positive.size(2), " wide but the transformer of '",
              models.paths.transformer.path, "' takes ", want, "; the file was made for another model");
  }
  hdr::validate_request(req, dm.comp, &contexts);
  const hdr::HdrIcLoraLatent out = hdr::run_hdr_ic_lora(
      req, dm.comp, contexts, ho, [&](const std::string& stage, int64_t step, int64_t total) {
        progress.stage(stage);
        progress.step(step, total);
      });
  progress.end_stage();
  dm = {};  // the diffusion models are no longer needed
  DecodeOptions dec;
  dec.device = options.device;
  dec.dtype = DType::F32;  // the reference decodes the HDR latent with f32 weights
  dec.fps = req.frame_rate;
  dec.noise_seed = req.seed;
  const int64_t tile = options.spatial_tile.value_or(kHdrSpatialTile);
  models::tiling::TileSizeConfig tiling;
  tiling.frames = models::tiling::DimensionSizeConfig(kHdrTemporalTile, kHdrTemporalOverlap);
  tiling.height = models::tiling::DimensionSizeConfig(tile, kHdrSpatialOverlap);
  tiling.width = models::tiling::DimensionSizeConfig(tile, kHdrSpatialOverlap);
  dec.tiling = tiling;
  dec.auto_tiling = false;
  LinearHdrSink linear(sink, out.size, options.high_quality, ho.lora.transfer);
  result.decoded = provider.decode(out.video_latent.to(Device::cpu(), DType::F32), Tensor(), models.paths,
                                   linear, dec, &progress);
  result.decoded.frames = linear.frames_out();
  result.decoded.height = out.size.crop_height;
  result.decoded.width = out.size.crop_width;
  result.frame_rate = req.frame_rate;
}

}  // namespace

StreamingPlan plan_run_streaming(const GenerateOptions& o, const ResolvedModels& models,
                                 int64_t jobs) {
  const bool budget = o.max_gpu_memory_bytes > 0;
  if (!o.device.is_cuda() || (!budget && o.offload != Offload::Auto)) {
    const models::BlockStreaming s = block_streaming(o.offload, o.device);
    return {s, s, {}};
  }
  const PipelineKind kind = pipelines::parse_pipeline_kind(o.pipeline);
  const pipelines::GenerationRequest req = make_request(o, models, /*read_images=*/false);
  const int64_t passes =
      kind == PipelineKind::OneStage
          ? (req.max_batch_size > 0 ? std::min<int64_t>(req.max_batch_size, 4) : 4)
          : 1;
  // The frame count the text step settles: the flag, else the preset's; with --auto-duration at
  // most its longest duration.
  int64_t frames = o.num_frames.value_or(req.num_frames);
  if (o.auto_duration)
    frames = std::max<int64_t>(
        frames, static_cast<int64_t>(std::ceil(o.auto_duration->second * req.frame_rate / 8.0)) * 8 + 1);
  // DFR's temporal rounds double the frames the later passes see.
  frames = (frames - 1) * (int64_t{1} << std::max<int64_t>(req.temporal_upsample_rounds, 0)) + 1;
  RunShape shape{req.width, req.height, frames, passes * jobs};
  // Image-aware enhancement with the text encoder itself loads its vision tower in that stage.
  shape.vision_tower =
      o.enhance_prompt && !o.images.empty() && o.prompt_enhancer_gemma_root.empty();
  return plan_streaming(models.paths, model_placement(o.device, o.dtype).dtype, shape, o.offload,
                        budget ? o.max_gpu_memory_bytes : backend::total_memory_bytes(o.device),
                        o.device, budget ? "--max-gpu-memory" : str(o.device.str(), " memory"));
}

GenerateResult generate_with(const GenerateOptions& options, const ResolvedModels& models,
                             ModelProvider& provider, Progress& progress, MediaSink& sink) {
  const PipelineKind kind = pipelines::parse_pipeline_kind(options.pipeline);
  // Every model on the one device, in one dtype (generate/placement.h).
  const nn::LoadOptions where = model_placement(options.device, options.dtype);
  const ModelPaths& paths = models.paths;
  GenerateResult result;
  result.pipeline = pipelines::pipeline_name(kind);
  result.demo = models.demo;

  pipelines::GenerationRequest req = make_request(options, models, /*read_images=*/true);
  if (req.retake) pipelines::validate_retake_source(req, nullptr);  // the clip, before any model loads
  if (req.dubit) pipelines::validate_dubit_reference(req);
  // The input audio is read before any model loads (a bad file fails here), and checked against
  // the audio encoder's channel count in the file's config.
  if (kind == PipelineKind::A2Vid) {
    read_input_audio(options, req);
    const auto file = io::SafetensorsFile::open(paths.audio_vae.path);
    const int64_t channels =
        models::audio_vae::AudioVaeConfig::from_config(file->metadata_json("config"), paths.audio_vae.path).in_channels;
    LTX_CHECK(req.input_audio.size(0) == channels, "--audio-path: the audio has ", req.input_audio.size(0),
              " channel(s) but the audio VAE encoder of '", paths.audio_vae.path, "' takes ", channels,
              "; convert it first, e.g. ffmpeg -i in.wav -ac ", channels, " out.wav");
  }
  // Before anything loads: a stage that cannot fit is refused here.
  const StreamingPlan streaming = plan_run_streaming(options, models);
  std::shared_ptr<const duration_head::DurationHead> head;
  if (paths.duration_head.given()) head = provider.duration_head(paths.duration_head.path, where);
  if (head) log_placement("duration head", where);
  const duration_head::NumFramesRequest frames_request = frames_request_of(options, req, head.get());

  // ---- text
  progress.stage("text encoding");
  pipelines::TextContexts contexts;
  if (!options.text_embeddings.empty()) {
    // hdr-ic-lora with the reference's precomputed contexts: no text model.
    contexts.video_positive = read_text_embeddings(options.text_embeddings);
    log_info("text contexts from ", options.text_embeddings, " (", contexts.video_positive.shape().str(), ")");
  } else {
    // The text models load on the device (bf16 on a GPU, as the reference runs them); the duration
    // head reads the contexts there, then they come back to the host in f32 (exact) for the
    // pipeline, which moves them to the transformer's device once.
    log_placement("text encoder", where);
    const std::shared_ptr<text::PromptEncoder> encoder =
        provider.prompt_encoder(paths, where, streaming.text_encoder);
    const int64_t frames_before = req.num_frames;
    result.prompt = encode_text(options, *encoder, head.get(), frames_request, where, req,
                                contexts, progress);
    head.reset();
    // A duration head chose another length: the default audio cut follows it.
    if (kind == PipelineKind::A2Vid && req.num_frames != frames_before && !options.audio_max_duration)
      read_input_audio(options, req);
  }  // the text models are freed here
  progress.end_stage();

  // ---- diffusion
  progress.stage("model loading");
  DiffusionModels dm = load_diffusion(kind, models, req, !options.images.empty() || req.retake.has_value(),
                                      where, streaming.transformer, provider);
  progress.end_stage();
  if (kind == PipelineKind::HdrIcLora) {
    run_hdr(options, models, req, contexts, std::move(dm), provider, progress, sink, result);
    return result;
  }
  pipelines::validate_request(kind, req, dm.comp, &contexts);
  const pipelines::GenerationResult out = pipelines::run_pipeline(
      kind, req, dm.comp, contexts, [&](const std::string& stage, int64_t step, int64_t total) {
        progress.stage(stage);
        progress.step(step, total);
      });
  progress.end_stage();
  result.step_cache = out.step_cache;
  if (!out.step_cache.empty()) log_info(pipelines::format_step_cache(req.step_cache, out.step_cache));

  // ---- decode (the diffusion models are no longer needed)
  dm = {};
  result.decoded = decode_output(options, models, req, out, provider, sink, progress);
  result.frame_rate = out.frame_rate;
  return result;
}

std::string batch_key(const GenerateOptions& options, const ResolvedModels& models,
                      const std::string& models_key) {
  const PipelineKind kind = pipelines::parse_pipeline_kind(options.pipeline);
  if (!pipelines::supports_batching(kind) || options.auto_duration || options.enhance_prompt)
    return {};
  // A duration head picks the frame count when none is given: known only after the encoding.
  if (!options.num_frames && models.paths.duration_head.given()) return {};
  pipelines::GenerationRequest req = make_request(options, models, /*read_images=*/false);
  // The count the text encoding step settles (frames_request_of): the flag, else the preset's.
  if (options.num_frames) req.num_frames = *options.num_frames;
  return pipelines::batch_key(kind, req, models_key);
}

std::vector<BatchMemberResult> generate_batch_with(std::span<const GenerateOptions> options,
                                                   const ResolvedModels& models,
                                                   ModelProvider& provider,
                                                   std::span<Progress* const> progress,
                                                   std::span<MediaSink* const> sinks) {
  const size_t n = options.size();
  LTX_CHECK(n >= 1 && progress.size() == n && sinks.size() == n, "generate batch: ", n,
            " jobs need as many progress reporters and sinks (got ", progress.size(), " and ",
            sinks.size(), ")");
  const PipelineKind kind = pipelines::parse_pipeline_kind(options[0].pipeline);
  const Device device = options[0].device;
  const std::optional<DType> dtype = options[0].dtype;
  for (size_t i = 0; i < n; ++i)
    LTX_CHECK(options[i].pipeline == options[0].pipeline && options[i].device == device &&
                  options[i].dtype == dtype && options[i].offload == options[0].offload,
              "generate batch: job ", i, " differs from job 0 in pipeline, device, dtype or offload");
  const nn::LoadOptions where = model_placement(device, dtype);
  const ModelPaths& paths = models.paths;

  const StreamingPlan streaming = plan_run_streaming(options[0], models, static_cast<int64_t>(n));

  std::vector<BatchMemberResult> results(n);
  std::vector<pipelines::GenerationRequest> reqs(n);
  std::vector<pipelines::TextContexts> contexts(n);
  const auto live = [&](size_t i) { return !results[i].error; };
  const auto any_live = [&] {
    for (size_t i = 0; i < n; ++i)
      if (live(i)) return true;
    return false;
  };
  // Runs `f` for job i; what it throws (an error, a stop) ends that job only.
  const auto for_job = [&](size_t i, const auto& f) {
    try {
      f();
    } catch (const Error&) {
      results[i].error = std::current_exception();
    }
  };

  // ---- requests and text, per job
  std::shared_ptr<const duration_head::DurationHead> head;
  if (paths.duration_head.given()) head = provider.duration_head(paths.duration_head.path, where);
  {
    log_placement("text encoder", where);
    const std::shared_ptr<text::PromptEncoder> encoder =
        provider.prompt_encoder(paths, where, streaming.text_encoder);
    for (size_t i = 0; i < n; ++i)
      for_job(i, [&] {
        results[i].result.pipeline = pipelines::pipeline_name(kind);
        results[i].result.demo = models.demo;
        progress[i]->stage("text encoding");
        reqs[i] = make_request(options[i], models, /*read_images=*/true);
        const duration_head::NumFramesRequest frames = frames_request_of(options[i], reqs[i], head.get());
        results[i].result.prompt = encode_text(options[i], *encoder, head.get(), frames, where,
                                               reqs[i], contexts[i], *progress[i]);
        progress[i]->end_stage();
      });
    head.reset();
  }
  if (!any_live()) return results;

  // ---- diffusion, shared
  std::vector<size_t> members;
  for (size_t i = 0; i < n; ++i)
    if (live(i)) members.push_back(i);
  for (size_t i : members) for_job(i, [&] { progress[i]->stage("model loading"); });
  DiffusionModels dm = load_diffusion(kind, models, reqs[members[0]],
                                      !options[members[0]].images.empty(), where,
                                      streaming.transformer, provider);
  for (size_t i : members) for_job(i, [&] { progress[i]->end_stage(); });
  std::vector<pipelines::GenerationRequest> batch_reqs;
  std::vector<pipelines::TextContexts> batch_ctx;
  members.clear();
  for (size_t i = 0; i < n; ++i)
    if (live(i)) {
      members.push_back(i);
      batch_reqs.push_back(reqs[i]);
      batch_ctx.push_back(contexts[i]);
    }
  if (members.empty()) return results;
  // Every member hears the shared steps. A member that is stopped (its token, its deadline) stops
  // hearing them at once, but stays in the run: the pipeline joined the states when the stage
  // began, so its sample is denoised to the end and then dropped. The run stops only when every
  // member was stopped.
  const auto on_step = [&](const std::string& stage, int64_t step, int64_t total) {
    std::exception_ptr last;
    bool someone = false;
    for (size_t i : members) {
      if (!live(i)) continue;
      try {
        progress[i]->stage(stage);
        progress[i]->step(step, total);
        someone = true;
      } catch (const Cancelled&) {
        results[i].error = last = std::current_exception();
      }
    }
    if (!someone) std::rethrow_exception(last ? last : results[members[0]].error);
  };
  std::vector<pipelines::GenerationResult> outs;
  try {
    outs = pipelines::run_pipeline_batch(kind, batch_reqs, dm.comp, batch_ctx, on_step);
  } catch (const Cancelled&) {
    // Every member was stopped: each keeps its own reason.
    for (size_t i : members)
      if (live(i)) results[i].error = std::current_exception();
    return results;
  }
  for (size_t i : members) for_job(i, [&] { if (live(i)) progress[i]->end_stage(); });

  // ---- decode, per job (the diffusion models are no longer needed)
  dm = {};
  for (size_t k = 0; k < members.size(); ++k) {
    const size_t i = members[k];
    if (!live(i)) continue;
    for_job(i, [&] {
      results[i].result.decoded = decode_output(options[i], models, reqs[i], outs[k], provider,
                                                *sinks[i], *progress[i]);
      results[i].result.frame_rate = outs[k].frame_rate;
      results[i].result.step_cache = outs[k].step_cache;
    });
  }
  return results;
}

namespace {

GenerateResult generate(const GenerateOptions& options, Progress& progress, MediaSink& sink) {
  LTX_CHECK(options.library_loras.empty(), "generate: LoRAs by library name (",
            options.library_loras.front().name,
            ") need an Engine with a LoRA library; name LoRA files with --lora instead");
  const ResolvedModels models = resolve_models(options, component_needs(options), progress);
  if (options.max_gpu_memory_bytes > 0) {
    check_budget_fits(
        unplanned_components(
            component_sizes(models.paths, model_placement(options.device, options.dtype).dtype),
            options.device),
        options.max_gpu_memory_bytes);
    apply_gpu_budget(options.device, options.max_gpu_memory_bytes);
  }
  OneShotProvider provider;
  return generate_with(options, models, provider, progress, sink);
}

}  // namespace

GenerateResult run_generation(const GenerateOptions& options, Progress& progress) {
  validate_options(options);
  const OutputFormat format = output_format_of(options);
  if (format == OutputFormat::Png) {
    PngSink sink(options.output_path, png_output_location(options.output_path, 2));
    GenerateResult result = generate(options, progress, sink);
    result.output_path = sink.written_path();
    return result;
  }
  if (format == OutputFormat::Exr) {
    // hdr-ic-lora: each clip of the input (one, or a folder's) into its own EXR folder and preview,
    // which appear when that clip is done (as the reference's script walks a folder).
    const std::vector<std::string> clips = hdr_clips(options.video_conditionings.at(0).path);
    GenerateResult result;
    for (size_t i = 0; i < clips.size(); ++i) {
      GenerateOptions one = options;
      one.video_conditionings.at(0).path = clips[i];
      if (clips.size() > 1) log_info("clip ", i + 1, " of ", clips.size(), ": ", clips[i]);
      ExrOutputSink sink(hdr_output_paths(options.output_path, clips[i]), options.skip_mp4);
      result = generate(one, progress, sink);
      result.output_path = sink.paths().exr_dir;
    }
    return result;
  }
  if (options.hdr) {
    HdrMasterSink sink(hdr_master_paths(options.output_path), *options.hdr);
    GenerateResult result = generate(options, progress, sink);
    result.output_path = options.output_path;
    return result;
  }
  std::unique_ptr<MediaSink> sink;
  if (format == OutputFormat::Wav)
    sink = std::make_unique<WavSink>(options.output_path);
  else
    sink = std::make_unique<Mp4Sink>(options.output_path);
  GenerateResult result = generate(options, progress, *sink);
  result.output_path = options.output_path;
  return result;
}

GenerateResult run_generation(const GenerateOptions& options, Progress& progress, MediaSink& sink) {
  validate_options(options, /*to_file=*/false);
  return generate(options, progress, sink);
}

}  // namespace ltx::generate
