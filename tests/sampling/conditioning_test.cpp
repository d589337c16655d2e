#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/error.h"
#include "sampling/conditioning.h"
#include "sampling/sampling_fixtures.h"

namespace ltx {
namespace {

using sampling::LatentState;
using sampling::VideoLatentShape;
using sampling::VideoLatentTools;

// 192x128x9 @ 24 fps: latent 2 x 4 x 6 (24 tokens per latent frame, 48 in all), 8 channels.
VideoLatentTools tools() { return VideoLatentTools{VideoLatentShape{1, 8, 2, 4, 6}, 24.0}; }

float at(const Tensor& t, std::initializer_list<int64_t> idx) {
  Tensor v = t;
  for (int64_t i : idx) v = v.select(0, i);
  return static_cast<float>(v.item());
}

TEST(VideoConditionByLatentIndex, ReplacesTheFrameTokensAndSetsTheMask) {
  const VideoLatentTools tl = tools();
  const Tensor image = test::random_tensor({1, 8, 1, 4, 6}, 5);
  const LatentState s0 = tl.create_initial_state(DType::F32);
  const LatentState s = sampling::VideoConditionByLatentIndex(image, 0.9, 1).apply(s0, tl);
  EXPECT_EQ(s.tokens(), 48);
  // Frame 1 = tokens 24..47: clean is the image, mask 1 - 0.9; frame 0 untouched.
  EXPECT_EQ(test::max_abs_diff(s.clean_latent.narrow(1, 24, 24), sampling::patchify_video(image)), 0.0);
  EXPECT_FLOAT_EQ(at(s.denoise_mask, {0, 30, 0}), static_cast<float>(1.0 - 0.9));
  EXPECT_EQ(at(s.denoise_mask, {0, 3, 0}), 1.0f);
  EXPECT_EQ(test::max_abs_diff(s.latent, s0.latent), 0.0);  // only clean/mask change
  EXPECT_EQ(at(s0.denoise_mask, {0, 30, 0}), 1.0f);         // the input state is not modified
  EXPECT_THROW(sampling::VideoConditionByLatentIndex(test::random_tensor({1, 8, 1, 4, 5}, 1), 1.0, 0).apply(s0, tl),
               Error);
  EXPECT_THROW(sampling::VideoConditionByLatentIndex(image, 1.0, 2).apply(s0, tl), Error);
}

TEST(VideoConditionByKeyframeIndex, AppendsGuidingTokensWithShiftedSingleFramePositions) {
  const VideoLatentTools tl = tools();
  const LatentState s0 = tl.create_initial_state(DType::F32);
  const Tensor key = test::random_tensor({1, 8, 1, 4, 6}, 6).to(DType::BF16);
  const LatentState s = sampling::VideoConditionByKeyframeIndex(key, 8, 0.9).apply(s0, tl);
  ASSERT_EQ(s.tokens(), 72);
  EXPECT_EQ(s.latent.dtype(), DType::F32);  // f32 state + bf16 tokens -> f32 (torch.cat promotion)
  EXPECT_EQ(test::max_abs_diff(s.latent.narrow(1, 48, 24), Tensor::zeros({1, 24, 8})), 0.0);
  EXPECT_EQ(test::max_abs_diff(s.clean_latent.narrow(1, 48, 24), sampling::patchify_video(key)), 0.0);
  // The mask is made in the keyframe's dtype: 1 - 0.9 rounded to bf16.
  EXPECT_EQ(at(s.denoise_mask, {0, 60, 0}), static_cast<float>(Tensor::full({1}, 1.0 - 0.9, DType::BF16).item()));
  // Time [8, 9) / 24 (no causal fix at frame > 0, single pixel frame); y/x in pixels.
  EXPECT_FLOAT_EQ(at(s.positions, {0, 0, 48, 0}), 8.0f / 24.0f);
  EXPECT_FLOAT_EQ(at(s.positions, {0, 0, 48, 1}), 9.0f / 24.0f);
  EXPECT_EQ(at(s.positions, {0, 1, 48 + 7, 0}), 32.0f);  // token 7 = row 1, col 1
  EXPECT_EQ(at(s.positions, {0, 2, 48 + 7, 1}), 64.0f);
  // Keyframe markers: the target's first frame only; appended guidance is not marked.
  EXPECT_EQ(at(s.keyframes_mask, {0, 0, 0}), 1.0f);
  EXPECT_EQ(at(s.keyframes_mask, {0, 60, 0}), 0.0f);
  EXPECT_FALSE(s.attention_mask.defined());
  // At frame 0 the causal fix applies: time [0, 1) / 24.
  const LatentState f0 = sampling::VideoConditionByKeyframeIndex(key, 0, 1.0).apply(s0, tl);
  EXPECT_EQ(at(f0.positions, {0, 0, 48, 0}), 0.0f);
  EXPECT_FLOAT_EQ(at(f0.positions, {0, 0, 48, 1}), 1.0f / 24.0f);
  EXPECT_EQ(at(f0.denoise_mask, {0, 50, 0}), 0.0f);  // strength 1 -> timestep 0
}

TEST(VideoGeneratedKeyframeSlots, AppendsMarkedFullyGeneratedSlots) {
  const VideoLatentTools tl = tools();
  const LatentState s0 = tl.create_initial_state(DType::F32);
  const LatentState s = sampling::VideoGeneratedKeyframeSlots({3, 6}).apply(s0, tl);
  ASSERT_EQ(s.tokens(), 96);
  ASSERT_TRUE(s.generated_keyframe_layout.has_value());
  EXPECT_EQ(s.generated_keyframe_layout->first_token, 48);
  EXPECT_EQ(s.generated_keyframe_layout->tokens_per_keyframe, 24);
  EXPECT_EQ(at(s.denoise_mask, {0, 80, 0}), 1.0f);
  EXPECT_EQ(at(s.keyframes_mask, {0, 80, 0}), 1.0f);
  EXPECT_EQ(at(s.keyframes_mask, {0, 30, 0}), 0.0f);
  EXPECT_FLOAT_EQ(at(s.positions, {0, 0, 72, 0}), 6.0f / 24.0f);
  EXPECT_FLOAT_EQ(at(s.positions, {0, 0, 72, 1}), 7.0f / 24.0f);
  // After denoising the slots come out as [B, C, K, H, W].
  LatentState done = s;
  done.latent = test::random_tensor({1, 96, 8}, 3);
  const LatentState cleared = tl.clear_conditioning(done);
  EXPECT_EQ(cleared.tokens(), 48);
  ASSERT_TRUE(cleared.generated_keyframes.defined());
  EXPECT_EQ(cleared.generated_keyframes.shape(), (Shape{1, 8, 2, 4, 6}));
  EXPECT_EQ(test::max_abs_diff(sampling::patchify_video(cleared.generated_keyframes.narrow(2, 1, 1)),
                               done.latent.narrow(1, 72, 24)),
            0.0);
  EXPECT_THROW(sampling::VideoGeneratedKeyframeSlots({3, 3}), Error);
  EXPECT_THROW(sampling::VideoGeneratedKeyframeSlots({}), Error);
  EXPECT_THROW(sampling::VideoGeneratedKeyframeSlots({9}).apply(s0, tl), Error);  // 9 pixel frames: 0..8
  EXPECT_THROW(sampling::VideoGeneratedKeyframeSlots({1}).apply(s, tl), Error);   // applied twice
}

TEST(AttentionStrengthWrapper, BuildsTheBlockMask) {
  const VideoLatentTools tl = tools();
  const LatentState s0 = tl.create_initial_state(DType::F32);
  auto ref = std::make_shared<sampling::VideoConditionByReferenceLatent>(test::random_tensor({1, 8, 1, 4, 6}, 4));
  const LatentState s1 = sampling::AttentionStrengthWrapper(ref, 0.5).apply(s0, tl);
  ASSERT_EQ(s1.attention_mask.shape(), (Shape{1, 72, 72}));
  EXPECT_EQ(at(s1.attention_mask, {0, 3, 5}), 1.0f);     // noisy <-> noisy
  EXPECT_EQ(at(s1.attention_mask, {0, 3, 60}), 0.5f);    // noisy -> reference
  EXPECT_EQ(at(s1.attention_mask, {0, 60, 3}), 0.5f);    // reference -> noisy
  EXPECT_EQ(at(s1.attention_mask, {0, 60, 61}), 1.0f);   // reference <-> itself
  // A second reference: the first one keeps its block, the two references do not see each other,
  // and a per-token cross mask sets the new columns.
  std::vector<float> cross(24, 0.25f);
  cross[0] = 0.75f;
  const LatentState s2 =
      sampling::AttentionStrengthWrapper(ref, Tensor::from_vector(cross, Shape{24})).apply(s1, tl);
  ASSERT_EQ(s2.attention_mask.shape(), (Shape{1, 96, 96}));
  EXPECT_EQ(at(s2.attention_mask, {0, 3, 60}), 0.5f);
  EXPECT_EQ(at(s2.attention_mask, {0, 3, 72}), 0.75f);
  EXPECT_EQ(at(s2.attention_mask, {0, 80, 3}), 0.25f);
  EXPECT_EQ(at(s2.attention_mask, {0, 60, 80}), 0.0f);
  EXPECT_EQ(at(s2.attention_mask, {0, 80, 60}), 0.0f);
  // Once a mask exists, plain appending items keep it consistent (weight 1 for their tokens).
  const LatentState s3 = sampling::VideoConditionByKeyframeIndex(test::random_tensor({1, 8, 1, 4, 6}, 1), 8, 1.0)
                             .apply(s2, tl);
  ASSERT_EQ(s3.attention_mask.shape(), (Shape{1, 120, 120}));
  EXPECT_EQ(at(s3.attention_mask, {0, 3, 100}), 1.0f);
  EXPECT_THROW(sampling::AttentionStrengthWrapper(ref, Tensor::zeros({5})).apply(s0, tl), Error);
}

TEST(VideoConditionByReferenceLatent, PositionsFollowTheReferenceSpacing) {
  const VideoLatentTools tl = tools();
  const LatentState s0 = tl.create_initial_state(DType::F32);
  // Half-resolution reference at a quarter of the frame rate.
  const Tensor ref = test::random_tensor({1, 8, 2, 2, 3}, 4);
  const LatentState s = sampling::VideoConditionByReferenceLatent(ref, 2, 4).apply(s0, tl);
  ASSERT_EQ(s.tokens(), 48 + 12);
  // Second latent frame of the reference: pixel frames [1, 9) / (24 / 4), shifted back by 3 / 24.
  EXPECT_FLOAT_EQ(at(s.positions, {0, 0, 48 + 6, 0}), std::max(1.0f / 6.0f - 3.0f / 24.0f, 0.0f));
  EXPECT_FLOAT_EQ(at(s.positions, {0, 0, 48 + 6, 1}), 9.0f / 6.0f - 3.0f / 24.0f);
  EXPECT_EQ(at(s.positions, {0, 0, 48, 0}), 0.0f);                 // clamped at 0
  EXPECT_EQ(at(s.positions, {0, 2, 48 + 1, 0}), 64.0f);            // x 32 * 2
  EXPECT_EQ(at(s.denoise_mask, {0, 50, 0}), 0.0f);
}

TEST(AudioConditionByReferenceLatent, AppendsTokensWithTheGivenPositions) {
  const sampling::AudioLatentTools tl{sampling::AudioLatentShape{1, 8, 9, 16}};
  const LatentState s0 = tl.create_initial_state(DType::F32);
  const Tensor tok = test::random_tensor({1, 5, 128}, 2), pos = test::random_tensor({1, 1, 5, 2}, 3);
  const LatentState s = sampling::AudioConditionByReferenceLatent(tok, pos, 0.75).apply(s0, tl);
  ASSERT_EQ(s.tokens(), 14);
  EXPECT_EQ(test::max_abs_diff(s.positions.narrow(2, 9, 5), pos), 0.0);
  EXPECT_EQ(at(s.denoise_mask, {0, 10, 0}), 0.25f);
  EXPECT_FALSE(s.keyframes_mask.defined());
  const VideoLatentTools vt = tools();
  EXPECT_THROW(sampling::AudioConditionByReferenceLatent(tok, pos).apply(vt.create_initial_state(DType::F32), vt),
               Error);
}

TEST(VideoConditionByMask, BlendsMaskedCellsIntoClean) {
  const VideoLatentTools tl = tools();
  const LatentState s0 = tl.create_initial_state(DType::F32);
  const Tensor lat = test::random_tensor({1, 8, 2, 4, 6}, 7);
  Tensor m = Tensor::zeros({1, 2, 4, 6});
  m.select(1, 1).fill(1.0);  // the second latent frame
  const LatentState s = sampling::VideoConditionByMask(lat, m, 0.8).apply(s0, tl);
  const Tensor tok = sampling::patchify_video(lat);
  EXPECT_EQ(test::max_abs_diff(s.clean_latent.narrow(1, 24, 24), tok.narrow(1, 24, 24)), 0.0);
  EXPECT_EQ(test::max_abs_diff(s.clean_latent.narrow(1, 0, 24), Tensor::zeros({1, 24, 8})), 0.0);
  EXPECT_FLOAT_EQ(at(s.denoise_mask, {0, 30, 0}), static_cast<float>(1.0 - 0.8));
  EXPECT_EQ(at(s.denoise_mask, {0, 3, 0}), 1.0f);
}

TEST(TemporalRegionMask, SelectsTokensOverlappingTheRange) {
  const VideoLatentTools tl{VideoLatentShape{1, 8, 4, 1, 1}, 24.0};  // frames: [0,1), [1,9), [9,17), [17,25) / 24
  const LatentState s = sampling::TemporalRegionMask(0.5, 0.8, 24.0).apply(tl.create_initial_state(DType::F32), tl);
  EXPECT_EQ(s.denoise_mask.to_float_vector(), (std::vector<float>{0, 0, 1, 1}));
  const sampling::AudioLatentTools at_{sampling::AudioLatentShape{1, 8, 6, 16}};  // [0,.01), [.01,.05), [.05,.09) ...
  const LatentState a = sampling::TemporalRegionMask(0.04, 0.1, 24.0).apply(at_.create_initial_state(DType::F32), at_);
  EXPECT_EQ(a.denoise_mask.to_float_vector(), (std::vector<float>{0, 1, 1, 1, 0, 0}));
}

// Items that write into their clone's mask in place leave mask levels that describe the new
// mask, so the runs a state takes to the device (LatentState::to) are the mask's own.
TEST(ConditioningMaskLevels, ItemsWritingTheMaskInPlaceLeaveLevelsOfTheNewMask) {
  const auto expect_levels_follow = [](const LatentState& s, const char* what) {
    const LatentState moved = s.to(Device::cpu());
    ASSERT_NE(moved.mask_levels, nullptr) << what;
    EXPECT_EQ(moved.mask_levels->runs, sampling::mask_runs_of(s.denoise_mask)) << what;
    EXPECT_GT(moved.mask_levels->runs[0].size(), 1u) << what << ": the item made more than one run";
  };
  const VideoLatentTools tl{VideoLatentShape{1, 8, 4, 1, 1}, 24.0};
  expect_levels_follow(sampling::TemporalRegionMask(0.5, 0.8, 24.0).apply(tl.create_initial_state(DType::F32), tl),
                       "TemporalRegionMask (video)");
  const sampling::AudioLatentTools at_{sampling::AudioLatentShape{1, 8, 6, 16}};
  expect_levels_follow(sampling::TemporalRegionMask(0.04, 0.1, 24.0).apply(at_.create_initial_state(DType::F32), at_),
                       "TemporalRegionMask (audio)");
  const VideoLatentTools t2 = tools();
  expect_levels_follow(sampling::VideoConditionByLatentIndex(test::random_tensor({1, 8, 1, 4, 6}, 5), 1.0, 0)
                           .apply(t2.create_initial_state(DType::F32), t2),
                       "VideoConditionByLatentIndex");
}

TEST(Noiser, LerpsTowardNoiseAndKeepsConditionedTokensClean) {
  const VideoLatentTools tl = tools();
  const Tensor image = test::random_tensor({1, 8, 1, 4, 6}, 5);
  sampling::ConditioningItems items = {std::make_shared<sampling::VideoConditionByLatentIndex>(image, 1.0, 0)};
  sampling::TorchCpuGenerator gen(10);
  const LatentState s = sampling::create_noised_state(tl, items, gen, DType::F32);
  const Tensor noise = sampling::TorchCpuGenerator(10).randn({1, 48, 8});
  // Frame 0 (mask 0) is exactly the image; frame 1 (mask 1, noise_scale 1) exactly the noise.
  EXPECT_EQ(test::max_abs_diff(s.latent.narrow(1, 0, 24), sampling::patchify_video(image)), 0.0);
  EXPECT_EQ(test::max_abs_diff(s.latent.narrow(1, 24, 24), noise.narrow(1, 24, 24)), 0.0);
  // Stage-2 style partial re-noise: x = (1 - s) * x0 + s * n for unconditioned tokens.
  const Tensor x0 = test::random_tensor({1, 8, 2, 4, 6}, 9);
  sampling::TorchCpuGenerator gen2(11);
  const LatentState r = sampling::create_noised_state(tl, {}, gen2, DType::F32, 0.909375, x0);
  const std::vector<float> n = sampling::TorchCpuGenerator(11).randn({1, 48, 8}).to_float_vector();
  const std::vector<float> x = sampling::patchify_video(x0).to_float_vector(), got = r.latent.to_float_vector();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], 0.090625f * x[i] + 0.909375f * n[i], 1e-6);
}

TEST(KeyframePositions, EvenlySpacedInteriorFrames) {
  EXPECT_EQ(sampling::evenly_spaced_keyframe_positions(1, 121), (std::vector<int64_t>{60}));
  EXPECT_EQ(sampling::evenly_spaced_keyframe_positions(3, 121), (std::vector<int64_t>{30, 60, 90}));
  EXPECT_EQ(sampling::evenly_spaced_keyframe_positions(1, 10), (std::vector<int64_t>{4}));  // 4.5 -> 4 (half to even)
  EXPECT_TRUE(sampling::evenly_spaced_keyframe_positions(0, 10).empty());
  EXPECT_THROW(sampling::evenly_spaced_keyframe_positions(3, 4), Error);
}

}  // namespace
}  // namespace ltx
