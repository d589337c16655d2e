#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "sampling/latent.h"
#include "sampling/sampling_fixtures.h"

namespace ltx::latent_test {
namespace {

using sampling::AudioLatentShape;
using sampling::VideoLatentShape;
using sampling::VideoPixelShape;

constexpr const char* kFile = "latent_tools";

int64_t i64(const nlohmann::json& j, const char* key) { return j.at(key).get<int64_t>(); }

struct Case {
  const char* name;
  VideoPixelShape pixel;
};
const Case kCases[] = {
    {"768x512x121@24", {1, 121, 512, 768, 24.0}},
    {"192x128x9@24", {1, 9, 128, 192, 24.0}},
    {"320x192x17@25", {1, 17, 192, 320, 25.0}},
};

TEST(LatentShapes, FromPixelShapeMatchFixtureMetadata) {
  const nlohmann::json entries = test::golden_meta(kFile, "entries");
  for (const Case& c : kCases) {
    const nlohmann::json& e = entries.at(c.name);
    const VideoLatentShape v = VideoLatentShape::from_pixel_shape(c.pixel);
    const nlohmann::json& vj = e.at("video_latent_shape");
    EXPECT_EQ(v.shape(), (Shape{i64(vj, "batch"), i64(vj, "channels"), i64(vj, "frames"), i64(vj, "height"),
                                i64(vj, "width")}))
        << c.name;
    const AudioLatentShape a = AudioLatentShape::from_video_pixel_shape(c.pixel);
    const nlohmann::json& aj = e.at("audio_latent_shape");
    EXPECT_EQ(a.shape(), (Shape{i64(aj, "batch"), i64(aj, "channels"), i64(aj, "frames"), i64(aj, "mel_bins")}))
        << c.name;
  }
  EXPECT_EQ(VideoLatentShape::from_pixel_shape(kCases[0].pixel).upscale().frames, 121);
  EXPECT_EQ(AudioLatentShape::from_duration(1, 121.0 / 24.0).frames, 126);  // round(125.99)
  EXPECT_EQ(AudioLatentShape::from_duration(1, 0.1).frames, 2);              // round(2.5) -> 2 (half to even)
}

TEST(LatentTools, VideoPositionsAndKeyframeMaskMatchFixture) {
  for (const Case& c : kCases) {
    const sampling::VideoLatentTools tools{VideoLatentShape::from_pixel_shape(c.pixel), c.pixel.fps};
    const sampling::LatentState s = tools.create_initial_state(DType::F32);
    const std::string base = std::string("video.") + c.name;
    const Tensor want_pos = test::golden_tensor(kFile, base + ".positions");
    ASSERT_EQ(s.positions.shape(), want_pos.shape()) << c.name;
    EXPECT_EQ(test::max_abs_diff(s.positions, want_pos), 0.0) << c.name;
    EXPECT_EQ(test::max_abs_diff(s.keyframes_mask, test::golden_tensor(kFile, base + ".keyframes_mask")), 0.0) << c.name;
    // Fresh state: zeros, mask ones, clean == latent, tokens (f, h, w) x channels.
    EXPECT_EQ(s.latent.shape(), (Shape{1, tools.target.token_count(), 128}));
    EXPECT_EQ(s.denoise_mask.shape(), (Shape{1, tools.target.token_count(), 1}));
    EXPECT_EQ(test::max_abs_diff(s.denoise_mask, Tensor::full(s.denoise_mask.shape(), 1.0)), 0.0);
  }
}

TEST(LatentTools, AudioPositionsMatchFixture) {
  for (const Case& c : kCases) {
    const sampling::AudioLatentTools tools{AudioLatentShape::from_video_pixel_shape(c.pixel)};
    const sampling::LatentState s = tools.create_initial_state(DType::F32);
    const Tensor want = test::golden_tensor(kFile, std::string("audio.") + c.name + ".positions");
    ASSERT_EQ(s.positions.shape(), want.shape()) << c.name;
    EXPECT_EQ(test::max_abs_diff(s.positions, want), 0.0) << c.name;
    EXPECT_EQ(s.latent.shape(), (Shape{1, tools.target.frames, 128}));
    EXPECT_FALSE(s.keyframes_mask.defined());
  }
}

TEST(Patchifiers, VideoTokensAreFhwRowMajorAndRoundTrip) {
  const Tensor x = test::random_tensor({2, 5, 3, 4, 6}, 8);
  const Tensor t = sampling::patchify_video(x);
  ASSERT_EQ(t.shape(), (Shape{2, 3 * 4 * 6, 5}));
  // token (f=1, h=2, w=3) channel 4 of batch 1 == x[1, 4, 1, 2, 3]
  EXPECT_EQ(t.select(0, 1).select(0, (1 * 4 + 2) * 6 + 3).select(0, 4).item(),
            x.select(0, 1).select(0, 4).select(0, 1).select(0, 2).select(0, 3).item());
  const VideoLatentShape shape{2, 5, 3, 4, 6};
  EXPECT_EQ(test::max_abs_diff(sampling::unpatchify_video(t, shape), x), 0.0);
  // Patch size 2 packs (c, p, q) into the channels and still round-trips; non-contiguous input too.
  const Tensor t2 = sampling::patchify_video(test::non_contiguous_copy(x), 2);
  ASSERT_EQ(t2.shape(), (Shape{2, 3 * 2 * 3, 20}));
  EXPECT_EQ(test::max_abs_diff(sampling::unpatchify_video(t2, shape, 2), x), 0.0);
  EXPECT_THROW(sampling::patchify_video(test::random_tensor({1, 2, 3, 5, 4}, 1), 2), Error);
  EXPECT_THROW(sampling::unpatchify_video(t, VideoLatentShape{2, 5, 3, 4, 5}), Error);
}

TEST(Patchifiers, AudioTokensAreChannelsTimesMelBins) {
  const Tensor x = test::random_tensor({2, 8, 7, 16}, 9);
  const Tensor t = sampling::patchify_audio(x);
  ASSERT_EQ(t.shape(), (Shape{2, 7, 128}));
  EXPECT_EQ(t.select(0, 1).select(0, 3).select(0, 5 * 16 + 2).item(),
            x.select(0, 1).select(0, 5).select(0, 3).select(0, 2).item());
  EXPECT_EQ(test::max_abs_diff(sampling::unpatchify_audio(t, AudioLatentShape{2, 8, 7, 16}), x), 0.0);
  EXPECT_THROW(sampling::unpatchify_audio(t, AudioLatentShape{2, 4, 7, 16}), Error);
}

TEST(LatentTools, PatchifyStateRoundTripsAndChecksTheTarget) {
  const sampling::VideoLatentTools tools{VideoLatentShape{1, 4, 2, 3, 5}, 24.0};
  const Tensor init = test::random_tensor({1, 4, 2, 3, 5}, 2);
  const sampling::LatentState s = tools.create_initial_state(DType::F32, init);
  const sampling::LatentState u = tools.unpatchify(s);
  EXPECT_EQ(test::max_abs_diff(u.latent, init), 0.0);
  EXPECT_EQ(u.denoise_mask.shape(), (Shape{1, 1, 2, 3, 5}));
  EXPECT_EQ(test::max_abs_diff(tools.patchify(u).latent, s.latent), 0.0);
  EXPECT_THROW(tools.create_initial_state(DType::F32, test::random_tensor({1, 4, 2, 3, 4}, 2)), Error);
}

TEST(LatentTools, ClearConditioningDropsAppendedTokens) {
  const sampling::VideoLatentTools tools{VideoLatentShape{1, 4, 2, 3, 5}, 24.0};
  sampling::LatentState s = tools.create_initial_state(DType::F32);
  // Pretend 7 tokens were appended.
  sampling::LatentState big = s;
  big.latent = Tensor::zeros({1, 37, 4});
  big.clean_latent = Tensor::zeros({1, 37, 4});
  big.denoise_mask = Tensor::zeros({1, 37, 1});
  big.positions = Tensor::zeros({1, 3, 37, 2});
  big.attention_mask = Tensor::zeros({1, 37, 37});
  const sampling::LatentState c = tools.clear_conditioning(big);
  EXPECT_EQ(c.latent.shape(), (Shape{1, 30, 4}));
  EXPECT_EQ(c.positions.shape(), (Shape{1, 3, 30, 2}));
  EXPECT_EQ(test::max_abs_diff(c.denoise_mask, Tensor::full({1, 30, 1}, 1.0)), 0.0);
  EXPECT_FALSE(c.attention_mask.defined());
  EXPECT_FALSE(c.keyframes_mask.defined());
  EXPECT_FALSE(c.generated_keyframes.defined());
}

// Mask levels: per sample its mask as runs of equal values, read on the host, so the denoisers
// can hand the transformer one timestep per sample (one run), or the runs' AdaLN expanded per
// token, with no device read (pipelines::TimestepForm).
std::vector<std::pair<float, int64_t>> as_pairs(const sampling::MaskRuns& runs) {
  std::vector<std::pair<float, int64_t>> out;
  for (const sampling::MaskRun& r : runs) out.emplace_back(r.value, r.length);
  return out;
}

TEST(MaskLevels, UniformMasksGiveOneRunPerSampleAndMixedOnesTheirRuns) {
  const sampling::VideoLatentTools tools{VideoLatentShape{2, 4, 2, 3, 5}, 24.0};  // 30 tokens
  sampling::LatentState s = tools.create_initial_state(DType::F32);
  EXPECT_EQ(sampling::uniform_mask_values(s), (std::vector<float>{1.0f, 1.0f}));
  // Sample 1 holds 0.25 everywhere: still one value per sample.
  s.denoise_mask.narrow(0, 1, 1).fill(0.25);
  EXPECT_EQ(sampling::uniform_mask_values(s), (std::vector<float>{1.0f, 0.25f}));
  const std::vector<sampling::MaskRuns> runs = sampling::mask_runs_of(s.denoise_mask);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(as_pairs(runs[1]), (std::vector<std::pair<float, int64_t>>{{0.25f, 30}}));
  // An image at frame 0 pins the first frame's 15 tokens of sample 0: two runs, no per-sample form.
  sampling::LatentState c = s.clone();
  c.denoise_mask.narrow(0, 0, 1).narrow(1, 0, 15).fill(0.0);
  EXPECT_FALSE(sampling::uniform_mask_values(c).has_value());
  const std::optional<std::vector<sampling::MaskRuns>> mixed = sampling::mask_runs(c);
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(as_pairs((*mixed)[0]), (std::vector<std::pair<float, int64_t>>{{0.f, 15}, {1.f, 15}}));
  EXPECT_EQ(as_pairs((*mixed)[1]), (std::vector<std::pair<float, int64_t>>{{0.25f, 30}}));
  // kMaxMaskRuns runs are described, one more is not (the per-token form then).
  for (const int64_t t : {15, 17, 19, 29}) c.denoise_mask.narrow(0, 0, 1).narrow(1, t, 1).fill(0.5);
  EXPECT_EQ(sampling::mask_runs_of(c.denoise_mask)[0].size(), sampling::kMaxMaskRuns);
  c.denoise_mask.narrow(0, 0, 1).narrow(1, 27, 1).fill(0.5);
  EXPECT_TRUE(sampling::mask_runs_of(c.denoise_mask)[0].empty());
  EXPECT_FALSE(sampling::mask_runs(c).has_value());
  // -0 and 0 differ in their bits: two runs (per-token values are always right).
  c.denoise_mask.narrow(0, 0, 1).fill(0.0);
  c.denoise_mask.narrow(0, 0, 1).narrow(1, 0, 1).fill(-0.0);
  EXPECT_EQ(sampling::mask_runs_of(c.denoise_mask)[0].size(), 2u);
  EXPECT_THROW(sampling::mask_runs_of(Tensor()), Error);
}

TEST(MaskLevels, TheyDescribeOnlyTheMaskTheyWereReadFrom) {
  const sampling::VideoLatentTools tools{VideoLatentShape{1, 4, 2, 3, 5}, 24.0};
  const sampling::LatentState s = tools.create_initial_state(DType::F32);
  // to() and clone() key the host's levels to their copy; with_latent keeps them.
  const sampling::LatentState moved = s.to(Device::cpu());
  ASSERT_NE(moved.mask_levels, nullptr);
  EXPECT_EQ(moved.mask_levels->mask.raw_data(), moved.denoise_mask.raw_data());
  const sampling::LatentState cloned = s.clone();
  ASSERT_NE(cloned.mask_levels, nullptr);
  EXPECT_EQ(cloned.mask_levels->mask.raw_data(), cloned.denoise_mask.raw_data());
  EXPECT_NE(cloned.denoise_mask.raw_data(), s.denoise_mask.raw_data());
  const sampling::LatentState stepped = cloned.with_latent(Tensor::zeros(s.latent.shape()));
  EXPECT_EQ(stepped.mask_levels, cloned.mask_levels);
  // Levels that name another tensor are not used: a host mask is read itself.
  sampling::LatentState other = cloned;
  other.denoise_mask = Tensor::zeros(s.denoise_mask.shape());
  EXPECT_EQ(sampling::uniform_mask_values(other), (std::vector<float>{0.0f}));
}

TEST(LatentHelpers, PostProcessPinsConditionedTokensInTheDenoisedDtype) {
  const Tensor d = test::random_tensor({1, 4, 3}, 1), clean = test::random_tensor({1, 4, 3}, 2);
  const Tensor mask = Tensor::from_vector(std::vector<float>{1, 0, 0.25f, 1}, Shape{1, 4, 1});
  const Tensor out = sampling::post_process_latent(d, mask, clean);
  EXPECT_EQ(test::max_abs_diff(out.narrow(1, 0, 1), d.narrow(1, 0, 1)), 0.0);
  EXPECT_EQ(test::max_abs_diff(out.narrow(1, 1, 1), clean.narrow(1, 1, 1)), 0.0);
  const float want = d.select(1, 2).select(1, 0).item() * 0.25f + clean.select(1, 2).select(1, 0).item() * 0.75f;
  EXPECT_EQ(out.select(1, 2).select(1, 0).item(), want);
  EXPECT_EQ(sampling::post_process_latent(d.to(DType::BF16), mask, clean).dtype(), DType::BF16);
  EXPECT_EQ(sampling::post_process_latent(d.to(DType::F64), mask, clean).dtype(), DType::F64);
  EXPECT_THROW(sampling::post_process_latent(d, Tensor::zeros({1, 3, 1}), clean), Error);
  const Tensor ts = sampling::timesteps_from_mask(mask, 0.5);
  EXPECT_EQ(ts.to_float_vector(), (std::vector<float>{0.5f, 0, 0.125f, 0.5f}));
}

}  // namespace
}  // namespace ltx::latent_test
