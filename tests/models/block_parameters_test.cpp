// The transformer block's parameter visitor (models/transformer/block_parameters.h), which block
// streaming relies on to move every weight of a block: it reaches each tensor the block binds,
// once, for every generation's fixture.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "io/safetensors.h"
#include "io/weights.h"
#include "models/transformer/block_parameters.h"
#include "models/transformer/model.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace tf = models::transformer;

TEST(TransformerBlockParameters, TheVisitorReachesEveryTensorOfTheBlockOnce) {
  for (const char* c : {"ltx2", "ltx23"}) {
    SCOPED_TRACE(c);
    const auto file = io::SafetensorsFile::open(test::fixture(std::string(c) + ".weights.safetensors"));
    const auto cfg = tf::LTXModelConfig::from_file(*file, tf::LTXModelType::AudioVideo);
    io::WeightMap w({file}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
    const std::string prefix = "transformer_blocks.1.";
    int64_t stored = 0;
    for (const std::string& n : w.names())
      if (n.starts_with(prefix)) stored += w.shape(n).numel();
    ASSERT_GT(stored, 0);

    const std::optional<tf::TransformerConfig> v = tf::TransformerConfig{
        cfg.inner_dim(), cfg.num_attention_heads, cfg.attention_head_dim, cfg.cross_attention_dim,
        cfg.apply_gated_attention, cfg.cross_attention_adaln, cfg.ff_bias};
    const std::optional<tf::TransformerConfig> a = tf::TransformerConfig{
        cfg.audio_inner_dim(), cfg.audio_num_attention_heads, cfg.audio_attention_head_dim,
        cfg.audio_cross_attention_dim, cfg.apply_gated_attention, cfg.cross_attention_adaln,
        cfg.audio_ff_bias};
    io::WeightMap s = w.scoped(prefix);
    tf::BasicAVTransformerBlock block =
        tf::BasicAVTransformerBlock::load(s, v, a, cfg.rope_type, cfg.norm_eps, {});
    int64_t visited = 0;
    std::set<const void*> seen;
    tf::for_each_block_tensor(block, [&](Tensor& t) {
      if (!t.defined()) return;
      visited += t.numel();
      EXPECT_TRUE(seen.insert(t.raw_data()).second) << "a tensor visited twice";
    });
    EXPECT_EQ(visited, stored) << "the visitor misses or invents block parameters";
  }
}

TEST(TransformerBlockParameters, StreamingOnTheCpuIsAnErrorNamingTheFlag) {
  EXPECT_ERROR_HAS(tf::LTXModel::from_files({test::fixture("ltx23.weights.safetensors")},
                                            tf::LTXModelType::AudioVideo, {}, {2}),
                   "--offload");
}

}  // namespace
}  // namespace ltx
