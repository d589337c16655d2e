// Runs `ltx tokenize` (LTX_BINARY) through popen: text on stdin, a JSON id array on stdout.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using nlohmann::json;
using test::TempDir;

struct TokRun {
  int code = -1;
  std::string out;
};

// Feeds `input` to `ltx tokenize <args>` on stdin; stderr is returned through `err` when given.
TokRun tokenize(const TempDir& dir, const std::string& input, const std::vector<std::string>& args,
                std::string* err = nullptr) {
  std::vector<std::string> full = {"tokenize"};
  full.insert(full.end(), args.begin(), args.end());
  const test::CliResult r = test::run_ltx(dir, full, &input);
  if (err) *err = r.err;
  return {r.code, r.out};
}

const json& cases() {
  static const json c = json::parse(test::read_bytes(test::fixture("text_tokenizer_cases.json")));
  return c;
}

TEST(TokenizeCli, PrintsTheLibraryIdsForEveryCaseWithAndWithoutSpecialTokens) {
  TempDir dir;
  for (const char* flavor : {"gemma3", "gemma4"}) {
    const std::string tok = test::fixture(str("text_tokenizer_", flavor, ".json"));
    // A few cases keep the test fast (each run starts the binary); the library-level tests cover
    // all 27.
    for (const char* name : {"ascii", "emoji_zwj", "chat_markup_g3"}) {
      const json* c = nullptr;
      for (const json& x : cases()["cases"])
        if (x["name"] == name) c = &x;
      ASSERT_NE(c, nullptr) << name;
      const std::string text = (*c)["text"].get<std::string>();
      std::string err;
      TokRun r = tokenize(dir, text, {"--tokenizer", tok}, &err);
      ASSERT_EQ(r.code, 0) << err;
      ASSERT_FALSE(r.out.empty());
      EXPECT_EQ(r.out.back(), '\n');
      EXPECT_EQ(json::parse(r.out), (*c)[flavor]["ids"]) << flavor << " " << name;
      if (std::string(name) != "chat_markup_g3") continue;
      r = tokenize(dir, text, {"--tokenizer", tok, "--no-special-tokens"}, &err);
      ASSERT_EQ(r.code, 0) << err;
      EXPECT_EQ(json::parse(r.out), (*c)[flavor]["ids_no_special"]) << flavor << " " << name;
    }
  }
}

TEST(TokenizeCli, AcceptsTextEncoderFilesAndRootFolders) {
  TempDir dir;
  const json& c = cases()["cases"][0];
  const std::string text = c["text"].get<std::string>();
  for (const char* flavor : {"gemma3", "gemma4"}) {
    std::string err;
    const TokRun r = tokenize(
        dir, text, {"--tokenizer", test::fixture(str("text_", flavor, ".te.safetensors"))}, &err);
    ASSERT_EQ(r.code, 0) << err;
    EXPECT_EQ(json::parse(r.out), c[flavor]["hf_ids"]) << flavor;
  }
  std::filesystem::create_directories(dir.file("root"));
  test::write_bytes(dir.file("root/tokenizer.json"),
                    test::read_bytes(test::fixture("text_tokenizer_gemma3.json")));
  std::string err;
  const TokRun r = tokenize(dir, text, {"--tokenizer", dir.file("root")}, &err);
  ASSERT_EQ(r.code, 0) << err;
  EXPECT_EQ(json::parse(r.out), c["gemma3"]["ids"]);
}

TEST(TokenizeCli, StdinIsTakenVerbatimIncludingATrailingNewline) {
  TempDir dir;
  const std::string tok = test::fixture("text_tokenizer_gemma3.json");
  const TokRun a = tokenize(dir, "x", {"--tokenizer", tok, "--no-special-tokens"});
  const TokRun b = tokenize(dir, "x\n", {"--tokenizer", tok, "--no-special-tokens"});
  ASSERT_EQ(a.code, 0);
  ASSERT_EQ(b.code, 0);
  EXPECT_EQ(json::parse(a.out), json::array({327}));
  EXPECT_EQ(json::parse(b.out), json::array({327, 19}));  // "\n" is added token 19
}

TEST(TokenizeCli, BadInputsFailWithOneErrorLine) {
  TempDir dir;
  std::string err;
  TokRun r = tokenize(dir, "x", {"--tokenizer", dir.file("missing.json")}, &err);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(err.find("missing.json"), std::string::npos) << err;

  test::write_bytes(dir.file("broken.json"), "{\"model\": ");
  r = tokenize(dir, "x", {"--tokenizer", dir.file("broken.json")}, &err);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(err.find("broken.json"), std::string::npos) << err;
  EXPECT_NE(err.find("not valid JSON"), std::string::npos) << err;

  r = tokenize(dir, "ab\xFF", {"--tokenizer", test::fixture("text_tokenizer_gemma3.json")}, &err);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(err.find("UTF-8"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

  r = tokenize(dir, "x", {}, &err);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(err.find("--tokenizer"), std::string::npos) << err;
}

}  // namespace
}  // namespace ltx
