// LoRA files (lora_A / lora_B pairs in the reference's ComfyUI layout) and their fusion into the
// tiny LTX-2.3 transformer's weights: the reference's bf16 rounding against a double-precision
// model of it, the plain math W + sum s B A, strength 0, switching sets in place and restoring the
// base weights, the transformer's forward with fused weights, and the errors.
#include "models/lora/lora.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/dtype_bits.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/lora/fuse.h"
#include "models/transformer/model.h"
#include "support/test_support.h"
#include "models/tiny_ltx23.h"

namespace ltx::lora_test {
namespace {

namespace tf = models::transformer;

const char* kWeights = "ltx23.weights.safetensors";

// One factor pair for `target` (a model weight's name without ".weight").
struct Factors {
  std::string target;
  Tensor a;  // [r, in]
  Tensor b;  // [out, r]
};

Factors random_factors(const std::string& target, int64_t out, int64_t in, int64_t rank,
                       uint64_t seed) {
  return {target, test::random_tensor({rank, in}, seed, -0.5f, 0.5f),
          test::random_tensor({out, rank}, seed + 1, -0.5f, 0.5f)};
}

// Factors whose products and sums are exact in f32 and f64 (multiples of 1/8 at rank 2), so the
// only roundings are the reference's explicit ones and any correct implementation agrees bit for
// bit.
Factors exact_factors(const std::string& target, int64_t out, int64_t in, uint64_t seed) {
  auto grid = [](const Tensor& t) {
    std::vector<float> v = t.to_float_vector();
    for (float& x : v) x = std::round(x * 4.f) / 8.f;
    return Tensor::from_vector(v, t.shape());
  };
  Factors f = random_factors(target, out, in, 2, seed);
  return {target, grid(f.a), grid(f.b)};
}

// Writes a LoRA file: each pair as `<prefix><target>.lora_{A,B}.weight` in `dtype`, plus `extra`.
std::string write_lora(const test::TempDir& dir, const std::string& name,
                       const std::vector<Factors>& pairs, DType dtype = DType::BF16,
                       const std::string& prefix = "diffusion_model.",
                       const std::vector<std::pair<std::string, Tensor>>& extra = {}) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Factors& f : pairs) {
    tensors.emplace_back(prefix + f.target + ".lora_A.weight", f.a.to(dtype));
    tensors.emplace_back(prefix + f.target + ".lora_B.weight", f.b.to(dtype));
  }
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  const std::string path = dir.file(name);
  io::write_safetensors(path, tensors);
  return path;
}

io::WeightMap tiny_weights() {
  return io::WeightMap({io::SafetensorsFile::open(test::fixture(kWeights))},
                       tf::transformer_key_map(tf::LTXModelType::AudioVideo));
}

Tensor file_weight(const std::string& name) {
  io::WeightMap w = tiny_weights();
  return w.take_any_shape(name, w.dtype(name));
}

double bf16_round(double x) {
  return dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(static_cast<float>(x)));
}

// The reference's rounding chain computed in f64 (fuse_loras.py with bf16_fuse_rule): factors to
// bf16, first product (bf16(B*s)) @ A rounded, later ones D + s*(B@A) rounded, then bf16(D + W).
// Returns the f64 values of the fused weight before the cast to the weight dtype.
std::vector<double> reference_fused(const Tensor& weight,
                                    const std::vector<std::pair<const Factors*, double>>& loras) {
  const int64_t rows = weight.size(0), cols = weight.size(1);
  std::vector<double> w = weight.to_double_vector(), d(w.size(), 0.0);
  bool first = true;
  for (const auto& [f, strength] : loras) {
    const float s = static_cast<float>(strength);
    const int64_t r = f->a.size(0);
    std::vector<double> a = f->a.to(DType::BF16).to_double_vector();
    std::vector<double> b = f->b.to(DType::BF16).to_double_vector();
    if (first)
      for (double& x : b) x = bf16_round(static_cast<float>(x) * s);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double acc = 0.0;
        for (int64_t k = 0; k < r; ++k) acc += b[i * r + k] * a[k * cols + j];
        double& out = d[i * cols + j];
        out = first ? bf16_round(acc) : bf16_round(out + static_cast<double>(s) * acc);
      }
    first = false;
  }
  for (size_t i = 0; i < w.size(); ++i) d[i] = bf16_round(d[i] + w[i]);
  return d;
}

