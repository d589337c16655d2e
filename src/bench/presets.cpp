#include "bench/presets.h"

#include <charconv>

#include "core/error.h"

namespace ltx::bench {

namespace {

// config.transformer of the published LTX-2.3 22B checkpoints (ltx-2.3-22b-{dev,distilled}),
// as recorded in tests/fixtures/transformer_keys_ltx23_22b.txt.
constexpr const char* kLtx23Transformer = R"json({
  "_class_name": "AVTransformer3DModel", "activation_fn": "gelu-approximate",
  "apply_gated_attention": true, "attention_bias": true, "attention_head_dim": 128,
  "attention_type": "default", "audio_attention_head_dim": 64,
  "audio_connector_attention_head_dim": 64, "audio_connector_num_attention_heads": 32,
  "audio_cross_attention_dim": 2048, "audio_in_channels": 128, "audio_num_attention_heads": 32,
  "audio_out_channels": 128, "audio_positional_embedding_max_pos": [20],
  "av_ca_timestep_scale_multiplier": 1000.0, "av_cross_ada_norm": true, "caption_channels": 3840,
  "caption_proj_before_connector": true, "caption_proj_input_norm": false,
  "caption_projection_first_linear": false, "caption_projection_second_linear": false,
  "causal_temporal_positioning": true, "connector_apply_gated_attention": true,
  "connector_attention_head_dim": 128, "connector_learnable_registers_std": 1,
  "connector_norm_output": true, "connector_num_attention_heads": 32, "connector_num_layers": 8,
  "connector_num_learnable_registers": 128, "connector_positional_embedding_max_pos": [4096],
  "cross_attention_adaln": true, "cross_attention_dim": 4096, "cross_attention_norm": true,
  "double_self_attention": false, "dropout": 0.0, "frequencies_precision": "float64",
  "in_channels": 128, "norm_elementwise_affine": false, "norm_eps": 1e-06, "norm_num_groups": 32,
  "num_attention_heads": 32, "num_embeds_ada_norm": 1000, "num_layers": 48,
  "num_vector_embeds": null, "only_cross_attention": false, "out_channels": 128,
  "positional_embedding_max_pos": [20, 2048, 2048], "positional_embedding_theta": 10000.0,
  "positional_embedding_type": "rope", "qk_norm": "rms_norm", "rope_type": "split",
  "share_ff": false, "standardization_norm": "rms_norm", "text_encoder_norm_type": "per_token_rms",
  "timestep_scale_multiplier": 1000, "upcast_attention": false,
  "use_audio_video_cross_attention": true, "use_embeddings_connector": true,
  "use_linear_projection": false, "use_middle_indices_grid": true
})json";

// config.vae of the LTX-2.3 checkpoints (the conv video VAE).
constexpr const char* kLtx23Vae = R"json({
  "_class_name": "CausalVideoAutoencoder", "dims": 3, "in_channels": 3, "out_channels": 3,
  "latent_channels": 128,
  "encoder_blocks": [["res_x", {"num_layers": 4}], ["compress_space_res", {"multiplier": 2}],
                     ["res_x", {"num_layers": 6}], ["compress_time_res", {"multiplier": 2}],
                     ["res_x", {"num_layers": 4}], ["compress_all_res", {"multiplier": 2}],
                     ["res_x", {"num_layers": 2}], ["compress_all_res", {"multiplier": 1}],
                     ["res_x", {"num_layers": 2}]],
  "decoder_blocks": [["res_x", {"num_layers": 4}], ["compress_space", {"multiplier": 2}],
                     ["res_x", {"num_layers": 6}], ["compress_time", {"multiplier": 2}],
                     ["res_x", {"num_layers": 4}], ["compress_all", {"multiplier": 1}],
                     ["res_x", {"num_layers": 2}], ["compress_all", {"multiplier": 2}],
                     ["res_x", {"num_layers": 2}]],
  "scaling_factor": 1.0, "norm_layer": "pixel_norm", "patch_size": 4, "latent_log_var": "uniform",
  "use_quant_conv": false, "causal_decoder": false, "timestep_conditioning": false,
  "normalize_latent_channels": false, "encoder_base_channels": 128, "decoder_base_channels": 128,
  "spatial_padding_mode": "zeros"
})json";

