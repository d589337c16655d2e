#include "models/video_vae/diffusion_video_decoder.h"

#include <algorithm>

#include "io/safetensors.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/shape.h"
#include "sampling/steps.h"

namespace ltx::models::video_vae {

namespace {

constexpr double kNormOutEps = 1e-6;

// Linear leaf -> the sibling gate folded into it (reference: _GATE_FOLD_TARGETS).
constexpr std::pair<const char*, const char*> kGateFolds[] = {
    {".attn.proj.weight", ".gate_msa"},    {".attn.proj.bias", ".gate_msa"},
    {".mlp.w_down.weight", ".gate_mlp"},   {".mlp.w_down.bias", ".gate_mlp"},
    {".context_proj.weight", ".gate_ctx"}, {".context_proj.bias", ".gate_ctx"},
};

// [B, C, T, H, W] <-> channels-last [B, T, H, W, C].
Tensor to_channels_last(const Tensor& x) { return x.permute({0, 2, 3, 4, 1}); }

// The stage-5 pixels <-> its patch tokens in one copy each way (instead of patchify / unpatchify
// and a channels-first transpose, two copies of the whole canvas): pixels [B, C, T, H p, W p],
// tokens [B, T, H, W, C p p] with the patchify channel order (c r q), r the width digit and q the
// height digit (ops.h: patchify).
Tensor pixels_to_patch_tokens(const Tensor& x, int64_t p) {
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3) / p, w = x.size(4) / p;
  return x.reshape({b, c, t, h, p, w, p})
      .permute({0, 2, 3, 5, 1, 6, 4})
      .contiguous()
      .view({b, t, h, w, c * p * p});
}
Tensor patch_tokens_to_pixels(const Tensor& x, int64_t p) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2), w = x.size(3), c = x.size(4) / (p * p);
  return x.reshape({b, t, h, w, c, p, p})
      .permute({0, 4, 1, 2, 6, 3, 5})
      .contiguous()
      .view({b, c, t, h * p, w * p});
}

// A stage's blocks on x [B, T, H, W, C]; they keep x's grid, so one set of RoPE tables serves
// them all. `first_probe` observes the first block.
Tensor run_det_stage(const std::vector<NABlock>& blocks, Tensor x, const Probe& first_probe) {
  if (blocks.empty()) return x;
  const AbsRope3d rope =
      blocks.front().attn.rope_tables(x.size(1), x.size(2), positions(x.size(3)), x.device());
  for (size_t b = 0; b < blocks.size(); ++b) x = blocks[b](x, b == 0 ? first_probe : Probe{}, &rope);
  return x;
}

}  // namespace

void DiffusionVideoDecoder::fold_legacy_gates(io::WeightMap& w) {
  for (const std::string& name : w.names()) {
    if (name.rfind("coarse_", 0) == 0 || name == "type_emb") w.ignore(name);
    for (const auto& [leaf, gate_suffix] : kGateFolds) {
      if (!name.ends_with(leaf)) continue;
      const std::string gate = name.substr(0, name.size() - std::string(leaf).size()) + gate_suffix;
      if (!w.contains(gate)) continue;
      // W <- g[:, None] * W, b <- g * b in f32 from the stored values, then back to the stored
      // dtype (bf16 in the published files) before the model's dtype.
      const DType stored = w.dtype(name);
      const Tensor value = w.take_any_shape(name, DType::F32);
      const Tensor g = w.take_any_shape(gate, DType::F32);
      LTX_CHECK(g.dim() == 1 && value.dim() >= 1 && value.size(0) == g.size(0),
                "diffusion decoder: gate '", gate, "' ", g.describe(), " does not fit '", name,
                "' ", value.describe());
      const Tensor folded = value.dim() == 2 ? ops::mul(g.unsqueeze(1), value) : ops::mul(g, value);
      w.add(name, folded.to(stored));
    }
  }
  // The gates themselves are never applied at run time.
  for (const std::string& name : w.names())
    for (const char* suffix : {".gate_msa", ".gate_mlp", ".gate_ctx"})
      if (name.ends_with(suffix)) w.ignore(name);
}

