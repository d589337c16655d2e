#include "models/video_vae/conv_video_decoder.h"

#include <type_traits>
#include <variant>

#include "io/safetensors.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace ltx::models::video_vae {

ConvVideoDecoder ConvVideoDecoder::load(io::WeightMap& w, const DecoderConfig& config,
                                        const nn::LoadOptions& opt) {
  ConvVideoDecoder d;
  d.config_ = config;
  const PaddingMode pad = config.spatial_padding_mode;
  const bool tc = config.timestep_conditioning;
  io::WeightMap sw = w.scoped("per_channel_statistics.");
  d.stats_ = PerChannelStatistics::load(sw, config.latent_channels, opt);
  w.ignore("per_channel_statistics.channel");
  w.ignore("per_channel_statistics.mean-of-stds");

  int64_t ch = config.bottleneck_channels();
  d.conv_in_ = CausalConv3d::load(w, "conv_in", config.latent_channels, ch, 3, {1, 1, 1}, pad, opt);
  // The decoder runs the configured blocks in reverse order: up_blocks.0 = the last entry.
  const size_t n = config.blocks.size();
  for (size_t i = 0; i < n; ++i) {
    const BlockSpec& b = config.blocks[n - 1 - i];
    io::WeightMap bw = w.scoped(str("up_blocks.", i, "."));
    const std::string& name = b.name;
    if (name == "res_x") {
      d.up_blocks_.emplace_back(
          UNetMidBlock3D::load(bw, ch, *b.num_layers, config.norm_layer, tc, pad, opt));
    } else if (name == "res_x_y") {
      const int64_t mult = b.multiplier_or(2);
      LTX_CHECK(ch % mult == 0, "video VAE decoder: up_blocks.", i, " (res_x_y) divides ", ch,
                " channels by ", mult);
      d.up_blocks_.emplace_back(
          ResnetBlock3D::load(bw, ch, ch / mult, config.norm_layer, 1e-6, 32, false, pad, opt));
      ch /= mult;
    } else if (name == "compress_time" || name == "compress_space" || name == "compress_all") {
      const std::array<int64_t, 3> stride = name == "compress_time"    ? std::array<int64_t, 3>{2, 1, 1}
                                            : name == "compress_space" ? std::array<int64_t, 3>{1, 2, 2}
                                                                       : std::array<int64_t, 3>{2, 2, 2};
      const int64_t mult = b.multiplier_or(1);
      LTX_CHECK(ch % mult == 0, "video VAE decoder: up_blocks.", i, " (", name, ") divides ", ch,
                " channels by ", mult);
      // Only compress_all reads `residual` (as the reference).
      const bool residual = name == "compress_all" && b.residual;
      d.up_blocks_.emplace_back(
          DepthToSpaceUpsample::load(bw, ch, stride, residual, mult, pad, opt));
      ch /= mult;
    } else if (name == "attn") {
      d.up_blocks_.emplace_back(AttnBlock3D::load(bw, ch, opt));
    } else {
      fail("video VAE decoder: unknown block '", name, "'");
    }
  }
  d.conv_norm_out_ = Norm::load(w, "conv_norm_out", config.norm_layer, ch, 32, 1e-6, opt);
  const int64_t out = config.out_channels * config.patch_size * config.patch_size;
  d.conv_out_ = CausalConv3d::load(w, "conv_out", ch, out, 3, {1, 1, 1}, pad, opt);
  if (tc) {
    d.timestep_scale_multiplier_ = w.take("timestep_scale_multiplier", Shape{}, opt.dtype, opt.device);
    io::WeightMap te = w.scoped("last_time_embedder.");
    d.last_time_embedder_ =
        transformer::PixArtAlphaCombinedTimestepSizeEmbeddings::load(te, 2 * ch, opt);
    d.last_scale_shift_table_ = w.take("last_scale_shift_table", {2, ch}, opt.dtype, opt.device);
  }
  return d;
}

ConvVideoDecoder ConvVideoDecoder::from_file(const std::string& path, const nn::LoadOptions& opt) {
  auto file = io::SafetensorsFile::open(path);
  const DecoderConfig config = decoder_config_from_metadata(file->metadata_json(), path);
  io::WeightMap w({file}, decoder_key_map());
  ConvVideoDecoder d = load(w, config, opt);
  w.finish("video VAE decoder");
  return d;
}

Shape ConvVideoDecoder::output_shape(const Shape& latent) const {
  LTX_CHECK(latent.size() == 5, "video VAE decoder: expected a latent [B, C, F, H, W], got ",
            latent.str());
  const tiling::ScaleFactors s = video_downscale_factors();
  return {latent[0], config_.out_channels, (latent[2] - 1) * s.time + 1, latent[3] * s.height,
          latent[4] * s.width};
}

