// `ltx parity transformer`: the LTX-2.x transformer on a golden `<case>.io.safetensors` file (the
// variants and their meaning: shared/golden/README.md, "Transformer inputs" and the outputs table).
//
// --weights <case>.weights.safetensors [--weights <bf16 weights>]: the second file (default: the
// first one's name with ".bf16.safetensors", when it exists) is used for the `bf16w` variant.
// `main_f64` (f64 compute) is not computed. With --device cuda the weights are moved to the GPU once
// and every op runs there. With --dtype bf16 (CUDA only) the weights are loaded as bf16 and the
// model computes in bf16 like the reference's bf16 builds: every variant is then a bf16 run compared
// against the f32 reference outputs, and the io file's `bf16` variant (the reference's own bf16
// run) is emitted from `main`. Without it the `bf16` variant is not computed.
#include <cstdio>
#include <filesystem>
#include <functional>

#include "io/safetensors.h"
#include "io/weights.h"
#include "models/transformer/model.h"
#include "parity/parity.h"
#include "quantization/file_format.h"
#include "quantization/fp8_cast.h"

namespace ltx::parity {

namespace {

namespace tf = models::transformer;
using tf::LTXModelType;
using tf::Perturbation;
using tf::PerturbationConfig;
using tf::PerturbationType;

tf::Modality read_modality(const Run& run, const std::string& stream, Device device) {
  const std::string p = "in." + stream + ".";
  tf::Modality m;
  m.latent = run.tensor(p + "latent").to(device);
  m.sigma = run.tensor(p + "sigma").to(device);
  m.timesteps = run.tensor(p + "timesteps").to(device);
  m.positions = run.tensor(p + "positions").to(device);
  m.context = run.tensor(p + "context").to(device);
  // Passed always; only models with use_keyframes_abs_pos_embedding use it (and only for video,
  // as the pipelines do).
  if (stream == "video" && run.has(p + "keyframes_mask"))
    m.keyframes_mask = run.tensor(p + "keyframes_mask").to(device);
  return m;
}

std::string bf16_weights_path(const Args& args) {
  if (args.weights.size() > 1) return args.weights[1];
  const std::string& w = args.weights[0];
  const std::string ext = ".safetensors";
  if (w.size() > ext.size() && w.compare(w.size() - ext.size(), ext.size(), ext) == 0) {
    const std::string sibling = w.substr(0, w.size() - ext.size()) + ".bf16" + ext;
    if (std::filesystem::exists(sibling)) return sibling;
  }
  return "";
}

}  // namespace

void run_transformer(Run& run) {
  const Args& args = run.args();
  const Device device = args.device;
  const DType dtype = args.dtype;
  LTX_CHECK(dtype == DType::F32 || (dtype == DType::BF16 && device.is_cuda()),
            "parity transformer: --dtype bf16 needs --device cuda (the CPU computes in f32 only)");
  const nn::LoadOptions opt{dtype, device, args.quantization};
  // Safetensors or GGUF weights (a GGUF file's quantized Linears computed as stored).
  const std::string& file = args.weights[0];
  const auto config_of = [](const std::string& path, LTXModelType type) {
    return tf::LTXModelConfig::from_metadata(io::checkpoint_metadata_json(path), type, path);
  };
  const auto load = [&](const std::string& path, tf::LTXModelConfig cfg) {
    quantization::check_mode_fits(path, opt.quantization);
    io::WeightMap w = io::WeightMap::open_checkpoints({path}, tf::transformer_key_map(cfg.model_type));
    if (opt.quantization == quantization::Mode::Fp8Cast)
      quantization::fold_prequant_scales(w, path);
    return tf::LTXModel::load(w, cfg, opt);
  };
  const tf::LTXModelConfig av_config = config_of(file, LTXModelType::AudioVideo);
  const tf::LTXModel model = load(file, av_config);

  const tf::Modality video = read_modality(run, "video", device);
  const tf::Modality audio = read_modality(run, "audio", device);
  const int64_t batch = video.latent.size(0), blocks = model.num_blocks();

  // Emits out.<variant>.<stream>_{velocity,denoised} (all four for main; for the other variants
  // those the io file has).
  const auto emit = [&](const std::string& variant, const tf::ModelOutputs& o, bool all) {
    const auto one = [&](const char* stream, const Tensor& vel, const tf::Modality& m) {
      if (!vel.defined()) return;
      const std::string base = "out." + variant + "." + stream;
      if (all || run.has(base + "_velocity")) run.emit(base + "_velocity", vel);
      if (all || run.has(base + "_denoised"))
        run.emit(base + "_denoised", tf::to_denoised(m.latent, vel, m.timesteps));
    };
    one("video", o.video, video);
    one("audio", o.audio, audio);
  };
  // Runs `fn` for a variant the io file asks for; a variant that fails is reported, not fatal.
  const auto variant = [&](const std::string& name, const std::function<tf::ModelOutputs()>& fn) {
    if (run.names_with_prefix("out." + name + ".").empty()) return;
    try {
      emit(name, fn(), false);
    } catch (const Error& e) {
      std::fprintf(stderr, "transformer: variant '%s' not computed: %s\n", name.c_str(), e.what());
    }
  };
  const auto batched = [&](std::vector<PerturbationConfig> per_sample) {
    per_sample.resize(static_cast<size_t>(batch));
    return tf::BatchedPerturbationConfig(per_sample, blocks);
  };
  const auto everywhere = [&](const PerturbationConfig& c) {
    return tf::BatchedPerturbationConfig::uniform(c, batch, blocks);
  };
  const std::vector<int64_t> block0{0}, block1{1};
  const Perturbation skip_v_b0{PerturbationType::SkipVideoSelfAttn, block0};
  const Perturbation skip_v_b1{PerturbationType::SkipVideoSelfAttn, block1};
  const Perturbation skip_a_b1{PerturbationType::SkipAudioSelfAttn, block1};
  const Perturbation skip_v_all{PerturbationType::SkipVideoSelfAttn, std::nullopt};
  const Perturbation skip_a2v_b0{PerturbationType::SkipA2VCrossAttn, block0};
  const Perturbation skip_a2v_all{PerturbationType::SkipA2VCrossAttn, std::nullopt};
  const Perturbation skip_v2a_all{PerturbationType::SkipV2ACrossAttn, std::nullopt};

  // main, with the intermediates for bisecting.
  const tf::Observer observer = [&](const std::string& name, const Tensor& t) {
    run.emit("inter." + name, t);
  };
  const tf::ModelOutputs main = model.forward(&video, &audio, nullptr, observer);
  emit("main", main, true);
  if (dtype == DType::BF16 && !run.names_with_prefix("out.bf16.").empty()) emit("bf16", main, false);

  variant("ctxmask", [&] {
    tf::Modality v = video, a = audio;
    v.context_mask = a.context_mask = run.tensor("in.context_mask", DType::I64).to(device);
    return model.forward(&v, &a, nullptr);
  });
  variant("selfmask", [&] {
    tf::Modality v = video;
    v.attention_mask = run.tensor("in.video.attention_mask").to(device);
    return model.forward(&v, &audio, nullptr);
  });
  variant("video_alone", [&] { return model.forward(&video, nullptr, nullptr); });
  variant("audio_alone", [&] { return model.forward(nullptr, &audio, nullptr); });
  variant("stg_v_b1", [&] {
    const auto p = everywhere({{skip_v_b1}});
    return model.forward(&video, &audio, &p);
  });
  variant("stg_va_b1_mixed", [&] {
    const auto p = batched({{}, {{skip_v_b1, skip_a_b1}}});
    return model.forward(&video, &audio, &p);
  });
  variant("stg_v0_a1", [&] {
    const auto p = batched({{{skip_v_b0}}, {{skip_a_b1}}});
    return model.forward(&video, &audio, &p);
  });
  variant("stg_v_allblocks", [&] {
    const auto p = everywhere({{skip_v_all}});
    return model.forward(&video, &audio, &p);
  });
  variant("mod_isolated", [&] {
    const auto p = everywhere({{skip_a2v_all, skip_v2a_all}});
    return model.forward(&video, &audio, &p);
  });
  variant("mod_mixed", [&] {
    const auto p = batched({{{skip_a2v_b0}}, {{skip_v2a_all}}});
    return model.forward(&video, &audio, &p);
  });
  variant("videoonly_model", [&] {
    const auto m = load(file, config_of(file, LTXModelType::VideoOnly));
    return m.forward(&video, nullptr, nullptr);
  });
  variant("audioonly_model", [&] {
    const auto m = load(file, config_of(file, LTXModelType::AudioOnly));
    return m.forward(nullptr, &audio, nullptr);
  });
  variant("avca1", [&] {
    tf::LTXModelConfig c = av_config;
    c.av_ca_timestep_scale_multiplier = 1;  // the code default when the key is absent
    return load(file, c).forward(&video, &audio, nullptr);
  });
  variant("bf16w", [&] {
    const std::string path = bf16_weights_path(args);
    LTX_CHECK(!path.empty(), "needs the bf16 weights: pass them as a second --weights");
    return load(path, config_of(path, LTXModelType::AudioVideo)).forward(&video, &audio, nullptr);
  });
  if (!run.names_with_prefix("out.main_f64.").empty())
    std::fprintf(stderr, "transformer: variant 'main_f64' not computed: the transformer computes in "
                         "f32 or bf16 only\n");
  if (dtype == DType::F32 && !run.names_with_prefix("out.bf16.").empty())
    std::fprintf(stderr, "transformer: variant 'bf16' not computed: it needs --dtype bf16 "
                         "(--device cuda)\n");
}

}  // namespace ltx::parity