DiffusionVideoDecoder DiffusionVideoDecoder::load(io::WeightMap& w, const DiffusionDecoderConfig& c,
                                                  const nn::LoadOptions& opt) {
  DiffusionVideoDecoder d;
  d.config_ = c;
  io::WeightMap sw = w.scoped("per_channel_statistics.");
  d.stats_ = PerChannelStatistics::load(sw, c.in_channels, opt);
  d.conv_in_ = nn::Linear::load(w, "conv_in", c.in_channels, c.stage_channels[0], true, opt);
  for (size_t s = 0; s < 4; ++s) {
    std::vector<NABlock> blocks;
    for (int64_t b = 0; b < c.stage_depths[s]; ++b) {
      io::WeightMap bw = w.scoped(str("det_stages.", s, ".", b, "."));
      blocks.push_back(NABlock::load(bw, c.stage_channels[s], c.stage_kernels[s], c.head_dim, opt));
    }
    d.det_stages_.push_back(std::move(blocks));
    io::WeightMap uw = w.scoped(str("upsamples.", s, "."));
    d.upsamples_.push_back(LinearPixelShuffleUpsample::load(
        uw, c.stage_channels[s], c.upsamples[s].stride, c.upsamples[s].reduction, opt));
  }
  io::WeightMap tw = w.scoped("t_embedder.");
  d.t_embedder_ =
      transformer::PixArtAlphaCombinedTimestepSizeEmbeddings::load(tw, c.t_emb_dim, opt);
  const int64_t c5 = c.diffusion_channels(), noised = c.out_channels * c.patch_size * c.patch_size;
  d.conv_in_x_t_ = nn::Linear::load(w, "conv_in_x_t", noised, c5, true, opt);
  d.shared_adaln_ =
      nn::Linear::load(w, "shared_adaln.proj", c.t_emb_dim, kAdaLnChunks * c5, true, opt);
  for (int64_t j = 0; j < c.stage_depths[4]; ++j) {
    io::WeightMap bw = w.scoped(str("diff_blocks.", j, "."));
    d.diff_blocks_.push_back(
        DiffusionNABlock::load(bw, c5, c.context_channels(), c.stage5_kernel, c.head_dim, opt));
  }
  d.norm_out_ = w.take("norm_out.weight", {c5}, opt.dtype, opt.device);
  d.conv_out_ = nn::Linear::load(w, "conv_out", c5, noised, true, opt);

  d.stage_min_tile_sizes_ = all_stages_min_tile_size(c.stage_kernels, c.upsamples, c.stage5_kernel);
  const Axis3& stride3 = c.upsamples[3].stride;
  d.tile_min_sizes_ = compute_tile_min_size(c.stage_kernels[3], c.stage5_kernel, stride3);
  d.tile_halos_ = compute_tile_halos(c.stage_kernels[3], c.stage_depths[3], c.stage5_kernel,
                                     c.stage_depths[4], stride3);
  return d;
}

DiffusionVideoDecoder DiffusionVideoDecoder::from_file(const std::string& path,
                                                       const nn::LoadOptions& opt) {
  auto file = io::SafetensorsFile::open(path);
  const nlohmann::json meta = file->metadata_json();
  LTX_CHECK(is_diffusion_video_vae(meta), path,
            ": config.vae._class_name is not a diffusion VAE (CausalDiffusionVAE); this file holds "
            "the convolutional video decoder");
  const DiffusionDecoderConfig config = diffusion_decoder_config_from_metadata(meta, path);
  io::WeightMap w({file}, diffusion_decoder_key_map());
  fold_legacy_gates(w);
  DiffusionVideoDecoder d = load(w, config, opt);
  w.finish(str("diffusion video decoder (", path, ")"));
  return d;
}