// config.vae of the LTX-2.5 diffusion video VAE file (CausalDiffusionVAE / NADiffusionDecoder),
// decoder part, as tools/bench/bench_official_diffdec.py builds it from the published header
// (docs: reference map 4.4): t_emb_dim is absent in the file (-> 384).
constexpr const char* kLtx25DiffusionVae = R"json({
  "_class_name": "CausalDiffusionVAE", "dims": 3, "model_output_type": "x0",
  "spatial_padding_mode": "zeros",
  "decoder": {
    "_class_name": "NADiffusionDecoder", "in_channels": 128, "out_channels": 3, "patch_size": 4,
    "head_dim": 64, "stage_channels": [2048, 1024, 512, 512, 256], "stage_depths": [4, 6, 4, 2, 8],
    "stage_kernels": [[3, 7, 7], [3, 7, 7], [3, 5, 5], [3, 5, 5], [11, 11, 11]],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 2]],
    "spatial_padding_mode": "zeros", "resampler_kind": "linear", "stage5_kernel": [11, 11, 11],
    "timestep_scale_multiplier": 1000.0, "default_num_inference_steps": 1
  }
})json";

// The text encoder of LTX-2.x: Gemma 3 12B (google/gemma-3-12b-it's config.json; the vision tower is
// not used by the text path). The token ids of the top level are those of the tokenizer the
// pipeline benchmark runs (the demo bundle's), which feeds every prompt padded to 1024 tokens.
constexpr const char* kGemma3_12b = R"json({
  "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
  "boi_token_index": 1085, "eoi_token_index": 1086, "image_token_index": 1087,
  "eos_token_id": [1, 9], "initializer_range": 0.02, "mm_tokens_per_image": 256,
  "text_config": {
    "model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360,
    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
    "query_pre_attn_scalar": 256, "sliding_window": 1024, "sliding_window_pattern": 6,
    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "vocab_size": 262208,
    "rms_norm_eps": 1e-06, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}},
  "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "image_size": 896,
                    "intermediate_size": 4304, "num_attention_heads": 16, "num_hidden_layers": 27,
                    "patch_size": 14, "vision_use_head": false}
})json";

// config.audio_vae and config.vocoder of the LTX-2.3 checkpoints (the audio VAE with 8 x 16 latent
// channels; BigVGAN-v2 at 16 kHz with the bandwidth extension to 48 kHz).
constexpr const char* kLtx23Audio = R"json({
  "audio_vae": {
    "model": {"params": {"ddconfig": {
        "double_z": true, "mel_bins": 64, "z_channels": 8, "resolution": 256,
        "downsample_time": false, "in_channels": 2, "out_ch": 2, "ch": 128, "ch_mult": [1, 2, 4],
        "num_res_blocks": 2, "attn_resolutions": [], "dropout": 0.0,
        "mid_block_add_attention": false, "norm_type": "pixel", "causality_axis": "height"},
      "sampling_rate": 16000}},
    "preprocessing": {
      "audio": {"sampling_rate": 16000, "max_wav_value": 32768.0, "duration": 5.12,
                "stereo": true, "causal_padding": 3},
      "stft": {"filter_length": 1024, "hop_length": 160, "win_length": 1024, "causal": true},
      "mel": {"n_mel_channels": 64, "mel_fmin": 0, "mel_fmax": 8000}}},
  "vocoder": {
    "vocoder": {"upsample_initial_channel": 1536, "resblock": "AMP1",
                "upsample_rates": [5, 2, 2, 2, 2, 2], "resblock_kernel_sizes": [3, 7, 11],
                "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4],
                "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "stereo": true,
                "use_tanh_at_final": false, "activation": "snakebeta", "use_bias_at_final": false},
    "bwe": {"upsample_initial_channel": 512, "resblock": "AMP1", "upsample_rates": [6, 5, 2, 2, 2],
            "resblock_kernel_sizes": [3, 7, 11], "upsample_kernel_sizes": [12, 11, 4, 4, 4],
            "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "stereo": true,
            "use_tanh_at_final": false, "activation": "snakebeta", "use_bias_at_final": false,
            "apply_final_activation": false, "input_sampling_rate": 16000,
            "output_sampling_rate": 48000, "hop_length": 80, "n_fft": 512, "win_size": 512,
            "num_mels": 64}}
})json";

