#include "bench/kernel_timings.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>

#include "backend/device_query.h"
#include "core/error.h"

#if LTX_WITH_CUDA
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "backend/cuda/attention.h"
#include "backend/cuda/block_ring.h"
#include "backend/cuda/device.h"
#include "backend/cuda/host_upload.h"
#include "backend/cuda/neighborhood_attention.h"
#include "models/lora/fuse.h"
#include "models/video_vae/transformer/rope.h"
#include "ops/attention.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/ggml_linear.h"
#include "ops/linalg.h"
#include "ops/mlp.h"
#include "ops/norm.h"
#include "ops/quantized_linear.h"
#include "ops/resample.h"
#include "ops/rope.h"
#include "ops/shape.h"
#include "ops/summed.h"
#endif

namespace ltx::bench {

namespace {

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// Spaces of the table's column padding collapsed to one, the ends trimmed.
std::string collapse_spaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::string KernelTiming::line() const {
  std::string s = format("[timing %s] %s %.3f ms", dtype.c_str(), name.c_str(), ms);
  if (!unit.empty())
    s += format(unit == "GB/s" ? "  %.0f %s" : "  %.1f %s", rate, unit.c_str());
  return s;
}

const std::vector<std::string>& kernel_harness_names() {
  static const std::vector<std::string> names = {"step-kernels", "fused-glue", "neighborhood-attention",
                                                 "qk-norm-rope", "swiglu-mlp", "vae-conv",
                                                 "vae-glue",     "fp8-linear",   "ggml-linear",
                                                 "lora-fuse",    "upload"};
  return names;
}

std::vector<std::string> select_kernel_harnesses(const std::vector<std::string>& filters) {
  const std::vector<std::string>& all = kernel_harness_names();
  std::string valid;
  for (const std::string& n : all) valid += (valid.empty() ? "" : ", ") + n;
  for (const std::string& f : filters)
    LTX_CHECK(std::find(all.begin(), all.end(), f) != all.end(), "--filter: unknown kernel harness '", f,
              "'; use one of ", valid);
  if (filters.empty()) return all;
  std::vector<std::string> out;
  for (const std::string& n : all)
    if (std::find(filters.begin(), filters.end(), n) != filters.end()) out.push_back(n);
  return out;
}

nlohmann::json kernel_timings_json(const std::vector<KernelTiming>& rows, const std::string& device) {
  nlohmann::json j;
  j["tool"] = "ltx bench kernels";
  j["device"] = device;
  j["rows"] = nlohmann::json::array();
  for (const KernelTiming& r : rows) {
    nlohmann::json row = {{"harness", r.harness}, {"dtype", r.dtype}, {"name", collapse_spaces(r.name)},
                          {"ms", r.ms}};
    if (!r.unit.empty()) {
      row["rate"] = r.rate;
      row["unit"] = r.unit;
    }
    j["rows"].push_back(row);
  }
  return j;
}

#if LTX_WITH_CUDA

namespace {

// Collects the rows of one harness and hands each to the caller as it is measured.
class Rows {
 public:
  Rows(std::string harness, Device device, std::vector<KernelTiming>& all,
       const std::function<void(const KernelTiming&)>& on_row)
      : harness_(std::move(harness)), device_(device), all_(all), on_row_(on_row) {}

  Device device() const { return device_; }

  void add(DType dt, std::string name, double seconds, double rate = 0, std::string unit = {}) {
    KernelTiming t{harness_, dtype_name(dt), std::move(name), seconds * 1e3, rate, std::move(unit)};
    all_.push_back(t);
    on_row_(t);
  }