Shape DiffusionVideoDecoder::output_shape(const Shape& latent) const {
  LTX_CHECK(latent.size() == 5 && latent[1] == config_.in_channels,
            "diffusion decoder: expected a latent [B, ", config_.in_channels, ", F, H, W], got ",
            latent.str());
  return {latent[0], config_.out_channels, 8 * (latent[2] - 1) + 1, 32 * latent[3], 32 * latent[4]};
}

std::vector<float> DiffusionVideoDecoder::inference_timesteps() const {
  const int64_t n = config_.default_num_inference_steps;
  return tiling::linspace_f32(1.f, static_cast<float>(1.0 / static_cast<double>(n)), n);
}

Tensor DiffusionVideoDecoder::forward_stages_1_to_3(const Tensor& latent,
                                                    const Probe& probe) const {
  Tensor x = conv_in_(to_channels_last(stats_.un_normalize(latent.to(conv_in_.weight.dtype()))));
  if (probe) probe("s0.conv_in", x);
  for (size_t s = 0; s < 3; ++s) {
    Probe na;
    if (probe && s == 1)
      na = [&probe](const std::string& n, const Tensor& t) { probe("na." + n, t); };
    x = run_det_stage(det_stages_[s], x, na);
    if (probe) probe(str("s", s + 1, ".blocks_out"), x);
    x = upsamples_[s](x, true);
    if (probe) probe(str("s", s + 1, ".upsample_out"), x);
  }
  return x;
}

Tensor DiffusionVideoDecoder::forward_stage_4(const Tensor& feat, bool drop_leading_frame,
                                              bool pad_trailing, Stage5Attention layout,
                                              Tensor* stage4_out) const {
  Tensor x = feat;
  x = run_det_stage(det_stages_[3], x, {});
  const int64_t ghost_latent = trailing_ghost_frames(), k5t = config_.stage5_kernel[0];
  const int64_t up_t = upsamples_[3].stride[0];
  if (layout == Stage5Attention::WChunked) {
    // Deferred: crop at the stage-4 resolution, then upsample.
    if (pad_trailing) {
      const int64_t keep = trailing_ghost_keep(x.size(1), ghost_latent * (8 / up_t),
                                               std::max<int64_t>(1, (k5t + up_t - 1) / up_t));
      x = x.narrow(1, 0, keep);
    }
    if (stage4_out != nullptr) *stage4_out = x;
    return upsamples_[3](x, drop_leading_frame);
  }
  if (stage4_out != nullptr) *stage4_out = x;
  Tensor ctx = upsamples_[3](x, drop_leading_frame);
  if (pad_trailing) ctx = ctx.narrow(1, 0, trailing_ghost_keep(ctx.size(1), ghost_latent * 8, k5t));
  return ctx;
}

Tensor DiffusionVideoDecoder::modulation(const Tensor& t, Tensor* t_emb, Tensor* scaled) const {
  const Tensor ts = ops::mul(t.to(DType::F32), config_.timestep_scale_multiplier);
  const Tensor emb = t_embedder_(ts);
  if (t_emb != nullptr) *t_emb = emb;
  if (scaled != nullptr) *scaled = ts;
  const Tensor m = shared_adaln_(ops::silu(emb));  // [B, 7 C5]
  return m.reshape({m.size(0), kAdaLnChunks, config_.diffusion_channels()});
}

