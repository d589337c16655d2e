// `ltx parity text-encoder` as a user runs it (DEVELOPERS.md): the built binary on the golden text
// cases, a Gemma 3 root folder + the LTX-2.3 checkpoint and the Gemma 4 text-encoder file + the
// LTX-2.5 transformer file (hidden states, ids, enhancement and the contexts), and refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "parity/parity.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::run_ltx;
using Result = test::CliResult;

// The reported max_rel of `name` (the fourth column of its line).
double reported_max_rel(const std::string& out, const std::string& name) {
  const size_t at = out.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  std::istringstream line(out.substr(at + 1, out.find('\n', at + 1) - at - 1));
  std::string n;
  double max_abs = 0, rel_l2 = 0, max_rel = 0;
  line >> n >> max_abs >> rel_l2 >> max_rel;
  return line ? max_rel : -1;
}

// The contexts (features of prompt 0, every prompt's encodings, their f64 twins) at rel L2 <= 1e-5.
void expect_contexts_match(const Result& r, const std::string& out, const std::string& io_name) {
  const io::SafetensorsFile written(out), ref(test::fixture(io_name));
  for (const char* name :
       {"out.features.video", "out.features.audio", "out.video_encoding", "out.audio_encoding",
        "out.f64.video_encoding", "out.f64.audio_encoding"}) {
    ASSERT_TRUE(written.contains(name)) << name << "\n" << r.out;
    EXPECT_EQ(written.info(name).shape, ref.info(name).shape) << name;
    EXPECT_LE(parity::compare(written.tensor(name), ref.tensor(name)).rel_l2, 1e-5) << name;
    EXPECT_LE(reported_max_rel(r.out, name), 1e-5) << name << "\n" << r.out;
  }
  EXPECT_EQ(written.info("out.f64.video_encoding").dtype, DType::F64);
}

TEST(TextEncoderParityCli, Gemma3RootFolderGivesHiddenStatesIdsAndGreedyEnhancement) {
  test::TempDir dir;
  const std::string out = dir.file("out.safetensors");
  const Result r =
      run_ltx(dir, {"parity", "text-encoder", "--weights", test::fixture("text_gemma3_root"),
                    "--weights", test::fixture("text_ltx23.ckpt.safetensors"), "--inputs",
                    test::fixture("text_ltx23.io.safetensors"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* name : {"out.hidden_states", "inter.layer0.self_attn_out",
                           "inter.last_layer_raw", "out.enhance.greedy.logits"}) {
    const double e = reported_max_rel(r.out, name);
    EXPECT_GE(e, 0.0) << name << "\n" << r.out;
    EXPECT_LE(e, 1e-5) << name << "\n" << r.out;
  }
  // Ids are exact.
  for (const char* name :
       {"in.input_ids", "in.attention_mask", "in.enhance.input_ids",
        "out.enhance.greedy.generated_ids", "inter.rope.full_attention_inv_freq",
        "out.encoding_mask"})
    EXPECT_EQ(reported_max_rel(r.out, name), 0.0) << name << "\n" << r.out;
  expect_contexts_match(r, out, "text_ltx23.io.safetensors");
  // Only the torch-RNG sampled enhancement is left.
  EXPECT_NE(r.out.find("not computed (1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("out.enhance.sampled.generated_ids"), std::string::npos) << r.out;
  const io::SafetensorsFile written(out);
  EXPECT_EQ(written.info("out.enhance.greedy.generated_ids").dtype, DType::I64);
  EXPECT_EQ(written.info("out.hidden_states").shape, (Shape{7, 3, 1024, 24}));
}

TEST(TextEncoderParityCli, Gemma4TextEncoderFileMatchesTheLtx25Case) {
  test::TempDir dir;
  const Result r = run_ltx(
      dir, {"parity", "text-encoder", "--weights", test::fixture("text_gemma4.te.safetensors"),
            "--weights", test::fixture("text_ltx25.transformer.safetensors"), "--inputs",
            test::fixture("text_ltx25.io.safetensors"), "--out", dir.file("out.safetensors")});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_LE(reported_max_rel(r.out, "out.hidden_states"), 1e-5) << r.out;
  EXPECT_GE(reported_max_rel(r.out, "out.hidden_states"), 0.0) << r.out;
  EXPECT_EQ(reported_max_rel(r.out, "in.input_ids"), 0.0) << r.out;
  // The split pack: the projection comes from the text-encoder file itself.
  expect_contexts_match(r, dir.file("out.safetensors"), "text_ltx25.io.safetensors");
  EXPECT_EQ(r.out.find("not computed"), std::string::npos) << r.out;
}

TEST(TextEncoderParityCli, WithoutAnLtxFileComputesHiddenStatesOnly) {
  test::TempDir dir;
  const Result r = run_ltx(
      dir, {"parity", "text-encoder", "--weights", test::fixture("text_gemma4.te.safetensors"),
            "--inputs", test::fixture("text_ltx25.io.safetensors"), "--out",
            dir.file("out.safetensors")});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_LE(reported_max_rel(r.out, "out.hidden_states"), 1e-5) << r.out;
  EXPECT_NE(r.out.find("contexts skipped"), std::string::npos) << r.out;
  EXPECT_EQ(reported_max_rel(r.out, "out.video_encoding"), -1) << r.out;
}

TEST(TextEncoderParityCli, RefusesATextEncoderTheCheckpointWasNotTrainedWith) {
  test::TempDir dir;
  const std::string out = dir.file("out.safetensors");
  const Result r = run_ltx(
      dir, {"parity", "text-encoder", "--weights", test::fixture("text_gemma3.te.safetensors"),
            "--weights", test::fixture("text_ltx25.transformer.safetensors"), "--inputs",
            test::fixture("text_ltx25.io.safetensors"), "--out", out});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("text_ltx25.transformer.safetensors"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("text_gemma3.te.safetensors"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::ifstream(out).good());
}

}  // namespace
}  // namespace ltx