// The x2 spatial latent upsampler (the reference configurator's values, which the published
// file's config carries).
constexpr const char* kLtx23Upsampler = R"json({
  "_class_name": "LatentUpsampler", "in_channels": 128, "mid_channels": 512,
  "num_blocks_per_stage": 4, "dims": 3, "spatial_upsample": true, "temporal_upsample": false,
  "spatial_scale": 2.0, "rational_resampler": false
})json";

// config.transformer of the LTX-2 19B checkpoints: the keys its files carry (reference map 2.2:
// no gated attention, no text-attention AdaLN, the caption projection inside the transformer) at
// the 22B's published widths, which the 19B shares. Its connector keys are left out: the
// transformer does not read them.
constexpr const char* kLtx2Transformer = R"json({
  "_class_name": "AVTransformer3DModel", "activation_fn": "gelu-approximate",
  "attention_bias": true, "attention_head_dim": 128, "attention_type": "default",
  "audio_attention_head_dim": 64, "audio_cross_attention_dim": 2048, "audio_in_channels": 128,
  "audio_num_attention_heads": 32, "audio_out_channels": 128,
  "audio_positional_embedding_max_pos": [20], "av_ca_timestep_scale_multiplier": 1000.0,
  "av_cross_ada_norm": true, "caption_channels": 3840, "causal_temporal_positioning": true,
  "cross_attention_dim": 4096, "cross_attention_norm": true, "double_self_attention": false,
  "dropout": 0.0, "frequencies_precision": "float64", "in_channels": 128,
  "norm_elementwise_affine": false, "norm_eps": 1e-06, "norm_num_groups": 32,
  "num_attention_heads": 32, "num_embeds_ada_norm": 1000, "num_layers": 48,
  "num_vector_embeds": null, "only_cross_attention": false, "out_channels": 128,
  "positional_embedding_max_pos": [20, 2048, 2048], "positional_embedding_theta": 10000.0,
  "positional_embedding_type": "rope", "qk_norm": "rms_norm", "rope_type": "split",
  "share_ff": false, "standardization_norm": "rms_norm", "timestep_scale_multiplier": 1000,
  "upcast_attention": false, "use_audio_video_cross_attention": true,
  "use_embeddings_connector": true, "use_linear_projection": false, "use_middle_indices_grid": true
})json";

// LTX-2 19B: the transformer only. Its conv VAE's published block layout is not recorded here
// (reference map 4.2 lists it as uncertain), so the preset has no VAE case.
Preset ltx2_19b() {
  Preset p;
  p.name = "ltx2-19b";
  p.description = "LTX-2 19B audio-video transformer (no VAE: its block layout is not recorded here)";
  p.transformer = nlohmann::json::parse(kLtx2Transformer);
  p.transformer_sizes = {{768, 512}, {1536, 1024}};
  p.vae_size = {1536, 1024};
  p.frames = 121;
  p.text_tokens = 1024;
  p.model_version = "";  // the 19B files carry none: LTX_2_PARAMS
  return p;
}