Tensor DiffusionVideoDecoder::forward_diff_step(Tensor x_t, const Tensor& context,
                                                const Tensor& t,
                                                const DiffusionDecodeOptions& options,
                                                int step,
                                                const std::vector<AbsRope3d>* rope) const {
  const Probe& probe = options.probe;
  const int64_t p = config_.patch_size;
  Tensor x = conv_in_x_t_(pixels_to_patch_tokens(x_t, p));
  x_t = Tensor();  // the caller's last reference (if moved in) goes before the blocks run
  LTX_CHECK(
      x.size(1) == context.size(1) && x.size(2) == context.size(2) && x.size(3) == context.size(3),
      "diffusion decoder: stage-5 canvas ", x.describe(), " does not match its context ",
      context.describe());
  Tensor t_emb, scaled;
  const Tensor mod = modulation(t, &t_emb, &scaled);
  if (probe && step >= 0) {
    probe(str("s5.x_in.step", step), x);
    probe(str("s5.timestep_scaled.step", step), scaled);
    probe(str("s5.t_emb.step", step), t_emb);
    probe(str("s5.modulation.step", step), mod);
  }
  std::vector<AbsRope3d> built;
  if (rope == nullptr && !diff_blocks_.empty()) {
    built = diff_blocks_.front().rope_tables(x.shape(), options.layout, options.w_chunks,
                                             x.device());
    rope = &built;
  }
  for (const DiffusionNABlock& b : diff_blocks_)
    x = b(std::move(x), context, mod, options.layout, options.w_chunks, rope);
  x = conv_out_(ops::rms_norm(x, norm_out_, kNormOutEps));
  return patch_tokens_to_pixels(x, p);
}

Tensor DiffusionVideoDecoder::decode_one_tile(const Tensor& feat_tile, Tensor x_t_init,
                                              bool is_origin, bool pad_trailing,
                                              const DiffusionDecodeOptions& options) const {
  const Probe& probe = options.probe;
  Tensor s4;
  const Tensor context = forward_stage_4(feat_tile, is_origin, pad_trailing, options.layout, &s4);
  if (probe) probe("s4.out", s4);
  const std::vector<float> ts = inference_timesteps();
  const int64_t batch = x_t_init.size(0), n = static_cast<int64_t>(ts.size());
  const Device device = x_t_init.device();
  auto t_at = [&](float v) { return Tensor::full({batch}, v, DType::F32, device); };
  const bool x0 = config_.model_output_type == ModelOutputType::X0;
  // x - (t_now - t_next) v in f32, stored back in x's dtype (the model's, as the reference keeps
  // x_t); an x0 output is turned into v = (x - x0) / t_now first.
  auto euler = [&](const Tensor& x, const Tensor& out, float t_now, float t_next) {
    const Tensor x32 = x.to(DType::F32), out32 = out.to(DType::F32);
    const Tensor v = x0 ? sampling::to_velocity(x32, t_now, out32) : out32;
    return ops::sub(x32, ops::mul(v, static_cast<double>(t_now - t_next))).to(x.dtype());
  };
  // Every step runs the blocks on the context's grid: one set of RoPE tables for the tile.
  std::vector<AbsRope3d> rope;
  if (!diff_blocks_.empty())
    rope = diff_blocks_.front().rope_tables(context.shape(), options.layout, options.w_chunks,
                                            context.device());
  Tensor x_t = std::move(x_t_init);
  for (int64_t i = 0; i + 1 < n; ++i) {
    const Tensor out =
        forward_diff_step(x_t, context, t_at(ts[i]), options, static_cast<int>(i), &rope);
    x_t = euler(x_t, out, ts[i], ts[i + 1]);
  }
  // An x0 model's last step does not need x_t afterwards: hand it over so that the canvas is
  // released before the blocks run (the decode's memory peak).
  if (x0)
    return forward_diff_step(std::move(x_t), context, t_at(ts[n - 1]), options,
                             static_cast<int>(n - 1), &rope);
  const Tensor out =
      forward_diff_step(x_t, context, t_at(ts[n - 1]), options, static_cast<int>(n - 1), &rope);
  return euler(x_t, out, ts[n - 1], 0.f);
}

