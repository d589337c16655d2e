// The transformer against the golden reference outputs of every fixture case, through the
// `transformer` parity component (the same code path as `ltx parity transformer`).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "parity/parity.h"
#include "support/test_support.h"

namespace ltx {
namespace {

// Outputs the CPU backend does not compute (f64 and bf16 compute).
bool expected_missing(const std::string& name) {
  return name.starts_with("out.main_f64.") || name.starts_with("out.bf16.");
}

// README section 3 tolerances for the intermediates, as max |x - ref| / max |ref| (or absolute for
// the RoPE tables).
struct InterTolerance {
  double value;
  bool absolute;
};
InterTolerance inter_tolerance(const std::string& name) {
  if (name.find("pe_cos") != std::string::npos || name.find("pe_sin") != std::string::npos)
    return {1e-3, true};
  if (name.starts_with("inter.block")) return {1e-4, false};
  return {1e-5, false};
}

class TransformerParity : public ::testing::TestWithParam<const char*> {};

TEST_P(TransformerParity, EveryVariantAndIntermediateMatchesTheReference) {
  const std::string c = GetParam();
  test::TempDir dir;
  parity::Args args;
  args.weights = {test::fixture(c + ".weights.safetensors")};
  if (c == "ltx23") args.weights.push_back(test::fixture("ltx23.weights.bf16.safetensors"));
  args.inputs = test::fixture(c + ".io.safetensors");
  args.out = dir.file("out.safetensors");
  const parity::ComponentInfo* info = nullptr;
  for (const auto& ci : parity::components())
    if (std::string(ci.name) == "transformer") info = &ci;
  ASSERT_NE(info, nullptr);
  {
    parity::Run run(args);
    info->fn(run);
    ASSERT_EQ(run.finish(), 0);
  }

  const io::SafetensorsFile out(args.out), ref(args.inputs);
  int outputs = 0, inters = 0;
  for (const std::string& name : ref.names()) {
    if (name.starts_with("out.")) {
      if (expected_missing(name)) {
        EXPECT_FALSE(out.contains(name)) << name;
        continue;
      }
      ASSERT_TRUE(out.contains(name)) << c << ": " << name << " was not computed";
      const parity::ErrorStats s = parity::compare(out.tensor(name), ref.tensor(name));
      std::printf("[%s] %-40s rel_l2 %.3e  max_rel %.3e\n", c.c_str(), name.c_str(), s.rel_l2,
                  s.max_rel);
      EXPECT_LE(s.rel_l2, 1e-4) << c << ": " << name;
      ++outputs;
    } else if (name.starts_with("inter.")) {
      ASSERT_TRUE(out.contains(name)) << c << ": " << name << " was not written";
      const parity::ErrorStats s = parity::compare(out.tensor(name), ref.tensor(name));
      const InterTolerance tol = inter_tolerance(name);
      EXPECT_LE(tol.absolute ? s.max_abs : s.max_rel, tol.value) << c << ": " << name;
      ++inters;
    }
  }
  EXPECT_GE(outputs, 20) << c;
  EXPECT_GE(inters, 20) << c;
}

INSTANTIATE_TEST_SUITE_P(Cases, TransformerParity,
                         ::testing::Values("ltx2", "ltx23", "ltx25", "ltx25_kvcache"));

}  // namespace
}  // namespace ltx
