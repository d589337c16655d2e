// `ltx parity pipeline`: an end-to-end recording of tools/parity/gen_e2e.py
// (e2e_<name>.io.safetensors) run through our pipeline. The request comes from the io file's
// `request` metadata (pipeline, seed, size, frames, fps, steps, guider params, LoRA strengths,
// images / source clip / DubIt reference clip as recorded in.* tensors, DFR rounds); the text contexts from the io file's
// out.text.* or, when it says they are bit-identical to the shared ones, from
// e2e_text.io.safetensors next to it. Computes out.video.latent, out.audio.latent and, from them
// through the checkpoint's decoders, out.video.frames and out.audio.waveform (+ out.audio.mel),
// in float32 as the recordings were made (DEVELOPERS.md "End-to-end parity").
//
// --weights: the files of the recording in any order, told apart by their content: the
// checkpoint (model.diffusion_model.* tensors), spatial / temporal latent upsamplers (their
// config), a LoRA (lora_A / lora_B pairs) used in the role the request names (distilled LoRA,
// DFR's detailing LoRA, or DubIt's IC-LoRA in both stages).
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/vocoder.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_decoder.h"
#include "models/video_vae/video_vae.h"
#include "ops/shape.h"
#include "parity/parity.h"
#include "pipelines/dfr.h"
#include "pipelines/pipeline.h"

