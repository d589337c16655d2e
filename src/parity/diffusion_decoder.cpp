// `ltx parity diffusion-decoder`: the diffdec_<case> io files (shared/golden/README-ltx25.md).
// --weights: the decoder file [+ the gated variant for out.gated.pixels; default:
// <stem>_gated.weights.safetensors next to the first file]. Noise is replayed from in.noise (the
// reference's single draw of the work canvas; tiles take their slice) or, when the io file has no
// in.noise, drawn like the reference from torch.Generator().manual_seed(notes.noise.seed) (the
// CPU generator is bit-exact). --device cuda runs every stage there; --dtype bf16 (CUDA only)
// loads the weights in bf16 and computes in it, as generate does with the published files.
// Computes, when the io file has them:
//   out.pixels           untiled decode, pipelines' default layout (W-chunked stage 5), + inter.*
//                        (always computed)
//   out.tiled.pixels     tiled decode with notes.tiled.tiling_config {axis: [size, overlap]}
//                        (whenever the notes have one)
//   out.combined.pixels  full-volume stage-5 attention (COMBINED_* layout)
//   out.gated.pixels     the gated file (legacy gates folded at load)
//   out.na_unit.k<j>     ops::neighborhood_attention_3d on in.na_unit.{q,k,v} with
//                        notes.na_unit.kernels[j], scale 1
//   out_f64.pixels_frame0  frame 0 of the f32 decode (the CPU has no f64 path)
//   inter.rope.*, inter.gated.folded.*
#include <filesystem>

#include "io/safetensors.h"
#include "models/video_vae/diffusion_video_decoder.h"
#include "ops/neighborhood_attention.h"
#include "ops/shape.h"
#include "parity/parity.h"
#include "sampling/noise.h"

