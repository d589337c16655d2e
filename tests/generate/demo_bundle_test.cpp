#include "generate/demo_bundle.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "generate/generate_test_util.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "models/text/gemma_tokenizer.h"
#include "pipelines/hdr_ic_lora.h"
#include "support/test_support.h"

namespace ltx {
namespace {

TEST(DemoBundle, WritesTheSameBytesEveryTime) {
  test::TempDir dir;
  const auto& first = test::shared_demo_bundle();
  const std::string again = dir.file("again");
  std::filesystem::create_directories(again);
  generate::write_demo_bundle_files(again);
  for (const std::string* p :
       {&first.checkpoint, &first.text_encoder, &first.spatial_upsampler, &first.temporal_upsampler,
        &first.distilled_lora, &first.system_prompt, &first.ic_lora, &first.hdr_lora}) {
    const std::string name = std::filesystem::path(*p).filename().string();
    EXPECT_EQ(test::read_bytes(*p), test::read_bytes(again + "/" + name)) << name;
  }
  // Nothing but the eight files (the Gemma seed file is gone).
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(again)) ++files;
  EXPECT_EQ(files, 8);
}

TEST(DemoBundle, FilesAreWhatInspectAndTheLoadersExpect) {
  const auto& b = test::shared_demo_bundle();
  const io::CheckpointSummary ckpt = io::inspect_checkpoint(b.checkpoint);
  EXPECT_EQ(ckpt.layout, "single-file checkpoint");
  EXPECT_EQ(ckpt.version, "2.3");
  for (const char* id : {"transformer", "video_connector", "audio_connector", "text_projection",
                         "video_vae_encoder", "video_vae_decoder", "audio_vae_decoder", "vocoder"})
    EXPECT_NE(ckpt.component(id), nullptr) << id;
  EXPECT_LT(std::filesystem::file_size(b.checkpoint), 4u << 20);  // a few MB at most
  EXPECT_NE(io::inspect_checkpoint(b.text_encoder).component("gemma"), nullptr);
  EXPECT_NE(io::inspect_checkpoint(b.spatial_upsampler).component("latent_upsampler"), nullptr);
  EXPECT_NE(io::inspect_checkpoint(b.temporal_upsampler).component("latent_upsampler"), nullptr);
  EXPECT_NE(io::inspect_checkpoint(b.distilled_lora).component("lora"), nullptr);
  // The IC-LoRA carries the metadata --pipeline ic-lora reads.
  EXPECT_NE(io::inspect_checkpoint(b.ic_lora).component("lora"), nullptr);
  EXPECT_EQ(io::SafetensorsFile::open(b.ic_lora)->metadata().at("reference_downscale_factor"), "1");
  // The HDR IC-LoRA: the metadata --pipeline hdr-ic-lora reads (LogC3, references at full size),
  // and factors of its own (not the IC-LoRA's).
  EXPECT_NE(io::inspect_checkpoint(b.hdr_lora).component("lora"), nullptr);
  const pipelines::hdr_ic_lora::HdrLoraConfig hdr = pipelines::hdr_ic_lora::read_hdr_lora_config(b.hdr_lora);
  EXPECT_EQ(hdr.transfer, media::HdrTransfer::LogC3);
  EXPECT_EQ(hdr.reference_downscale_factor, 1);
  EXPECT_NE(test::read_bytes(b.hdr_lora), test::read_bytes(b.ic_lora));
  // The embedded tokenizer works.
  const text::Tokenizer tok = text::load_tokenizer(b.text_encoder);
  EXPECT_GT(tok.encode_ids("a cat plays the piano", true).size(), 3u);
}

TEST(DemoBundle, IsReusedOnceCompleteAndRebuiltWhenPartial) {
  test::TempDir dir;
  const std::string d = dir.file("cache/ltx/demo");
  const generate::DemoBundle b = generate::ensure_demo_bundle(d);
  const auto stamp = std::filesystem::last_write_time(b.checkpoint);
  generate::ensure_demo_bundle(d);
  EXPECT_EQ(std::filesystem::last_write_time(b.checkpoint), stamp);  // reused, not rewritten
  std::filesystem::remove(b.distilled_lora);
  generate::ensure_demo_bundle(d);
  EXPECT_TRUE(std::filesystem::exists(b.distilled_lora));
  // No temporary folders left next to it.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.file("cache/ltx")))
    ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(DemoBundle, DefaultFolderFollowsXdgCacheHome) {
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", "/some/cache", 1);
  EXPECT_EQ(generate::default_demo_dir(),
            std::string("/some/cache/ltx/") + generate::kDemoBundleVersion);
  unsetenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (home != nullptr) {
    EXPECT_EQ(generate::default_demo_dir(),
              std::string(home) + "/.cache/ltx/" + generate::kDemoBundleVersion);
  }
  if (old) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
}

}  // namespace
}  // namespace ltx
