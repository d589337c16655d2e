#include "generate/model_paths.h"

#include <gtest/gtest.h>

#include "generate/components.h"
#include "generate/generate_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using generate::ComponentNeeds;
using generate::ModelFlags;
using generate::ModelPaths;
using generate::resolve_model_paths;

TEST(ModelPaths, SingleFileCheckpointFillsEverySlotButTheTextEncoder) {
  const auto& demo = test::shared_demo_bundle();
  ModelFlags f;
  f.checkpoint_path = demo.checkpoint;
  f.gemma_root = demo.dir;
  const ModelPaths p = resolve_model_paths(f);
  EXPECT_EQ(p.layout, ModelPaths::Layout::SingleFile);
  EXPECT_EQ(p.transformer.path, demo.checkpoint);
  EXPECT_EQ(p.transformer.flag, "--checkpoint-path");
  EXPECT_EQ(p.video_vae.path, demo.checkpoint);
  EXPECT_EQ(p.audio_vae.path, demo.checkpoint);
  EXPECT_EQ(p.text_encoder.flag, "--gemma-root");
  EXPECT_FALSE(p.spatial_upsampler.given());
  // The connectors and projection come from the checkpoint.
  EXPECT_EQ(p.embeddings_weight_paths, std::vector<std::string>{demo.checkpoint});
  f.gemma_root.clear();
  f.text_encoder_path = demo.text_encoder;
  f.video_vae_path = demo.checkpoint;
  const ModelPaths q = resolve_model_paths(f);
  EXPECT_EQ(q.video_vae.flag, "--video-vae-path");
  EXPECT_EQ(q.embeddings_weight_paths, std::vector<std::string>{demo.checkpoint});
  EXPECT_FALSE(f.empty());
  EXPECT_TRUE(ModelFlags{}.empty());
}

TEST(ModelPaths, SplitFilesLeaveUnnamedSlotsEmpty) {
  const auto& demo = test::shared_demo_bundle();
  ModelFlags f;
  f.transformer_path = demo.checkpoint;
  f.audio_vae_path = demo.checkpoint;
  const ModelPaths p = resolve_model_paths(f);
  EXPECT_EQ(p.layout, ModelPaths::Layout::Split);
  EXPECT_EQ(p.transformer.flag, "--transformer-path");
  EXPECT_FALSE(p.video_vae.given());
  EXPECT_EQ(p.video_vae.flag, "--video-vae-path");
  EXPECT_FALSE(p.text_encoder.given());
  // Split packs may keep the projection in a single-file text encoder (LTX-2.5).
  f.text_encoder_path = demo.text_encoder;
  EXPECT_EQ(resolve_model_paths(f).embeddings_weight_paths,
            (std::vector<std::string>{demo.checkpoint, demo.text_encoder}));
}

TEST(ModelPaths, ContradictingOrMissingFilesNameTheFlags) {
  const auto& demo = test::shared_demo_bundle();
  ModelFlags f;
  f.checkpoint_path = demo.checkpoint;
  f.transformer_path = demo.checkpoint;
  EXPECT_ERROR_HAS(resolve_model_paths(f),
                   "--transformer-path (split layout) cannot be combined with --checkpoint-path");
  f.transformer_path.clear();
  f.distilled_checkpoint_path = demo.checkpoint;
  EXPECT_ERROR_HAS(resolve_model_paths(f), "--checkpoint-path and --distilled-checkpoint-path");
  f = {};
  f.text_encoder_path = demo.text_encoder;
  f.gemma_root = demo.dir;
  EXPECT_ERROR_HAS(resolve_model_paths(f), "--text-encoder-path and --gemma-root");
  f = {};
  f.spatial_upsampler_path = "/nonexistent/up.safetensors";
  EXPECT_ERROR_HAS(resolve_model_paths(f),
                   "--spatial-upsampler-path: '/nonexistent/up.safetensors' does not exist");
  f = {};
  f.loras.push_back({"/nonexistent/l.safetensors", 0.5});
  EXPECT_ERROR_HAS(resolve_model_paths(f), "--lora: '/nonexistent/l.safetensors'");
}

ModelFlags demo_flags() {
  const auto& demo = test::shared_demo_bundle();
  ModelFlags f;
  f.checkpoint_path = demo.checkpoint;
  f.text_encoder_path = demo.text_encoder;
  f.spatial_upsampler_path = demo.spatial_upsampler;
  f.distilled_lora = generate::LoraSpec{demo.distilled_lora, 1.0};
  return f;
}