void DiffusionVideoDecoder::tiled_decode(const Tensor& latent_in,
                                         const std::optional<tiling::TilingConfig>& config,
                                         const NoiseFn& noise, const ChunkFn& on_chunk,
                                         const DiffusionDecodeOptions& options) const {
  using tiling::Range;
  LTX_CHECK(static_cast<bool>(on_chunk), "diffusion decoder: no chunk callback");
  const Shape content = output_shape(latent_in.shape());
  const auto floor_padded =
      ensure_min_latent_shape(latent_in.to(DType::F32), stage_min_tile_sizes_);
  const Tensor& latent = floor_padded.first;
  const std::array<AxisPad, 3>& pads = floor_padded.second;
  const Shape full = output_shape(latent.shape());  // the padded work canvas
  const int64_t batch = latent.size(0);
  const Axis3 s4 = stage4_thw_from_latent(config_.upsamples,
                                          {latent.size(2), latent.size(3), latent.size(4)}, true);
  const Axis3& stride3 = config_.upsamples[3].stride;
  const std::vector<tiling::Tile> tiles =
      prepare_tile_schedule(s4, full, batch, config_.stage_channels[3], config, stride3,
                            config_.patch_size, tile_min_sizes_, tile_halos_);

  const Tensor padded =
      resize_axis(latent, 2, latent.size(2) + trailing_ghost_frames(), ResizeMode::RepeatLast)
          .first;
  const Tensor feat_s4 = forward_stages_1_to_3(padded, options.probe).contiguous();
  if (options.probe) options.probe("feat_s4", feat_s4);

  const bool single_step_x0 =
      config_.default_num_inference_steps == 1 && config_.model_output_type == ModelOutputType::X0;
  // The stage-5 canvas x_t (and its noise) in the model's dtype, as the reference draws and keeps
  // it (its Euler updates run in f32 and round back).
  const DType canvas_dtype = conv_in_x_t_.weight.dtype();
  Tensor x_t_init = options.initial_noise;
  if (x_t_init.defined()) {
    LTX_CHECK(x_t_init.shape() == full, "diffusion decoder: initial noise ", x_t_init.describe(),
              " must cover the work canvas ", full.str());
    x_t_init = x_t_init.to(canvas_dtype);
  } else if (!single_step_x0) {
    LTX_CHECK(static_cast<bool>(noise), "diffusion decoder: no noise source");
    x_t_init = noise(full).to(canvas_dtype);
  }

  // The blend as the reference's _decode_temporal_group_isolated: buffers in f16 when the features
  // are bf16 (else their dtype), each tile cast to it before the f32 masks, the sums rounded to
  // it; the finished frames emitted in the latent's dtype (bf16 in the GPU pipelines).
  const DType feature_dtype = conv_in_x_t_.weight.dtype();
  const DType accum = feature_dtype == DType::BF16 ? DType::F16 : DType::F32;
  // (The CPU computes in f32: a bf16 latent there still gives f32 frames.)
  const DType emit_dtype =
      latent_in.device().is_cuda() && latent_in.dtype() == DType::BF16 ? DType::BF16 : DType::F32;
  DiffusionDecodeOptions tile_options = options;
  bool first_tile = true;
  tiling::blend_tile_groups(
      tiles, full,
      [&](const tiling::Tile& tile, tiling::GroupBuffers& buffers, int64_t) {
        const Range t_in = tile.in[1];
        const bool is_origin = t_in.start == 0, pad_trailing = t_in.stop == s4[0];
        const Axis3 content_s4{t_in.length(), tile.in[2].length(), tile.in[3].length()};
        const Tensor feat_tile =
            feat_s4.narrow(1, t_in.start, (pad_trailing ? feat_s4.size(1) : t_in.stop) - t_in.start)
                .narrow(2, tile.in[2].start, tile.in[2].length())
                .narrow(3, tile.in[3].start, tile.in[3].length());
        const Axis3 canvas =
            stage5_pixel_shape_from_stage4(content_s4, stride3, config_.patch_size,
                                           config_.stage5_kernel[0], is_origin, pad_trailing);
        Tensor init;
        if (x_t_init.defined()) {
          // The tile's slice of the one draw, brought to its canvas.
          init = tiling::slice_ranges(x_t_init, tile.out);
          init = resize_axis(init, 2, canvas[0], ResizeMode::RepeatLast).first;
          init = resize_axis(init, 3, canvas[1], ResizeMode::Symmetric).first;
          init = resize_axis(init, 4, canvas[2], ResizeMode::Symmetric).first;
        } else {
          LTX_CHECK(static_cast<bool>(noise), "diffusion decoder: no noise source");
          init =
              noise({batch, config_.out_channels, canvas[0], canvas[1], canvas[2]}).to(canvas_dtype);
        }
        if (!first_tile) tile_options.probe = {};
        first_tile = false;
        // The tile's noise goes to the decode (which releases it once the stage-5 input is made).
        init = init.contiguous();
        Tensor pixels =
            decode_one_tile(feat_tile, std::move(init), is_origin, pad_trailing, tile_options);
        const Tensor& buffer = buffers.values();  // made after the decode's peak
        const Tensor& weights = buffers.weights();
        // Crop the canvas to the tile's output box (frames from the end, H / W symmetric).
        pixels = resize_axis(pixels, 2, tile.out[2].length(), ResizeMode::RepeatLast).first;
        pixels = resize_axis(pixels, 3, tile.out[3].length(), ResizeMode::Symmetric).first;
        pixels = resize_axis(pixels, 4, tile.out[4].length(), ResizeMode::Symmetric).first;
        const std::vector<Range> where = {
            tile.out[0], tile.out[1], {0, buffer.size(2)}, tile.out[3], tile.out[4]};
        // pixel_tile.to(buffer dtype) * masks (f32): an f16 tile is rounded, then widened exactly.
        if (accum == DType::F16) pixels = pixels.to(DType::F16).to(DType::F32);
        tiling::accumulate_into(tiling::slice_ranges(buffer, where),
                                tiling::scale_by_masks_1d(pixels, tile.masks));
        if (weights.defined())
          tiling::accumulate_into(tiling::slice_ranges(weights, where),
                                  tiling::scale_by_masks_1d(
                                      Tensor::full(pixels.shape(), 1.0, DType::F32, pixels.device()),
                                      tile.masks));
      },
      [&](const Tensor& frames, int64_t first_frame) {
        // Back to the content: drop padded frames and the size floor's rows / columns.
        const int64_t keep = std::min(frames.size(2), content[2] - first_frame);
        if (keep < 1) return;
        on_chunk(frames.narrow(2, 0, keep)
                     .narrow(3, pads[1].before * 32, content[3])
                     .narrow(4, pads[2].before * 32, content[4]));
      },
      latent.device(), accum, tiling::BlendEmit{emit_dtype});
}

