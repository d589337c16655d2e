// GuidedDenoiser / SimpleDenoiser on the tiny LTX-2.3 transformer against the reference
// (tests/fixtures/ltx23.guided.io.safetensors; golden README "Guided denoising").
#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "models/transformer/text_kv_cache.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "pipelines/denoisers.h"
#include "sampling/loops.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace mt = models::transformer;
using pipelines::GuidedDenoiser;
using sampling::GuiderParams;
using sampling::LatentState;

constexpr double kTol = 2e-4;  // golden README: guided step / 3-step loop

struct Fixture {
  std::shared_ptr<const io::SafetensorsFile> io = io::SafetensorsFile::open(test::fixture("ltx23.guided.io.safetensors"));
  mt::LTXModel model = mt::LTXModel::from_files({test::fixture("ltx23.weights.safetensors")}, mt::LTXModelType::AudioVideo);
  Tensor t(const std::string& name) const { return io->tensor(name).contiguous(); }

  // The fixture's state of `modality` ("video" keeps its keyframes_mask) around `latent`.
  LatentState state(const std::string& modality, const Tensor& latent) const {
    LatentState s;
    s.latent = latent;
    s.clean_latent = t("in." + modality + ".clean_latent");
    s.denoise_mask = t("in." + modality + ".denoise_mask");
    s.positions = t("in." + modality + ".positions");
    if (modality == "video") s.keyframes_mask = t("in.video.keyframes_mask");
    return s;
  }
  LatentState video_state(const Tensor& latent) const { return state("video", latent); }
  LatentState audio_state(const Tensor& latent) const { return state("audio", latent); }
  static GuiderParams params(double cfg) {
    GuiderParams p;
    p.cfg_scale = cfg;
    p.stg_scale = 1.0;
    p.rescale_scale = 0.7;
    p.modality_scale = 3.0;
    p.stg_blocks = {1};
    return p;
  }
  GuidedDenoiser denoiser() const {
    return GuidedDenoiser(model, {t("in.video.context_pos"), t("in.video.context_neg")},
                          {t("in.audio.context_pos"), t("in.audio.context_neg")}, params(3.0), params(7.0));
  }
  std::vector<double> sigmas() const {
    std::vector<double> s;
    for (float v : t("in.sigmas").to_float_vector()) s.push_back(v);
    return s;
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

TEST(GuidedDenoiser, OneBatchedStepMatchesTheReferencePassesAndGuidedResult) {
  const Fixture& f = fixture();
  GuidedDenoiser d = f.denoiser();
  const LatentState v = f.video_state(f.t("in.video.latent")), a = f.audio_state(f.t("in.audio.latent"));
  const sampling::DenoiseOutput out = d(&v, &a, f.sigmas(), 1);
  EXPECT_EQ(d.transformer_calls(), 1);
  for (const char* m : {"video", "audio"}) {
    const sampling::DenoisedLatent& r = std::string(m) == "video" ? out.video : out.audio;
    const std::string p = std::string("out.step.") + m + ".";
    EXPECT_LE(test::max_rel_err(r.cond, f.t(p + "cond")), kTol) << m;
    EXPECT_LE(test::max_rel_err(r.uncond, f.t(p + "uncond")), kTol) << m;
    EXPECT_LE(test::max_rel_err(r.ptb, f.t(p + "ptb")), kTol) << m;
    EXPECT_LE(test::max_rel_err(r.mod, f.t(p + "mod")), kTol) << m;
    EXPECT_LE(test::max_rel_err(r.denoised, f.t(p + "denoised")), kTol) << m;
  }
  // The passes differ from each other (else the comparison above could not tell them apart).
  EXPECT_GT(test::max_rel_err(out.video.cond, out.video.ptb), 1e-3);
  EXPECT_GT(test::max_rel_err(out.audio.cond, out.audio.mod), 1e-3);
}

TEST(GuidedDenoiser, ThreeStepEulerLoopMatchesTheReference) {
  const Fixture& f = fixture();
  GuidedDenoiser d = f.denoiser();
  sampling::AVState st;
  st.video = f.video_state(f.t("in.loop.video.init"));
  st.audio = f.audio_state(f.t("in.loop.audio.init"));
  std::vector<sampling::DenoiseOutput> seen;
  auto recording = [&](const LatentState* v, const LatentState* a, const std::vector<double>& s, int64_t i) {
    seen.push_back(d(v, a, s, i));
    return seen.back();
  };
  sampling::Sigmas sig = f.t("in.sigmas").to_float_vector();
  const sampling::AVState fin = sampling::euler_loop(sig, st, recording);
  ASSERT_EQ(seen.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const std::string p = "out.loop.step" + std::to_string(k) + ".";
    EXPECT_LE(test::max_rel_err(seen[k].video.denoised, f.t(p + "video.denoised")), kTol) << k;
    EXPECT_LE(test::max_rel_err(seen[k].audio.denoised, f.t(p + "audio.denoised")), kTol) << k;
  }
  EXPECT_LE(test::max_rel_err(fin.video->latent, f.t("out.loop.video.final")), kTol);
  EXPECT_LE(test::max_rel_err(fin.audio->latent, f.t("out.loop.audio.final")), kTol);
}

TEST(GuidedDenoiser, PositiveOnlyGuidanceEqualsTheSimpleDenoiser) {
  const Fixture& f = fixture();
  GuidedDenoiser g(f.model, {f.t("in.video.context_pos"), Tensor()}, {f.t("in.audio.context_pos"), Tensor()},
                   GuiderParams{}, GuiderParams{});
  pipelines::SimpleDenoiser s(f.model, f.t("in.video.context_pos"), f.t("in.audio.context_pos"));
  const LatentState v = f.video_state(f.t("in.video.latent")), a = f.audio_state(f.t("in.audio.latent"));
  const auto go = g(&v, &a, f.sigmas(), 1);
  const auto so = s(&v, &a, f.sigmas(), 1);
  EXPECT_EQ(test::max_abs_diff(go.video.denoised, so.video.denoised), 0.0);
  EXPECT_EQ(test::max_abs_diff(go.audio.denoised, so.audio.denoised), 0.0);
  EXPECT_FALSE(go.video.uncond.defined());
  // The conditioned pass of the guided step is the simple denoiser's output.
  EXPECT_LE(test::max_rel_err(so.video.denoised, f.t("out.step.video.cond")), kTol);
}

TEST(GuidedDenoiser, SkipStepReusesTheLastResultWithoutATransformerCall) {
  const Fixture& f = fixture();
  GuiderParams p = Fixture::params(3.0);
  p.skip_step = 1;  // run steps 0, 2, ...; reuse on 1
  GuidedDenoiser d(f.model, {f.t("in.video.context_pos"), f.t("in.video.context_neg")},
                   {f.t("in.audio.context_pos"), f.t("in.audio.context_neg")}, p, p);
  const LatentState v = f.video_state(f.t("in.video.latent")), a = f.audio_state(f.t("in.audio.latent"));
  const auto first = d(&v, &a, f.sigmas(), 0);
  const auto second = d(&v, &a, f.sigmas(), 1);
  EXPECT_EQ(d.transformer_calls(), 1);
  EXPECT_EQ(test::max_abs_diff(first.video.denoised, second.video.denoised), 0.0);
}

TEST(GuidedDenoiser, ChunkedPassesGiveTheSameResultAsOneBatchedCall) {
  const Fixture& f = fixture();
  const LatentState v = f.video_state(f.t("in.video.latent")), a = f.audio_state(f.t("in.audio.latent"));
  GuidedDenoiser one = f.denoiser();
  const auto ref = one(&v, &a, f.sigmas(), 1);
  for (int64_t chunk : {1, 3}) {
    GuidedDenoiser d = f.denoiser();
    d.set_max_batch_size(chunk);
    const auto out = d(&v, &a, f.sigmas(), 1);
    // Not bit-exact: BLAS may pick other kernels for other batch sizes (seen on the GPU machine's
    // OpenBLAS), so the bound is a few f32 ulps of accumulation, far below the reference tolerance.
    EXPECT_LE(test::max_rel_err(out.video.denoised, ref.video.denoised), 2e-5) << chunk;
    EXPECT_LE(test::max_rel_err(out.audio.ptb, ref.audio.ptb), 2e-5) << chunk;
    EXPECT_LE(test::max_rel_err(out.audio.denoised, f.t("out.step.audio.denoised")), kTol) << chunk;
  }
}

// The cond, perturbed and isolated passes read the positive prompt and share its text K / V (the
// default); the reference computes them per pass. Same values to BLAS's summation order for
// another row count, batched and chunked.
TEST(GuidedDenoiser, SharedTextKvEqualsKvPerPass) {
  const Fixture& f = fixture();
  const LatentState v = f.video_state(f.t("in.video.latent")), a = f.audio_state(f.t("in.audio.latent"));
  GuidedDenoiser per_pass = f.denoiser();
  per_pass.set_share_text_kv(false);
  const auto ref = per_pass(&v, &a, f.sigmas(), 1);
  for (int64_t chunk : {0, 3}) {
    GuidedDenoiser d = f.denoiser();
    d.set_max_batch_size(chunk);
    const auto out = d(&v, &a, f.sigmas(), 1);
    for (const auto& [got, want] : {std::pair{&out.video, &ref.video}, std::pair{&out.audio, &ref.audio}}) {
      EXPECT_LE(test::max_rel_err(got->cond, want->cond), 2e-5) << chunk;
      EXPECT_LE(test::max_rel_err(got->uncond, want->uncond), 2e-5) << chunk;
      EXPECT_LE(test::max_rel_err(got->ptb, want->ptb), 2e-5) << chunk;
      EXPECT_LE(test::max_rel_err(got->mod, want->mod), 2e-5) << chunk;
      EXPECT_LE(test::max_rel_err(got->denoised, want->denoised), 2e-5) << chunk;
    }
  }
}

// The 19B (its text K / V do not depend on sigma): the denoisers keep them across steps
// (text_kv_cache.h), the same outputs as computing them per pass and step, for the guided and the
// simple denoiser over two steps.
TEST(GuidedDenoiser, TextKvCacheAcrossStepsOnThe19BEqualsPerStepKv) {
  const io::SafetensorsFile io(test::fixture("ltx2.io.safetensors"));
  const mt::LTXModel model =
      mt::LTXModel::from_files({test::fixture("ltx2.weights.safetensors")}, mt::LTXModelType::AudioVideo);
  const auto state = [&](const std::string& m) {
    LatentState st;
    st.latent = io.tensor("in." + m + ".latent").contiguous();
    st.positions = io.tensor("in." + m + ".positions").contiguous();
    st.denoise_mask = Tensor::full({st.latent.size(0), st.latent.size(1), 1}, 1.f, DType::F32, Device::cpu());
    st.clean_latent = Tensor::zeros(st.latent.shape(), st.latent.dtype(), Device::cpu());
    return st;
  };
  const LatentState v = state("video"), a = state("audio");
  const Tensor vc = io.tensor("in.video.context").contiguous(), ac = io.tensor("in.audio.context").contiguous();
  const pipelines::ModalityContext vctx{vc, ops::mul(vc, 0.5)}, actx{ac, ops::mul(ac, 0.5)};
  const std::vector<double> sigmas{0.9, 0.5, 0.0};
  GuidedDenoiser cached(model, vctx, actx, Fixture::params(3.0), Fixture::params(7.0));
  GuidedDenoiser per_step(model, vctx, actx, Fixture::params(3.0), Fixture::params(7.0));
  per_step.set_share_text_kv(false);
  const pipelines::SimpleDenoiser simple(model, vc, ac);
  for (int64_t step : {0, 1}) {
    SCOPED_TRACE(step);
    const auto got = cached(&v, &a, sigmas, step), want = per_step(&v, &a, sigmas, step);
    EXPECT_LE(test::max_rel_err(got.video.denoised, want.video.denoised), 2e-5);
    EXPECT_LE(test::max_rel_err(got.audio.denoised, want.audio.denoised), 2e-5);
    // Two prompts x batch items x 2 streams x blocks, filled by the first step.
    const int64_t b = v.batch();
    EXPECT_EQ(cached.text_kv_cache().entries(), static_cast<size_t>(2 * b * 2 * model.num_blocks()));
    const auto s = simple(&v, &a, sigmas, step);
    EXPECT_LE(test::max_rel_err(s.video.denoised, got.video.cond), 2e-5);
    EXPECT_EQ(simple.text_kv_cache().entries(), static_cast<size_t>(b * 2 * model.num_blocks()));
  }
  EXPECT_EQ(per_step.text_kv_cache().entries(), 0u);
}

// One guided step in the pipelines' timestep form (per sample, or per run) against the reference's
// per-token timesteps: the same to BLAS's summation order. Returns the step in the pipelines' form.
auto expect_step_matches_per_token(const Fixture& f, const LatentState& v, const LatentState& a) {
  GuidedDenoiser reference_form = f.denoiser();
  reference_form.set_timestep_form(pipelines::TimestepForm::PerToken);
  const auto ref = reference_form(&v, &a, f.sigmas(), 1);
  GuidedDenoiser d = f.denoiser();
  auto out = d(&v, &a, f.sigmas(), 1);
  for (const auto& [got, want] : {std::pair{&out.video, &ref.video}, std::pair{&out.audio, &ref.audio}}) {
    EXPECT_LE(test::max_rel_err(got->cond, want->cond), 2e-5);
    EXPECT_LE(test::max_rel_err(got->ptb, want->ptb), 2e-5);
    EXPECT_LE(test::max_rel_err(got->denoised, want->denoised), 2e-5);
  }
  return out;
}

// Where every token of a sample has one timestep (no conditioning tokens), the denoisers hand the
// transformer one per sample ([B, 1, 1]) and its AdaLN runs once per sample; the values equal the
// per-token ones, so the results match the reference's per-token form to BLAS's summation order.
TEST(GuidedDenoiser, PerSampleTimestepsEqualPerTokenOnesWhereTheMaskIsUniform) {
  const Fixture& f = fixture();
  LatentState v = f.video_state(f.t("in.video.latent"));
  v.denoise_mask = Tensor::full(v.denoise_mask.shape(), 1.0);  // the fixture pins frame 0
  const LatentState a = f.audio_state(f.t("in.audio.latent"));
  const mt::Modality m = pipelines::modality_from_state(v, f.t("in.video.context_pos"), 0.5);
  EXPECT_EQ(m.timesteps.shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(m.timesteps.to_float_vector(), std::vector<float>{0.5f});
  const mt::Modality per_token = pipelines::modality_from_state(v, f.t("in.video.context_pos"), 0.5, true,
                                                                pipelines::TimestepForm::PerToken);
  EXPECT_EQ(per_token.timesteps.shape(), (Shape{1, v.tokens(), 1}));
  // The fixture's own video mask (frame 0 pinned) stays per token.
  EXPECT_EQ(pipelines::modality_from_state(f.video_state(f.t("in.video.latent")), f.t("in.video.context_pos"), 0.5)
                .timesteps.shape(),
            (Shape{1, v.tokens(), 1}));

  const auto out = expect_step_matches_per_token(f, v, a);
  // The mask matters: the same state with frame 0 pinned gives another result.
  const LatentState pinned = f.video_state(f.t("in.video.latent"));
  GuidedDenoiser p = f.denoiser();
  EXPECT_GT(test::max_rel_err(p(&pinned, &a, f.sigmas(), 1).video.denoised, out.video.denoised), 1e-3);
}

// The fixture's video mask pins frame 0 (an image condition): two runs of timesteps, which the
// denoisers describe (Modality::timestep_runs) so that the transformer forms its AdaLN once per
// run and expands it per token; the results match the per-token form to BLAS's summation order.
TEST(GuidedDenoiser, TimestepRunsEqualPerTokenTimestepsWhereAFrameIsPinned) {
  const Fixture& f = fixture();
  const LatentState v = f.video_state(f.t("in.video.latent"));
  const LatentState a = f.audio_state(f.t("in.audio.latent"));
  const mt::Modality m = pipelines::modality_from_state(v, f.t("in.video.context_pos"), 0.5);
  EXPECT_EQ(m.timesteps.shape(), (Shape{1, v.tokens(), 1}));
  ASSERT_EQ(m.timestep_runs.size(), 1u);
  ASSERT_EQ(m.timestep_runs[0].size(), 2u);
  const int64_t pinned = m.timestep_runs[0][0];
  EXPECT_EQ(pinned + m.timestep_runs[0][1], v.tokens());
  const std::vector<float> ts = m.timesteps.to_float_vector();
  EXPECT_EQ(ts[0], 0.f);
  EXPECT_EQ(ts[static_cast<size_t>(pinned)], 0.5f);
  EXPECT_TRUE(pipelines::modality_from_state(v, f.t("in.video.context_pos"), 0.5, true, pipelines::TimestepForm::PerToken)
                  .timestep_runs.empty());
  // The transformer reads the runs: lengths that do not cover the tokens are an error.
  mt::Modality bad = pipelines::modality_from_state(v, f.t("in.video.context_pos"), 0.5);
  mt::Modality audio = pipelines::modality_from_state(a, f.t("in.audio.context_pos"), 0.5);
  bad.timestep_runs = {{1, v.tokens() - 2}};
  EXPECT_ERROR_HAS(mt::X0Model{f.model}(&bad, &audio, nullptr), "cover");

  expect_step_matches_per_token(f, v, a);
}

// Two copies of a one-sample modality as a batch of two (every per-sample tensor stacked).
mt::Modality batch_of_two(const mt::Modality& m) {
  mt::Modality b = m;
  for (Tensor* t : {&b.latent, &b.sigma, &b.timesteps, &b.positions, &b.context, &b.context_mask,
                    &b.attention_mask, &b.keyframes_mask})
    if (t->defined()) *t = ops::concat({*t, *t}, 0);
  if (!b.timestep_runs.empty()) b.timestep_runs = {m.timestep_runs[0], m.timestep_runs[0]};
  return b;
}

// Per-token timesteps [2, T, 1] from each sample's runs (lengths) and their values.
Tensor timesteps_of_runs(const std::vector<std::vector<int64_t>>& runs,
                         const std::vector<std::vector<float>>& values) {
  std::vector<float> v;
  int64_t tokens = 0;
  for (size_t s = 0; s < runs.size(); ++s) {
    tokens = 0;
    for (size_t r = 0; r < runs[s].size(); ++r) {
      v.insert(v.end(), static_cast<size_t>(runs[s][r]), values[s][r]);
      tokens += runs[s][r];
    }
  }
  return Tensor::from_vector(v, {static_cast<int64_t>(runs.size()), tokens, 1});
}

// Samples whose runs differ (their boundaries together make the common runs the transformer keeps
// the AdaLN values per), and more common runs than the run map holds (then expanded per token):
// the results match per-token timesteps to BLAS's summation order, sample by sample.
TEST(GuidedDenoiser, TimestepRunsThatDifferBetweenSamplesEqualPerTokenTimesteps) {
  const Fixture& f = fixture();
  const LatentState v = f.video_state(f.t("in.video.latent"));
  const LatentState a = f.audio_state(f.t("in.audio.latent"));
  const mt::Modality pinned = pipelines::modality_from_state(v, f.t("in.video.context_pos"), 0.5);
  ASSERT_EQ(pinned.timestep_runs.size(), 1u);
  const int64_t frame = pinned.timestep_runs[0][0], tokens = v.tokens();
  ASSERT_GT(tokens, frame);
  ASSERT_GE(frame, 2);
  ASSERT_GE(tokens, 9);
  const mt::Modality audio = batch_of_two(pipelines::modality_from_state(a, f.t("in.audio.context_pos"), 0.5));
  const std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{frame, tokens - frame}, {frame / 2, tokens - frame / 2}},    // 3 common runs
      {{1, 1, 1, 1, 1, 1, 1, 1, tokens - 8}, {tokens}},              // 9 > ops::kMaxSummedRuns
  };
  for (const auto& runs : cases) {
    SCOPED_TRACE(std::to_string(runs[0].size()) + " runs in sample 0");
    std::vector<std::vector<float>> values(2);
    for (size_t r = 0; r < runs[0].size(); ++r) values[0].push_back(0.05f * static_cast<float>(r));
    for (size_t r = 0; r < runs[1].size(); ++r) values[1].push_back(0.3f + 0.1f * static_cast<float>(r));
    mt::Modality with_runs = batch_of_two(pinned);
    with_runs.timesteps = timesteps_of_runs(runs, values);
    with_runs.timestep_runs = runs;
    mt::Modality per_token = with_runs;
    per_token.timestep_runs.clear();
    const mt::ModelOutputs got = mt::X0Model{f.model}(&with_runs, &audio, nullptr);
    const mt::ModelOutputs want = mt::X0Model{f.model}(&per_token, &audio, nullptr);
    for (int64_t s = 0; s < 2; ++s) {
      EXPECT_LE(test::max_rel_err(got.video.narrow(0, s, 1), want.video.narrow(0, s, 1)), 2e-5) << s;
      EXPECT_LE(test::max_rel_err(got.audio.narrow(0, s, 1), want.audio.narrow(0, s, 1)), 2e-5) << s;
    }
    // The samples' timesteps differ, and so do their results.
    EXPECT_GT(test::max_rel_err(got.video.narrow(0, 0, 1), got.video.narrow(0, 1, 1)), 1e-3);
  }
}

TEST(GuidedDenoiser, MissingNegativeContextIsAnErrorWhenCfgIsOn) {
  const Fixture& f = fixture();
  GuidedDenoiser d(f.model, {f.t("in.video.context_pos"), Tensor()}, {f.t("in.audio.context_pos"), Tensor()},
                   Fixture::params(3.0), Fixture::params(7.0));
  const LatentState v = f.video_state(f.t("in.video.latent")), a = f.audio_state(f.t("in.audio.latent"));
  EXPECT_ERROR_HAS(d(&v, &a, f.sigmas(), 1), "negative prompt's context");
}

}  // namespace
}  // namespace ltx