Preset ltx23_22b() {
  Preset p;
  p.name = "ltx23-22b";
  p.description = "LTX-2.3 22B audio-video transformer + conv video VAE (published configs)";
  p.transformer = nlohmann::json::parse(kLtx23Transformer);
  p.vae = nlohmann::json::parse(kLtx23Vae);
  p.gemma = nlohmann::json::parse(kGemma3_12b);
  p.audio = nlohmann::json::parse(kLtx23Audio);
  p.upsampler = nlohmann::json::parse(kLtx23Upsampler);
  p.transformer_sizes = {{768, 512}, {1536, 1024}};
  p.vae_size = {1536, 1024};
  p.frames = 121;
  p.text_tokens = 1024;
  p.model_version = "2.3.0";
  return p;
}

// LTX-2.5 22B: the 2.3 transformer with a bias-free video FF and the keyframe position embedding
// (reference map 2.2), the conv VAE (2.5 ships a conv VAE file too) and the diffusion VAE.
Preset ltx25_22b() {
  Preset p = ltx23_22b();
  p.name = "ltx25-22b";
  p.description = "LTX-2.5 22B audio-video transformer + conv video VAE + diffusion video decoder";
  p.transformer["ff_bias"] = false;
  p.transformer["use_keyframes_abs_pos_embedding"] = true;
  p.diffusion_vae = nlohmann::json::parse(kLtx25DiffusionVae);
  p.model_version = "2.5.0";
  // Its text encoder is Gemma 4 and its pipelines decode with the diffusion decoder: no pipeline
  // preset yet.
  p.gemma = p.audio = p.upsampler = nullptr;
  return p;
}

Preset tiny() {
  Preset p = ltx23_22b();
  p.name = "tiny";
  p.description =
      "LTX-2.3 transformer + conv VAE and an LTX-2.5 diffusion decoder at toy widths (CPU smoke test)";
  const nlohmann::json small = {
      {"num_layers", 2},           {"num_attention_heads", 2},       {"attention_head_dim", 16},
      {"cross_attention_dim", 32}, {"audio_num_attention_heads", 2}, {"audio_attention_head_dim", 8},
      {"audio_cross_attention_dim", 16}, {"in_channels", 16},        {"out_channels", 16},
      {"audio_in_channels", 32},   {"audio_out_channels", 32},       {"caption_channels", 24},
      {"connector_num_layers", 2}, {"connector_num_attention_heads", 2},
      {"connector_attention_head_dim", 16}, {"audio_connector_num_attention_heads", 2},
      {"audio_connector_attention_head_dim", 8}};
  p.transformer.update(small);
  p.vae["latent_channels"] = 16;
  p.vae["encoder_base_channels"] = 16;
  p.vae["decoder_base_channels"] = 4;
  for (const char* key : {"encoder_blocks", "decoder_blocks"})
    for (auto& block : p.vae[key])
      if (block[1].contains("num_layers")) block[1]["num_layers"] = 1;
  // A diffusion decoder at toy widths: 16 latent channels like the conv VAE above, head_dim 16,
  // reductions that keep 16 channels after the first upsample, kernels below the real ones.
  p.diffusion_vae = nlohmann::json::parse(kLtx25DiffusionVae);
  p.diffusion_vae["decoder"].update(nlohmann::json{
      {"in_channels", 16},
      {"head_dim", 16},
      {"t_emb_dim", 32},
      {"stage_channels", {32, 16, 16, 16, 16}},
      {"stage_depths", {1, 1, 1, 1, 2}},
      {"stage_kernels", {{3, 1, 3}, {3, 3, 5}, {3, 3, 3}, {3, 3, 3}, {3, 3, 3}}},
      {"upsamples", nlohmann::json::parse("[[[1, 2, 2], 2], [[2, 1, 1], 1], [[2, 2, 2], 1], [[2, 2, 2], 1]]")},
      {"stage5_kernel", {3, 3, 3}}});
  // The pipeline's other models at the demo bundle's toy widths: a 6-layer Gemma 3 of width 24
  // (the transformer's caption_channels), an audio VAE of 2 x 16 latent channels (its
  // audio_in_channels) with a narrow BWE vocoder, an upsampler on the 16 latent channels.
  p.gemma["text_config"].update(nlohmann::json{
      {"hidden_size", 24}, {"intermediate_size", 64}, {"num_hidden_layers", 6},
      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
      {"query_pre_attn_scalar", 20}, {"sliding_window", 8}, {"vocab_size", 1088}});
  auto& dd = p.audio["audio_vae"]["model"]["params"]["ddconfig"];
  dd.update(nlohmann::json{{"z_channels", 2}, {"ch", 32}, {"ch_mult", {1, 1, 1}}, {"num_res_blocks", 1}});
  p.audio["vocoder"]["vocoder"]["upsample_initial_channel"] = 64;
  p.audio["vocoder"]["bwe"].update(nlohmann::json{
      {"upsample_initial_channel", 32}, {"n_fft", 256}, {"win_size", 256}});
  p.upsampler.update(nlohmann::json{{"in_channels", 16}, {"mid_channels", 32}, {"num_blocks_per_stage", 1}});
  p.transformer_sizes = {{64, 64}, {128, 64}};
  p.vae_size = {64, 64};
  p.frames = 9;
  p.text_tokens = 16;
  return p;
}

}  // namespace

