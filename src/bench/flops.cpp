#include "bench/flops.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/diffusion_tiling.h"
#include "models/video_vae/transformer/layers.h"

namespace ltx::bench {

namespace tf = models::transformer;
namespace vae = models::video_vae;

int64_t FlopCount::gemm() const {
  int64_t s = 0;
  for (const FlopTerm& t : terms) s += t.gemm;
  return s;
}

int64_t FlopCount::attention() const {
  int64_t s = 0;
  for (const FlopTerm& t : terms) s += t.attention;
  return s;
}

void FlopCount::add(const std::string& name, int64_t gemm, int64_t attention) {
  for (FlopTerm& t : terms) {
    if (t.name == name) {
      t.gemm += gemm;
      t.attention += attention;
      return;
    }
  }
  terms.push_back({name, gemm, attention});
}

void FlopCount::add(const FlopCount& other, int64_t times) {
  for (const FlopTerm& t : other.terms) add(t.name, t.gemm * times, t.attention * times);
}

double floor_ms(const FlopCount& flops, const Ceilings& c) {
  LTX_CHECK(c.gemm_tflops > 0 && c.attention_tflops > 0,
            "FLOP floor: the ceilings must be positive, got GEMM ", c.gemm_tflops,
            " and attention ", c.attention_tflops, " TFLOP/s");
  return static_cast<double>(flops.gemm()) / (c.gemm_tflops * 1e9) +
         static_cast<double>(flops.attention()) / (c.attention_tflops * 1e9);
}

// ------------------------------------------------------------------------------- transformer

namespace {

// One attention module: projections of `tq` query rows (query_dim -> inner) and `tk` context rows
// (context_dim -> inner), the output projection back to query_dim, the optional per-head gate
// logits, and the attention product itself.
struct AttentionShape {
  int64_t tq, tk, query_dim, context_dim, heads, head_dim;
  bool gated;
};

FlopTerm attention_module(const std::string& name, int64_t batch, const AttentionShape& a) {
  const int64_t inner = a.heads * a.head_dim;
  const int64_t rq = batch * a.tq, rk = batch * a.tk;
  FlopTerm t{name, 0, 0};
  t.gemm = linear_flops(rq, a.query_dim, inner)         // to_q
           + 2 * linear_flops(rk, a.context_dim, inner)  // to_k, to_v
           + linear_flops(rq, inner, a.query_dim);       // to_out
  if (a.gated) t.gemm += linear_flops(rq, a.query_dim, a.heads);  // to_gate_logits
  t.attention = attention_flops(batch, a.heads, a.tq, a.tk, a.head_dim);
  return t;
}

// AdaLayerNormSingle on `rows` timesteps: sinusoidal 256 -> dim -> dim, then dim -> coef * dim.
int64_t adaln_flops(int64_t rows, int64_t dim, int64_t coefficient) {
  return linear_flops(rows, 256, dim) + linear_flops(rows, dim, dim) +
         linear_flops(rows, dim, coefficient * dim);
}

struct Stream {
  const char* name;
  int64_t tokens, text, dim, heads, head_dim, in_channels, out_channels, context_dim;
};

}  // namespace

FlopCount transformer_flops(const tf::LTXModelConfig& c, const TransformerTokens& t) {
  LTX_CHECK(t.batch >= 1 && t.video >= 0 && t.audio >= 0 && t.video_text >= 0 &&
                t.audio_text >= 0,
            "transformer FLOPs: token counts must be >= 0 and the batch >= 1, got batch ", t.batch,
            ", video ", t.video, ", audio ", t.audio, ", text ", t.video_text, " / ", t.audio_text);
  const bool video = tf::is_video_enabled(c.model_type) && t.video > 0;
  const bool audio = tf::is_audio_enabled(c.model_type) && t.audio > 0;
  LTX_CHECK(video || audio, "transformer FLOPs: no stream has tokens (model ",
            tf::model_type_name(c.model_type), ", video ", t.video, ", audio ", t.audio, ")");
  const int64_t b = t.batch, layers = c.num_layers;
  const bool gated = c.apply_gated_attention;
  const int64_t coefficient = c.cross_attention_adaln ? 9 : 6;
  const bool prompt_adaln = c.cross_attention_adaln && c.use_prompt_adaln_single;

  std::vector<Stream> streams;
  if (video)
    streams.push_back({"video", t.video, t.video_text, c.inner_dim(), c.num_attention_heads,
                       c.attention_head_dim, c.in_channels, c.out_channels, c.cross_attention_dim});
  if (audio)
    streams.push_back({"audio", t.audio, t.audio_text, c.audio_inner_dim(),
                       c.audio_num_attention_heads, c.audio_attention_head_dim,
                       c.audio_in_channels, c.audio_out_channels, c.audio_cross_attention_dim});

  FlopCount f;
  // Preprocessing (once per call).
  for (const Stream& s : streams) {
    const std::string n = s.name;
    const int64_t rows = b * s.tokens;
    f.add(n + ".patchify", linear_flops(rows, s.in_channels, s.dim));
    f.add(n + ".adaln", adaln_flops(rows, s.dim, coefficient));  // per-token timesteps
    if (prompt_adaln) f.add(n + ".prompt_adaln", adaln_flops(b, s.dim, 2));  // on sigma
    if (c.caption_projection)  // 19B: caption_channels -> dim -> dim on the text tokens
      f.add(n + ".caption_projection", linear_flops(b * s.text, c.caption_channels, s.dim) +
                                           linear_flops(b * s.text, s.dim, s.dim));
    if (video && audio)  // A/V scale-shift per token, gate from the other stream's sigma
      f.add(n + ".av_adaln", adaln_flops(rows, s.dim, 4) + adaln_flops(b, s.dim, 1));
  }
  // The blocks.
  FlopCount block;
  for (const Stream& s : streams) {
    const std::string n = s.name;
    const FlopTerm self = attention_module(
        n + ".self_attn", b, {s.tokens, s.tokens, s.dim, s.dim, s.heads, s.head_dim, gated});
    const FlopTerm text = attention_module(
        n + ".text_attn", b, {s.tokens, s.text, s.dim, s.context_dim, s.heads, s.head_dim, gated});
    block.add(self.name, self.gemm, self.attention);
    block.add(text.name, text.gemm, text.attention);
    block.add(n + ".ff", linear_flops(b * s.tokens, s.dim, 4 * s.dim) +
                             linear_flops(b * s.tokens, 4 * s.dim, s.dim));
  }
  if (video && audio) {
    // Both directions at the audio width and head layout.
    const Stream& v = streams[0];
    const Stream& a = streams[1];
    const FlopTerm a2v = attention_module(
        "a2v_attn", b, {v.tokens, a.tokens, v.dim, a.dim, a.heads, a.head_dim, gated});
    const FlopTerm v2a = attention_module(
        "v2a_attn", b, {a.tokens, v.tokens, a.dim, v.dim, a.heads, a.head_dim, gated});
    block.add(a2v.name, a2v.gemm, a2v.attention);
    block.add(v2a.name, v2a.gemm, v2a.attention);
  }
  f.add(block, layers);
  for (const Stream& s : streams)
    f.add(std::string(s.name) + ".proj_out", linear_flops(b * s.tokens, s.dim, s.out_channels));
  return f;
}

// ------------------------------------------------------------------------------- video VAE

namespace {

// A cubic stride-1 convolution that keeps the grid (the VAE's padded CausalConv3d).
int64_t conv_flops(int64_t voxels, int64_t in, int64_t out, int64_t kernel) {
  return 2 * voxels * in * out * kernel * kernel * kernel;
}

}  // namespace

FlopCount conv_decoder_flops(const vae::DecoderConfig& config, const Shape& latent) {
  LTX_CHECK(latent.size() == 5 && latent[1] == config.latent_channels,
            "VAE decoder FLOPs: expected a latent [B, ", config.latent_channels,
            ", F, H, W], got ", latent.str());
  for (int64_t d : latent) LTX_CHECK(d >= 1, "VAE decoder FLOPs: empty latent ", latent.str());
  const int64_t batch = latent[0];
  int64_t frames = latent[2], height = latent[3], width = latent[4];
  const auto voxels = [&] { return batch * frames * height * width; };

  FlopCount f;
  int64_t ch = config.bottleneck_channels();
  f.add("conv_in", conv_flops(voxels(), config.latent_channels, ch, 3));
  const size_t n = config.blocks.size();
  for (size_t i = 0; i < n; ++i) {
    // up_blocks.i is the config's blocks in reverse order (as ConvVideoDecoder::load).
    const vae::BlockSpec& blk = config.blocks[n - 1 - i];
    const std::string name = str("up_blocks.", i);
    if (blk.name == "res_x") {
      LTX_CHECK(blk.num_layers.has_value(), "VAE decoder FLOPs: ", name, " (res_x) has no num_layers");
      f.add(name, *blk.num_layers * 2 * conv_flops(voxels(), ch, ch, 3));
    } else if (blk.name == "res_x_y") {
      const int64_t out = ch / blk.multiplier_or(2);
      f.add(name, conv_flops(voxels(), ch, out, 3) + conv_flops(voxels(), out, out, 3) +
                      conv_flops(voxels(), ch, out, 1));  // + the 1x1x1 shortcut
      ch = out;
    } else if (blk.name == "compress_time" || blk.name == "compress_space" ||
               blk.name == "compress_all") {
      const bool time = blk.name != "compress_space", space = blk.name != "compress_time";
      const int64_t factor = (time ? 2 : 1) * (space ? 4 : 1);
      const int64_t reduction = blk.multiplier_or(1);
      // conv to factor * ch / reduction channels, then depth-to-space (first frame dropped in time)
      f.add(name, conv_flops(voxels(), ch, factor * ch / reduction, 3));
      ch /= reduction;
      if (time) frames = 2 * frames - 1;
      if (space) {
        height *= 2;
        width *= 2;
      }
    } else if (blk.name == "attn") {
      // 1x1 q/k/v and output projections; single-head attention over each frame's positions.
      const int64_t positions = height * width;
      f.add(name, 2 * voxels() * ch * 3 * ch + 2 * voxels() * ch * ch,
            attention_flops(batch * frames, 1, positions, positions, ch));
    } else {
      fail("VAE decoder FLOPs: unknown block '", blk.name, "' (", name, ")");
    }
  }
  f.add("conv_out", conv_flops(voxels(), ch, config.out_channels * config.patch_size * config.patch_size, 3));
  return f;
}

FlopCount tiled_decoder_flops(const vae::DecoderConfig& config, const Shape& latent,
                              const std::optional<models::tiling::TilingConfig>& tiling) {
  LTX_CHECK(latent.size() == 5, "VAE decoder FLOPs: expected a latent [B, C, F, H, W], got ",
            latent.str());
  const models::tiling::ScaleFactors s = config.scale_factors();
  const Shape out = {latent[0], config.out_channels, (latent[2] - 1) * s.time + 1,
                     latent[3] * s.height, latent[4] * s.width};
  FlopCount f;
  for (const models::tiling::Tile& t : vae::prepare_tiles_for_decoding(latent, out, s, tiling)) {
    Shape tile = latent;
    for (int d = 0; d < 5; ++d) tile[d] = t.in[static_cast<size_t>(d)].length();
    f.add(conv_decoder_flops(config, tile));
  }
  return f;
}

// ------------------------------------------------------------------------------- diffusion decoder

int64_t na_window(const vae::Axis3& kernel, const vae::Axis3& volume) {
  int64_t w = 1;
  for (int a = 0; a < 3; ++a) w *= std::min(kernel[a], volume[a]);
  return w;
}

namespace {

int64_t volume_of(const vae::Axis3& v) { return v[0] * v[1] * v[2]; }

// `depth` NA blocks of width `ch` on `batch` volumes `v`: attention (qkv + proj GEMMs, the
// windowed product) into `attn`, the SwiGLU into `mlp`.
void na_blocks(FlopCount& f, const std::string& attn, const std::string& mlp, int64_t batch,
               const vae::Axis3& v, int64_t ch, const vae::Axis3& kernel, int64_t depth) {
  const int64_t rows = batch * volume_of(v), hidden = vae::SwiGLU::hidden_dim(ch);
  f.add(attn, depth * (linear_flops(rows, ch, 3 * ch) + linear_flops(rows, ch, ch)),
        depth * 4 * rows * na_window(kernel, v) * ch);
  f.add(mlp, depth * (2 * linear_flops(rows, ch, hidden) + linear_flops(rows, hidden, ch)));
}

// One upsample hop (the linear on the input rows) and the volume it produces.
vae::Axis3 upsample(FlopCount& f, const std::string& name, int64_t batch, const vae::Axis3& v,
                    int64_t ch, const vae::Upsample& u, bool drop_leading_frame) {
  const int64_t cells = u.stride[0] * u.stride[1] * u.stride[2];
  f.add(name, linear_flops(batch * volume_of(v), ch, cells * ch / u.reduction));
  vae::Axis3 out{v[0] * u.stride[0], v[1] * u.stride[1], v[2] * u.stride[2]};
  if (u.stride[0] == 2 && drop_leading_frame) out[0] -= 1;
  return out;
}

}  // namespace

FlopCount diffusion_decoder_flops(const vae::DiffusionDecoderConfig& c, const Shape& latent,
                                  const std::optional<models::tiling::TilingConfig>& tiling,
                                  vae::Stage5Attention layout, int64_t w_chunks, int64_t* tiles_out) {
  LTX_CHECK(latent.size() == 5 && latent[1] == c.in_channels,
            "diffusion decoder FLOPs: expected a latent [B, ", c.in_channels, ", F, H, W], got ",
            latent.str());
  for (int64_t d : latent) LTX_CHECK(d >= 1, "diffusion decoder FLOPs: empty latent ", latent.str());
  LTX_CHECK(layout == vae::Stage5Attention::FullVolume || w_chunks >= 1,
            "diffusion decoder FLOPs: w_chunks must be >= 1, got ", w_chunks);
  const vae::DiffusionTilingGeometry g = vae::diffusion_tiling_geometry(c);
  const int64_t b = latent[0];
  // The size floor, then the ghost frames (tiled_decode).
  const vae::Axis3 floor = vae::all_stages_min_tile_size(c.stage_kernels, c.upsamples, c.stage5_kernel);
  const vae::Axis3 padded{std::max(latent[2], floor[0]), std::max(latent[3], floor[1]),
                          std::max(latent[4], floor[2])};
  const int64_t ghost = g.trailing_pad_latent_frames;

  FlopCount f;
  vae::Axis3 v{padded[0] + ghost, padded[1], padded[2]};
  f.add("conv_in", linear_flops(b * volume_of(v), c.in_channels, c.stage_channels[0]));
  for (size_t s = 0; s < 3; ++s) {
    const std::string stage = str("stage", s + 1);
    na_blocks(f, stage + ".attn", stage + ".mlp", b, v, c.stage_channels[s], c.stage_kernels[s],
              c.stage_depths[s]);
    v = upsample(f, str("upsamples.", s), b, v, c.stage_channels[s], c.upsamples[s], true);
  }
  const int64_t feat_frames = v[0];  // content + ghost frames on the stage-4 grid

  const vae::Axis3 s4 = vae::stage4_thw_from_latent(c.upsamples, padded, true);
  const Shape pixels = {b, c.out_channels, 8 * (padded[0] - 1) + 1, 32 * padded[1], 32 * padded[2]};
  const vae::Axis3& stride3 = c.upsamples[3].stride;
  const std::vector<models::tiling::Tile> tiles = vae::prepare_tile_schedule(
      s4, pixels, b, c.stage_channels[3], tiling, stride3, c.patch_size, g.min_tile_size_s4, g.tile_halos);
  if (tiles_out != nullptr) *tiles_out = static_cast<int64_t>(tiles.size());
  const int64_t c3 = c.stage_channels[3], c5 = c.diffusion_channels(), ctx = c.context_channels();
  const int64_t k5t = c.stage5_kernel[0], up_t = stride3[0];
  const int64_t noised = c.out_channels * c.patch_size * c.patch_size;
  const int64_t steps = c.default_num_inference_steps, depth5 = c.stage_depths[4];
  for (const models::tiling::Tile& tile : tiles) {
    const models::tiling::Range t_in = tile.in[1];
    const bool is_origin = t_in.start == 0, pad_trailing = t_in.stop == s4[0];
    // Stage 4 on the tile's slice (trailing tiles keep the ghost frames).
    const vae::Axis3 feat{(pad_trailing ? feat_frames : t_in.stop) - t_in.start, tile.in[2].length(),
                          tile.in[3].length()};
    na_blocks(f, "stage4.attn", "stage4.mlp", b, feat, c3, c.stage_kernels[3], c.stage_depths[3]);
    vae::Axis3 up_in = feat;
    // W-chunked: the ghost frames are cropped before upsamples[3] (at the stage-4 resolution).
    if (layout == vae::Stage5Attention::WChunked && pad_trailing)
      up_in[0] = vae::trailing_ghost_keep(feat[0], ghost * (8 / up_t),
                                          std::max<int64_t>(1, (k5t + up_t - 1) / up_t));
    vae::Axis3 context = upsample(f, "upsamples.3", b, up_in, c3, c.upsamples[3], is_origin);
    if (layout == vae::Stage5Attention::FullVolume && pad_trailing)
      context[0] = vae::trailing_ghost_keep(context[0], ghost * 8, k5t);
    // Stage 5 on the tile's canvas, patchified: one token per context cell.
    const vae::Axis3 canvas = vae::stage5_pixel_shape_from_stage4(
        {t_in.length(), tile.in[2].length(), tile.in[3].length()}, stride3, c.patch_size, k5t,
        is_origin, pad_trailing);
    const vae::Axis3 grid{canvas[0], canvas[1] / c.patch_size, canvas[2] / c.patch_size};
    LTX_CHECK(grid == context, "diffusion decoder FLOPs: stage-5 canvas ", grid[0], "x", grid[1],
              "x", grid[2], " does not match its context ", context[0], "x", context[1], "x",
              context[2]);
    const int64_t rows = b * volume_of(grid);
    FlopCount step;
    step.add("stage5.conv_in_x_t", linear_flops(rows, noised, c5));
    step.add("stage5.context_proj", depth5 * linear_flops(rows, ctx, c5));
    if (layout == vae::Stage5Attention::WChunked) {
      const int64_t width = grid[2], chunk = (width + w_chunks - 1) / w_chunks;
      const int64_t halo = c.stage5_kernel[2] / 2, extent = chunk + 2 * halo;
      const vae::Axis3 slab{grid[0], grid[1], extent};
      const int64_t window = na_window(c.stage5_kernel, slab), plane = b * grid[0] * grid[1];
      const auto attention = [&](int64_t r) {
        return std::pair<int64_t, int64_t>{depth5 * (linear_flops(r, c5, 3 * c5) + linear_flops(r, c5, c5)),
                                           depth5 * 4 * r * window * c5};
      };
      for (int64_t i = 0; i < w_chunks && i * chunk < width; ++i) {
        const int64_t core = std::min(width, (i + 1) * chunk) - i * chunk;
        const auto [core_gemm, core_attn] = attention(plane * core);
        const auto [halo_gemm, halo_attn] = attention(plane * (extent - core));
        step.add("stage5.attn", core_gemm, core_attn);
        step.add("stage5.attn_halo", halo_gemm, halo_attn);
      }
    } else {
      step.add("stage5.attn",
               depth5 * (linear_flops(rows, c5, 3 * c5) + linear_flops(rows, c5, c5)),
               depth5 * 4 * rows * na_window(c.stage5_kernel, grid) * c5);
    }
    const int64_t hidden = vae::SwiGLU::hidden_dim(c5);
    step.add("stage5.mlp",
             depth5 * (2 * linear_flops(rows, c5, hidden) + linear_flops(rows, hidden, c5)));
    step.add("stage5.conv_out", linear_flops(rows, c5, noised));
    f.add(step, steps);
  }
  return f;
}

}  // namespace ltx::bench