// W + sum s B A in f64 without any rounding.
std::vector<double> exact_sum(const Tensor& weight,
                              const std::vector<std::pair<const Factors*, double>>& loras) {
  const int64_t rows = weight.size(0), cols = weight.size(1);
  std::vector<double> w = weight.to_double_vector();
  for (const auto& [f, s] : loras) {
    const int64_t r = f->a.size(0);
    const std::vector<double> a = f->a.to_double_vector(), b = f->b.to_double_vector();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t k = 0; k < r; ++k) w[i * cols + j] += s * b[i * r + k] * a[k * cols + j];
  }
  return w;
}

lora::LoraSet open_set(const std::vector<std::pair<std::string, double>>& files) {
  std::vector<lora::LoraSpec> specs;
  for (const auto& [p, s] : files) specs.push_back({p, s});
  return lora::open_set(specs);
}

// ---------------------------------------------------------------- files

TEST(LoraFile, NamesTargetsAfterRemovingDiffusionModelAndIgnoresAlpha) {
  test::TempDir dir;
  const Factors q = random_factors("transformer_blocks.0.attn1.to_q", 64, 64, 4, 1);
  const Factors ff = random_factors("transformer_blocks.1.ff.net.0.proj", 256, 64, 3, 3);
  std::string path = write_lora(
      dir, "a.safetensors", {q}, DType::BF16, "diffusion_model.",
      {{"diffusion_model.transformer_blocks.0.attn1.to_q.alpha", Tensor::full({}, 4.0)}});
  // A second pair stored without the prefix (the reference accepts both).
  {
    io::SafetensorsFile f(path);
    std::vector<std::pair<std::string, Tensor>> t;
    for (const std::string& n : f.names()) t.emplace_back(n, f.tensor(n).clone());
    t.emplace_back("transformer_blocks.1.ff.net.0.proj.lora_A.weight", ff.a.to(DType::F32));
    t.emplace_back("transformer_blocks.1.ff.net.0.proj.lora_B.weight", ff.b.to(DType::F32));
    path = dir.file("b.safetensors");
    io::write_safetensors(path, t, {{"reference_downscale_factor", "2"}});
  }
  const auto lf = lora::LoraFile::open(path);
  ASSERT_EQ(lf->targets().size(), 2u);
  const auto& pq = lf->targets().at("transformer_blocks.0.attn1.to_q.weight");
  EXPECT_EQ(pq.rank(), 4);
  EXPECT_EQ(pq.a.shape(), Shape({4, 64}));
  EXPECT_EQ(pq.b.shape(), Shape({64, 4}));
  EXPECT_EQ(pq.a.dtype(), DType::BF16);
  EXPECT_EQ(test::max_abs_diff(pq.b, q.b.to(DType::BF16)), 0.0);
  EXPECT_EQ(lf->targets().at("transformer_blocks.1.ff.net.0.proj.weight").rank(), 3);
  EXPECT_EQ(lf->file().metadata_json("reference_downscale_factor"), 2);
  EXPECT_EQ(lf->path(), path);
  // The same checks on a file opened elsewhere (from_file: e.g. bytes held in memory).
  const auto same = lora::LoraFile::from_file(io::SafetensorsFile::open(path));
  ASSERT_EQ(same->targets().size(), 2u);
  EXPECT_EQ(test::max_abs_diff(same->targets().at("transformer_blocks.0.attn1.to_q.weight").b,
                               pq.b), 0.0);
}

