// Block streaming (`--offload cpu` / `disk`, models/block_streaming.h) on the GPU: the transformer
// whose blocks stream from page-locked host memory (or, for disk, from the mapped file through
// staging buffers) through 2 or 3 device slots computes the resident model's outputs bit for bit
// (same kernels in the same order, only the weights' addresses differ), pass after pass through
// the same slots, with fewer device bytes, also with the first blocks resident; LoRA fusion into the streamed model's host weights
// gives the resident fused model's outputs; the same for Gemma's layers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/device_query.h"
#include "core/hash.h"
#include "cuda/cuda_test_util.h"
#include "generate/model_provider.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/text/gemma/model.h"
#include "models/text/gemma_assets.h"
#include "models/text/prompt_encoder.h"
#include "models/transformer/model.h"
#include "support/test_support.h"

namespace ltx::block_streaming_test {
namespace {

namespace tf = models::transformer;

const std::string kCase = "ltx23";

std::string weights_path() { return test::fixture(kCase + ".weights.safetensors"); }

// The fixture's inputs on the GPU, in the model dtype where the pipelines pass it.
tf::Modality read_stream(const io::SafetensorsFile& io, const std::string& stream) {
  const std::string p = "in." + stream + ".";
  tf::Modality m;
  m.latent = io.tensor(p + "latent").to(test::kGpu, DType::BF16);
  m.sigma = io.tensor(p + "sigma").to(test::kGpu, DType::F32);
  m.timesteps = io.tensor(p + "timesteps").to(test::kGpu, DType::F32);
  m.positions = io.tensor(p + "positions").to(test::kGpu, DType::F32);
  m.context = io.tensor(p + "context").to(test::kGpu, DType::BF16);
  return m;
}

struct Inputs {
  tf::Modality video, audio;
};

Inputs fixture_inputs() {
  const io::SafetensorsFile io(test::fixture(kCase + ".io.safetensors"));
  return {read_stream(io, "video"), read_stream(io, "audio")};
}

void expect_same_outputs(const tf::ModelOutputs& got, const tf::ModelOutputs& want) {
  ASSERT_TRUE(got.video.defined() && want.video.defined());
  ASSERT_TRUE(got.audio.defined() && want.audio.defined());
  EXPECT_TRUE(test::same_bytes(got.video, want.video)) << "video velocity";
  EXPECT_TRUE(test::same_bytes(got.audio, want.audio)) << "audio velocity";
}

// The fixture's config with `layers` blocks and weights drawn per name (the same values whichever
// device asks: made on the host, rounded to the dtype there, then moved).
tf::LTXModelConfig config_with_layers(int64_t layers) {
  const auto file = io::SafetensorsFile::open(weights_path());
  tf::LTXModelConfig c = tf::LTXModelConfig::from_file(*file, tf::LTXModelType::AudioVideo);
  c.num_layers = layers;
  return c;
}

tf::LTXModel synthetic_model(const tf::LTXModelConfig& c, const models::BlockStreaming& streaming) {
  io::WeightMap w = io::WeightMap::synthetic(
      [](const std::string& name, const Shape& shape, DType dtype, Device device) {
        return test::random_tensor(shape, fnv1a(name), -0.05f, 0.05f).to(dtype).to(device);
      });
  return tf::LTXModel::load(w, c, {DType::BF16, test::kGpu}, streaming);
}

int64_t live_bytes() { return backend::memory_stats(test::kGpu).live_bytes; }

TEST(CudaBlockStreaming, StreamedForwardIsTheResidentForwardBitForBit) {
  LTX_REQUIRE_CUDA();
  const Inputs in = fixture_inputs();
  const tf::LTXModelConfig c = config_with_layers(5);
  const int64_t before_resident = live_bytes();
  const tf::LTXModel resident = synthetic_model(c, {});
  const int64_t resident_bytes = live_bytes() - before_resident;
  const tf::ModelOutputs want = resident.forward(&in.video, &in.audio, nullptr);
  const tf::ModelOutputs want_video = resident.forward(&in.video, nullptr, nullptr);
  ASSERT_FALSE(resident.streams_blocks());

  for (const auto& [slots, from_file] :
       {std::pair{int64_t{2}, false}, std::pair{int64_t{3}, false}, std::pair{int64_t{2}, true},
        std::pair{int64_t{3}, true}}) {
    SCOPED_TRACE(str(slots, " slots", from_file ? ", from the bound host tensors (disk)" : ""));
    const int64_t before = live_bytes();
    const tf::LTXModel streamed = synthetic_model(c, {slots, from_file});
    const int64_t streamed_bytes = live_bytes() - before;
    ASSERT_TRUE(streamed.streams_blocks());
    EXPECT_EQ(streamed.streaming_slots(), slots);
    EXPECT_EQ(streamed.num_blocks(), 5);
    EXPECT_GT(streamed.streamed_host_bytes(), 0);
    // The device holds the resident part and the slots: fewer bytes than all five blocks.
    EXPECT_LT(streamed_bytes, resident_bytes);
    // Several passes reuse the same slots; each is the resident forward.
    for (int pass = 0; pass < 3; ++pass) {
      SCOPED_TRACE(str("pass ", pass));
      expect_same_outputs(streamed.forward(&in.video, &in.audio, nullptr), want);
    }
    // One stream alone (no side line) streams the same way.
    const tf::ModelOutputs video_only = streamed.forward(&in.video, nullptr, nullptr);
    EXPECT_TRUE(test::same_bytes(video_only.video, want_video.video));
  }
}

TEST(CudaBlockStreaming, MoreSlotsThanBlocksUsesOneSlotPerBlock) {
  LTX_REQUIRE_CUDA();
  const Inputs in = fixture_inputs();
  const tf::LTXModelConfig c = config_with_layers(2);
  const tf::LTXModel resident = synthetic_model(c, {});
  const tf::LTXModel streamed = synthetic_model(c, {3});
  EXPECT_EQ(streamed.streaming_slots(), 2);
  expect_same_outputs(streamed.forward(&in.video, &in.audio, nullptr),
                      resident.forward(&in.video, &in.audio, nullptr));
}

// Partial residency (the memory planner's choice under a budget): the first K blocks stay on the
// device, the rest stream; K = 0 is --offload cpu|disk, K >= the block count the resident model.
// Every K gives the resident forward bit for bit, and the device holds more the larger K.
TEST(CudaBlockStreaming, PartlyResidentBlocksGiveTheResidentForwardBitForBit) {
  LTX_REQUIRE_CUDA();
  const Inputs in = fixture_inputs();
  const tf::LTXModelConfig c = config_with_layers(5);
  const tf::LTXModel resident = synthetic_model(c, {});
  const tf::ModelOutputs want = resident.forward(&in.video, &in.audio, nullptr);
  for (bool from_file : {false, true}) {
    int64_t previous_bytes = 0;
    for (int64_t k : {0, 1, 3, 4, 5, 7}) {
      SCOPED_TRACE(str(k, " resident", from_file ? ", disk" : ", cpu"));
      const int64_t before = live_bytes();
      const tf::LTXModel m = synthetic_model(c, {2, from_file, k});
      const int64_t bytes = live_bytes() - before;
      EXPECT_EQ(m.streams_blocks(), k < 5);
      EXPECT_EQ(m.resident_blocks(), std::min<int64_t>(k, 5));
      EXPECT_EQ(m.num_blocks(), 5);
      if (k > 0 && k <= 3) {
        EXPECT_GT(bytes, previous_bytes) << "a resident block takes device memory";
      }
      previous_bytes = bytes;
      for (int pass = 0; pass < 2; ++pass) {
        SCOPED_TRACE(str("pass ", pass));
        expect_same_outputs(m.forward(&in.video, &in.audio, nullptr), want);
      }
      const tf::ModelOutputs video_only = m.forward(&in.video, nullptr, nullptr);
      EXPECT_TRUE(test::same_bytes(video_only.video,
                                   resident.forward(&in.video, nullptr, nullptr).video));
    }
  }
}

// The fixture's weights rewritten in bf16, so that a bf16 model binds them as views of the mapped
// file (what --offload disk reads at every pass).
std::string write_bf16_weights(const test::TempDir& dir) {
  const io::SafetensorsFile f(weights_path());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : f.names()) {
    const Tensor t = f.tensor(n);
    tensors.emplace_back(n, dtype_is_floating(t.dtype()) ? t.to(DType::BF16) : t);
  }
  const std::string path = dir.file("weights.bf16.safetensors");
  io::write_safetensors(path, tensors, f.metadata());
  return path;
}

TEST(CudaBlockStreaming, StreamedBlocksFromTheFixtureFileMatchTheResidentModel) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const Inputs in = fixture_inputs();
  for (const std::string& path : {weights_path(), write_bf16_weights(dir)}) {
    SCOPED_TRACE(path);
    const auto resident =
        tf::LTXModel::from_files({path}, tf::LTXModelType::AudioVideo, {DType::BF16, test::kGpu});
    const tf::ModelOutputs want = resident.forward(&in.video, &in.audio, nullptr);
    for (bool from_file : {false, true}) {
      SCOPED_TRACE(from_file ? "disk" : "cpu");
      const auto streamed = tf::LTXModel::from_files(
          {path}, tf::LTXModelType::AudioVideo, {DType::BF16, test::kGpu}, {2, from_file});
      ASSERT_TRUE(streamed.streams_blocks());
      for (int pass = 0; pass < 2; ++pass)
        expect_same_outputs(streamed.forward(&in.video, &in.audio, nullptr), want);
    }
  }
}