  // Mean seconds per call over `reps` calls after one warm-up.
  double seconds_per_call(const std::function<void()>& fn, int reps) const {
    fn();
    backend::synchronize(device_);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    backend::synchronize(device_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  }

  // Uniform values in [lo, hi) from `seed`, made on the host and moved to the device in `dt`.
  Tensor uniform(const Shape& s, uint64_t seed, DType dt, float lo = -1.f, float hi = 1.f) const {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = dist(rng);
    return Tensor::from_vector(v, s).to(device_, dt);
  }

 private:
  std::string harness_;
  Device device_;
  std::vector<KernelTiming>& all_;
  const std::function<void(const KernelTiming&)>& on_row_;
};

// The transformer step's kernels on the full-size LTX-2.3 shapes (768 x 512, 121 frames: 6144
// video tokens of width 4096, 32 heads of 128; 126 audio tokens, 32 heads of 64; the 1536 x 1024
// step's 24576 video tokens for the attentions), in bf16 and f32: every attention kernel that
// applies, the wgmma kernel's key splits and query tiles per block, the memory-bound glue, RoPE and
// an FFN GEMM.
void step_kernels(Rows& r) {
  for (DType dt : {DType::BF16, DType::F32}) {
    struct Case {
      const char* name;
      int64_t h, tq, tk, d;
    };
    for (const Case& c :
         {Case{"video self", 32, 6144, 6144, 128}, Case{"video text", 32, 6144, 1024, 128},
          Case{"audio self", 32, 126, 126, 64}, Case{"audio-video", 32, 126, 6144, 64},
          Case{"video-audio", 32, 6144, 126, 64}, Case{"video self 1536", 32, 24576, 24576, 128},
          Case{"video text 1536", 32, 24576, 1024, 128}, Case{"audio-video 1536", 32, 126, 24576, 64},
          Case{"video-audio 1536", 32, 24576, 126, 64}}) {
      if (dt == DType::F32 && c.tq > 6144) continue;  // the f32 kernels take minutes there
      const Tensor q = r.uniform({1, c.tq, c.h, c.d}, 1, dt).transpose(1, 2);
      const Tensor k = r.uniform({1, c.tk, c.h, c.d}, 2, dt).transpose(1, 2);
      const Tensor v = r.uniform({1, c.tk, c.h, c.d}, 3, dt).transpose(1, 2);
      const double flops = 4.0 * c.h * c.tq * c.tk * c.d;
      const float scale = 1.f / std::sqrt(static_cast<float>(c.d));
      // Each fused kernel that applies (wgmma on Hopper with sm_90a code, mma), then Auto.
      std::vector<std::pair<const char*, cuda::AttentionKernel>> kernels;
      if (cuda::wgmma_attention_applies(q, k, v)) kernels.emplace_back("wgmma", cuda::AttentionKernel::Wgmma);
      if (cuda::tensor_core_attention_applies(q, k, v))
        kernels.emplace_back("mma", cuda::AttentionKernel::TensorCore);
      kernels.emplace_back("auto", cuda::AttentionKernel::Auto);
      if (c.tq <= 6144) kernels.emplace_back("simple", cuda::AttentionKernel::Simple);
      for (const auto& [kname, kernel] : kernels) {
        const double s = r.seconds_per_call(
            [&] { (void)cuda::scaled_dot_product_attention(q, k, v, Tensor(), scale, kernel); }, 3);
        r.add(dt, format("attention %-16s %-6s", c.name, kname), s, flops / s / 1e12, "TFLOP/s");
      }
      // The wgmma kernel with the keys unsplit and split in 2, 4, 8 ranges (Auto's choice noted).
      if (cuda::wgmma_attention_applies(q, k, v) && c.tq < 1024) {
        Tensor out = Tensor::empty({1, c.tq, c.h, c.d}, DType::BF16, r.device()).transpose(1, 2);
        for (int splits : {1, 2, 4, 8}) {
          const double s = r.seconds_per_call(
              [&] { cuda::wgmma_attention(q, k, v, Tensor(), Tensor(), scale, out, splits); }, 10);
          r.add(dt,
                format("attention %-16s wgmma split %d%s", c.name, splits,
                       cuda::wgmma_attention_auto_splits(q, k) == splits ? " (auto)" : ""),
                s, flops / s / 1e12, "TFLOP/s");
        }
      }
      // Several query tiles per block over resident keys (Auto's choice noted).
      if (cuda::wgmma_attention_applies(q, k, v) && c.tq >= 1024 && c.tk <= 384) {
        Tensor out = Tensor::empty({1, c.tq, c.h, c.d}, DType::BF16, r.device()).transpose(1, 2);
        for (int per : {1, 2, 4, 8, 12, 16, 48}) {
          const double s = r.seconds_per_call(
              [&] { cuda::wgmma_attention(q, k, v, Tensor(), Tensor(), scale, out, 1, per); }, 10);
          r.add(dt,
                format("attention %-16s wgmma %d q tiles%s", c.name, per,
                       cuda::wgmma_attention_auto_q_tiles(q, k) == per ? " (auto)" : ""),
                s, flops / s / 1e12, "TFLOP/s");
        }
      }
    }
    // Memory-bound ops on the video stream [1, 6144, 4096].
    const Tensor x = r.uniform({1, 6144, 4096}, 4, dt), y = r.uniform({1, 6144, 4096}, 5, dt);
    const Tensor row = r.uniform({1, 1, 4096}, 6, dt);
    const double bytes = static_cast<double>(x.nbytes());
    const auto report = [&](const char* name, double s, double passes) {
      r.add(dt, format("%-22s", name), s, passes * bytes / s / 1e9, "GB/s");
    };
    report("add", r.seconds_per_call([&] { (void)ops::add(x, y); }, 10), 3);
    report("modulate (row)", r.seconds_per_call([&] { (void)ops::modulate(x, row, row); }, 10), 2);
    report("gelu_tanh", r.seconds_per_call([&] { (void)ops::gelu_tanh(x); }, 10), 2);
    report("rms_norm", r.seconds_per_call([&] { (void)ops::rms_norm(x, Tensor(), 1e-6); }, 10), 2);
    report("layer_norm",
           r.seconds_per_call([&] { (void)ops::layer_norm(x, Tensor(), Tensor(), 1e-6); }, 10), 2);
    // The AdaLN norm: per-sample [1, 1, D] scale/shift, and per-token [1, T, D] ones (two more
    // streams of x's size).
    report("rms_norm_modulate (row)",
           r.seconds_per_call([&] { (void)ops::rms_norm_modulate(x, row, row, 1e-6); }, 10), 2);
    report("rms_norm_modulate (tok)",
           r.seconds_per_call([&] { (void)ops::rms_norm_modulate(x, y, y, 1e-6); }, 10), 4);
    // RoPE on q and k ([1, T, H * D] viewed as [1, H, T, D]) with the transformer's
    // [1, H, T, D / 2] tables, in f32 and in the stream's dtype; bytes: x read, output written,
    // both tables read.
    const Tensor xh = x.view({1, 6144, 32, 128}).transpose(1, 2);
    const Tensor kh = y.view({1, 6144, 32, 128}).transpose(1, 2);
    for (DType tdt : {DType::F32, dt}) {
      const Tensor c = r.uniform({1, 32, 6144, 64}, 7, tdt);
      const Tensor sn = r.uniform({1, 32, 6144, 64}, 8, tdt);
      const double passes = 2.0 + 2.0 * static_cast<double>(c.nbytes()) / bytes;
      for (const auto& qk : {std::pair{"q", &xh}, std::pair{"k", &kh}}) {
        const Tensor& xr = *qk.second;
        const std::string label =
            std::string("rope split (") + qk.first + ", " + dtype_name(tdt) + " tab)";
        report(label.c_str(),
               r.seconds_per_call([&] { (void)ops::apply_rope(xr, c, sn, ops::RopeLayout::Split); }, 10),
               passes);
      }
      if (tdt == dt) break;  // f32 streams: the f32 tables once
    }
    // A GEMM of the FFN: [6144, 4096] @ [16384, 4096]^T.
    const Tensor w = r.uniform({16384, 4096}, 9, dt);
    const double sg = r.seconds_per_call([&] { (void)ops::linear(x, w); }, 3);
    r.add(dt, "linear 6144x4096x16384", sg, 2.0 * 6144 * 4096 * 16384 / sg / 1e12, "TFLOP/s");
  }
}

// The transformer block's fused glue against the unfused ops it replaces, bf16 video stream
// [1, 6144, 4096]: the AdaLN values as ops::Summed (table row + per-token slice of [1, T, 9, D])
// in rms_norm_modulate / gated_add; the residual + next norm in one pass; the q / k RMSNorm +
// split RoPE (32 heads of 128); the per-head gate (logits [1, T, 32, 1]).
void fused_glue(Rows& r) {
  const DType dt = DType::BF16;
  const int64_t t = 6144, d = 4096, heads = 32;
  const Tensor x = r.uniform({1, t, d}, 20, dt), y = r.uniform({1, t, d}, 21, dt);
  const Tensor table = r.uniform({9, d}, 22, dt), ts = r.uniform({1, t, 9 * d}, 23, dt);
  const auto value = [&](int64_t i) {
    return ops::Summed(table.select(0, i), ts.view({1, t, 9, d}).select(2, i));
  };
  const ops::Summed scale = value(1), shift = value(0), gate = value(2);
  const auto report = [&](const char* name, double s) { r.add(dt, format("%-34s", name), s); };
  report("add x2 + rms_norm_modulate", r.seconds_per_call([&] {
           (void)ops::rms_norm_modulate(x, ops::materialize(scale), ops::materialize(shift), 1e-6);
         }, 10));
  report("rms_norm_modulate (summed)",
         r.seconds_per_call([&] { (void)ops::rms_norm_modulate(x, scale, shift, 1e-6); }, 10));
  report("add + gated_add", r.seconds_per_call([&] { (void)ops::gated_add(x, y, ops::materialize(gate)); }, 10));
  report("gated_add (summed)", r.seconds_per_call([&] { (void)ops::gated_add(x, y, gate); }, 10));
  report("gated_add + rms_norm_modulate", r.seconds_per_call([&] {
           (void)ops::rms_norm_modulate(ops::gated_add(x, y, gate), scale, shift, 1e-6);
         }, 10));
  report("gated_add_rms_norm_modulate", r.seconds_per_call([&] {
           (void)ops::gated_add_rms_norm_modulate(x, y, gate, scale, shift, 1e-6);
         }, 10));
  // Per-sample timesteps (pipelines::TimestepForm): the AdaLN rows broadcast over the tokens.
  const Tensor ts1 = r.uniform({1, 1, 9 * d}, 28, dt);
  const auto value1 = [&](int64_t i) {
    return ops::Summed(table.select(0, i), ts1.view({1, 1, 9, d}).select(2, i));
  };
  const ops::Summed scale1 = value1(1), shift1 = value1(0), gate1 = value1(2);
  report("rms_norm_modulate (per-sample ts)",
         r.seconds_per_call([&] { (void)ops::rms_norm_modulate(x, scale1, shift1, 1e-6); }, 20));
  report("gated_add (per-sample ts)", r.seconds_per_call([&] { (void)ops::gated_add(x, y, gate1); }, 20));
  report("gated_add_rms_norm_mod (per-sample)", r.seconds_per_call([&] {
           (void)ops::gated_add_rms_norm_modulate(x, y, gate1, scale1, shift1, 1e-6);
         }, 20));
  // The text attention's residual and the two cross-modal AdaLN inputs of it (rows 3 / 4 as the
  // second scale / shift here): as three ops and in one pass.
  const ops::Summed scale1b = value1(3), shift1b = value1(4);
  report("gated_add + 2 x rms_norm_modulate", r.seconds_per_call([&] {
           const Tensor xn = ops::gated_add(x, y, gate1);
           (void)ops::rms_norm_modulate(xn, scale1, shift1, 1e-6);
           (void)ops::rms_norm_modulate(xn, scale1b, shift1b, 1e-6);
         }, 20));
  report("gated_add_rms_norm_modulate2", r.seconds_per_call([&] {
           (void)ops::gated_add_rms_norm_modulate2(x, y, gate1, scale1, shift1, scale1b, shift1b, 1e-6);
         }, 20));
  report("rms_norm (no weight)", r.seconds_per_call([&] { (void)ops::rms_norm(x, Tensor(), 1e-6); }, 20));
  const Tensor w = r.uniform({d}, 24, dt);
  const Tensor c = r.uniform({1, heads, t, d / heads / 2}, 25, dt);
  const Tensor sn = r.uniform({1, heads, t, d / heads / 2}, 26, dt);
  report("rms_norm + apply_rope (split)", r.seconds_per_call([&] {
           (void)ops::rms_norm_rope_unfused(x, w, 1e-6, c, sn, ops::RopeLayout::Split, heads);
         }, 10));
  report("rms_norm_rope (split)", r.seconds_per_call([&] {
           (void)ops::rms_norm_rope(x, w, 1e-6, c, sn, ops::RopeLayout::Split, heads);
         }, 20));
  const Tensor xk = r.uniform({1, t, d}, 33, dt), wk = r.uniform({d}, 34, dt);
  report("2 x rms_norm_rope (q, k)", r.seconds_per_call([&] {
           (void)ops::rms_norm_rope(x, w, 1e-6, c, sn, ops::RopeLayout::Split, heads);
           (void)ops::rms_norm_rope(xk, wk, 1e-6, c, sn, ops::RopeLayout::Split, heads);
         }, 20));
  report("qk_rms_norm_rope (q, k; one table read)", r.seconds_per_call([&] {
           (void)ops::qk_rms_norm_rope(x, xk, w, wk, 1e-6, c, sn, ops::RopeLayout::Split, heads);
         }, 20));
  const Tensor x2 = r.uniform({1, t, d / 2}, 29, dt), w2 = r.uniform({d / 2}, 30, dt);
  const Tensor c2 = r.uniform({1, heads, t, d / heads / 4}, 31, dt);
  const Tensor s2 = r.uniform({1, heads, t, d / heads / 4}, 32, dt);
  report("rms_norm_rope (split, 2048 wide)", r.seconds_per_call([&] {
           (void)ops::rms_norm_rope(x2, w2, 1e-6, c2, s2, ops::RopeLayout::Split, heads);
         }, 20));
  const Tensor out = x.view({1, t, heads, d / heads});
  const Tensor logits = r.uniform({1, t, heads, 1}, 27, dt);
  report("sigmoid + mul + mul (gate)",
         r.seconds_per_call([&] { (void)ops::mul(out, ops::mul(ops::sigmoid(logits), 2.0)); }, 10));
  report("mul_2sigmoid (gate)", r.seconds_per_call([&] { (void)ops::mul_2sigmoid(out, logits); }, 10));
}

// The LTX-2.5 diffusion decoder's neighborhood attention at 1536 x 1024 x 121: stage 5 (one of the
// four W-chunks of the pipelines' default mode: 121 x 256 x (96 + 10) tokens, 4 heads of 64, 11^3
// window), stage 4 (69 x 128 x 192, 8 heads, 3 x 5 x 5) and stage 2. FLOPs count the window keys
// only (4 * tokens * heads * window * D).
void neighborhood_attention(Rows& r) {
  struct Case {
    const char* name;
    Shape grid;  // T, H, W, heads
    std::array<int64_t, 3> kernel;
  };
  const DType dt = DType::BF16;
  for (const Case& c : {Case{"stage5 chunk", {121, 256, 106, 4}, {11, 11, 11}},
                        Case{"stage4", {69, 128, 192, 8}, {3, 5, 5}},
                        Case{"stage2", {18, 64, 96, 16}, {3, 7, 7}}}) {
    const Shape s{1, c.grid[0], c.grid[1], c.grid[2], c.grid[3], 64};
    const Tensor q = r.uniform(s, 1, dt), k = r.uniform(s, 2, dt), v = r.uniform(s, 3, dt);
    const double flops = 4.0 * static_cast<double>(q.numel()) * c.kernel[0] * c.kernel[1] * c.kernel[2];
    const auto time = [&](cuda::NeighborhoodKernel which, int reps) {
      return r.seconds_per_call(
          [&] { (void)cuda::neighborhood_attention_3d(q, k, v, c.kernel, 0.125f, which); }, reps);
    };
    const double tc = time(cuda::NeighborhoodKernel::TensorCore, 3);
    r.add(dt, format("neighborhood %-13s tensor-core", c.name), tc, flops / tc / 1e12, "TFLOP/s (window)");
    // Auto takes the wgmma kernel where it applies (Hopper, sm_90a code).
    if (cuda::wgmma_neighborhood_attention_applies(q, k, v, c.kernel)) {
      const double wg = time(cuda::NeighborhoodKernel::Auto, 3);
      r.add(dt, format("neighborhood %-13s wgmma (auto)", c.name), wg, flops / wg / 1e12,
            "TFLOP/s (window)");
    }
    if (c.kernel[0] == 11) continue;  // the CUDA-core kernel takes minutes there
    const double sec = time(cuda::NeighborhoodKernel::Simple, 1);
    r.add(dt, format("neighborhood %-13s simple", c.name), sec, flops / sec / 1e12, "TFLOP/s (window)");
  }
}

// The diffusion decoder's 3-D RoPE tables for a (d_t, d_h, d_w) split, built by the model's own
// code; W positions from w_start (the decoder's W chunks are shifted).
ops::Rope3dTables rope3d_tables(const std::array<int64_t, 3>& split, int64_t t, int64_t h, int64_t w,
                                int64_t w_start, Device device) {
  namespace vv = models::video_vae;
  const std::array<Tensor, 3> inv = {vv::rope_inv_freqs(split[0]), vv::rope_inv_freqs(split[1]),
                                     vv::rope_inv_freqs(split[2])};
  return vv::abs_rope_3d(inv, t, h, vv::positions(w, w_start), device);
}

// The diffusion decoder attention's q / k preparation (head dim 64, split 16/24/24): the q / k RMS
// norms, q's scale and the 3-D RoPE as ops::qk_norm_rope_3d (one launch for q and k) and as the
// unfused ops, q and k narrowed from one fused qkv projection (bf16). GB/s counts q and k read and
// written once.
void qk_norm_rope(Rows& r) {
  struct Case {
    const char* name;
    Shape grid;  // T, H, W, heads
  };
  const DType dt = DType::BF16;
  for (const Case& c : {Case{"stage5 chunk", {121, 256, 106, 4}}, Case{"stage4", {69, 128, 192, 8}}}) {
    const Shape s{1, c.grid[0], c.grid[1], c.grid[2], c.grid[3], 64};
    const int64_t width = s[4] * s[5];
    const Tensor fused = r.uniform({s[0], s[1], s[2], s[3], 3 * width}, 1, dt, -2.f, 2.f);
    const Tensor q = fused.narrow(4, 0, width).view(s), k = fused.narrow(4, width, width).view(s);
    const Tensor qw = r.uniform({64}, 2, dt), kw = r.uniform({64}, 3, dt);
    const ops::Rope3dTables rope = rope3d_tables({16, 24, 24}, s[1], s[2], s[3], -5, r.device());
    const double bytes = 4.0 * static_cast<double>(q.numel()) * 2;
    const double f = r.seconds_per_call([&] { (void)ops::qk_norm_rope_3d(q, k, qw, kw, 1e-6, 0.125, rope); }, 5);
    r.add(dt, format("qk_norm_rope_3d %-13s fused", c.name), f, bytes / f / 1e9, "GB/s");
    const double u =
        r.seconds_per_call([&] { (void)ops::qk_norm_rope_3d_unfused(q, k, qw, kw, 1e-6, 0.125, rope); }, 2);
    r.add(dt, format("qk_norm_rope_3d %-13s unfused", c.name), u, bytes / u / 1e9, "GB/s");
  }
}

// The 22B transformer's linears on the 768x512x121 video stream (6144 tokens): the bf16 GEMM,
// the static-scale FP8 linear of fp8-scaled-mm (activation quantisation + cuBLASLt FP8 GEMM with
// the bias epilogue), the activation quantisation alone, and the per-token FP8 linear. FLOPs:
// 2 M K N per GEMM; the quantisation's rate is its bytes (2 read + 1 written per element).
void fp8_linear(Rows& r) {
  const int64_t m = 6144;
  const struct {
    const char* name;
    int64_t k, n;
  } shapes[] = {{"attn to_q", 4096, 4096}, {"ff.net.0", 4096, 16384}, {"ff.net.2", 16384, 4096}};
  for (const auto& sh : shapes) {
    const Tensor x = r.uniform({1, m, sh.k}, 60, DType::BF16);
    const Tensor w = r.uniform({sh.n, sh.k}, 61, DType::BF16, -0.05f, 0.05f);
    const Tensor bias = r.uniform({sh.n}, 62, DType::BF16);
    const ops::Fp8PerTensor wq = ops::quantize_fp8_per_tensor(w);
    const Tensor input_scale = Tensor::full({}, 1.0 / 448.0, DType::F32, r.device());
    const double flops = 2.0 * static_cast<double>(m * sh.k * sh.n);
    const std::string shape = format("%s %lldx%lldx%lld", sh.name, static_cast<long long>(m),
                                     static_cast<long long>(sh.k), static_cast<long long>(sh.n));
    const double tb = r.seconds_per_call([&] { (void)ops::linear(x, w, bias); }, 5);
    r.add(DType::BF16, "linear " + shape, tb, flops / tb / 1e12, "TFLOP/s");
    const double tf = r.seconds_per_call(
        [&] { (void)ops::linear_fp8_scaled(x, wq.weight, wq.weight_scale, input_scale, bias); }, 5);
    r.add(DType::F8E4M3FN, "linear_fp8_scaled " + shape, tf, flops / tf / 1e12, "TFLOP/s");
    const double tq = r.seconds_per_call([&] { (void)ops::quantize_fp8(x, input_scale); }, 5);
    r.add(DType::F8E4M3FN, "quantize_fp8 " + shape, tq, 3.0 * static_cast<double>(x.numel()) / tq / 1e9,
          "GB/s");
    const double tt = r.seconds_per_call(
        [&] { (void)ops::linear_fp8_per_token(x, wq.weight, wq.weight_scale, bias); }, 5);
    r.add(DType::F8E4M3FN, "linear_fp8_per_token " + shape, tt, flops / tt / 1e12, "TFLOP/s");
  }
}

// Random GGML blocks of `type` for a [n, k] weight on `device`: random bytes with every f16 scale
// field set to a small value (what matters for timing is the layout, not the values).
Tensor random_ggml_blocks(GgmlType type, int64_t n, int64_t k, Device device) {
  const int64_t elems = ggml_traits(type).block_elems, bytes = ggml_traits(type).block_bytes;
  const int64_t row_bytes = k / elems * bytes;
  std::vector<uint8_t> v(static_cast<size_t>(n * row_bytes));
  std::mt19937_64 rng(70);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  // The f16 scales' offsets in a block (ggml-common.h): 0.01 is 0x211F.
  const std::vector<int> offsets = type == GgmlType::Q6_K   ? std::vector<int>{208}
                                   : type == GgmlType::Q4_K ? std::vector<int>{0, 2}
                                                            : std::vector<int>{0};
  for (size_t blk = 0; blk < v.size(); blk += static_cast<size_t>(bytes))
    for (int off : offsets) {
      v[blk + off] = 0x1F;
      v[blk + off + 1] = 0x21;
    }
  Tensor host = Tensor::empty({n, row_bytes}, DType::U8);
  std::copy(v.begin(), v.end(), host.data<uint8_t>());
  return host.to(device);
}

// The 22B transformer's linears on the 768x512x121 video stream (6144 tokens) with GGUF weights
// (ops::linear_ggml: the dequantising kernel into a bf16 scratch, then cuBLASLt) next to the bf16
// GEMM, and the dequantisation alone (its rate: the bf16 bytes written plus the blocks read).
void ggml_linear(Rows& r) {
  const int64_t m = 6144;
  const struct {
    const char* name;
    int64_t k, n;
  } shapes[] = {{"attn to_q", 4096, 4096}, {"ff.net.0", 4096, 16384}, {"ff.net.2", 16384, 4096}};
  for (const auto& sh : shapes) {
    const Tensor x = r.uniform({1, m, sh.k}, 60, DType::BF16);
    const Tensor w = r.uniform({sh.n, sh.k}, 61, DType::BF16, -0.05f, 0.05f);
    const Tensor bias = r.uniform({sh.n}, 62, DType::BF16);
    const double flops = 2.0 * static_cast<double>(m * sh.k * sh.n);
    const std::string shape = format("%s %lldx%lldx%lld", sh.name, static_cast<long long>(m),
                                     static_cast<long long>(sh.k), static_cast<long long>(sh.n));
    const double tb = r.seconds_per_call([&] { (void)ops::linear(x, w, bias); }, 5);
    r.add(DType::BF16, "linear " + shape, tb, flops / tb / 1e12, "TFLOP/s");
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q4_K}) {
      const ops::GgmlWeight g{random_ggml_blocks(type, sh.n, sh.k, r.device()), type, sh.k};
      const std::string t = ggml_type_name(type);
      const double tg = r.seconds_per_call([&] { (void)ops::linear_ggml(x, g, bias); }, 5);
      r.add(DType::BF16, "linear_ggml " + t + " " + shape, tg, flops / tg / 1e12, "TFLOP/s");
      const double td = r.seconds_per_call([&] { (void)ops::dequantize_ggml(g, DType::BF16); }, 5);
      const double moved = static_cast<double>(g.blocks.nbytes()) + 2.0 * static_cast<double>(sh.n * sh.k);
      r.add(DType::BF16, "dequantize_ggml " + t + " " + shape, td, moved / td / 1e9, "GB/s");
    }
  }
}

// LoRA fusion of one feed-forward weight of the 22B transformer ([16384, 4096] bf16) with a
// rank-384 LoRA (the published distilled LoRA's rank), as a stage switch fuses every targeted
// weight: the in-order factor product alone, then the whole rule (factor rounding, product,
// bf16 roundings, the add to the weight). Elements/s of the weight: a switch fuses ~2e10 of them.
void lora_fuse(Rows& r) {
  const int64_t out = 16384, in = 4096, rank = 384;
  const Tensor w = r.uniform({out, in}, 70, DType::BF16, -0.05f, 0.05f);
  const lora::LoraFile::Pair p{r.uniform({rank, in}, 71, DType::BF16, -0.02f, 0.02f),
                               r.uniform({out, rank}, 72, DType::BF16, -0.02f, 0.02f)};
  const Tensor a32 = p.a.to(DType::F32), b32 = p.b.to(DType::F32);
  const double flops = 2.0 * static_cast<double>(out * in * rank);
  const std::string shape = format("%lldx%lld rank %lld", static_cast<long long>(out),
                                   static_cast<long long>(in), static_cast<long long>(rank));
  const double tm = r.seconds_per_call([&] { (void)ops::matmul_in_order(b32, a32); }, 3);
  r.add(DType::F32, "matmul_in_order " + shape, tm, flops / tm / 1e12, "TFLOP/s");
  const std::vector<lora::Product> products = {{&p, 1.0}};
  const double tf = r.seconds_per_call([&] { (void)lora::fused_weight_on(w, products, r.device()); }, 3);
  r.add(DType::BF16, "fused_weight_on " + shape, tf, static_cast<double>(out * in) / tf / 1e9,
        "Gelem/s");
}

// A file of `bytes` written from `data` into the temp folder, removed with this object.
class UploadBenchFile {
 public:
  UploadBenchFile(const void* data, size_t bytes)
      : path_(std::filesystem::temp_directory_path() /
              ("ltx-bench-upload-" + std::to_string(getpid()) + ".bin")),
        bytes_(bytes) {
    std::ofstream out(path_, std::ios::binary);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    out.close();
    LTX_CHECK(out.good(), "ltx bench kernels upload: cannot write ", bytes, " bytes to ", path_.string(),
              "; free space in the temp folder (TMPDIR)");
  }
  ~UploadBenchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  UploadBenchFile(const UploadBenchFile&) = delete;
  UploadBenchFile& operator=(const UploadBenchFile&) = delete;

