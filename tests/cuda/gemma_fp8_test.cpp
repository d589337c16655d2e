// ComfyUI's FP8 Gemma on the GPU in bf16 (models/text/gemma/model.h): its Linear weights stay in
// e4m3 with their scales (nn::LoadOptions::keep_fp8_linears) and every hidden state has the bits
// of the twin whose scales were folded at load, resident and with the layers streamed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "backend/device_query.h"
#include "cuda/cuda_test_util.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/text/gemma/model.h"
#include "support/layout_writers.h"
#include "support/test_support.h"

namespace ltx {
namespace {

void expect_kept_fp8_gives_the_twins_bits(bool scaled) {
  test::TempDir tmp;
  const std::string file = tmp.file("gemma_fp8.safetensors"), twin = tmp.file("twin.safetensors");
  test::write_comfy_fp8_gemma(file, twin, scaled);
  const auto te = io::SafetensorsFile::open(test::fixture("text_gemma3.te.safetensors"));
  const auto config = text::GemmaTextConfig::from_json(
      nlohmann::json::parse(te->metadata().at("gemma_config")), "text_gemma3.te.safetensors");
  const nn::LoadOptions bf16{DType::BF16, test::kGpu};
  const auto live = [] { return backend::memory_stats(test::kGpu).live_bytes; };
  int64_t before = live();
  const auto ref = text::GemmaTextModel::load(config, {twin}, bf16);
  const int64_t twin_bytes = live() - before;
  const Tensor ids = Tensor::from_vector<int64_t>({2, 10, 20, 30, 40, 50}, {1, 6});
  const Tensor mask = Tensor::from_vector<int64_t>({1, 1, 1, 1, 1, 1}, {1, 6});
  const std::vector<Tensor> want = ref.encode(ids, mask);
  for (const models::BlockStreaming streaming :
       {models::BlockStreaming{}, models::BlockStreaming{2, false, 0},
        models::BlockStreaming{2, true, 0}}) {
    before = live();
    const auto fp8 = text::GemmaTextModel::load(config, {file}, bf16, streaming);
    EXPECT_EQ(fp8.streams_layers(), streaming.enabled());
    // Resident, the kept weights take a byte on the device, not two (the tiny model's norms and
    // scales, each a 512-byte block of the allocator, leave the whole at ~0.83 of the twin's).
    if (!streaming.enabled()) {
      EXPECT_LT(live() - before, twin_bytes * 0.9);
    }
    const std::vector<Tensor> got = fp8.encode(ids, mask);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(test::same_bits(got[i], want[i]))
          << "hidden state " << i << ", slots " << streaming.slots << ", from file "
          << streaming.from_file;
  }
}

TEST(CudaComfyFp8Gemma, ScaledLinearsKeptInE4m3GiveTheFoldedTwinsBits) {
  LTX_REQUIRE_CUDA();
  expect_kept_fp8_gives_the_twins_bits(true);
}

TEST(CudaComfyFp8Gemma, UnscaledLinearsKeptInE4m3GiveTheUpcastTwinsBits) {
  LTX_REQUIRE_CUDA();
  expect_kept_fp8_gives_the_twins_bits(false);
}

}  // namespace
}  // namespace ltx