// A LoRA file over weights of both blocks (the factors rounded to bf16 by the fusion anyway).
std::string write_block_lora(const test::TempDir& dir) {
  const io::SafetensorsFile weights(weights_path());
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint64_t seed = 100;
  for (const char* target : {"transformer_blocks.0.attn1.to_q", "transformer_blocks.1.ff.net.2",
                             "transformer_blocks.1.audio_attn2.to_v"}) {
    const Shape shape =
        weights.tensor(str("model.diffusion_model.", target, ".weight")).shape();
    const int64_t out = shape[0], in = shape[1], rank = 4;
    tensors.emplace_back(str("diffusion_model.", target, ".lora_A.weight"),
                         test::random_tensor({rank, in}, seed++, -0.5f, 0.5f).to(DType::BF16));
    tensors.emplace_back(str("diffusion_model.", target, ".lora_B.weight"),
                         test::random_tensor({out, rank}, seed++, -0.5f, 0.5f).to(DType::BF16));
  }
  const std::string path = dir.file("blocks_lora.safetensors");
  io::write_safetensors(path, tensors);
  return path;
}

TEST(CudaBlockStreaming, LoraFusedIntoTheHostCopiesIsTheResidentFusedModel) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const Inputs in = fixture_inputs();
  const lora::LoraSet set = {{lora::LoraFile::open(write_block_lora(dir)), 0.8}};
  const nn::LoadOptions gpu{DType::BF16, test::kGpu};

  // Resident: the fused state dict (CPU fusion, the reference's rounding) bound on the GPU.
  const auto file = io::SafetensorsFile::open(weights_path());
  const auto config = tf::LTXModelConfig::from_file(*file, tf::LTXModelType::AudioVideo);
  io::WeightMap fused_w({file}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  lora::fuse_into(fused_w, set);
  const tf::LTXModel fused_resident = tf::LTXModel::load(fused_w, config, gpu);
  const auto base_resident =
      tf::LTXModel::from_files({weights_path()}, tf::LTXModelType::AudioVideo, gpu);

  const tf::ModelOutputs want_base = base_resident.forward(&in.video, &in.audio, nullptr);
  const tf::ModelOutputs want_fused = fused_resident.forward(&in.video, &in.audio, nullptr);

  // Streamed, as the providers load it: the fuser writes the blocks' host weights (cpu: the
  // page-locked copies; disk: its own host buffers, read at every pass).
  for (bool from_file : {false, true}) {
    SCOPED_TRACE(from_file ? "disk" : "cpu");
    const auto st = generate::load_stage_transformer(weights_path(), {set}, gpu, {2, from_file});
    ASSERT_TRUE(st->model->streams_blocks());
    ASSERT_NE(st->fuser, nullptr);
    EXPECT_EQ(st->fuser->targets().size(), 3u);
    for (const std::string& t : st->fuser->targets())
      EXPECT_TRUE(st->fuser->bound(t).device().is_cpu()) << t << ": a streamed block's weight";
    const tf::ModelOutputs base = st->model->forward(&in.video, &in.audio, nullptr);
    expect_same_outputs(base, want_base);

    st->fuser->apply(set);
    const tf::ModelOutputs fused = st->model->forward(&in.video, &in.audio, nullptr);
    expect_same_outputs(fused, want_fused);
    EXPECT_FALSE(test::same_bytes(fused.video, base.video)) << "the LoRA changed nothing";

    st->fuser->reset();
    expect_same_outputs(st->model->forward(&in.video, &in.audio, nullptr), want_base);
  }
}

