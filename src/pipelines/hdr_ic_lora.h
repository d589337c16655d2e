#pragma once
// Building blocks of the HDR IC-LoRA pipeline (reference: ltx_pipelines/hdr_ic_lora.py
// HDRICLoraPipeline, ltx_pipelines/utils/media_io/decode.py load_video_conditioning_hdr): a
// two-stage video-to-video IC-LoRA run whose LoRA was trained to produce a log-encoded (LogC3)
// working space, decoded to scene-linear HDR. This header holds its LoRA metadata reader, the
// resolution rule and the reference-video preparation; the generation itself reuses the IC-LoRA
// machinery (pipelines/ic_lora.h).
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "media/hdr.h"

namespace ltx::pipelines::hdr_ic_lora {

// The HDR LoRA's safetensors metadata (read_hdr_lora_config): the working-space transfer
// ("hdr_transform": a transfer name, or "true" for the default LogC3; or a non-empty
// "use_hdr_transform", LogC3) and "reference_downscale_factor" (default 1).
struct HdrLoraConfig {
  media::HdrTransfer transfer = media::HdrTransfer::LogC3;
  int64_t reference_downscale_factor = 1;
};
// Unlike the reference, which falls back to LogC3 silently, a LoRA without HDR metadata is an
// error naming `flag` and the file: it is not an HDR IC-LoRA (decoding an SDR LoRA's output as
// LogC3 gives wrong colours without a word). Also throws for an unknown transfer or a bad factor.
HdrLoraConfig read_hdr_lora_config(const std::string& lora_path,
                                   const std::string& flag = "--hdr-lora");

// The generation size for a requested (conditioning video) size: both dims rounded up to a
// multiple of 64 (align_resolution with reflect-pad, so never below the reference's minimum of 64);
// the decoded frames are cropped back to the request.
struct HdrResolution {
  int64_t gen_height = 0, gen_width = 0;    // generated (multiples of 64)
  int64_t crop_height = 0, crop_width = 0;  // written
};
HdrResolution align_resolution(int64_t height, int64_t width);

// Generated frames for `num_frames` output frames: 2 * num_frames - 1 in high-quality mode
// (every other one is kept), else num_frames.
int64_t generated_frames(int64_t num_frames, bool high_quality);

// The reference video for one stage (_create_conditionings + load_video_conditioning_hdr):
// `frames` u8 [F, H, W, 3]; the first `num_frames` frames (high quality: the first
// (num_frames + 1) / 2, each then repeated twice and the result cut to num_frames), each fitted to
// (height / downscale) x (width / downscale) by media::resize_and_reflect_pad, / 255, clamped to
// [0, 1] (SDR display range: the LDR compression is the identity), mapped to [-1, 1];
// [1, 3, F', h, w] in `dtype`. `num_frames` counts generated frames. Throws when height or
// width is not divisible by the downscale factor, or when there are no frames.
Tensor reference_video(const Tensor& frames, int64_t height, int64_t width, int64_t num_frames,
                       int64_t downscale, bool high_quality, DType dtype = DType::F32);

}  // namespace ltx::pipelines::hdr_ic_lora