  // Maps the file afresh (its pages are in the page cache after the write, but this process
  // faults them in again, as a loader that maps a checkpoint does) and hands the mapping to `fn`.
  void with_mapping(const std::function<void(const void*)>& fn) const {
    const int fd = open(path_.c_str(), O_RDONLY);
    LTX_CHECK(fd >= 0, "ltx bench kernels upload: cannot open ", path_.string());
    void* p = mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    LTX_CHECK(p != MAP_FAILED, "ltx bench kernels upload: cannot map ", path_.string());
    const std::unique_ptr<void, std::function<void(void*)>> unmap(p, [n = bytes_](void* q) { munmap(q, n); });
    fn(p);
  }

 private:
  std::filesystem::path path_;
  size_t bytes_;
};

// Host -> device uploads of 1 GiB, the way weights reach the GPU (docs/CUDA.md): pageable memory
// straight through cudaMemcpyAsync (the driver's own staging) and through the backend's upload
// (page-locked staging buffers filled by the thread pool); a page-cached file mapped afresh at each
// call (what loading a checkpoint does) both ways; and a page-locked source through
// cudaMemcpyAsync (the link's ceiling). The times include the device finishing the copy.
void host_upload_rates(Rows& r) {
  const size_t bytes = size_t{1} << 30;
  const int dev = r.device().index;
  const cuda::Stream s = cuda::current_stream(dev);
  const Tensor dst = Tensor::empty({static_cast<int64_t>(bytes)}, DType::U8, r.device());
  const auto host_tensor = [&](const void* p) {
    return Tensor::from_blob(const_cast<void*>(p), {static_cast<int64_t>(bytes)}, DType::U8, Device::cpu(),
                             nullptr);
  };
  const auto report = [&](const char* name, double sec) {
    r.add(DType::U8, format("upload 1 GiB %-42s", name), sec, static_cast<double>(bytes) / sec / 1e9, "GB/s");
  };
  const std::unique_ptr<unsigned char[]> pageable(new unsigned char[bytes]);
  for (size_t i = 0; i < bytes; i += 4096) std::memset(pageable.get() + i, static_cast<int>(i >> 12), 4096);
  report("pageable, cudaMemcpyAsync", r.seconds_per_call([&] {
           LTX_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), pageable.get(), bytes, cudaMemcpyHostToDevice,
                                          s.handle()));
         }, 3));
  const Tensor from_pageable = host_tensor(pageable.get());
  report(cuda::upload_path(dev, pageable.get(), bytes) == cuda::UploadPath::Staged
             ? "pageable, staged"
             : "pageable, staged (unavailable: direct)",
         r.seconds_per_call([&] { dst.copy_from(from_pageable); }, 3));
  {
    const UploadBenchFile file(pageable.get(), bytes);
    report("mapped file (page cache), cudaMemcpyAsync", r.seconds_per_call([&] {
             file.with_mapping([&](const void* p) {
               LTX_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), p, bytes, cudaMemcpyHostToDevice, s.handle()));
             });
           }, 3));
    report("mapped file (page cache), staged", r.seconds_per_call([&] {
             file.with_mapping([&](const void* p) { dst.copy_from(host_tensor(p)); });
           }, 3));
  }
  const std::shared_ptr<void> pinned = cuda::pinned_host_allocate(bytes);
  std::memcpy(pinned.get(), pageable.get(), bytes);
  report("page-locked, cudaMemcpyAsync", r.seconds_per_call([&] {
           LTX_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), pinned.get(), bytes, cudaMemcpyHostToDevice,
                                          s.handle()));
         }, 3));
}