// LoRA with partial residency: block 0 resident (its target's buffer on the device, fused there
// as in a resident model), block 1 streamed (its targets' buffers on the host, fused on the CPU as
// with every block streamed). A GPU fusion may land one bf16 step from the CPU's (lora/fuse.h),
// so each fused buffer is compared with the one made the same way: the resident model's for block
// 0, the all-streamed model's for block 1.
TEST(CudaBlockStreaming, LoraFusedIntoPartlyResidentBlocksFusesEachWhereItLives) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const Inputs in = fixture_inputs();
  const lora::LoraSet set = {{lora::LoraFile::open(write_block_lora(dir)), 0.8}};
  const nn::LoadOptions gpu{DType::BF16, test::kGpu};
  const auto resident = generate::load_stage_transformer(weights_path(), {set}, gpu, {});
  ASSERT_NE(resident->fuser, nullptr);
  const tf::ModelOutputs want_base = resident->model->forward(&in.video, &in.audio, nullptr);
  resident->fuser->apply(set);

  for (bool from_file : {false, true}) {
    SCOPED_TRACE(from_file ? "disk" : "cpu");
    const auto all_streamed = generate::load_stage_transformer(weights_path(), {set}, gpu, {2, from_file});
    all_streamed->fuser->apply(set);
    const auto st = generate::load_stage_transformer(weights_path(), {set}, gpu, {2, from_file, 1});
    ASSERT_TRUE(st->model->streams_blocks());
    EXPECT_EQ(st->model->resident_blocks(), 1);
    ASSERT_NE(st->fuser, nullptr);
    EXPECT_EQ(st->fuser->targets().size(), 3u);
    for (const std::string& t : st->fuser->targets())
      EXPECT_EQ(st->fuser->bound(t).device().is_cpu(), tf::LTXModel::block_index(t) >= 1) << t;
    const tf::ModelOutputs base = st->model->forward(&in.video, &in.audio, nullptr);
    expect_same_outputs(base, want_base);

    st->fuser->apply(set);
    for (const std::string& t : st->fuser->targets()) {
      const auto& same_way = tf::LTXModel::block_index(t) >= 1 ? all_streamed : resident;
      EXPECT_TRUE(test::same_bytes(st->fuser->bound(t), same_way->fuser->bound(t))) << t;
    }
    const tf::ModelOutputs fused = st->model->forward(&in.video, &in.audio, nullptr);
    EXPECT_FALSE(test::same_bytes(fused.video, base.video)) << "the LoRA changed nothing";
    st->fuser->reset();
    expect_same_outputs(st->model->forward(&in.video, &in.audio, nullptr), want_base);
  }
}

