#include "generate/dubit_inputs.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "media/video_reader.h"
#include "pipelines/ic_lora.h"

namespace ltx::generate {

namespace fs = std::filesystem;
using pipelines::PipelineKind;

namespace {

bool guidance_flag_given(const GuidanceFlags& f) {
  return f.cfg || f.stg || f.rescale || f.modality || f.skip_step || f.stg_blocks;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The frame count snapped down to the VAE's 8k + 1 grid (the reference's snap_frames_to_grid).
int64_t snapped(int64_t frames) { return (frames - 1) / 8 * 8 + 1; }

}  // namespace

void validate_dubit_options(const GenerateOptions& o, PipelineKind kind) {
  const bool dubit = kind == PipelineKind::DubIt;
  for (const auto& [given, flag] : {std::pair{!o.reference_video.empty(), "--reference-video"},
                                    std::pair{o.reference_strength.has_value(), "--reference-strength"}})
    LTX_CHECK(!given || dubit, flag, " is a flag of --pipeline dubit");
  if (!dubit) return;
  const std::string& path = o.reference_video;
  LTX_CHECK(!path.empty(), "--pipeline dubit needs --reference-video CLIP (a video with the voice to keep in its "
            "audio track)");
  std::error_code ec;
  LTX_CHECK(!fs::is_directory(path, ec), "--reference-video '", path, "' is a folder; pass a video file (its frame "
            "rate and audio come from the container)");
  LTX_CHECK(lower(fs::path(path).extension().string()) != ".exr", "--reference-video '", path, "' must be a video file "
            "with an audio track; EXR is not supported (the frame rate and audio come from the container)");
  LTX_CHECK(fs::is_regular_file(path, ec), "--reference-video '", path, "': no such file");
  if (o.reference_strength)
    LTX_CHECK(std::isfinite(*o.reference_strength) && *o.reference_strength >= 0.0 && *o.reference_strength <= 1.0,
              "--reference-strength ", *o.reference_strength, " must be in [0, 1]");
  media::MediaInfo info;
  try {
    info = media::probe_media(path);
  } catch (const Error& e) {
    fail("--reference-video '", path, "': cannot read the video (", e.what(), "); give a video file FFmpeg decodes "
         "(e.g. H.264 + AAC MP4)");
  }
  const auto has = [&](const char* type) {
    return std::any_of(info.streams.begin(), info.streams.end(), [&](const media::StreamInfo& s) { return s.type == type; });
  };
  LTX_CHECK(has("video"), "--reference-video '", path, "': the file has no video stream; give a video file with an "
            "audio track");
  LTX_CHECK(has("audio"), "--reference-video '", path, "': the file has no audio track; DubIt keeps the voice of the "
            "reference clip: give a clip with sound");
  for (const auto& [given, flag] :
       {std::pair{o.num_frames.has_value(), "--num-frames"}, std::pair{o.frame_rate.has_value(), "--frame-rate"},
        std::pair{o.auto_duration.has_value(), "--auto-duration"}})
    LTX_CHECK(!given, flag, ": the dubit pipeline takes the frame count and frame rate of --reference-video");
  LTX_CHECK(o.images.empty(), "--image: the dubit pipeline conditions on --reference-video, not on images");
  LTX_CHECK(!o.num_inference_steps && !o.negative_prompt && !guidance_flag_given(o.video_guidance) &&
                !guidance_flag_given(o.audio_guidance),
            "the dubit pipeline runs the distilled 8 + 3 steps without guidance: --num-inference-steps, "
            "--negative-prompt and the guidance scale flags do not apply to it");
  LTX_CHECK(!o.models.distilled_lora, "--distilled-lora: the dubit pipeline runs a distilled checkpoint and fuses only "
            "the DubIt IC-LoRA (--lora)");
}

void add_dubit_reference(const GenerateOptions& options, const ModelPaths& paths, bool decode,
                         pipelines::GenerationRequest& req) {
  LTX_CHECK(paths.loras.size() == 1, "--pipeline dubit needs exactly one --lora, the DubIt IC-LoRA (got ",
            paths.loras.size(), ")");
  // As the reference's DubIt: the downscale factor alone (its temporal factor is not read).
  const int64_t downscale = pipelines::ic_lora::read_lora_factor(paths.loras.front().path, "reference_downscale_factor", 1);
  req.reference_downscale_factor = downscale;
  const std::string& path = options.reference_video;
  pipelines::DubItReference ref;
  ref.path = path;
  ref.strength = options.reference_strength.value_or(1.0);
  try {
    const media::MediaInfo info = media::probe_media(path);
    const media::StreamInfo* video = &media::first_video_stream(info);
    const bool audio = media::has_audio_stream(info);
    req.frame_rate = video->fps;
    if (video->frames > 0) req.num_frames = snapped(video->frames);
    ref.frame_rate = video->fps;
    if (decode) {
      // The frames the pipeline uses: the container's count snapped to 8k + 1 (all when unknown).
      ref.frames = media::decode_video_frames(path, video->frames > 0 ? snapped(video->frames) : -1);
      LTX_CHECK(ref.frames.dim() == 4 && ref.frames.size(0) > 0, "no video frames could be decoded");
      req.num_frames = snapped(ref.frames.size(0));
      if (audio) {
        const media::AudioTrack track = media::decode_audio(path);
        ref.waveform = track.waveform;
        ref.sample_rate = track.sample_rate;
      }
      log_info("DubIt reference: ", video->frames > 0 ? video->frames : ref.frames.size(0), " frames at ",
               ref.frame_rate, " fps -> ", req.num_frames, " frames; the video reference at ",
               req.height / 2 / downscale, "x", req.width / 2 / downscale, " in stage 1 (reference_downscale_factor ",
               downscale, ")");
    } else {
      ref.frames = Tensor::zeros({1, 1, 1, 3}, DType::U8);  // enough for a batch key
    }
  } catch (const Error& e) {
    fail("--reference-video '", path, "': cannot read the clip: ", e.what());
  }
  req.dubit = std::move(ref);
}

}  // namespace ltx::generate