Tensor ConvVideoDecoder::operator()(const Tensor& latent, const std::optional<Tensor>& timestep,
                                    const NoiseFn& noise, const Probe& probe) const {
  LTX_CHECK(latent.dim() == 5 && latent.size(1) == config_.latent_channels,
            "video VAE decoder: expected a latent [B, ", config_.latent_channels,
            ", F, H, W], got ", latent.describe());
  const int64_t batch = latent.size(0);
  const bool tc = config_.timestep_conditioning;
  const bool causal = config_.causal;
  // The activations run in the weights' dtype from the start, as the reference's decoder (the
  // noise blend and the un-normalisation round per op in bf16 for a bf16 decoder).
  const DType dtype = conv_in_.weight.dtype();
  Tensor x = latent.to(dtype);
  if (tc) {
    LTX_CHECK(static_cast<bool>(noise),
              "video VAE decoder: this decoder is timestep-conditioned and draws noise; pass a "
              "noise source (the pipeline's generator)");
    Tensor n = noise(x.shape());
    LTX_CHECK(n.shape() == x.shape(), "video VAE decoder: the noise source returned ",
              n.describe(), " for a latent ", x.describe());
    x = ops::add(ops::mul(n.to(dtype), kDecodeNoiseScale), ops::mul(x, 1.0 - kDecodeNoiseScale));
  }
  x = stats_.un_normalize(x).to(dtype);
  // On CUDA the activations run channels-last ([B, F, H, W, C] memory, logically still
  // [B, C, F, H, W]) like PyTorch's channels_last_3d: cuDNN's tensor-core convs read and write
  // that layout, and every op on the way keeps it (elementwise ops, PixelNorm, depth-to-space).
  // The CPU convs (and the f32 CUDA ones, parity runs) are im2col over NCDHW: those stay contiguous.
  if (x.device().is_cuda() && x.dtype() == DType::BF16 && cuda_channels_last_)
    x = x.to_channels_last();
  Tensor scaled_timestep;
  if (tc) {
    Tensor t = timestep ? timestep->to(DType::F32).contiguous()
                        : Tensor::full({batch}, kDecodeTimestep, DType::F32, x.device());
    LTX_CHECK(t.numel() == batch, "video VAE decoder: timestep ", t.describe(),
              " must hold one value per sample (batch ", batch, ")");
    scaled_timestep = ops::mul(t.reshape({batch}), timestep_scale_multiplier_);
  }
  x = conv_in_(std::move(x), causal);
  if (probe) probe("conv_in", x);
  // The last ResNet block before an unmodulated PixelNorm conv_norm_out forms its activation in
  // the skip connection's pass (UNetMidBlock3D::forward).
  Tensor out_h;
  for (size_t i = 0; i < up_blocks_.size(); ++i) {
    const Norm* next = !tc && i + 1 == up_blocks_.size() ? &conv_norm_out_ : nullptr;
    x = std::visit(
        [&](const auto& b) -> Tensor {
          using B = std::decay_t<decltype(b)>;
          if constexpr (std::is_same_v<B, UNetMidBlock3D>) {
            ResnetStep step = b.forward(std::move(x), causal, scaled_timestep, next);
            out_h = std::move(step.h);
            return std::move(step.x);
          } else if constexpr (std::is_same_v<B, AttnBlock3D>) {
            return b(x);
          } else {
            return b(std::move(x), causal);
          }
        },
        up_blocks_[i]);
    if (probe) probe(str("up_blocks.", i), x);
  }
  if (out_h.defined()) {
    x = std::move(out_h);  // conv_norm_out_.then_silu(x), formed by the last block
  } else if (tc) {
    x = conv_norm_out_(x);
    const int64_t c = last_scale_shift_table_.size(1);
    Tensor emb = (*last_time_embedder_)(scaled_timestep.flatten());  // [B, 2C]
    Tensor ada = ops::add(last_scale_shift_table_.view({1, 2, c, 1, 1, 1}),
                          emb.reshape({batch, 2, c, 1, 1, 1}));
    x = ops::modulate(x, ada.select(1, 1), ada.select(1, 0));
    x = ops::silu(x);
  } else {
    x = conv_norm_out_.then_silu(std::move(x));  // one pass for PixelNorm
  }
  x = conv_out_(std::move(x), causal);
  return unpatchify(x, config_.patch_size, 1).contiguous();  // callers get NCDHW
}