TEST(LoraFile, RejectsMalformedFilesNamingTheFileAndTensor) {
  test::TempDir dir;
  const Factors q = random_factors("transformer_blocks.0.attn1.to_q", 64, 64, 4, 1);
  const std::string a_only = "diffusion_model.transformer_blocks.0.attn1.to_k.lora_A.weight";

  const std::string half = write_lora(dir, "half.safetensors", {q}, DType::BF16, "diffusion_model.",
                                      {{a_only, Tensor::zeros({4, 64})}});
  EXPECT_ERROR_HAS(lora::LoraFile::open(half), "half.safetensors");
  EXPECT_ERROR_HAS(lora::LoraFile::open(half), a_only);
  EXPECT_ERROR_HAS(lora::LoraFile::open(half), "no .lora_B.weight partner");

  Factors bad = q;
  bad.b = Tensor::zeros({64, 5});
  const std::string rank = write_lora(dir, "rank.safetensors", {bad});
  EXPECT_ERROR_HAS(lora::LoraFile::open(rank), "rank mismatch");
  EXPECT_ERROR_HAS(lora::LoraFile::open(rank), "transformer_blocks.0.attn1.to_q.weight");
  EXPECT_ERROR_HAS(lora::LoraFile::open(rank, {.strict = false}), "rank mismatch");

  const std::string kohya =
      write_lora(dir, "kohya.safetensors", {q}, DType::BF16, "diffusion_model.",
                 {{"lora_unet_blocks_0.lora_down.weight", Tensor::zeros({4, 64})}});
  EXPECT_ERROR_HAS(lora::LoraFile::open(kohya), "lora_unet_blocks_0.lora_down.weight");
  EXPECT_ERROR_HAS(lora::LoraFile::open(kohya), "non-strict");

  // Non-strict skips what the reference skips and keeps the rest.
  const auto lenient = lora::LoraFile::open(kohya, {.strict = false});
  EXPECT_EQ(lenient->targets().size(), 1u);
  EXPECT_EQ(lora::LoraFile::open(half, {.strict = false})->targets().size(), 1u);

  Factors flat = q;
  flat.a = Tensor::zeros({4, 8, 8});
  EXPECT_ERROR_HAS(lora::LoraFile::open(write_lora(dir, "flat.safetensors", {flat})), "2-D");

  const std::string collide =
      write_lora(dir, "collide.safetensors", {q}, DType::BF16, "diffusion_model.",
                 {{"transformer_blocks.0.attn1.to_q.lora_A.weight", q.a}});
  EXPECT_ERROR_HAS(lora::LoraFile::open(collide, {.strict = false}), "collide");

  const std::string empty = dir.file("empty.safetensors");
  io::write_safetensors(empty, {{"something.else", Tensor::zeros({2})}});
  EXPECT_ERROR_HAS(lora::LoraFile::open(empty), "something.else");
  EXPECT_ERROR_HAS(lora::LoraFile::open(dir.file("absent.safetensors")), "absent.safetensors");
}

TEST(LoraSet, OpensEachPathOnceKeepsOrderAndKnowsTheIdentity) {
  test::TempDir dir;
  const std::string p1 = write_lora(
      dir, "1.safetensors", {random_factors("transformer_blocks.0.attn1.to_q", 64, 64, 2, 1)});
  const std::string p2 = write_lora(
      dir, "2.safetensors", {random_factors("transformer_blocks.0.attn1.to_k", 64, 64, 2, 3)});
  const lora::LoraSet set = open_set({{p2, 0.5}, {p1, 1.0}, {p2, 0.25}});
  ASSERT_EQ(set.size(), 3u);
  EXPECT_EQ(set[0].lora->path(), p2);
  EXPECT_EQ(set[1].lora->path(), p1);
  EXPECT_EQ(set[0].lora, set[2].lora);
  EXPECT_EQ(set[2].strength, 0.25);
  EXPECT_FALSE(lora::is_identity(set));
  EXPECT_TRUE(lora::is_identity({}));
  EXPECT_TRUE(lora::is_identity(open_set({{p1, 0.0}, {p2, 0.0}})));
  EXPECT_NE(lora::describe(set).find("1.safetensors (1)"), std::string::npos);
  EXPECT_EQ(lora::LoraSpec{}.strength, 1.0);
}