// The diffusion decoder's stage-5 SwiGLU MLP on one chunk of 262144 rows (C 256, hidden 1024):
// residual += w_down(silu(gate) * up), unfused (GEMM to [n, 2048] bf16, silu_mul, GEMM, add_) and
// fused (one kernel, no hidden activations in memory) where it applies. FLOPs: 6 n C H.
void swiglu_mlp(Rows& r) {
  const DType dt = DType::BF16;
  const int64_t n = 262144, c = 256, h = 1024;
  const Tensor y = r.uniform({n, c}, 1, dt), residual = r.uniform({n, c}, 2, dt);
  const Tensor gate_up = r.uniform({2 * h, c}, 3, dt, -0.1f, 0.1f);
  const Tensor down = r.uniform({c, h}, 4, dt, -0.05f, 0.05f);
  const double flops = 6.0 * static_cast<double>(n) * c * h;
  const double unfused = r.seconds_per_call([&] { ops::swiglu_add_unfused(residual, y, gate_up, down); }, 5);
  r.add(dt, "swiglu mlp 262144x256x1024 unfused", unfused, flops / unfused / 1e12, "TFLOP/s");
  if (ops::swiglu_add_fuses(residual, y, gate_up, down)) {
    const double fused = r.seconds_per_call([&] { ops::swiglu_add_(residual, y, gate_up, down); }, 5);
    r.add(dt, "swiglu mlp 262144x256x1024 fused", fused, flops / fused / 1e12, "TFLOP/s");
  }
}