ComponentNeeds two_stage() { return {"two-stage", true, true, true}; }

TEST(Components, TheDemoBundleHasWhatEveryPipelineNeeds) {
  const generate::ComponentReport r =
      check_components(resolve_model_paths(demo_flags()), two_stage());
  EXPECT_EQ(r.model_version, "2.3.0");
  EXPECT_EQ(r.video_latent_channels, 16);
  EXPECT_EQ(r.audio_latent_channels, 2);
  EXPECT_EQ(r.audio_mel_bins, 16);
  EXPECT_EQ(r.audio_sample_rate, 48000);
}

TEST(Components, MissingComponentsNameTheFlagToPass) {
  const auto& demo = test::shared_demo_bundle();
  ModelFlags f = demo_flags();
  f.distilled_lora.reset();
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()), "--distilled-lora PATH");
  f = demo_flags();
  f.spatial_upsampler_path.clear();
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "pass --spatial-upsampler-path");
  f = demo_flags();
  f.text_encoder_path.clear();
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "the Gemma text encoder: pass --text-encoder-path");
  // Split layout without a video VAE.
  f = demo_flags();
  f.checkpoint_path.clear();
  f.transformer_path = demo.checkpoint;
  f.audio_vae_path = demo.checkpoint;
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "needs the video VAE: pass --video-vae-path");
  // A file without the component.
  f = demo_flags();
  f.spatial_upsampler_path = demo.text_encoder;
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "--spatial-upsampler-path '" + demo.text_encoder + "' has no latent upsampler");
  f = demo_flags();
  f.distilled_lora = generate::LoraSpec{demo.spatial_upsampler, 1.0};
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "--distilled-lora '" + demo.spatial_upsampler + "' has no LoRA");
}

TEST(Components, ADiffusionVideoVaeIsAccepted) {
  // LTX-2.5's diffusion decoder (16-channel latents like the demo transformer), chosen from the
  // file's metadata; without images or latent upsampling no video encoder is needed.
  ModelFlags f = demo_flags();
  f.video_vae_path = test::fixture("diffdec_ltx25.weights.safetensors");
  const ComponentNeeds one_stage{"one-stage", false, false, false};
  const generate::ComponentReport r = check_components(resolve_model_paths(f), one_stage);
  EXPECT_EQ(r.video_latent_channels, 16);
  // The file holds the decoder only: pipelines that encode say what is missing.
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "--video-vae-path '" + f.video_vae_path + "' has no video VAE encoder");
  // Latent widths still have to agree: the LTX-2 (19B) transformer works on 24 channels.
  f.checkpoint_path.clear();
  f.transformer_path = test::fixture("tiny_ltx2_19b.safetensors");
  f.audio_vae_path = test::shared_demo_bundle().checkpoint;
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), one_stage),
                   "works on 24-channel video latents but the video VAE (--video-vae-path");
}

TEST(Components, FilesOfDifferentModelsAreRejected) {
  ModelFlags f = demo_flags();
  f.video_vae_path = test::fixture("vae_ltx23.weights.safetensors");  // 4 latent channels
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "works on 16-channel video latents but the video VAE (--video-vae-path");
  f = demo_flags();
  f.spatial_upsampler_path = test::fixture("upsampler_x2.weights.safetensors");  // 4 channels
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "upsamples 4-channel latents");
  // An LTX-2 (19B) transformer (24 latent channels) with the demo's VAE.
  f = demo_flags();
  f.checkpoint_path.clear();
  f.transformer_path = test::fixture("tiny_ltx2_19b.safetensors");
  f.video_vae_path = test::shared_demo_bundle().checkpoint;
  f.audio_vae_path = test::shared_demo_bundle().checkpoint;
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "works on 24-channel video latents but the video VAE (--video-vae-path");
  // LTX-2.3 pairs with Gemma 3 only (the reference's rule).
  f = demo_flags();
  f.text_encoder_path = test::fixture("text_gemma4.te.safetensors");
  EXPECT_ERROR_HAS(check_components(resolve_model_paths(f), two_stage()),
                   "expects a Gemma 3 text encoder");
}

}  // namespace
}  // namespace ltx