// ---------------------------------------------------------------- fusion math

// One case of fused_weight against the f64 model of the reference's rounding.
void expect_matches_reference(const Tensor& weight, const std::vector<Factors>& factors,
                              const std::vector<double>& strengths, DType file_dtype) {
  test::TempDir dir;
  std::vector<std::pair<std::string, double>> specs;
  for (size_t i = 0; i < factors.size(); ++i)
    specs.emplace_back(write_lora(dir, str(i, ".safetensors"), {factors[i]}, file_dtype),
                       strengths[i]);
  const lora::LoraSet set = open_set(specs);
  const std::string target = factors[0].target + ".weight";
  const Tensor fused = lora::fused_weight(weight, lora::products_for(set, target));
  ASSERT_EQ(fused.dtype(), weight.dtype());
  ASSERT_EQ(fused.shape(), weight.shape());

  std::vector<std::pair<const Factors*, double>> ref_in;
  for (size_t i = 0; i < factors.size(); ++i) ref_in.emplace_back(&factors[i], strengths[i]);
  const std::vector<double> ref = reference_fused(weight, ref_in);
  const std::vector<double> got = fused.to_double_vector();
  // The products accumulate in f32 here and in f64 in the model: a sum that lands within an f32
  // rounding of a bf16 rounding boundary may round the other way (one bf16 ulp), nothing more.
  int64_t exact = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::abs(ref[i]), 1e-30)) - 7);
    ASSERT_LE(std::abs(got[i] - ref[i]), ulp)
        << "element " << i << ": " << got[i] << " vs " << ref[i];
    exact += got[i] == ref[i];
  }
  EXPECT_GE(static_cast<double>(exact), 0.99 * static_cast<double>(ref.size()));

  // And it is W + sum s B A up to the bf16 roundings.
  const std::vector<double> plain = exact_sum(weight, ref_in);
  double scale = 0.0, err = 0.0;
  for (size_t i = 0; i < plain.size(); ++i) {
    scale = std::max(scale, std::abs(plain[i]));
    err = std::max(err, std::abs(got[i] - plain[i]));
  }
  EXPECT_LE(err, scale * 0.02) << "max |fused - (W + sum s B A)|";
}

TEST(LoraFuse, MatchesTheReferenceRoundingInDoublePrecision) {
  // Odd sizes, rank 1 and 7, one to three LoRAs, f32 and bf16 factor files, f32 and bf16 weights.
  const Tensor w33 = test::random_tensor({7, 33}, 10);
  expect_matches_reference(w33, {random_factors("x.y", 7, 33, 1, 11)}, {0.8}, DType::BF16);
  expect_matches_reference(w33, {random_factors("x.y", 7, 33, 7, 12)}, {-1.3}, DType::F32);
  expect_matches_reference(
      w33.to(DType::BF16),
      {random_factors("x.y", 7, 33, 3, 13), random_factors("x.y", 7, 33, 5, 14),
       random_factors("x.y", 7, 33, 2, 15)},
      {1.0, 0.37, 2.5}, DType::BF16);
  const Tensor w129 = test::random_tensor({129, 3}, 16);
  expect_matches_reference(
      test::non_contiguous_copy(w129),
      {random_factors("x.y", 129, 3, 4, 17), random_factors("x.y", 129, 3, 1, 18)}, {0.5, 0.25},
      DType::F32);
}

