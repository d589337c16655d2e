#pragma once
// Building blocks of the HDR IC-LoRA pipeline (reference: ltx_pipelines/hdr_ic_lora.py
// HDRICLoraPipeline, ltx_pipelines/utils/media_io/decode.py load_video_conditioning_hdr): a
// two-stage video-to-video IC-LoRA run whose LoRA was trained to produce a log-encoded (LogC3)
// working space, decoded to scene-linear HDR. This header holds its LoRA metadata reader, the
// resolution rule, the reference-video preparation, the stage-2 tiling and the generation up to
// the decode, built on the shared stages (pipelines/stages.h) and tiling (models/tiling.h).
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "media/hdr.h"
#include "models/tiling.h"
#include "pipelines/pipeline.h"

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

// ---- stage 2: refinement in overlapping latent tiles (HDRICLoraPipeline._run_stage2_phase) ----
// The default phase: 2 tiles on every latent axis, overlaps 8 frames / 6 rows / 6 columns (clamped
// to the latent, see clamp_tile_count), the stage-2 distilled sigmas up to their second value then
// 0, the IC-LoRA reference on. Each tile is a stage-2 run of its own (its own noise generator,
// seeded seed + tile index); the denoised tiles are blended back with trapezoidal masks.
models::tiling::TileCountConfig default_stage2_tiling();

// _clamp_dim_tiling: a tile count that cannot fit an axis of `size` latent cells falls back to one
// tile; an overlap the axis cannot hold (split_by_count needs overlap <= size - tiles) is clamped.
models::tiling::DimensionTilingConfig clamp_tile_count(
    const models::tiling::DimensionTilingConfig& c, int64_t size);

// The tiles of a latent [F, H, W] (VideoModalityTilingHelper: the clamped config's split_by_count
// on every axis, the frames non-causal, identity mapping with trapezoidal masks), frames varying
// slowest, width fastest. Each tile's `in` ranges (F, H, W) are its latent region.
std::vector<models::tiling::Tile> stage2_tiles(int64_t frames, int64_t height, int64_t width,
                                               const models::tiling::TileCountConfig& config);

// A tile's size in pixels for its stage-2 run: (frames - 1) * 8 + 1 frames, 32 x rows, 32 x
// columns.
struct TilePixelSize {
  int64_t frames = 0, height = 0, width = 0;
};
TilePixelSize tile_pixel_size(const models::tiling::Tile& tile);

// The part of an encoded reference [B, C, F, h, w] a tile conditions on: the tile's frames and its
// rows / columns divided by the downscale factor (start // d to stop // d, as the reference
// slices).
Tensor tile_reference_latent(const Tensor& reference, const models::tiling::Tile& tile,
                             int64_t downscale);

// Adds a denoised tile [B, C, f, h, w] into the phase's output [B, C, F, H, W] (f32, CPU) at the
// tile's region, each cell weighted by the tile's blend mask (mask_F * mask_H) * mask_W, as the
// reference's blend into the token sequence. `precision`: the pipeline dtype the reference blends
// in (bf16: the weight, the product and the sum each rounded to bf16; f32: none).
void blend_tile(const Tensor& output, const Tensor& tile_latent, const models::tiling::Tile& tile,
                DType precision = DType::F32);

// ---- the generation ----
struct HdrIcLoraOptions {
  HdrLoraConfig lora;         // read_hdr_lora_config of the fused LoRA
  bool high_quality = false;  // --high-quality
};
struct HdrIcLoraLatent {
  Tensor video_latent;  // the final latent at the generation size [1, C, F, H, W], request dtype
  HdrResolution size;
  int64_t generated_frames = 0;
};
// HDRICLoraPipeline.__call__ up to the decode, video only. The request gives the seed, the
// output size (request.height x request.width: the conditioning clip's, aligned up by
// align_resolution), num_frames (output frames), the frame rate, the dtype, the reference videos
// (request.video_conditionings: u8 frames and strengths) and optionally recorded noise; the HDR
// LoRA must be fused into both stages' transformers (Components::stage_transformer).
//   stage 1  half the generation size, distilled sigmas (request.stage_1_sigmas overrides), Euler,
//            the reference videos (reference_video at the stage size) as
//            VideoConditionByReferenceLatent(latent, downscale, 1, strength); seeded generator
//   stage 2  x2 upsample; the default tiles (stage2_tiles); per tile a stage-2 run at the tile's
//            size from the upscaled latent's cut-out renoised to the first of the sigmas
//            {stage-2 distilled [0], [1], 0} (request.stage_2_sigmas overrides), its own generator
//            seeded seed + tile index (recorded noise: the same source, tile after tile), the
//            references at the generation size cut to the tile (tile_reference_latent); the
//            denoised tiles blended (blend_tile).
// The request checks of pipelines::validate_request for PipelineKind::HdrIcLora: the size is
// the clip's (any positive size: align_resolution pads it), frames 8k + 1, a positive frame rate,
// at least one reference video with a strength in [0, 1]; the transformer, the video encoder and
// the spatial upsampler; the positive video context (when `contexts` is given); none of the other
// pipelines' inputs (images, a retake or DubIt clip, an attention mask, generated keyframes).
void validate_request(const GenerationRequest& request, const Components& components,
                      const TextContexts* contexts = nullptr);

HdrIcLoraLatent run_hdr_ic_lora(const GenerationRequest& request, const Components& components,
                                const TextContexts& contexts, const HdrIcLoraOptions& options,
                                const ProgressCallback& progress = {});

// The HDR frames from the VAE decode of the final latent (decoded in f32, [F, H, W, 3] in [0, 1]
// at the generation size): cropped to the request size, every other frame in high-quality mode,
// decompressed by the LoRA's transfer to scene-linear Rec.709 (_decode_video).
Tensor linear_frames(const Tensor& decoded, const HdrResolution& size, bool high_quality,
                     media::HdrTransfer transfer);

}  // namespace ltx::pipelines::hdr_ic_lora