std::vector<tiling::Tile> prepare_tiles_for_decoding(
    const Shape& latent, const Shape& out, const tiling::ScaleFactors& s,
    const std::optional<tiling::TilingConfig>& config) {
  using namespace tiling;
  std::vector<SplitOperation> splitters(5, split_default());
  std::vector<MappingOperation> mappers(5, default_mapping());
  if (!config) return create_tiles(latent, splitters, mappers, out);
  const Splitters sp = to_splitters(*config, s);
  splitters[2] = sp[0];
  splitters[3] = sp[1];
  splitters[4] = sp[2];
  if (height_tiled(*config)) mappers[3] = spatial_slice_mapping(s.height);
  if (width_tiled(*config)) mappers[4] = spatial_slice_mapping(s.width);
  // The reference leaves an untiled frames axis "open" ([0, None)) and then fails on it; we
  // resolve it to the whole output axis, which decodes the same tiles.
  if (frames_tiled(*config)) mappers[2] = temporal_slice_mapping(s.time);
  return create_tiles(latent, splitters, mappers, out);
}

void ConvVideoDecoder::tiled_decode(const Tensor& latent,
                                    const std::optional<tiling::TilingConfig>& config,
                                    const std::optional<Tensor>& timestep, const NoiseFn& noise,
                                    const ChunkFn& on_chunk) const {
  using namespace tiling;
  LTX_CHECK(latent.dim() == 5, "video VAE tiled decode: expected a latent [B, C, F, H, W], got ",
            latent.describe());
  LTX_CHECK(static_cast<bool>(on_chunk), "video VAE tiled decode: no chunk callback");
  const Shape full = output_shape(latent.shape());
  const std::vector<Tile> tiles =
      prepare_tiles_for_decoding(latent.shape(), full, video_downscale_factors(), config);
  // The reference accumulates in the latent's dtype (bf16 on the GPU: half the f32 buffers); the
  // CPU backend computes and accumulates in f32 whatever the latent's storage.
  const bool half_latent = latent.dtype() == DType::BF16 || latent.dtype() == DType::F16;
  const DType accum_dtype = latent.device().is_cuda() && half_latent ? latent.dtype() : DType::F32;
  blend_tile_groups(
      tiles, full,
      [&](const Tile& t, GroupBuffers& buffers, int64_t group_start) {
        Tensor decoded = (*this)(slice_ranges(latent, t.in), timestep, noise);
        const Tensor& buffer = buffers.values();
        const Tensor& weights = buffers.weights();
        const int64_t offset = t.out[2].start - group_start;
        const int64_t len = std::min({t.out[2].length(), decoded.size(2), buffer.size(2) - offset});
        std::vector<Range> where = {{0, full[0]}, {0, full[1]}, {offset, offset + len}, t.out[3],
                                    t.out[4]};
        std::vector<std::vector<float>> masks = t.masks;
        if (masks[2].size() > 1) masks[2].resize(static_cast<size_t>(len));
        Tensor part = decoded.narrow(2, 0, len);
        ops::add_(slice_ranges(buffer, where), scale_by_masks_1d(part, masks));
        if (weights.defined())
          ops::add_(slice_ranges(weights, where),
                    scale_by_masks_1d(Tensor::full(part.shape(), 1.0, DType::F32, part.device()),
                                      masks));
      },
      [&](const Tensor& frames, int64_t) { on_chunk(frames); }, latent.device(), accum_dtype);
}

Tensor ConvVideoDecoder::tiled_decode_all(const Tensor& latent,
                                          const std::optional<tiling::TilingConfig>& config,
                                          const std::optional<Tensor>& timestep,
                                          const NoiseFn& noise,
                                          std::vector<int64_t>* chunk_frames) const {
  std::vector<Tensor> chunks;
  tiled_decode(latent, config, timestep, noise, [&](const Tensor& c) {
    if (chunk_frames != nullptr) chunk_frames->push_back(c.size(2));
    if (c.size(2) > 0) chunks.push_back(c.contiguous());
  });
  LTX_CHECK(!chunks.empty(), "video VAE tiled decode: no frames were decoded");
  return chunks.size() == 1 ? chunks.front() : ops::concat(chunks, 2);
}

void ConvVideoDecoder::decode_video(const Tensor& latent,
                                    const std::optional<tiling::TilingConfig>& config,
                                    const NoiseFn& noise, const ChunkFn& on_chunk) const {
  auto to_rgb = [&](const Tensor& frames) {
    if (frames.size(2) == 0) {
      on_chunk(Tensor::empty({0, frames.size(3), frames.size(4), frames.size(1)}));
      return;
    }
    // "c f h w -> f h w c" of sample 0, then (x + 1) * 0.5 clamped to [0, 1].
    Tensor v = frames.select(0, 0).permute({1, 2, 3, 0});
    on_chunk(ops::clamp(ops::mul(ops::add(v, 1.0), 0.5), 0.0, 1.0));
  };
  if (config)
    tiled_decode(latent, config, std::nullopt, noise, to_rgb);
  else
    to_rgb((*this)(latent, std::nullopt, noise));
}

}  // namespace ltx::models::video_vae
