// AdaLN values per run of tokens on CUDA (ops::Summed::run_ends: an image-conditioned latent's
// pinned frame, then the rest): every consumer (rms_norm_modulate, modulate, gated_add and the
// fused residual + norm ops) equals the same op on the values repeated per token, bit for bit, in
// each kernel the shapes reach (the block-per-row vector kernel with its shared-memory cache at
// 2048 / 4096, the warp kernel at 1024, the 256-wide one, the general one at odd widths), with
// f32 values (no cache), a batch whose samples differ, a mix of per-run and per-token operands,
// and more runs than the run map holds (both materialised per token first).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/residual_norm.h"
#include "cuda/cuda_test_util.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/summed.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::same_bytes;

struct RunCase {
  int64_t b, d;
  std::vector<int64_t> ends;
};

std::string describe(const RunCase& c, DType dtype) {
  std::string ends;
  for (const int64_t e : c.ends) ends += (ends.empty() ? "" : ",") + std::to_string(e);
  return "B " + std::to_string(c.b) + " D " + std::to_string(c.d) + " run ends {" + ends + "} " +
         dtype_name(dtype);
}

TEST(CudaAdaRuns, ConsumersEqualThePerTokenValuesBitForBit) {
  LTX_REQUIRE_CUDA();
  const std::vector<RunCase> cases = {
      {1, 4096, {7, 40}},        {2, 4096, {1, 5, 33}},  {2, 2048, {16, 17, 50}},
      {2, 1024, {3, 8}},         {3, 256, {2, 9}},       {2, 33, {4, 9}},
      {1, 64, {5}},              {2, 512, {1, 2, 3, 4, 5, 6, 7, 8, 9}},  // 9 > ops::kMaxSummedRuns
  };
  uint64_t seed = 2600;
  for (const RunCase& c : cases) {
    for (const DType dtype : {DType::BF16, DType::F32}) {
      SCOPED_TRACE(describe(c, dtype));
      const int64_t t = c.ends.back(), runs = static_cast<int64_t>(c.ends.size());
      const auto gpu = [&](const Shape& s, float lo = -1.f, float hi = 1.f) {
        return test::random_tensor(s, seed++, lo, hi).to(kGpu, dtype);
      };
      const Tensor x = gpu({c.b, t, c.d}, -3.f, 5.f), y = gpu({c.b, t, c.d}, -2.f, 2.f);
      const Tensor table = gpu({5, c.d});
      const Tensor emb = gpu({c.b, runs, 5 * c.d}, -0.5f, 0.5f);
      const Tensor emb_tokens = ops::expand_runs(emb, c.ends).view({c.b, t, 5, c.d});
      const auto run = [&](int64_t row) {
        return ops::Summed(table.select(0, row), emb.view({c.b, runs, 5, c.d}).select(2, row), c.ends);
      };
      const auto token = [&](int64_t row) {
        return ops::Summed(table.select(0, row), emb_tokens.select(2, row));
      };

      EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(x, run(1), run(0), 1e-6),
                             ops::rms_norm_modulate(x, token(1), token(0), 1e-6)));
      EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(test::non_contiguous_copy(x), run(1), run(0), 1e-6),
                             ops::rms_norm_modulate(x, token(1), token(0), 1e-6)));
      // A per-token shift next to a per-run scale: materialised per token, the same bits.
      EXPECT_TRUE(same_bytes(ops::rms_norm_modulate(x, run(1), token(0), 1e-6),
                             ops::rms_norm_modulate(x, token(1), token(0), 1e-6)));
      EXPECT_TRUE(same_bytes(ops::modulate(x, run(1), run(0)), ops::modulate(x, token(1), token(0))));
      EXPECT_TRUE(same_bytes(ops::modulate(x, run(1), token(0)), ops::modulate(x, token(1), token(0))));
      EXPECT_TRUE(same_bytes(ops::gated_add(x, y, run(2)), ops::gated_add(x, y, token(2))));
      EXPECT_TRUE(same_bytes(ops::gated_add(x, test::non_contiguous_copy(y), run(2)),
                             ops::gated_add(x, y, token(2))));

      EXPECT_EQ(cuda::gated_add_rms_norm_modulate_fusable(x, y, run(2), run(1), run(0)),
                cuda::gated_add_rms_norm_modulate_fusable(x, y, token(2), token(1), token(0)));
      if (dtype == DType::BF16 && c.d % 8 == 0) {
        EXPECT_TRUE(cuda::gated_add_rms_norm_modulate_fusable(x, y, run(2), run(1), run(0)));
      }
      const ops::ResidualNorm got = ops::gated_add_rms_norm_modulate(x, y, run(2), run(1), run(0), 1e-6);
      const ops::ResidualNorm want =
          ops::gated_add_rms_norm_modulate(x, y, token(2), token(1), token(0), 1e-6);
      EXPECT_TRUE(same_bytes(got.x, want.x));
      EXPECT_TRUE(same_bytes(got.h, want.h));
      const ops::ResidualNorm2 got2 =
          ops::gated_add_rms_norm_modulate2(x, y, run(2), run(1), run(0), run(3), run(4), 1e-6);
      const ops::ResidualNorm2 want2 = ops::gated_add_rms_norm_modulate2(
          x, y, token(2), token(1), token(0), token(3), token(4), 1e-6);
      EXPECT_TRUE(same_bytes(got2.x, want2.x));
      EXPECT_TRUE(same_bytes(got2.h, want2.h));
      EXPECT_TRUE(same_bytes(got2.h2, want2.h2));
      // The gate per token, the modulations per run (and the other way round).
      const ops::ResidualNorm2 mixed =
          ops::gated_add_rms_norm_modulate2(x, y, token(2), run(1), run(0), token(3), run(4), 1e-6);
      EXPECT_TRUE(same_bytes(mixed.x, want2.x));
      EXPECT_TRUE(same_bytes(mixed.h, want2.h));
      EXPECT_TRUE(same_bytes(mixed.h2, want2.h2));
    }
  }
}

}  // namespace
}  // namespace ltx