Tensor DiffusionVideoDecoder::tiled_decode_all(const Tensor& latent,
                                               const std::optional<tiling::TilingConfig>& config,
                                               const NoiseFn& noise,
                                               const DiffusionDecodeOptions& options,
                                               std::vector<int64_t>* chunk_frames) const {
  std::vector<Tensor> chunks;
  tiled_decode(
      latent, config, noise,
      [&](const Tensor& c) {
        if (chunk_frames != nullptr) chunk_frames->push_back(c.size(2));
        chunks.push_back(c.contiguous());
      },
      options);
  LTX_CHECK(!chunks.empty(), "diffusion decoder: no frames were decoded");
  return chunks.size() == 1 ? chunks.front() : ops::concat(chunks, 2);
}

Tensor DiffusionVideoDecoder::operator()(const Tensor& latent, const NoiseFn& noise,
                                         const DiffusionDecodeOptions& options) const {
  return tiled_decode_all(latent, std::nullopt, noise, options);
}

void DiffusionVideoDecoder::decode_video(const Tensor& latent,
                                         const std::optional<tiling::TilingConfig>& config,
                                         const NoiseFn& noise, const ChunkFn& on_chunk,
                                         const DiffusionDecodeOptions& options) const {
  tiled_decode(
      latent, config, noise,
      [&](const Tensor& frames) {
        // "c f h w -> f h w c" of sample 0, then (x + 1) * 0.5 clamped to [0, 1].
        const Tensor v = frames.select(0, 0).permute({1, 2, 3, 0});
        on_chunk(ops::clamp(ops::mul(ops::add(v, 1.0), 0.5), 0.0, 1.0));
      },
      options);
}

}  // namespace ltx::models::video_vae