// One CausalConv3d of the conv video decoder's 512-channel stage on a tile's shape
// (1 x 512 x 31 x 128 x 192, 3x3x3, non-causal): replicate pad + conv on contiguous activations,
// the same on channels-last ones, and the folded conv3d_replicate_time (channels-last).
// FLOPs: 2 N O C 27 T H W.
void vae_conv(Rows& r) {
  const DType dt = DType::BF16;
  const int64_t c = 512, t = 31, h = 128, w = 192;
  const Tensor x = r.uniform({1, c, t, h, w}, 1, dt);
  const Tensor xl = x.to_channels_last();
  const Tensor wt = r.uniform({c, c, 3, 3, 3}, 2, dt, -0.02f, 0.02f);
  const Tensor wl = wt.to_channels_last();
  const Tensor b = r.uniform({c}, 3, dt);
  const double flops = 2.0 * c * c * 27.0 * static_cast<double>(t * h * w);
  const auto composed = [&](const Tensor& in, const Tensor& weight) {
    return ops::conv3d(ops::pad(in, {0, 0, 0, 0, 1, 1}, ops::PadMode::Replicate), weight, b, {1, 1, 1},
                       {0, 1, 1});
  };
  const double plain = r.seconds_per_call([&] { composed(x, wt); }, 3);
  const double last = r.seconds_per_call([&] { composed(xl, wl); }, 3);
  const double fold =
      r.seconds_per_call([&] { ops::conv3d_replicate_time(xl, wl, b, {1, 1, 1}, {1, 1}, 1, 1); }, 3);
  for (const auto& [name, sec] : {std::pair<const char*, double>{"pad + conv, contiguous", plain},
                                  {"pad + conv, channels-last", last},
                                  {"conv3d_replicate_time, channels-last", fold}})
    r.add(dt, format("vae conv 512x31x128x192 %s", name), sec, flops / sec / 1e12, "TFLOP/s");
}