models::transformer::LTXModelConfig Preset::transformer_config() const {
  const nlohmann::json metadata = {{"config", {{"transformer", transformer}}}};
  return models::transformer::LTXModelConfig::from_metadata(
      metadata, models::transformer::LTXModelType::AudioVideo, "bench preset '" + name + "'");
}

models::video_vae::DecoderConfig Preset::decoder_config() const {
  LTX_CHECK(has_conv_vae(), "bench preset '", name, "' has no conv video VAE; use --preset "
            "ltx23-22b, ltx25-22b or tiny for the VAE decode");
  return models::video_vae::decoder_config_from_json(vae, "bench preset '" + name + "'");
}

models::video_vae::DiffusionDecoderConfig Preset::diffusion_decoder_config() const {
  LTX_CHECK(has_diffusion_decoder(), "bench preset '", name, "' has no diffusion video decoder; "
            "use --preset ltx25-22b or tiny");
  return models::video_vae::diffusion_decoder_config_from_json(diffusion_vae,
                                                               "bench preset '" + name + "'");
}

std::vector<std::string> preset_names() { return {"ltx2-19b", "ltx23-22b", "ltx25-22b", "tiny"}; }

Preset preset(const std::string& name) {
  if (name == "ltx2-19b") return ltx2_19b();
  if (name == "ltx23-22b") return ltx23_22b();
  if (name == "ltx25-22b") return ltx25_22b();
  if (name == "tiny") return tiny();
  fail("--preset: unknown preset '", name, "'; choose one of: ltx2-19b, ltx23-22b, ltx25-22b, tiny");
}

VideoSize parse_video_size(const std::string& text, const char* what) {
  const size_t x = text.find('x');
  VideoSize s;
  const auto number = [&](size_t begin, size_t end, int64_t* out) {
    const char* first = text.data() + begin;
    const char* last = text.data() + end;
    const auto r = std::from_chars(first, last, *out);
    return begin < end && r.ec == std::errc() && r.ptr == last;
  };
  LTX_CHECK(x != std::string::npos && number(0, x, &s.width) && number(x + 1, text.size(), &s.height),
            what, ": expected WIDTHxHEIGHT (e.g. 768x512), got '", text, "'");
  LTX_CHECK(s.width > 0 && s.height > 0 && s.width % 32 == 0 && s.height % 32 == 0, what, ": ",
            text, " is not a positive multiple of 32 in both dimensions (the VAE's spatial factor)");
  return s;
}

}  // namespace ltx::bench
