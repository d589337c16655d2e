#pragma once
// `--pipeline dubit`'s inputs (reference: ltx_pipelines/utils/args.py dubit_arg_parser and
// _verify_media_path_args, dubit.py main): --reference-video, a video file with an audio track whose
// frame count (snapped down to 8k + 1), frame rate, motion and voice the dub keeps, and
// --reference-strength, the video reference's conditioning strength (default 1). The run takes
// exactly one --lora, the DubIt IC-LoRA (its reference_downscale_factor metadata sizes the video
// reference) and fuses it for both stages.
#include "generate/generate.h"
#include "generate/model_paths.h"
#include "pipelines/pipeline.h"

namespace ltx::generate {

// The flags alone, before any model loads (validate_options calls it for every pipeline): the
// DubIt flags only with --pipeline dubit; there, a readable video file (not a folder, not EXR) with
// a video and an audio stream, a strength in [0, 1], and none of the flags the reference's DubIt
// parser leaves out (--num-frames, --frame-rate, --image, --auto-duration; the guidance flags,
// --negative-prompt and --num-inference-steps of the guided pipelines; --distilled-lora). Each
// error is one line naming the flag.
void validate_dubit_options(const GenerateOptions& options, pipelines::PipelineKind kind);

// For --pipeline dubit: the IC-LoRA's reference scale factors from `paths.loras` (exactly one),
// the frame count and rate of --reference-video (the request's num_frames / frame_rate) and, when
// `decode`, its frames and audio track (GenerationRequest::dubit). Unreadable media fail naming
// --reference-video.
void add_dubit_reference(const GenerateOptions& options, const ModelPaths& paths, bool decode,
                         pipelines::GenerationRequest& request);

}  // namespace ltx::generate