TEST(LoraFuse, RoundsThroughBf16EvenForF32WeightsAndKeepsTheWeightDtype) {
  test::TempDir dir;
  const Factors f = random_factors("x.y", 5, 9, 2, 21);
  const lora::LoraSet set = open_set({{write_lora(dir, "a.safetensors", {f}), 1.0}});
  const Tensor w = test::random_tensor({5, 9}, 22);
  const Tensor fused = lora::fused_weight(w, lora::products_for(set, "x.y.weight"));
  EXPECT_EQ(fused.dtype(), DType::F32);
  EXPECT_EQ(test::max_abs_diff(fused, fused.to(DType::BF16)), 0.0);  // bf16 values

  // f8 weights: bf16(D + W) cast to f8 (the fp8-cast rule's deterministic path).
  const Tensor w8 = w.to(DType::F8E4M3FN);
  const Tensor fused8 = lora::fused_weight(w8, lora::products_for(set, "x.y.weight"));
  EXPECT_EQ(fused8.dtype(), DType::F8E4M3FN);
  const std::vector<double> ref = reference_fused(w8, {{&f, 1.0}});
  const Tensor ref8 = Tensor::from_vector(ref, {5, 9}).to(DType::F8E4M3FN);
  EXPECT_EQ(test::max_abs_diff(fused8, ref8), 0.0);
}

TEST(LoraFuse, TwoLorasSumWithTheirStrengths) {
  test::TempDir dir;
  const Factors f1 = exact_factors("x.y", 6, 10, 31), f2 = exact_factors("x.y", 6, 10, 33);
  const lora::LoraSet set = open_set({{write_lora(dir, "1.safetensors", {f1}), 0.5},
                                      {write_lora(dir, "2.safetensors", {f2}), 2.0}});
  const Tensor w = Tensor::zeros({6, 10});
  const Tensor fused = lora::fused_weight(w, lora::products_for(set, "x.y.weight"));
  // Exact factors and zero weights: every rounding is exact, so this is the plain sum.
  const std::vector<double> plain = exact_sum(w, {{&f1, 0.5}, {&f2, 2.0}});
  EXPECT_EQ(test::max_abs_diff(fused, Tensor::from_vector(plain, {6, 10})), 0.0);
  EXPECT_GT(test::max_abs_diff(fused, w), 0.0);
}

TEST(LoraFuse, StrengthZeroLeavesTheWeightsUntouched) {
  test::TempDir dir;
  const std::string name = "transformer_blocks.0.attn1.to_q.weight";
  const std::string path = write_lora(
      dir, "a.safetensors", {random_factors("transformer_blocks.0.attn1.to_q", 64, 64, 4, 41)});
  io::WeightMap w = tiny_weights();
  lora::fuse_into(w, open_set({{path, 0.0}}));
  const Tensor base = file_weight(name);
  EXPECT_EQ(test::max_abs_diff(w.take(name, {64, 64}, DType::F32), base), 0.0);

  io::WeightMap w2 = tiny_weights();
  lora::fuse_into(w2, open_set({{path, 0.7}}));
  EXPECT_GT(test::max_abs_diff(w2.take(name, {64, 64}, DType::F32), base), 1e-3);
}

// ---------------------------------------------------------------- on the transformer

using test::tiny_ltx23::forward;

tf::LTXModelConfig tiny_config() {
  return tf::LTXModelConfig::from_file(io::SafetensorsFile(test::fixture(kWeights)),
                                       tf::LTXModelType::AudioVideo);
}

double diff(const tf::ModelOutputs& x, const tf::ModelOutputs& y) {
  return std::max(test::max_abs_diff(x.video, y.video), test::max_abs_diff(x.audio, y.audio));
}

// Exact-factor LoRAs on a video, an audio, a cross-modal and a top-level weight of the tiny model.
struct TinyLoras {
  test::TempDir dir;
  std::vector<Factors> f1 = {
      exact_factors("transformer_blocks.0.attn1.to_q", 64, 64, 51),
      exact_factors("transformer_blocks.1.ff.net.0.proj", 256, 64, 53),
      exact_factors("transformer_blocks.0.audio_to_video_attn.to_q", 32, 64, 55)};
  std::vector<Factors> f2 = {exact_factors("transformer_blocks.0.attn1.to_q", 64, 64, 57),
                             exact_factors("transformer_blocks.1.audio_ff.net.2", 32, 128, 59),
                             exact_factors("patchify_proj", 64, 24, 61)};
  std::string p1 = write_lora(dir, "user.safetensors", f1);
  std::string p2 = write_lora(dir, "distilled.safetensors", f2, DType::F32);
};

