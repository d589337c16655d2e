// The diffusion decoder's neighborhood attention with the fused q / k preparation
// (ops::qk_norm_rope_3d) and RoPE tables built once per grid: bit-identical to the unfused ops,
// and the tables the blocks share are the ones each call would build.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"  // same_bytes (device-independent)
#include "models/na_test_util.h"
#include "models/video_vae/transformer/attention.h"
#include "models/video_vae/transformer/blocks.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "support/test_support.h"

namespace ltx::diffusion_attention_test {
namespace {

using namespace models::video_vae;
using test::same_bytes;

TEST(NeighborhoodAttention3D, FusedProjectionIsBitIdenticalToTheUnfusedOps) {
  uint64_t seed = 40;
  for (int64_t head_dim : {16, 64}) {
    const int64_t dim = 2 * head_dim;
    const NeighborhoodAttention3D attn = test::random_na3d(dim, head_dim, {3, 3, 5}, {}, seed++);
    const Tensor y = test::random_tensor({1, 3, 4, 9, dim}, seed++);
    for (int64_t w_start : {0, -3, 5}) {  // full volume, and W chunks' shifted positions
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " W from " + std::to_string(w_start));
      const AbsRope3d rope = attn.rope_tables(3, 4, positions(9, w_start), Device::cpu());
      const NeighborhoodAttention3D::Qkv got = attn.project(y, rope);
      const NeighborhoodAttention3D::Qkv want = attn.project_unfused(y, rope);
      EXPECT_TRUE(same_bytes(got.q, want.q));
      EXPECT_TRUE(same_bytes(got.k, want.k));
      EXPECT_TRUE(same_bytes(got.v, want.v));
      EXPECT_EQ(got.q.shape(), Shape({1, 3, 4, 9, 2, head_dim}));
    }
  }
}

TEST(SwiGLU, RowChunksGiveTheUnchunkedResult) {
  // 3 x 5 x 7 = 105 tokens of width 8 (hidden 32) through chunks of 1, 4 and 13 rows, and a
  // non-contiguous input.
  const int64_t dim = 8, hidden = SwiGLU::hidden_dim(dim);
  auto linear = [](int64_t in, int64_t out, uint64_t seed) {
    nn::Linear l;
    l.weight = test::random_tensor({out, in}, seed, -0.3f, 0.3f);
    return l;
  };
  const nn::Linear gate = linear(dim, hidden, 1), up = linear(dim, hidden, 2);
  const nn::Linear down = linear(hidden, dim, 3);
  const SwiGLU mlp = SwiGLU::from(gate, up, down);
  const Tensor y = test::non_contiguous_copy(test::random_tensor({1, 3, 5, 7, dim}, 4));
  const Tensor whole = mlp(y);
  // The merged projection computes what the three separate layers do.
  EXPECT_LE(test::max_abs_diff(whole, down(ops::mul(ops::silu(gate(y)), up(y)))), 1e-6);
  const Tensor residual = test::random_tensor(y.shape(), 5);
  const Tensor y_flat = y.reshape({y.numel() / dim, dim});
  const SwiGLU::RowInput y_rows = [&](const Tensor& target, int64_t first) {
    return y_flat.narrow(0, first, target.size(0));
  };
  for (int64_t rows : {1, 4, 13}) {
    SwiGLU chunked = mlp;
    chunked.max_hidden_elements = rows * hidden;
    const Tensor got = chunked(y);
    EXPECT_EQ(got.shape(), y.shape());
    EXPECT_LE(test::max_abs_diff(got, whole), 1e-6) << rows << " rows per chunk";
    // In place on a residual: the same bits as adding the whole output.
    const Tensor acc = residual.clone();
    chunked.add_into(acc, y_rows, y_flat.size(0));
    EXPECT_TRUE(test::same_bytes(acc, ops::add(residual, got))) << rows << " rows per chunk";
  }
  EXPECT_THROW(mlp.add_into(test::non_contiguous_copy(residual), y_rows, y_flat.size(0)), Error);
}

TEST(NeighborhoodAttention3D, RopeTablesAreTheAxisTables) {
  const NeighborhoodAttention3D attn = test::random_na3d(32, 16, {3, 3, 3}, {}, 7);
  const std::vector<float> w_pos = positions(6, -2);
  const AbsRope3d rope = attn.rope_tables(3, 5, w_pos, Device::cpu());
  const std::vector<float> pos[3] = {positions(3), positions(5), w_pos};
  for (int a = 0; a < 3; ++a) {
    const AxisRope want = axis_rope(pos[a], attn.rope_inv[a]);
    EXPECT_TRUE(same_bytes(rope.cos[a], want.cos)) << a;
    EXPECT_TRUE(same_bytes(rope.sin[a], want.sin)) << a;
    EXPECT_EQ(rope.cos[a].size(1), attn.rope_split[a]);
  }
}

TEST(NeighborhoodAttention3D, SharedTablesGiveTheOutputOfPerCallTables) {
  const NeighborhoodAttention3D attn = test::random_na3d(32, 16, {3, 3, 3}, {}, 8);
  const Tensor y = test::random_tensor({1, 4, 3, 5, 32}, 9);
  const AbsRope3d rope = attn.rope_tables(4, 3, positions(5), Device::cpu());
  Tensor probed_q;
  const Tensor shared = attn(
      y, [&](const std::string& name, const Tensor& t) { if (name == "q") probed_q = t; }, &rope);
  EXPECT_TRUE(same_bytes(shared, attn(y)));
  EXPECT_TRUE(same_bytes(probed_q, attn.project(y, rope).q));
  // Tables of another grid are refused.
  const AbsRope3d other = attn.rope_tables(4, 3, positions(6), Device::cpu());
  EXPECT_ERROR_HAS(attn(y, {}, &other), "the w tables");
}

TEST(DiffusionNABlock, RopeTablesFollowTheWChunks) {
  io::WeightMap w = test::random_decoder_weights(11);
  const DiffusionNABlock block = DiffusionNABlock::load(w, 16, 8, {3, 3, 7}, 16, {});
  // W 26 in 4 chunks of 7 columns, halo 3: slabs of 13 columns from core_start - 3.
  const Shape canvas{1, 3, 4, 26, 16};
  const std::vector<AbsRope3d> chunked =
      block.rope_tables(canvas, Stage5Attention::WChunked, 4, Device::cpu());
  ASSERT_EQ(chunked.size(), 4u);
  for (int64_t i = 0; i < 4; ++i) {
    const AxisRope want = axis_rope(positions(13, 7 * i - 3), block.attn.rope_inv[2]);
    EXPECT_TRUE(same_bytes(chunked[i].cos[2], want.cos)) << i;
    EXPECT_TRUE(same_bytes(chunked[i].sin[2], want.sin)) << i;
    EXPECT_EQ(chunked[i].cos[0].size(0), 3);
    EXPECT_EQ(chunked[i].cos[1].size(0), 4);
  }
  const std::vector<AbsRope3d> full =
      block.rope_tables(canvas, Stage5Attention::FullVolume, 4, Device::cpu());
  ASSERT_EQ(full.size(), 1u);
  EXPECT_TRUE(same_bytes(full[0].cos[2], axis_rope(positions(26), block.attn.rope_inv[2]).cos));
  // Trailing empty chunks get no tables: W 10 in 8 chunks of 2 columns -> 5 chunks.
  EXPECT_EQ(block.rope_tables({1, 3, 4, 10, 16}, Stage5Attention::WChunked, 8, Device::cpu()).size(),
            5u);

  // The residual with shared tables is the one with per-call tables; a wrong count is refused.
  const Tensor x = test::random_tensor(canvas, 12);
  const Tensor scale = test::random_tensor({1, 1, 1, 1, 16}, 13, -0.2f, 0.2f);
  const Tensor shift = test::random_tensor({1, 1, 1, 1, 16}, 14, -0.2f, 0.2f);
  EXPECT_TRUE(same_bytes(block.w_chunked_attention_residual(x, scale, shift, 4, &chunked),
                         block.w_chunked_attention_residual(x, scale, shift, 4)));
  EXPECT_ERROR_HAS(block.w_chunked_attention_residual(x, scale, shift, 4, &full), "W chunks");
}

// The W-chunked attention (normalising straight from the canvas, each chunk's output added once
// the next chunk has read its halo) against the slab composition written out here: each chunk's
// slab of block-input columns (left edge repeating column 0, columns past the right neighbour
// repeating the chunk's last one, left slots a narrow previous chunk cannot fill zero), normalised,
// attended for the core columns and added; bit for bit.
TEST(DiffusionNABlock, WChunkedAttentionMatchesTheSlabComposition) {
  io::WeightMap w = test::random_decoder_weights(12);
  const DiffusionNABlock block = DiffusionNABlock::load(w, 16, 8, {3, 3, 7}, 16, {});
  struct Case {
    int64_t width, chunks;
  };
  for (const Case c : {Case{26, 1}, Case{26, 3}, Case{26, 4}, Case{10, 8}}) {
    const Tensor x = test::random_tensor({1, 3, 4, c.width, 16}, 20 + c.width + c.chunks);
    const Tensor scale = test::random_tensor({1, 1, 1, 1, 16}, 4, -0.2f, 0.2f);
    const Tensor shift = test::random_tensor({1, 1, 1, 1, 16}, 5, -0.2f, 0.2f);
    const int64_t halo = 3, chunk_w = (c.width + c.chunks - 1) / c.chunks, extent = chunk_w + 2 * halo;
    const std::vector<AbsRope3d> rope =
        block.rope_tables(x.shape(), Stage5Attention::WChunked, c.chunks, Device::cpu());
    Tensor want = x.clone();
    for (int64_t i = 0; i * chunk_w < c.width; ++i) {
      const int64_t start = i * chunk_w, len = std::min(c.width, start + chunk_w) - start;
      const int64_t prev_len = i == 0 ? 0 : std::min(c.width, i * chunk_w) - (i - 1) * chunk_w;
      const int64_t right = i + 1 < c.chunks ? std::min(c.width, start + len + halo) - start - len : 0;
      Tensor slab = Tensor::zeros({1, 3, 4, extent, 16});
      for (int64_t j = 0; j < extent; ++j) {
        int64_t col = start - halo + j;
        if (j < halo && i == 0) col = start;
        else if (j < halo && j < halo - std::min(halo, prev_len)) continue;  // stays zero
        if (j >= halo + len + right) col = start + len - 1;
        slab.narrow(3, j, 1).copy_from(x.narrow(3, col, 1));
      }
      const Tensor y = ops::rms_norm_modulate(slab, scale, shift, 1e-6, block.norm1);
      const Tensor out = block.attn.attend(block.attn.project(y, rope[static_cast<size_t>(i)]),
                                           {halo, len});
      ops::add_(want.narrow(3, start, len), out);
    }
    EXPECT_TRUE(same_bytes(block.w_chunked_attention_residual(x, scale, shift, c.chunks), want))
        << c.width << " in " << c.chunks;
  }
}

}  // namespace
}  // namespace ltx::diffusion_attention_test
