#pragma once
// LTXModel: the LTX-2.x audio-video diffusion transformer (reference: model/transformer/model.py,
// model_configurator.py), and the X0Model wrapper that turns its velocity into a denoised latent.
//
//   auto model = LTXModel::from_files({"ltx-2.3.safetensors"}, LTXModelType::AudioVideo);
//   ModelOutputs v = model.forward(&video, &audio, nullptr);  // velocities
//   ModelOutputs x0 = X0Model{model}(&video, &audio, nullptr);  // latent - velocity * timesteps
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/weights.h"
#include "models/block_streaming.h"
#include "models/transformer/adaln.h"
#include "models/transformer/config.h"
#include "models/transformer/modality.h"
#include "models/transformer/perturbations.h"
#include "models/transformer/step_cache.h"
#include "models/transformer/text_projection.h"
#include "models/transformer/transformer.h"
#include "models/transformer/transformer_args.h"
#include "nn/linear.h"

namespace ltx::models::transformer {

// The key filter and renaming of each configurator's loader: AudioVideo / VideoOnly keep
// `model.diffusion_model.*` and strip the prefix (LTXV_MODEL_COMFY_RENAMING_MAP); AudioOnly keeps
// only the audio-stream names (LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP).
io::KeyMap transformer_key_map(LTXModelType type);

struct ModelOutputs {
  // In the model dtype (LTXModel::dtype(), as the reference's x dtype).
  Tensor video;  // [B, Tv, out_channels], undefined when video was not given
  Tensor audio;  // [B, Ta, audio_out_channels], undefined when audio was not given
};

class LTXModel {
 public:
  // Binds every parameter of the model `config` describes from `w` (names after the key map).
  // Names the reference's loader drops silently are ignored: the text connectors stored under the
  // transformer prefix, and for a video-only model the audio and audio-video names. Then
  // w.finish("transformer") reports every missing, misshaped and unexpected name in one error.
  // keyframes_abs_pos_embedding may be absent (a zero embedding, i.e. none).
  // With `streaming` enabled (opt.device a GPU), the transformer_blocks are bound on the host in
  // opt.dtype and streamed through device slots (models/block_streaming.h); the rest is on
  // opt.device.
  static LTXModel load(io::WeightMap& w, const LTXModelConfig& config,
                       const nn::LoadOptions& opt = {}, const BlockStreaming& streaming = {});
  // Opens `paths` (the transformer file first: its metadata holds the config), applies the key map
  // of `type` and loads. Safetensors or GGUF files (io::WeightMap::open_checkpoints): a GGUF
  // file's block-quantized Linears stay GGML blocks (nn::LinearFormat::GgmlBlocks), its dense
  // tensors (norms, tables, small layers) load as from safetensors.
  static LTXModel from_files(const std::vector<std::string>& paths, LTXModelType type,
                             const nn::LoadOptions& opt = {}, const BlockStreaming& streaming = {});

  // Whether a weight name (after the key map) belongs to the repeated blocks, which streaming
  // keeps on the host.
  static bool is_block_parameter(const std::string& name);
  // The block a weight name (after the key map) belongs to; -1 for a name outside the blocks.
  static int64_t block_index(const std::string& name);

  const LTXModelConfig& config() const { return config_; }
  LTXModelType model_type() const { return config_.model_type; }
  int64_t num_blocks() const { return num_blocks_; }
  // Whether blocks stream from host memory; how many stay resident (the first ones); the streamed
  // blocks' device slots and host bytes.
  bool streams_blocks() const { return streamed_ != nullptr; }
  int64_t resident_blocks() const { return static_cast<int64_t>(transformer_blocks_.size()); }
  int64_t streaming_slots() const { return streamed_ ? streamed_->slots() : 0; }
  int64_t streamed_host_bytes() const { return streamed_ ? streamed_->host_bytes() : 0; }
  // For a streamed model, the host copy that replaced a block tensor bound at load (what LoRA
  // fusion must write from then on, lora::Fuser::rebind); undefined otherwise.
  Tensor streamed_home(const Tensor& bound) const {
    return streamed_ ? streamed_->host_home(bound) : Tensor();
  }
  // The activations' dtype (the reference's x dtype): the loaded weights' dtype, f32 or bf16.
  DType dtype() const { return dtype_; }

  // Velocity predictions. A stream the model lacks must be null. `perturbations` null means none;
  // otherwise it must cover this model's blocks and the batch. `observer` receives intermediates:
  // "<video|audio>.{x_in, context, adaln_timestep, embedded_timestep, prompt_timestep, pe_cos,
  // pe_sin, cross_pe_cos, cross_pe_sin, cross_scale_shift_timestep, cross_gate_timestep,
  // context_mask_additive, self_attention_bias}" and "block<i>.<video|audio>_x" (the blocks that
  // run). `step_cache` (null: none) may replace the blocks after its first ones by the residual
  // they added in an earlier call (step_cache.h); the state it then gives the output layers is
  // "step_cache.<video|audio>_x".
  ModelOutputs forward(const Modality* video, const Modality* audio,
                       const BatchedPerturbationConfig* perturbations,
                       const Observer& observer = {}, StepCache* step_cache = nullptr) const;

 private:
  LTXModelConfig config_;
  DType dtype_ = DType::F32;  // set at load from the patchify projection's weight
  // video stream
  nn::Linear patchify_proj_, proj_out_;
  std::optional<PixArtAlphaTextProjection> caption_projection_;
  std::optional<Tensor> keyframes_abs_pos_embedding_;  // [1, D]
  std::optional<AdaLayerNormSingle> adaln_single_, prompt_adaln_single_;
  Tensor scale_shift_table_;  // [2, D]
  // audio stream
  nn::Linear audio_patchify_proj_, audio_proj_out_;
  std::optional<PixArtAlphaTextProjection> audio_caption_projection_;
  std::optional<AdaLayerNormSingle> audio_adaln_single_, audio_prompt_adaln_single_;
  Tensor audio_scale_shift_table_;  // [2, A]
  // audio <-> video
  std::optional<AdaLayerNormSingle> av_ca_video_scale_shift_adaln_single_,
      av_ca_audio_scale_shift_adaln_single_, av_ca_a2v_gate_adaln_single_,
      av_ca_v2a_gate_adaln_single_;
  std::vector<BasicAVTransformerBlock> transformer_blocks_;  // the resident blocks: the first ones
  std::shared_ptr<StreamedBlocks<BasicAVTransformerBlock>> streamed_;
  int64_t num_blocks_ = 0;

  // The arguments preprocessor of one stream (the audio stream's modules with `audio`, else the
  // video stream's); the cross-modal parts only in an audio-video model.
  MultiModalTransformerArgsPreprocessor preprocessor(bool audio) const;
};

// to_denoised: sample - velocity * timesteps computed in f32, returned in the sample's dtype
// ([B, T, C] with timesteps [B, T, 1] or any broadcastable shape).
Tensor to_denoised(const Tensor& sample, const Tensor& velocity, const Tensor& timesteps);

// X0Model: the velocity model's outputs turned into denoised latents with each modality's
// per-token timesteps.
struct X0Model {
  const LTXModel& velocity_model;
  StepCache* step_cache = nullptr;  // LTXModel::forward's
  ModelOutputs operator()(const Modality* video, const Modality* audio,
                          const BatchedPerturbationConfig* perturbations,
                          const Observer& observer = {}) const;
};

}  // namespace ltx::models::transformer