// The conv video decoder's glue on its three largest tile activations (channels-last bf16, as the
// 1536 x 1024 x 121 decode runs them): PixelNorm + SiLU, the skip + PixelNorm + SiLU as two ops
// and in one pass, the plain PixelNorm, SiLU alone, a copy of the same bytes (the bandwidth
// reference) and the depth-to-space of an upsample conv's output with the sub-positions inside /
// outside the channels. GB/s count one read and one write.
void vae_glue(Rows& r) {
  const DType dt = DType::BF16;
  struct Case {
    int64_t c, t, h, w;
  };
  for (const Case& k : {Case{512, 37, 64, 96}, Case{256, 73, 64, 96}, Case{128, 73, 128, 192}}) {
    const Tensor x = r.uniform({1, k.c, k.t, k.h, k.w}, 5, dt).to_channels_last();
    const auto report = [&](const char* name, const Tensor& t, double sec) {
      const double bytes = 2.0 * 2.0 * static_cast<double>(t.numel());
      r.add(dt,
            format("vae glue %lldx%lldx%lldx%lld %-28s", static_cast<long long>(k.c),
                   static_cast<long long>(k.t), static_cast<long long>(k.h), static_cast<long long>(k.w),
                   name),
            sec, bytes / sec / 1e9, "GB/s");
    };
    report("rms_norm_dim_silu", x, r.seconds_per_call([&] { ops::rms_norm_dim_silu(x, 1, 1e-8); }, 5));
    const Tensor bias = r.uniform({k.c}, 7, dt);
    report("rms_norm_dim_silu + bias", x,
           r.seconds_per_call([&] { ops::rms_norm_dim_silu(x, 1, 1e-8, bias); }, 5));
    const Tensor res = r.uniform({1, k.c, k.t, k.h, k.w}, 8, dt).to_channels_last();
    const Tensor xs = x.clone().to_channels_last();  // updated in place: a copy of x
    report("add_then_add_ + norm + silu", x, r.seconds_per_call([&] {
             ops::add_then_add_(xs, bias.view({1, k.c, 1, 1, 1}), res);
             ops::rms_norm_dim_silu(xs, 1, 1e-8);
           }, 5));
    report("skip + norm + silu, one pass", x, r.seconds_per_call([&] {
             ops::add_then_add_rms_norm_dim_silu_(xs, bias, res, 1, 1e-8);
           }, 5));
    report("rms_norm_dim", x, r.seconds_per_call([&] { ops::rms_norm_dim(x, 1, 1e-8); }, 5));
    report("silu", x, r.seconds_per_call([&] { ops::silu(x); }, 5));
    const Tensor y = Tensor::empty_in_order(x.shape(), Tensor::channels_last_order(5), x.dtype(), x.device());
    report("copy", x, r.seconds_per_call([&] { y.copy_from(x); }, 5));
    // An upsample conv's output (8 sub-positions times c channels at half the size in each axis):
    // the result has x's volume at c channels.
    const Tensor d = r.uniform({1, 8 * k.c, k.t / 2, k.h / 2, k.w / 2}, 6, dt).to_channels_last();
    for (const auto sub : {ops::Subpositions::Inner, ops::Subpositions::Outer})
      report(sub == ops::Subpositions::Inner ? "depth_to_space (c p1 p2 p3)" : "depth_to_space (p1 p2 p3 c)",
             d, r.seconds_per_call([&] { ops::depth_to_space(d, {2, 2, 2}, {0, 1, 2}, sub); }, 5));
  }
}

}  // namespace