// Gemma 3 (root folder) and Gemma 4 unified (KV-shared layers, per-layer inputs): the streamed
// decoder layers give the resident model's hidden states, through encode() and through the
// KV-cached forward() of prompt enhancement.
TEST(CudaBlockStreaming, StreamedGemmaLayersGiveTheResidentHiddenStatesBitForBit) {
  LTX_REQUIRE_CUDA();
  const nn::LoadOptions gpu{DType::BF16, test::kGpu};
  for (const auto& [path, io_case] : {std::pair{"text_gemma3_root", "text_ltx23"},
                                      std::pair{"text_gemma4.te.safetensors", "text_ltx25"}}) {
    SCOPED_TRACE(path);
    const text::GemmaAssets assets = text::GemmaAssets::load(test::fixture(path));
    const text::GemmaTextModel resident = text::GemmaTextModel::load(assets, gpu);
    ASSERT_FALSE(resident.streams_layers());
    for (bool from_file : {false, true}) {
      SCOPED_TRACE(from_file ? "disk" : "cpu");
     // All layers streamed, then the first layer resident (partial residency: a KV-shared layer
     // may read a resident layer's keys).
     for (int64_t k : {0, 1}) {
      SCOPED_TRACE(str(k, " resident"));
      const text::GemmaTextModel streamed =
          text::GemmaTextModel::load(assets, gpu, {2, from_file, k});
      ASSERT_EQ(streamed.streams_layers(), k < resident.config().num_layers);

      const io::SafetensorsFile io(test::fixture(std::string(io_case) + ".io.safetensors"));
      const Tensor ids = io.tensor("in.input_ids").narrow(0, 0, 1);
      const Tensor mask = io.tensor("in.attention_mask").narrow(0, 0, 1);
      const std::vector<Tensor> want = resident.encode(ids, mask);
      for (int pass = 0; pass < 2; ++pass) {
        const std::vector<Tensor> got = streamed.encode(ids, mask);
        ASSERT_EQ(got.size(), want.size());
        for (size_t l = 0; l < got.size(); ++l)
          EXPECT_TRUE(test::same_bytes(got[l], want[l])) << "pass " << pass << ", hidden state " << l;
      }

      // The last 8 tokens through the KV cache.
      const int64_t T = ids.size(1), n = 8;
      std::vector<int64_t> pos(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = t;
      const Tensor last_ids = ids.narrow(1, T - n, n).contiguous();
      const Tensor last_mask = Tensor::full({1, n}, 1.0, DType::I64);
      const Tensor positions = Tensor::from_vector(pos, {1, n});
      text::GemmaKvCache want_cache = resident.make_cache(1, n), got_cache = streamed.make_cache(1, n);
      const Tensor want_h = resident.forward(last_ids, positions, last_mask, want_cache);
      const Tensor got_h = streamed.forward(last_ids, positions, last_mask, got_cache);
      EXPECT_TRUE(test::same_bytes(got_h, want_h)) << "forward() with the KV cache";
     }
    }
  }
}

// The prompt encoder's Gemma streamed (`--offload cpu`): the one forward of a default encode()
// reads its layers from the bound file, a kept-loaded encoder from page-locked copies; both give
// the resident encoder's contexts bit for bit.
TEST(CudaBlockStreaming, AStreamingPromptEncoderGivesTheResidentContextsBitForBit) {
  LTX_REQUIRE_CUDA();
  const std::string te = test::fixture("text_gemma3.te.safetensors");
  const std::string ckpt = test::fixture("text_ltx23.ckpt.safetensors");
  const std::vector<std::string> prompts = {"a red fox running through snow", ""};
  text::PromptEncoderOptions resident_options;
  resident_options.load = {DType::BF16, test::kGpu};
  text::PromptEncoder resident(te, {ckpt}, resident_options);
  const std::vector<text::PromptContext> want = resident.encode(prompts);
  for (bool keep_loaded : {false, true}) {
    SCOPED_TRACE(keep_loaded ? "kept loaded (page-locked layers)" : "one forward (from the file)");
    text::PromptEncoderOptions o = resident_options;
    o.streaming = {2, false, 0};
    o.keep_loaded = keep_loaded;
    text::PromptEncoder streamed(te, {ckpt}, o);
    for (int pass = 0; pass < 2; ++pass) {
      const std::vector<text::PromptContext> got = streamed.encode(prompts);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(test::same_bytes(got[i].video, want[i].video)) << "prompt " << i;
        EXPECT_TRUE(test::same_bytes(got[i].audio, want[i].audio)) << "prompt " << i;
      }
      EXPECT_EQ(streamed.text_encoder_loaded(), keep_loaded);
    }
  }
}

TEST(CudaBlockStreaming, StreamingOnTheCpuIsAnErrorNamingTheFlag) {
  EXPECT_ERROR_HAS(tf::LTXModel::from_files({weights_path()}, tf::LTXModelType::AudioVideo,
                                            {DType::F32, Device::cpu()}, {2}),
                   "--offload");
}

}  // namespace
}  // namespace ltx::block_streaming_test