namespace ltx::parity {

namespace {

using namespace models::video_vae;
namespace tiling = models::tiling;
using nlohmann::json;

void emit_if(Run& run, const std::string& name, const Tensor& t) {
  if (!run.has(name)) return;
  const Shape want = run.io().info(name).shape;
  run.emit(name, t.numel() == want.numel() ? t.reshape(want) : t);
}

json notes(const Run& run) {
  const json n = run.io().metadata_json("notes");
  return n.is_object() ? n : json::object();
}

tiling::TilingConfig tiling_from_notes(const Run& run) {
  const json n = notes(run);
  LTX_CHECK(n.contains("tiled") && n["tiled"].contains("tiling_config"),
            "parity diffusion-decoder: the io file has out.tiled.pixels but no "
            "notes.tiled.tiling_config");
  const json& c = n["tiled"]["tiling_config"];
  auto axis = [&](const char* key) {
    if (!c.contains(key)) return tiling::DimensionSizeConfig();
    return tiling::DimensionSizeConfig(c[key].at(0).get<int64_t>(), c[key].at(1).get<int64_t>());
  };
  tiling::TileSizeConfig t;
  t.frames = axis("frames");
  t.height = axis("height");
  t.width = axis("width");
  return t;
}

std::string gated_weights(const Run& run) {
  const auto& w = run.args().weights;
  if (w.size() >= 2) return w[1];
  std::string first = w.at(0);
  const std::string suffix = ".weights.safetensors";
  if (first.size() > suffix.size() &&
      first.compare(first.size() - suffix.size(), suffix.size(), suffix) == 0)
    return first.substr(0, first.size() - suffix.size()) + "_gated" + suffix;
  return {};
}

// cos / sin [L, d / 2] of pos * inv (the reference's tables, one entry per pair).
std::pair<Tensor, Tensor> half_tables(const std::vector<float>& pos, const Tensor& inv) {
  const AxisRope r = axis_rope(pos, inv);
  const int64_t n = r.cos.size(0), half = r.cos.size(1) / 2;
  return {r.cos.view({n, half, 2}).select(2, 0).contiguous(),
          r.sin.view({n, half, 2}).select(2, 0).contiguous()};
}

void emit_rope(Run& run, const DiffusionVideoDecoder& dec, const Shape& canvas,
               const DiffusionDecodeOptions& options) {
  const auto& c = dec.config();
  const RopeDimSplit split = default_rope_dim_split(c.head_dim);
  emit_if(run, "inter.rope.split",
          Tensor::from_vector(std::vector<int64_t>(split.begin(), split.end()), {3}));
  const char* axes[3] = {"t", "h", "w"};
  std::array<Tensor, 3> inv;
  for (int a = 0; a < 3; ++a) {
    inv[a] = rope_inv_freqs(split[a]);
    emit_if(run, str("inter.rope.inv_", axes[a]), inv[a]);
  }
  // Stage-5 positions of the untiled canvas: T and H local, W over every slab.
  const int64_t f5 = canvas[2], h5 = canvas[3] / c.patch_size, w5 = canvas[4] / c.patch_size;
  const int64_t halo = c.stage5_kernel[2] / 2,
                chunk_w = (w5 + options.w_chunks - 1) / options.w_chunks;
  const std::vector<float> pos[3] = {positions(f5), positions(h5), positions(w5 + 2 * halo, -halo)};
  for (int a = 0; a < 3; ++a) {
    emit_if(run, str("inter.rope.s5.", axes[a], "_pos"),
            Tensor::from_vector(pos[a], {static_cast<int64_t>(pos[a].size())}));
    const auto [cs, sn] = half_tables(pos[a], inv[a]);
    emit_if(run, str("inter.rope.s5.", axes[a], "_cos"), cs);
    emit_if(run, str("inter.rope.s5.", axes[a], "_sin"), sn);
  }
  for (int64_t i = 0; i < options.w_chunks; ++i) {
    const std::vector<float> slab = positions(chunk_w + 2 * halo, i * chunk_w - halo);
    emit_if(run, str("inter.rope.s5.w_pos.slab", i),
            Tensor::from_vector(slab, {static_cast<int64_t>(slab.size())}));
  }
}

// Stacks the per-step probe values "<base>.step<i>" into the reference's layouts.
void emit_steps(Run& run, const std::map<std::string, Tensor>& probed, int64_t steps) {
  std::vector<Tensor> scaled, t_emb, mod;
  for (int64_t i = 0; i < steps; ++i) {
    const std::string s = str(".step", i);
    if (!probed.count("s5.t_emb" + s)) return;
    scaled.push_back(probed.at("s5.timestep_scaled" + s));
    t_emb.push_back(probed.at("s5.t_emb" + s));
    mod.push_back(probed.at("s5.modulation" + s).permute({1, 0, 2}));  // [7, B, C]
  }
  emit_if(run, "inter.s5.timestep_scaled", ops::concat(scaled, 0));
  emit_if(run, "inter.s5.t_emb", ops::stack(t_emb, 0));
  emit_if(run, "inter.s5.modulation", ops::stack(mod, 0));
  if (probed.count("s5.x_in.step0"))
    emit_if(run, "inter.s5.x_in_f0_2", probed.at("s5.x_in.step0").narrow(1, 0, 2));
}

}  // namespace

void run_diffusion_decoder(Run& run) {
  const std::string weights = run.args().weights.at(0);
  const Device device = run.args().device;
  const DType dtype = run.args().dtype;
  LTX_CHECK(dtype == DType::F32 || (dtype == DType::BF16 && device.is_cuda()),
            "parity diffusion-decoder: --dtype bf16 needs --device cuda (the CPU computes in f32 "
            "only)");
  const nn::LoadOptions load{dtype, device};
  const DiffusionVideoDecoder dec = DiffusionVideoDecoder::from_file(weights, load);
  const Tensor latent = run.tensor("in.latent").to(device);
  DiffusionDecodeOptions options;
  const Shape work = dec.output_shape(
      ensure_min_latent_shape(latent, dec.stage_min_tile_sizes()).first.shape());
  Tensor recorded;
  if (run.has("in.noise")) {
    recorded = run.tensor("in.noise");
  } else {
    const json n = notes(run);
    LTX_CHECK(n.contains("noise") && n["noise"].contains("seed"),
              "parity diffusion-decoder: the io file has neither in.noise nor notes.noise.seed");
    sampling::TorchCpuGenerator gen(n["noise"]["seed"].get<int64_t>());
    recorded = gen.randn(work);
  }
  // A draw of the whole work canvas is replayed tile by tile; any other recorded draw is handed
  // out when the decode asks for exactly its shape (a single-tile 1-step decode).
  recorded = recorded.to(device);
  if (recorded.shape() == work) options.initial_noise = recorded;
  const NoiseFn no_noise = [recorded](const Shape& s) -> Tensor {
    LTX_CHECK(recorded.shape() == s, "parity diffusion-decoder: the decode asked for noise of ",
              "shape ", s.str(), " but the io file's in.noise is ", recorded.shape().str());
    return recorded;
  };

  {
    std::map<std::string, Tensor> probed;
    DiffusionDecodeOptions o = options;
    o.probe = [&](const std::string& name, const Tensor& t) {
      probed[name] = t.contiguous();
      emit_if(run, "inter." + name, t);
    };
    const Tensor pixels = dec(latent, no_noise, o);
    run.emit("out.pixels", pixels);
    emit_steps(run, probed, dec.config().default_num_inference_steps);
    if (run.has("out_f64.pixels_frame0"))
      run.emit("out_f64.pixels_frame0",
               pixels.narrow(2, 0, 1).to(Device::cpu()).to(DType::F64));
    const Shape canvas = recorded.shape();
    emit_rope(run, dec, canvas, o);
  }
  const json n = notes(run);
  if (run.has("out.tiled.pixels") || (n.contains("tiled") && n["tiled"].contains("tiling_config")))
    run.emit("out.tiled.pixels",
             dec.tiled_decode_all(latent, tiling_from_notes(run), no_noise, options));
  if (run.has("out.combined.pixels")) {
    DiffusionDecodeOptions o = options;
    o.layout = Stage5Attention::FullVolume;
    o.w_chunks = 1;
    run.emit("out.combined.pixels", dec(latent, no_noise, o));
  }
  if (run.has("out.gated.pixels")) {
    const std::string gated = gated_weights(run);
    LTX_CHECK(!gated.empty() && std::filesystem::exists(gated),
              "parity diffusion-decoder: out.gated.pixels needs the gated weights file (second "
              "--weights; looked for '",
              gated, "')");
    run.emit("out.gated.pixels",
             DiffusionVideoDecoder::from_file(gated, load)(latent, no_noise, options));
    // The folded block-0 tensors as loaded.
    const std::string prefix = "inter.gated.folded.";
    if (!run.names_with_prefix(prefix).empty()) {
      io::WeightMap w({io::SafetensorsFile::open(gated)}, diffusion_decoder_key_map());
      DiffusionVideoDecoder::fold_legacy_gates(w);
      for (const auto& name : run.names_with_prefix(prefix))
        run.emit(name, w.take_any_shape(name.substr(prefix.size()), DType::F32));
    }
  }
  // The stand-alone neighborhood-attention unit case.
  if (run.has("in.na_unit.q") && n.contains("na_unit") && n["na_unit"].contains("kernels")) {
    const Tensor q = run.tensor("in.na_unit.q").to(device, dtype),
                 k = run.tensor("in.na_unit.k").to(device, dtype),
                 v = run.tensor("in.na_unit.v").to(device, dtype);
    const json& kernels = n["na_unit"]["kernels"];
    for (size_t j = 0; j < kernels.size(); ++j) {
      const std::array<int64_t, 3> kernel{
          kernels[j][0].get<int64_t>(), kernels[j][1].get<int64_t>(), kernels[j][2].get<int64_t>()};
      emit_if(run, str("out.na_unit.k", j), ops::neighborhood_attention_3d(q, k, v, kernel, 1.0));
    }
  }
}

}  // namespace ltx::parity