namespace ltx::parity {

namespace {

namespace mt = models::transformer;
using nlohmann::json;

struct PipelineFiles {
  std::string checkpoint, spatial_upsampler, temporal_upsampler, lora;
};

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Tells the --weights files apart by what they hold.
PipelineFiles classify_weights(const std::vector<std::string>& paths) {
  PipelineFiles f;
  auto assign = [](std::string& slot, const std::string& path, const char* what) {
    LTX_CHECK(slot.empty(), "parity pipeline: --weights ", path, " and ", slot, " are both ", what,
              "; give one of each kind");
    slot = path;
  };
  for (const std::string& path : paths) {
    const io::SafetensorsFile file(path);
    bool transformer = false, lora = false;
    for (const std::string& n : file.names()) {
      transformer = transformer || n.starts_with("model.diffusion_model.");
      lora = lora || has_suffix(n, ".lora_A.weight");
    }
    if (transformer) {
      assign(f.checkpoint, path, "LTX checkpoints");
    } else if (lora) {
      assign(f.lora, path, "LoRAs");
    } else if (file.has_metadata("config")) {
      const json cfg = file.metadata_json("config");
      const bool temporal = cfg.is_object() && cfg.value("temporal_upsample", false) && !cfg.value("spatial_upsample", true);
      if (temporal)
        assign(f.temporal_upsampler, path, "temporal upsamplers");
      else
        assign(f.spatial_upsampler, path, "spatial upsamplers");
    } else {
      fail("parity pipeline: --weights ", path, " is neither an LTX checkpoint, a latent upsampler nor a LoRA");
    }
  }
  LTX_CHECK(!f.checkpoint.empty(), "parity pipeline: no LTX checkpoint among --weights (the recording's ",
            "e2e/ltx23_tiny.safetensors)");
  return f;
}

sampling::GuiderParams guider_from(const json& g) {
  sampling::GuiderParams p;
  p.cfg_scale = g.value("cfg_scale", p.cfg_scale);
  p.stg_scale = g.value("stg_scale", p.stg_scale);
  p.rescale_scale = g.value("rescale_scale", p.rescale_scale);
  p.modality_scale = g.value("modality_scale", p.modality_scale);
  p.skip_step = g.value("skip_step", p.skip_step);
  if (g.contains("stg_blocks")) p.stg_blocks = g.at("stg_blocks").get<std::vector<int>>();
  return p;
}

// The recorded text contexts: the io file's own, else the shared file it names.
pipelines::TextContexts recorded_contexts(const Run& run) {
  std::shared_ptr<const io::SafetensorsFile> src;
  if (run.has("out.text.positive.video_encoding")) {
    src = io::SafetensorsFile::open(run.args().inputs);
  } else {
    const std::filesystem::path shared =
        std::filesystem::path(run.args().inputs).parent_path() / "e2e_text.io.safetensors";
    LTX_CHECK(std::filesystem::exists(shared), "parity pipeline: ", run.args().inputs,
              " has no out.text.* contexts and ", shared.string(), " (the shared contexts it refers to) is missing");
    src = io::SafetensorsFile::open(shared.string());
  }
  pipelines::TextContexts ctx;
  auto get = [&](const std::string& name) {
    return src->contains(name) ? src->tensor(name).to(DType::F32).contiguous() : Tensor();
  };
  ctx.video_positive = get("out.text.positive.video_encoding");
  ctx.audio_positive = get("out.text.positive.audio_encoding");
  ctx.video_negative = get("out.text.negative.video_encoding");
  ctx.audio_negative = get("out.text.negative.audio_encoding");
  return ctx;
}

}  // namespace

void run_pipeline_parity(Run& run) {
  const io::SafetensorsFile& io = run.io();
  LTX_CHECK(io.has_metadata("request"), "parity pipeline: ", run.args().inputs,
            " has no `request` metadata (not an e2e_<name>.io.safetensors recording of tools/parity/gen_e2e.py)");
  const json req = io.metadata_json("request");
  const std::string name = req.value("pipeline", "");
  const pipelines::PipelineKind kind = pipelines::parse_pipeline_kind(name);
  const PipelineFiles files = classify_weights(run.args().weights);
  const Device dev = run.args().device;
  const nn::LoadOptions opt{DType::F32, dev};
  const std::string version = io.has_metadata("model_version") ? io.metadata().at("model_version") : "";

  // The request as the recording made it: float32 latents, its size and schedule.
  pipelines::GenerationRequest r = pipelines::default_request(kind, version);
  r.dtype = DType::F32;
  r.seed = req.value("seed", r.seed);
  r.height = req.value("height", r.height);
  r.width = req.value("width", r.width);
  r.num_frames = req.value("num_frames", r.num_frames);
  r.frame_rate = req.value("frame_rate", r.frame_rate);
  r.num_inference_steps = req.value("num_inference_steps", r.num_inference_steps);
  if (req.contains("video_guider_params")) r.video_guider = guider_from(req.at("video_guider_params"));
  if (req.contains("audio_guider_params")) r.audio_guider = guider_from(req.at("audio_guider_params"));
  r.max_batch_size = req.value("max_batch_size", int64_t{1});
  if (kind == pipelines::PipelineKind::Dfr) {
    r.temporal_upsample_rounds = req.value("temporal_upsample_rounds", int64_t{0});
    if (req.contains("detailing_lora") && !req.at("detailing_lora").empty()) {
      r.detailing_lora_strength = req.at("detailing_lora").at(0).value("strength", 1.0);
      r.detailing_downscale_factor = req.value("detailing_downscale_factor", int64_t{2});
    }
  }
  std::optional<double> distilled_strength[2];
  if (req.contains("distilled_lora") && !req.at("distilled_lora").empty()) {
    const json& d = req.at("distilled_lora").at(0);
    if (d.contains("strength")) {
      r.distilled_lora_strengths = {r.distilled_lora_strengths[0], d.at("strength").get<double>()};
    } else {
      r.distilled_lora_strengths = {d.value("strength_stage_1", 1.0), d.value("strength_stage_2", 1.0)};
    }
    for (pipelines::Stage s : {pipelines::Stage::One, pipelines::Stage::Two})
      distilled_strength[s == pipelines::Stage::One ? 0 : 1] = pipelines::distilled_lora_strength(kind, s, r);
  }
  // Images: the recorded pixels with the recorded frame, strength and CRF.
  if (req.contains("images"))
    for (const json& im : req.at("images")) {
      if (!im.is_object() || !im.contains("tensor")) continue;
      pipelines::ImageConditioning c;
      c.image = run.tensor(im.at("tensor").get<std::string>(), DType::U8);
      c.frame_index = im.value("frame_idx", int64_t{0});
      c.strength = im.value("strength", 1.0);
      if (im.contains("crf") && !im.at("crf").is_null()) c.crf = im.at("crf").get<int>();
      r.images.push_back(c);
    }
  if (kind == pipelines::PipelineKind::Retake) {
    pipelines::RetakeSource src;
    src.frames = run.tensor("in.source.frames", DType::U8);
    src.start_time = req.value("start_time", 0.0);
    src.end_time = req.value("end_time", 0.0);
    if (req.contains("source_audio") && req.at("source_audio").is_object()) {
      const json& a = req.at("source_audio");
      src.waveform = run.tensor(a.value("tensor", "in.source.waveform"));
      src.sample_rate = a.value("sampling_rate", int64_t{0});
    }
    r.retake = src;
  }
  std::optional<double> ic_lora_strength;  // DubIt: its IC-LoRA, fused for both stages
  if (kind == pipelines::PipelineKind::DubIt) {
    pipelines::DubItReference ref;
    ref.frames = run.tensor("in.reference.frames", DType::U8);
    ref.frame_rate = req.value("frame_rate", r.frame_rate);
    ref.strength = req.value("reference_strength", 1.0);
    ref.path = req.value("reference_video", "");
    const json audio = req.value("reference_audio", json::object());
    ref.waveform = run.tensor(audio.value("tensor", "in.reference.waveform"));
    ref.sample_rate = audio.value("sampling_rate", int64_t{0});
    r.dubit = ref;
    r.reference_downscale_factor = req.value("reference_downscale_factor", int64_t{1});
    if (req.contains("ic_lora")) ic_lora_strength = req.at("ic_lora").value("strength", 1.0);
  }

  // Models. DFR records the keyframe-embedding variant of the checkpoint as the tensor it adds.
  auto ckpt = io::SafetensorsFile::open(files.checkpoint);
  mt::LTXModelConfig config = mt::LTXModelConfig::from_file(*ckpt, mt::LTXModelType::AudioVideo);
  const bool keyframe_embedding = run.has("in.keyframes_abs_pos_embedding");
  if (keyframe_embedding) config.use_keyframes_abs_pos_embedding = true;
  std::shared_ptr<const lora::LoraFile> lora_file;
  if (!files.lora.empty()) lora_file = lora::LoraFile::open(files.lora);
  auto load_transformer = [&](std::optional<double> lora_strength) {
    io::WeightMap w({ckpt}, mt::transformer_key_map(mt::LTXModelType::AudioVideo));
    if (keyframe_embedding) w.add("keyframes_abs_pos_embedding", run.tensor("in.keyframes_abs_pos_embedding"));
    if (lora_strength) {
      LTX_CHECK(lora_file, "parity pipeline: the recording's ", name, " run fuses a LoRA; add it to --weights");
      lora::fuse_into(w, lora::LoraSet{{lora_file, *lora_strength}});
    }
    return std::make_unique<mt::LTXModel>(mt::LTXModel::load(w, config, opt));
  };
  std::map<int, std::unique_ptr<mt::LTXModel>> stage_models;  // by stage (one model per LoRA strength)
  std::optional<double> stage_lora[3];
  if (kind == pipelines::PipelineKind::Dfr) {
    stage_lora[1] = r.detailing_lora_strength;  // no distilled LoRA in the recording's DFR run
  } else if (kind == pipelines::PipelineKind::DubIt) {
    stage_lora[0] = stage_lora[1] = ic_lora_strength;
  } else {
    stage_lora[0] = distilled_strength[0];
    stage_lora[1] = distilled_strength[1];
  }
  stage_models[0] = load_transformer(stage_lora[0]);
  stage_models[1] = stage_lora[1] == stage_lora[0] ? nullptr : load_transformer(stage_lora[1]);
  const models::video_vae::VideoEncoder encoder = models::video_vae::VideoEncoder::from_file(files.checkpoint, opt);
  std::optional<models::upsampler::LatentUpsampler> spatial, temporal;
  if (!files.spatial_upsampler.empty())
    spatial.emplace(models::upsampler::LatentUpsampler::from_file(files.spatial_upsampler, opt));
  if (!files.temporal_upsampler.empty())
    temporal.emplace(models::upsampler::LatentUpsampler::from_file(files.temporal_upsampler, opt));
  std::optional<models::audio_vae::AudioEncoder> audio_encoder;
  if ((r.retake && r.retake->waveform.defined()) || r.dubit) audio_encoder.emplace(models::audio_vae::AudioEncoder::from_file(ckpt, opt));

  pipelines::Components c;
  c.transformer = stage_models[0].get();
  c.stage_transformer = [&](pipelines::Stage s) -> const mt::LTXModel& {
    return s == pipelines::Stage::Two && stage_models[1] ? *stage_models[1] : *stage_models[0];
  };
  c.video_encoder = &encoder;
  c.spatial_upsampler = spatial ? &*spatial : nullptr;
  c.temporal_upsampler = temporal ? &*temporal : nullptr;
  c.audio_encoder = audio_encoder ? &*audio_encoder : nullptr;
  c.model_version = version;
  c.device = dev;

  const pipelines::GenerationResult out =
      pipelines::run_pipeline(kind, r, c, recorded_contexts(run), [](const std::string& stage, int64_t step, int64_t total) {
        if (step == total) log_info("parity pipeline: ", stage, " done");
      });
  run.emit("out.video.latent", out.video_latent);
  if (out.audio_latent.defined()) run.emit("out.audio.latent", out.audio_latent);

  // Decoded as the recording decoded: the video decoder in one tile (AUTO_TILING at these sizes),
  // the audio decoder + vocoder.
  if (run.has("out.video.frames")) {
    const models::video_vae::VideoDecoder decoder = models::video_vae::load_video_decoder(files.checkpoint, opt);
    std::vector<Tensor> chunks;
    models::video_vae::decode_video(decoder, out.video_latent.to(dev, DType::F32), std::nullopt, {},
                                    [&](const Tensor& chunk) { chunks.push_back(chunk.to(Device::cpu()).contiguous()); });
    run.emit("out.video.frames", ops::concat(chunks, 0));
  }
  if (out.audio_latent.defined() && (run.has("out.audio.waveform") || run.has("out.audio.mel"))) {
    const auto decoder = models::audio_vae::AudioDecoder::from_file(ckpt, opt);
    const auto vocoder = models::audio_vae::VocoderModel::from_file(ckpt, opt);
    const models::audio_vae::Audio audio =
        models::audio_vae::decode_audio(out.audio_latent.to(dev, DType::F32), decoder, vocoder,
                                        [&](const std::string& n, const Tensor& v) {
                                          if (n == "mel" && run.has("out.audio.mel")) run.emit("out.audio.mel", v);
                                        });
    Tensor wave = audio.waveform.to(Device::cpu());
    const int64_t keep = pipelines::audio_samples_to_keep(out, wave.size(-1), static_cast<double>(audio.sampling_rate));
    if (keep < wave.size(-1)) wave = wave.narrow(wave.dim() - 1, 0, keep).contiguous();
    if (run.has("out.audio.waveform")) run.emit("out.audio.waveform", wave);
  }
}

}  // namespace ltx::parity
