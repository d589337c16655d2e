// `ltx parity pipeline` as a user runs it (DEVELOPERS.md): the built binary on the end-to-end
// recordings of tools/parity/gen_e2e.py (tests/fixtures/e2e_<name>.io.safetensors), each with the
// files it was recorded with; the written latents, frames and waveform against the recording's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "support/cli_runner.h"
#include "support/e2e_compare.h"
#include "support/test_support.h"

namespace ltx::pipeline_parity_test {
namespace {

using e2e_fixture::e2e;
using e2e_fixture::psnr_db;
using e2e_fixture::rel_l2;

struct Recording {
  std::string io;
  std::vector<std::string> weights;
};

TEST(PipelineParityCli, EveryRecordingMatchesThroughTheCommand) {
  const std::string ckpt = e2e("ltx23_tiny.safetensors"), ups = e2e("ltx23_tiny_upsampler_x2.safetensors"),
                    lora = e2e("ltx23_tiny_distilled_lora.safetensors"),
                    temporal = e2e("ltx23_tiny_upsampler_temporal_x2.safetensors");
  const std::vector<Recording> recordings = {
      {"e2e_one_stage", {ckpt}},
      {"e2e_distilled", {ups, ckpt}},  // any order
      {"e2e_two_stage", {ckpt, ups, lora}},
      {"e2e_two_stage_hq", {ckpt, ups, lora}},
      {"e2e_dfr", {ckpt, ups, lora, temporal}},
      {"e2e_keyframe_interpolation", {ckpt, ups, lora}},
      {"e2e_retake", {ckpt}},
      {"e2e_dubit", {ckpt, ups, e2e("ltx23_tiny_ic_lora.safetensors")}},  // the IC-LoRA in both stages
  };
  int ran = 0;
  for (const Recording& rec : recordings) {
    const std::string io = test::fixture(rec.io + ".io.safetensors");
    if (!std::ifstream(io).good()) continue;  // a recording not generated yet
    test::TempDir dir;
    const std::string out = dir.file("out.safetensors");
    std::vector<std::string> args = {"parity", "pipeline", "--inputs", io, "--out", out};
    for (const std::string& w : rec.weights) args.insert(args.end(), {"--weights", w});
    const test::CliResult r = test::run_ltx(dir, args);
    ASSERT_EQ(r.code, 0) << rec.io << "\n" << r.err;
    EXPECT_NE(r.out.find("out.video.latent"), std::string::npos) << r.out;
    const io::SafetensorsFile ref(io), got(out);
    for (const char* name : {"out.video.latent", "out.audio.latent"})
      EXPECT_LE(rel_l2(got.tensor(name), ref.tensor(name)), 1e-5) << rec.io << " " << name;
    if (ref.contains("out.video.frames")) {
      EXPECT_GE(psnr_db(got.tensor("out.video.frames"), ref.tensor("out.video.frames")), 40.0) << rec.io;
    }
    if (ref.contains("out.audio.waveform")) {
      EXPECT_GE(psnr_db(got.tensor("out.audio.waveform"), ref.tensor("out.audio.waveform")), 40.0) << rec.io;
    }
    ++ran;
  }
  EXPECT_GE(ran, 5);  // the five committed recordings at least
}

TEST(PipelineParityCli, FailsWithOneLineAndNoOutput) {
  test::TempDir dir;
  const std::string out = dir.file("out.safetensors");
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      // Not a pipeline recording.
      {{"--inputs", test::fixture("audio_ltx23.io.safetensors"), "--weights", e2e("ltx23_tiny.safetensors")},
       "has no `request` metadata"},
      // The two-stage recording fuses the distilled LoRA in stage 2.
      {{"--inputs", test::fixture("e2e_two_stage.io.safetensors"), "--weights", e2e("ltx23_tiny.safetensors"),
        "--weights", e2e("ltx23_tiny_upsampler_x2.safetensors")},
       "fuses a LoRA; add it to --weights"},
      {{"--inputs", test::fixture("e2e_one_stage.io.safetensors"), "--weights", e2e("ltx23_tiny_upsampler_x2.safetensors")},
       "no LTX checkpoint among --weights"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"parity", "pipeline", "--out", out};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const test::CliResult r = test::run_ltx(dir, args);
    EXPECT_NE(r.code, 0) << c.error;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::ifstream(out).good()) << c.error;
  }
}

}  // namespace
}  // namespace ltx::pipeline_parity_test
