// The LTX-2.5 duration head and auto-duration against the golden fixture (duration_ltx25), plus
// the seconds -> frames rules.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/duration_head/duration_predictor.h"
#include "models/vae_test_util.h"

namespace ltx::duration_head_test {
namespace {

using namespace models::duration_head;
using test::io_tensor;

const std::string kWeights = "duration_ltx25.weights.safetensors";
const std::string kIo = "duration_ltx25.io.safetensors";

struct Mix {
  Tensor video, audio;
};

std::vector<Mix> mixes(const io::SafetensorsFile& io, int prompt) {
  const std::string p = str("in.p", prompt, ".");
  const Tensor v = io_tensor(io, p + "video_encoding"), a = io_tensor(io, p + "audio_encoding");
  return {{v, a}, {v, Tensor()}, {Tensor(), a}};  // av, v, a (the io file's axis 1)
}

TEST(DurationHead, ConfigComesFromTheFileMetadata) {
  const auto f = test::open_fixture(kWeights);
  const DurationHeadConfig c = duration_head_config_from_metadata(f->metadata_json(), kWeights);
  EXPECT_EQ(c.video_cross_attention_dim, 64);
  EXPECT_EQ(c.audio_cross_attention_dim, 32);
  EXPECT_EQ(c.pooler_hidden_dim, 32);
  EXPECT_EQ(c.num_queries, 1);
  EXPECT_EQ(c.num_pooler_heads, 4);
  EXPECT_EQ(c.mlp_hidden, 48);
  // Without the sections the reference's defaults apply.
  const DurationHeadConfig d = duration_head_config_from_metadata(nlohmann::json::object(), "x");
  EXPECT_EQ(d.video_cross_attention_dim, 4096);
  EXPECT_EQ(d.audio_cross_attention_dim, 2048);
  EXPECT_EQ(d.pooler_hidden_dim, 256);
  EXPECT_EQ(d.mlp_hidden, 256);
  EXPECT_ERROR_HAS(
      duration_head_config_from_metadata(
          nlohmann::json::parse(R"({"config":{"duration_head":{"num_pooler_heads":5}}})"),
          "f.safetensors"),
      "num_pooler_heads");
  EXPECT_ERROR_HAS(
      duration_head_config_from_metadata(
          nlohmann::json::parse(R"({"config":{"transformer":{"cross_attention_dim":"x"}}})"),
          "f.safetensors"),
      "cross_attention_dim");
}

TEST(DurationHead, MatchesTheReferenceSecondsAndIntermediates) {
  const auto io = test::open_fixture(kIo);
  const DurationHead head = DurationHead::from_file(test::fixture(kWeights));
  // Intermediates of prompt 0 with both modalities.
  const std::vector<Mix> m0 = mixes(*io, 0);
  int probes = 0;
  head.log_seconds(m0[0].video, m0[0].audio, Precision::F32,
                   [&](const std::string& n, const Tensor& t) {
                     ++probes;
                     const Tensor ref = io_tensor(*io, "inter.p0." + n);
                     test::expect_matches("inter.p0." + n, t.reshape(ref.shape()), ref, 1e-5, 1e-5);
                   });
  EXPECT_EQ(probes, 6);
  const auto ref_s = io_tensor(*io, "out.seconds.f32").to_double_vector();
  const auto ref_log = io_tensor(*io, "out.log_seconds.f32").to_double_vector();
  for (int p = 0; p < 5; ++p) {
    const std::vector<Mix> m = mixes(*io, p);
    for (int j = 0; j < 3; ++j) {
      const double s = predict_seconds(head, m[j].video, m[j].audio);
      EXPECT_NEAR(s, ref_s[p * 3 + j], 1e-5 * ref_s[p * 3 + j]) << p << "/" << j;
      EXPECT_NEAR(head.log_seconds(m[j].video, m[j].audio).item(), ref_log[p * 3 + j], 1e-5)
          << p << "/" << j;
    }
  }
}

TEST(DurationHead, FramesMatchTheReferenceForEveryRangeExactly) {
  const auto io = test::open_fixture(kIo);
  const DurationHead head = DurationHead::from_file(test::fixture(kWeights));
  const nlohmann::json ranges = io->metadata_json("notes")["ranges"];
  ASSERT_EQ(ranges.size(), 6u);
  for (const auto& r : ranges) {
    const std::string name = r["name"];
    const AutoDuration span(r["min_seconds"].get<double>(), r["max_seconds"].get<double>());
    const double fps = r["fps"].get<double>();
    const auto ref = io->tensor("out.frames." + name + ".f32").to_int_vector();
    for (int p = 0; p < 5; ++p) {
      const std::vector<Mix> m = mixes(*io, p);
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(predict_num_frames(head, m[j].video, m[j].audio, fps, span), ref[p * 3 + j])
            << name << " prompt " << p << " mix " << j;
    }
  }
}

TEST(DurationHead, Bf16StepsApproximateTheBf16Head) {
  // The reference's pipelines build the head in bf16; rounding every activation to bf16 lands
  // within its error band (README: bf16 vs f64 up to 1.3e-2).
  const auto io = test::open_fixture(kIo);
  const DurationHead head = DurationHead::from_file(test::fixture(kWeights));
  const auto ref = io_tensor(*io, "out.seconds.bf16").to_double_vector();
  for (int p = 0; p < 5; ++p) {
    const std::vector<Mix> m = mixes(*io, p);
    for (int j = 0; j < 3; ++j) {
      const double s = predict_seconds(head, m[j].video, m[j].audio, Precision::Bf16Steps);
      EXPECT_NEAR(s, ref[p * 3 + j], 2e-2 * ref[p * 3 + j]) << p << "/" << j;
    }
  }
}

TEST(DurationHead, RoundingTableMatchesTheReference) {
  const auto io = test::open_fixture(kIo);
  const auto secs = io->tensor("table.seconds").to_double_vector();
  const auto fps = io->tensor("table.fps").to_double_vector();
  const auto lo = io->tensor("table.min_seconds").to_double_vector();
  const auto hi = io->tensor("table.max_seconds").to_double_vector();
  const auto min_f = io->tensor("table.min_frames").to_int_vector();
  const auto max_f = io->tensor("table.max_frames").to_int_vector();
  const auto frames = io->tensor("table.frames").to_int_vector();
  for (size_t i = 0; i < secs.size(); ++i) {
    SCOPED_TRACE(str("row ", i, ": ", secs[i], " s @ ", fps[i]));
    EXPECT_EQ(python_round(lo[i] * fps[i]), min_f[i]);
    EXPECT_EQ(python_round(hi[i] * fps[i]), max_f[i]);
    if (frames[i] < 0) {
      EXPECT_ERROR_HAS(seconds_to_clamped_num_frames(secs[i], fps[i], min_f[i], max_f[i]),
                       "frames must be >= 1, got 0");
    } else {
      EXPECT_EQ(seconds_to_clamped_num_frames(secs[i], fps[i], min_f[i], max_f[i]), frames[i]);
      EXPECT_EQ(frames_from_seconds(secs[i], fps[i], AutoDuration(lo[i], hi[i])), frames[i]);
    }
  }
}

TEST(DurationHead, RoundingFollowsPython) {
  EXPECT_EQ(python_round(25.5), 26);
  EXPECT_EQ(python_round(28.5), 28);
  EXPECT_EQ(python_round(12.5), 12);
  EXPECT_EQ(python_round(0.55 * 30), 16);  // exactly 16.5 in binary64
  EXPECT_EQ(python_round(-0.5), 0);
  EXPECT_EQ(python_round(-1.5), -2);
  EXPECT_EQ(python_round(2.4999999), 2);
  EXPECT_EQ(snap_frames_to_grid(1), 1);
  EXPECT_EQ(snap_frames_to_grid(16), 9);
  EXPECT_EQ(snap_frames_to_grid(17), 17);
  EXPECT_EQ(snap_frames_to_grid(480), 473);
  EXPECT_ERROR_HAS(snap_frames_to_grid(0), "frames must be >= 1");
  // A narrow range can end off the 8k+1 grid (1.1-1.2 s @ 24: min 26, max 29).
  EXPECT_EQ(seconds_to_clamped_num_frames(1.15, 24, 26, 29), 29);
}

TEST(DurationHead, NumFramesRequestFollowsTheCliRules) {
  using R = NumFramesRequest;
  const R explicit_wins = num_frames_request(49, AutoDuration(2, 6));
  ASSERT_TRUE(std::holds_alternative<int64_t>(explicit_wins));
  EXPECT_EQ(std::get<int64_t>(explicit_wins), 49);
  const R def = num_frames_request(std::nullopt, std::nullopt);
  ASSERT_TRUE(std::holds_alternative<AutoDuration>(def));
  EXPECT_EQ(std::get<AutoDuration>(def).min_seconds, 1.0);
  EXPECT_EQ(std::get<AutoDuration>(def).max_seconds, 20.0);
  const R custom = num_frames_request(std::nullopt, AutoDuration(2, 6));
  EXPECT_EQ(std::get<AutoDuration>(custom).max_seconds, 6.0);
  EXPECT_ERROR_HAS(AutoDuration(6, 2), "must be <= MAX_SECONDS");
  // No head: an explicit count passes, auto-duration fails before any work.
  EXPECT_NO_THROW(require_num_frames_source(R{int64_t{49}}, nullptr));
  EXPECT_ERROR_HAS(require_num_frames_source(def, nullptr), "no duration head");
  EXPECT_EQ(resolve_num_frames(R{int64_t{49}}, nullptr, Tensor(), Tensor(), 24.0), 49);
  EXPECT_ERROR_HAS(resolve_num_frames(def, nullptr, Tensor(), Tensor(), 24.0), "--num-frames");
}

TEST(DurationHead, ResolvesTheFrameCountOfAPrompt) {
  const auto io = test::open_fixture(kIo);
  const DurationHead head = DurationHead::from_file(test::fixture(kWeights));
  const std::vector<Mix> m = mixes(*io, 1);
  const auto ref = io->tensor("out.frames.auto_2_6_24fps.f32").to_int_vector();
  EXPECT_EQ(resolve_num_frames(num_frames_request(std::nullopt, AutoDuration(2, 6)), &head,
                               m[0].video, m[0].audio, 24.0),
            ref[3]);
  // Audio only (the T2A pipeline).
  EXPECT_EQ(resolve_num_frames(num_frames_request(std::nullopt, AutoDuration(2, 6)), &head,
                               Tensor(), m[2].audio, 24.0),
            ref[5]);
}

TEST(DurationHead, FilesWithoutAHeadHaveNone) {
  EXPECT_FALSE(DurationHead::try_from_file(test::fixture("vae_ltx23.weights.safetensors")));
  EXPECT_TRUE(DurationHead::try_from_file(test::fixture(kWeights)));
  EXPECT_ERROR_HAS(DurationHead::from_file(test::fixture("vae_ltx23.weights.safetensors")),
                   "no duration_head");
}

TEST(DurationHead, RejectsBadInputs) {
  const DurationHead head = DurationHead::from_file(test::fixture(kWeights));
  EXPECT_ERROR_HAS(head(Tensor(), Tensor()), "neither");
  EXPECT_ERROR_HAS(head(test::random_tensor({1, 4, 32}, 1), Tensor()), "[B, T, 64]");
  EXPECT_ERROR_HAS(predict_seconds(head, test::random_tensor({2, 4, 64}, 1), Tensor()),
                   "single-prompt");
}

}  // namespace
}  // namespace ltx::duration_head_test