// The fused weights computed here from the documented rule, in f32 arithmetic like torch's
// (exact factors: the sums are exact, so no accumulation-order effects).
std::map<std::string, Tensor> manual_fusion(
    const std::vector<std::pair<const Factors*, double>>& loras) {
  std::map<std::string, std::vector<std::pair<const Factors*, double>>> by_target;
  for (const auto& l : loras) by_target[l.first->target + ".weight"].push_back(l);
  std::map<std::string, Tensor> out;
  for (const auto& [name, ls] : by_target) {
    const Tensor w = file_weight(name);
    const int64_t rows = w.size(0), cols = w.size(1);
    std::vector<float> d(static_cast<size_t>(w.numel()), 0.f);
    bool first = true;
    for (const auto& [f, s] : ls) {
      const float sf = static_cast<float>(s);
      const int64_t r = f->a.size(0);
      const std::vector<float> a = f->a.to_float_vector();
      std::vector<float> b = f->b.to_float_vector();
      if (first)
        for (float& x : b) x = static_cast<float>(bf16_round(x * sf));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          float acc = 0.f;
          for (int64_t k = 0; k < r; ++k) acc += b[i * r + k] * a[k * cols + j];
          float& x = d[i * cols + j];
          x = static_cast<float>(first ? bf16_round(acc) : bf16_round(x + sf * acc));
        }
      first = false;
    }
    const std::vector<float> wv = w.to_float_vector();
    for (size_t i = 0; i < wv.size(); ++i) d[i] = static_cast<float>(bf16_round(d[i] + wv[i]));
    out[name] = Tensor::from_vector(d, w.shape());
  }
  return out;
}

tf::LTXModel model_with(const std::map<std::string, Tensor>& replaced) {
  io::WeightMap w = tiny_weights();
  for (const auto& [name, t] : replaced) w.add(name, t);
  return tf::LTXModel::load(w, tiny_config());
}

TEST(LoraFuser, ForwardWithFusedLorasEqualsForwardWithManuallyFusedWeights) {
  TinyLoras t;
  const lora::LoraSet stage1 = open_set({{t.p1, 0.8}});
  const lora::LoraSet stage2 = open_set({{t.p1, 0.8}, {t.p2, 0.6}});

  io::WeightMap w = tiny_weights();
  lora::Fuser fuser(w, {stage1, stage2}, {});
  EXPECT_EQ(fuser.targets().size(), 5u);
  const tf::LTXModel model = tf::LTXModel::load(w, tiny_config());
  const tf::ModelOutputs base = forward(model_with({}));

  EXPECT_EQ(diff(forward(model), base), 0.0);  // nothing applied yet

  fuser.apply(stage1);
  const tf::ModelOutputs out1 = forward(model);
  std::vector<std::pair<const Factors*, double>> m1;
  for (const Factors& f : t.f1) m1.emplace_back(&f, 0.8);
  EXPECT_EQ(diff(out1, forward(model_with(manual_fusion(m1)))), 0.0);
  EXPECT_GT(diff(out1, base), 1e-4);

  fuser.apply(stage2);
  std::vector<std::pair<const Factors*, double>> m2 = m1;
  for (const Factors& f : t.f2) m2.emplace_back(&f, 0.6);
  EXPECT_EQ(diff(forward(model), forward(model_with(manual_fusion(m2)))), 0.0);

  // fuse_into (the state-dict path) gives the same model.
  io::WeightMap w2 = tiny_weights();
  lora::fuse_into(w2, stage2);
  EXPECT_EQ(diff(forward(model), forward(tf::LTXModel::load(w2, tiny_config()))), 0.0);

  // Back to stage 1, then to the base weights: bit for bit.
  fuser.apply(stage1);
  EXPECT_EQ(diff(forward(model), out1), 0.0);
  fuser.reset();
  EXPECT_EQ(diff(forward(model), base), 0.0);
}