#endif  // LTX_WITH_CUDA

std::vector<KernelTiming> run_kernel_timings(const std::vector<std::string>& harnesses, Device device,
                                             const std::function<void(const KernelTiming&)>& on_row,
                                             const char* what) {
  LTX_CHECK(device.is_cuda(), what, " ", device.str(),
            ": `ltx bench kernels` times CUDA kernels; use --device cuda[:N]");
  backend::check_device(device, what);
  std::vector<KernelTiming> rows;
#if LTX_WITH_CUDA
  const cuda::DeviceGuard guard(device.index);
  using Harness = void (*)(Rows&);
  const std::vector<std::pair<std::string, Harness>> all = {
      {"step-kernels", step_kernels}, {"fused-glue", fused_glue}, {"neighborhood-attention", neighborhood_attention},
      {"qk-norm-rope", qk_norm_rope}, {"swiglu-mlp", swiglu_mlp}, {"vae-conv", vae_conv},
      {"vae-glue", vae_glue}, {"fp8-linear", fp8_linear}, {"ggml-linear", ggml_linear},
      {"lora-fuse", lora_fuse}, {"upload", host_upload_rates}};
  for (const std::string& name : harnesses) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const auto& h) { return h.first == name; });
    LTX_CHECK(it != all.end(), "ltx bench kernels: no harness named '", name, "'");
    Rows r(name, device, rows, on_row);
    it->second(r);
  }
#else
  (void)harnesses;
  (void)on_row;
#endif
  return rows;
}

}  // namespace ltx::bench
