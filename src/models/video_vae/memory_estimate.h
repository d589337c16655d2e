#pragma once
// Host-memory estimate of decoding with ConvVideoDecoder on the CPU backend (f32), from the config
// and the latent shape alone (no weights needed): what docs/VIDEO_VAE.md quotes for the real 2.3
// VAE and what tests/models/video_vae_memory_test.cpp checks against the measured peak
// (ltx::host_allocation_stats) at reduced size.
//
// It models this implementation's allocation order (each op writes a new tensor; block inputs are
// moved in and dropped once consumed; convolutions materialise their padded input), so it counts
// tensor bytes only, not the conv's bounded im2col scratch, OpenBLAS buffers or the mmap'd file.
#include <cstdint>
#include <optional>

#include "core/shape.h"
#include "models/tiling.h"
#include "models/video_vae/model_configurator.h"

namespace ltx::models::video_vae {

struct DecodeMemoryEstimate {
  int64_t weight_bytes = 0;    // f32 decoder parameters
  int64_t latent_bytes = 0;    // the input latent (f32)
  int64_t buffer_bytes = 0;    // blend buffers alive at once (tiled) / the output (untiled)
  int64_t tile_peak_bytes = 0; // the largest tile: activations of its forward pass and blending
  int64_t tiles = 0;
  Shape largest_tile;          // latent shape of the tile with the largest peak
  int64_t total_bytes() const { return weight_bytes + latent_bytes + buffer_bytes + tile_peak_bytes; }
};

// Parameters of the decoder `config` builds (the count behind weight_bytes).
int64_t decoder_parameter_count(const DecoderConfig& config);
// Peak bytes of tensors allocated by one forward pass on `latent` ([B, C, F, H, W]), beyond the
// input itself.
int64_t estimate_forward_peak_bytes(const DecoderConfig& config, const Shape& latent);
// Whole decode: untiled (config nullopt: the forward pass plus the output) or tiled_decode with
// `tiling` (chunks handed out and dropped by the caller).
DecodeMemoryEstimate estimate_decode_memory(const DecoderConfig& config, const Shape& latent,
                                            const std::optional<tiling::TilingConfig>& tiling);

// The conv decoder's automatic tiling for `free_bytes` of device memory (a GPU under
// --max-gpu-memory: what the allocator may still hand out once the decoder is loaded): the
// pipelines' layout (tiling::auto_tiling_config: 768 px, 80 frames) when the estimate above, less
// the weights, fits; else the largest of smaller layouts (long side 640 down to 256 px, then 48
// frames) that fits; else the smallest. The estimate counts f32 activations while a GPU decodes
// in bf16: about a factor two of margin for the convolutions' workspaces and the allocator's
// rounding.
tiling::TileSizeConfig budgeted_decode_tiling(const DecoderConfig& config, const Shape& latent,
                                              int64_t free_bytes);

}  // namespace ltx::models::video_vae