TEST(LoraFuser, RestoresTheBaseWeightsBitForBitAndReappliesDeterministically) {
  // bf16 base weights, as the published checkpoints: the buffers hold f32 copies.
  TinyLoras t;
  io::WeightMap w({io::SafetensorsFile::open(test::fixture("ltx23.weights.bf16.safetensors"))},
                  tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  const lora::LoraSet set = open_set({{t.p1, 1.5}, {t.p2, -0.5}});
  lora::Fuser fuser(w, {set}, {});
  std::map<std::string, Tensor> base, fused;
  for (const std::string& n : fuser.targets()) base[n] = fuser.bound(n).clone();
  fuser.apply(set);
  for (const std::string& n : fuser.targets()) {
    fused[n] = fuser.bound(n).clone();
    EXPECT_GT(test::max_abs_diff(fused[n], base[n]), 0.0) << n;
    EXPECT_EQ(test::max_abs_diff(fused[n], fused[n].to(DType::BF16)), 0.0) << n;
  }
  fuser.reset();
  for (const std::string& n : fuser.targets())
    EXPECT_EQ(test::max_abs_diff(fuser.bound(n), base[n]), 0.0) << n;
  fuser.apply(set);
  for (const std::string& n : fuser.targets())
    EXPECT_EQ(test::max_abs_diff(fuser.bound(n), fused[n]), 0.0) << n;
}

TEST(LoraFuser, ZeroStrengthSetIsTheBaseModel) {
  TinyLoras t;
  io::WeightMap w = tiny_weights();
  const lora::LoraSet zero = open_set({{t.p1, 0.0}, {t.p2, 0.0}});
  lora::Fuser fuser(w, {zero}, {});
  const tf::LTXModel model = tf::LTXModel::load(w, tiny_config());
  fuser.apply(zero);
  EXPECT_EQ(diff(forward(model), forward(model_with({}))), 0.0);
}

TEST(LoraFuse, RejectsTargetsTheModelLacksOrThatDoNotFit) {
  test::TempDir dir;
  const Factors ok = random_factors("transformer_blocks.0.attn1.to_q", 64, 64, 2, 71);
  const Factors ghost = random_factors("transformer_blocks.7.attn1.to_q", 64, 64, 2, 73);
  const std::string p = write_lora(dir, "ghost.safetensors", {ok, ghost});
  {
    io::WeightMap w = tiny_weights();
    const auto set = open_set({{p, 1.0}});
    EXPECT_ERROR_HAS(lora::fuse_into(w, set), "ghost.safetensors");
    EXPECT_ERROR_HAS(lora::fuse_into(w, set), "transformer_blocks.7.attn1.to_q.weight");
    EXPECT_ERROR_HAS(lora::Fuser(w, {set}, {}), "not weights of this model");
  }
  {
    // Non-strict: the absent target is skipped, the rest is fused (the reference's behaviour).
    io::WeightMap w = tiny_weights();
    lora::LoraSet set{{lora::LoraFile::open(p, {.strict = false}), 1.0}};
    lora::Fuser fuser(w, {set}, {});
    EXPECT_EQ(fuser.targets(), std::vector<std::string>{"transformer_blocks.0.attn1.to_q.weight"});
    fuser.apply(set);
    EXPECT_GT(test::max_abs_diff(fuser.bound("transformer_blocks.0.attn1.to_q.weight"),
                                 file_weight("transformer_blocks.0.attn1.to_q.weight")),
              0.0);
  }
  // Shapes that do not fit the weight are errors even non-strict; so are non-2-D targets.
  const std::string wide = write_lora(
      dir, "wide.safetensors", {random_factors("transformer_blocks.0.attn1.to_k", 64, 65, 2, 75)});
  const std::string norm = write_lora(
      dir, "norm.safetensors", {random_factors("transformer_blocks.0.attn1.q_norm", 64, 1, 2, 77)});
  io::WeightMap w = tiny_weights();
  lora::LoraSet wide_set{{lora::LoraFile::open(wide, {.strict = false}), 1.0}};
  EXPECT_ERROR_HAS(lora::fuse_into(w, wide_set), "do not fit");
  EXPECT_ERROR_HAS(lora::fuse_into(w, wide_set), "[64, 64]");
  EXPECT_ERROR_HAS(lora::fuse_into(w, open_set({{norm, 1.0}})),
                   "transformer_blocks.0.attn1.q_norm.weight");
  EXPECT_ERROR_HAS(lora::fused_weight(Tensor::zeros({64}), {}), "2-D");
}

TEST(LoraFuser, RejectsSetsItWasNotPreparedFor) {
  TinyLoras t;
  io::WeightMap w = tiny_weights();
  lora::Fuser fuser(w, {open_set({{t.p1, 1.0}})}, {});
  EXPECT_ERROR_HAS(fuser.apply(open_set({{t.p2, 1.0}})), "not prepared");
  EXPECT_ERROR_HAS(fuser.apply(open_set({{t.p2, 1.0}})), "patchify_proj.weight");
  EXPECT_ERROR_HAS(fuser.bound("proj_out.weight"), "proj_out.weight");
  fuser.apply(open_set({{t.p1, 2.0}}));  // another strength of a prepared file is fine
}

// Against the official loader (fixtures from tools/parity/gen_lora_reference.py; skips without them).
TEST(LoraReference, FusedWeightsAndForwardMatchTheOfficialLoader) {
  const std::string io_path = test::fixture("lora_ltx23.io.safetensors");
  if (!std::filesystem::exists(io_path))
    GTEST_SKIP() << "no " << io_path << " (made by tools/parity/gen_lora_reference.py)";
  const io::SafetensorsFile ref(io_path);
  const std::vector<lora::LoraSpec> user = {{test::fixture("lora_ltx23.user.safetensors"), 0.8}};
  std::vector<lora::LoraSpec> both = user;
  both.push_back({test::fixture("lora_ltx23.distilled.safetensors"), 0.6});
  const std::map<std::string, lora::LoraSet> stages = {{"stage1", lora::open_set(user)},
                                                       {"stage2", lora::open_set(both)}};

  io::WeightMap w({io::SafetensorsFile::open(test::fixture("ltx23.weights.bf16.safetensors"))},
                  tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  lora::Fuser fuser(w, {stages.at("stage1"), stages.at("stage2")}, {});
  const tf::LTXModel model = tf::LTXModel::load(w, tiny_config());
  for (const auto& [stage, set] : stages) {
    fuser.apply(set);
    int weights = 0;
    for (const std::string& name : ref.names()) {
      const std::string p = "out." + stage + ".weight.";
      if (name.rfind(p, 0) != 0) continue;
      const std::string target = name.substr(p.size()) + ".weight";
      // Both accumulate in f32 (OpenBLAS here, the reference's bf16 GEMM there): at most one bf16
      // ulp apart where a sum lands next to a rounding boundary.
      const Tensor got = fuser.bound(target), want = ref.tensor(name);
      const std::vector<double> g = got.to_double_vector(), r = want.to_double_vector();
      int64_t exact = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::abs(r[i]), 1e-30)) - 7);
        ASSERT_LE(std::abs(g[i] - r[i]), ulp) << stage << " " << target << " element " << i;
        exact += g[i] == r[i];
      }
      EXPECT_GE(static_cast<double>(exact), 0.99 * static_cast<double>(g.size())) << target;
      ++weights;
    }
    EXPECT_EQ(weights, 9) << stage;
    const tf::ModelOutputs out = forward(model);
    EXPECT_LE(test::max_rel_err(out.video, ref.tensor("out." + stage + ".video_velocity")), 1e-4);
    EXPECT_LE(test::max_rel_err(out.audio, ref.tensor("out." + stage + ".audio_velocity")), 1e-4);
  }
}

}  // namespace
}  // namespace ltx::lora_test
