#include "ops/conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/conv.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using ops::PadMode;
using test::max_abs_diff;
using test::non_contiguous_copy;
using test::random_tensor;
using A3 = std::array<int64_t, 3>;

// Shrinks the CPU conv tiles for one test so small problems span many tiles and channel blocks.
class TileLimits {
 public:
  TileLimits(int64_t cols, int64_t floats) { cpu::set_conv_tile_limits(cols, floats); }
  ~TileLimits() { cpu::set_conv_tile_limits(0, 0); }
};

// ---------------------------------------------------------------- naive references (double)

// 5-D view helpers: a rank-R tensor [N, C, *s] is addressed as [N, C, D, H, W] with leading 1s.
struct Vol {
  std::vector<double> v;
  int64_t n, c, d, h, w;
  double at(int64_t a, int64_t b, int64_t z, int64_t y, int64_t x) const {
    return v[(((a * c + b) * d + z) * h + y) * w + x];
  }
};

Vol vol_of(const Tensor& t) {
  Vol o{t.to_double_vector(), t.size(0), t.size(1), 1, 1, 1};
  const int R = t.dim() - 2;
  int64_t* dims[3] = {&o.d, &o.h, &o.w};
  for (int i = 0; i < R; ++i) *dims[3 - R + i] = t.size(2 + i);
  return o;
}

A3 pad3(const std::vector<int64_t>& a, int64_t fill) {
  A3 r = {fill, fill, fill};
  for (size_t i = 0; i < a.size(); ++i) r[3 - a.size() + i] = a[i];
  return r;
}

// Direct convolution: out[n, o, p] = b[o] + sum_{c, k} w[o, c, k] * x[n, g * Cg + c, p * s - pad +
// k * d].
Tensor conv_ref(const Tensor& x, const Tensor& w, const Tensor& b, const std::vector<int64_t>& s,
                const std::vector<int64_t>& p, const std::vector<int64_t>& dl, int64_t groups) {
  const Vol X = vol_of(x), W = vol_of(w);
  const A3 S = pad3(s, 1), P = pad3(p, 0), D = pad3(dl, 1);
  const A3 in = {X.d, X.h, X.w}, k = {W.d, W.h, W.w};
  A3 out;
  for (int a = 0; a < 3; ++a) out[a] = (in[a] + 2 * P[a] - D[a] * (k[a] - 1) - 1) / S[a] + 1;
  const int64_t O = w.size(0), Cg = w.size(1), Og = O / groups;
  const std::vector<double> bv = b.defined() ? b.to_double_vector() : std::vector<double>(O, 0.0);
  std::vector<double> y;
  for (int64_t n = 0; n < X.n; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t z = 0; z < out[0]; ++z)
        for (int64_t yy = 0; yy < out[1]; ++yy)
          for (int64_t xx = 0; xx < out[2]; ++xx) {
            double acc = bv[o];
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t kz = 0; kz < k[0]; ++kz)
                for (int64_t ky = 0; ky < k[1]; ++ky)
                  for (int64_t kx = 0; kx < k[2]; ++kx) {
                    const int64_t iz = z * S[0] - P[0] + kz * D[0];
                    const int64_t iy = yy * S[1] - P[1] + ky * D[1];
                    const int64_t ix = xx * S[2] - P[2] + kx * D[2];
                    if (iz < 0 || iz >= in[0] || iy < 0 || iy >= in[1] || ix < 0 || ix >= in[2])
                      continue;
                    acc += W.at(o, c, kz, ky, kx) * X.at(n, (o / Og) * Cg + c, iz, iy, ix);
                  }
            y.push_back(acc);
          }
  Shape shape = {X.n, O};
  for (int a = 3 - static_cast<int>(s.size()); a < 3; ++a) shape.push_back(out[a]);
  return Tensor::from_vector(y, shape);
}

// Direct transposed 1-D convolution (scatter form).
Tensor conv_transpose1d_ref(const Tensor& x, const Tensor& w, const Tensor& b, int64_t s, int64_t p,
                            int64_t op, int64_t groups, int64_t d) {
  const auto xv = x.to_double_vector(), wv = w.to_double_vector();
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2), Og = w.size(1), K = w.size(2);
  const int64_t O = Og * groups, Cg = C / groups;
  const int64_t Lout = (L - 1) * s - 2 * p + d * (K - 1) + op + 1;
  std::vector<double> y(static_cast<size_t>(N * O * Lout), 0.0);
  const std::vector<double> bv = b.defined() ? b.to_double_vector() : std::vector<double>(O, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      for (int64_t t = 0; t < Lout; ++t) y[(n * O + o) * Lout + t] = bv[o];
      const int64_t g = o / Og, oo = o % Og;
      for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c)
        for (int64_t i = 0; i < L; ++i)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t t = i * s - p + k * d;
            if (t >= 0 && t < Lout)
              y[(n * O + o) * Lout + t] += wv[(c * Og + oo) * K + k] * xv[(n * C + c) * L + i];
          }
    }
  return Tensor::from_vector(y, {N, O, Lout});
}

// ---------------------------------------------------------------- forward convs

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  bool bias;
};

Tensor run_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  auto arr = [](const std::vector<int64_t>& v, auto tag) {
    decltype(tag) a{};
    for (size_t i = 0; i < a.size(); ++i) a[i] = v[i];
    return a;
  };
  switch (c.stride.size()) {
    case 1:
      return ops::conv1d(x, w, b, arr(c.stride, ops::ConvArg<1>{}),
                         arr(c.padding, ops::ConvArg<1>{}), arr(c.dilation, ops::ConvArg<1>{}),
                         c.groups);
    case 2:
      return ops::conv2d(x, w, b, arr(c.stride, ops::ConvArg<2>{}),
                         arr(c.padding, ops::ConvArg<2>{}), arr(c.dilation, ops::ConvArg<2>{}),
                         c.groups);
    default:
      return ops::conv3d(x, w, b, arr(c.stride, ops::ConvArg<3>{}),
                         arr(c.padding, ops::ConvArg<3>{}), arr(c.dilation, ops::ConvArg<3>{}),
                         c.groups);
  }
}

void expect_cases_match(const std::vector<ConvCase>& cases, double tol = 2e-5) {
  uint64_t seed = 1;
  for (const ConvCase& c : cases) {
    const Tensor x = random_tensor(c.x, seed++), w = random_tensor(c.w, seed++);
    const Tensor b = c.bias ? random_tensor({c.w[0]}, seed++) : Tensor();
    const Tensor ref = conv_ref(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    const Tensor y = run_conv(c, x, w, b);
    ASSERT_EQ(y.shape(), ref.shape()) << "x " << c.x.str() << " w " << c.w.str();
    EXPECT_TRUE(y.is_contiguous());
    EXPECT_LE(max_abs_diff(y, ref), tol) << "x " << c.x.str() << " w " << c.w.str();
    const Tensor yn = run_conv(c, non_contiguous_copy(x), non_contiguous_copy(w),
                               b.defined() ? non_contiguous_copy(b) : b);
    EXPECT_LE(max_abs_diff(yn, ref), tol) << "non-contiguous x " << c.x.str();
  }
}

const std::vector<ConvCase>& conv1d_cases() {
  static const std::vector<ConvCase> cases = {
      {{2, 4, 9}, {6, 4, 3}, {1}, {1}, {1}, 1, true},
      {{2, 4, 9}, {6, 2, 3}, {2}, {0}, {2}, 2, false},
      {{1, 4, 9}, {4, 1, 5}, {2}, {2}, {1}, 4, true},  // depthwise (vocoder low-pass filter)
      {{1, 4, 13}, {4, 1, 12}, {2}, {0}, {1}, 4, false},
      {{2, 3, 1}, {5, 3, 1}, {1}, {0}, {1}, 1, true},   // length 1, 1x1 kernel
      {{1, 5, 7}, {3, 5, 7}, {1}, {3}, {1}, 1, true},   // vocoder conv_pre / conv_post shape
      {{1, 3, 11}, {3, 3, 3}, {1}, {5}, {5}, 1, true},  // AMP block dilation 5
      {{1, 1, 8}, {2, 1, 4}, {4}, {0}, {1}, 1, false},  // STFT-like strided conv
      {{1, 4, 5}, {8, 1, 3}, {1}, {1}, {1}, 4, true},   // groups = C with 2 outputs per group
  };
  return cases;
}

TEST(Conv1d, MatchesDirectReference) { expect_cases_match(conv1d_cases()); }

TEST(Conv2d, MatchesDirectReference) {
  expect_cases_match({
      {{2, 3, 7, 5}, {4, 3, 3, 3}, {2, 1}, {1, 0}, {1, 2}, 1, true},
      {{1, 4, 9, 7}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, false},
      {{2, 3, 9, 9}, {3, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 3, false},  // BlurDownsample
      {{1, 5, 1, 1}, {7, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},   // spatial 1, pointwise
      {{1, 4, 5, 7}, {6, 4, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, true},   // 1x1 with stride
      {{1, 3, 7, 7}, {3, 3, 3, 3}, {2, 2}, {0, 0}, {1, 1}, 1, true},   // audio Downsample conv
      {{1, 2, 6, 5}, {3, 2, 2, 3}, {1, 2}, {1, 1}, {2, 1}, 1, true},
  });
}

TEST(Conv3d, MatchesDirectReference) {
  expect_cases_match({
      {{1, 4, 5, 7, 9}, {6, 4, 3, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, true},
      {{2, 6, 3, 5, 7}, {5, 6, 1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, true},  // linear
      {{1, 6, 3, 5, 7}, {4, 3, 1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 2, false},
      {{1, 3, 5, 7, 5}, {4, 3, 3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {2, 1, 1}, 1, true},
      {{1, 4, 3, 5, 5}, {4, 1, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 4, true},  // depthwise
      {{1, 2, 1, 1, 1}, {3, 2, 1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, false},
      {{1, 4, 5, 3, 3}, {2, 4, 3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, 1, true},  // time-only
  });
}

TEST(Conv2d, ManyOutputChannelsUseTheThreadedGemmPath) {
  // 64+ output channels per group take the serial-tile path with OpenBLAS threading.
  expect_cases_match({
      {{2, 3, 5, 7}, {64, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{1, 4, 5, 6}, {130, 2, 3, 1}, {2, 1}, {0, 1}, {1, 1}, 2, false},
  });
}

TEST(Conv3d, SmallTilesAndChannelBlocksGiveTheSameResult) {
  // 7 output columns per tile and 40 floats of scratch: a 3x3x3 kernel (27 taps) then runs one
  // input channel per block and one column per tile when 27 * T > 40.
  for (auto [cols, floats] :
       std::vector<std::pair<int64_t, int64_t>>{{7, 40}, {7, 200}, {3, 1000}}) {
    TileLimits limits(cols, floats);
    expect_cases_match({
        {{2, 5, 3, 4, 5}, {6, 5, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, true},
        {{1, 4, 4, 5, 3}, {70, 2, 3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1}, 2, true},
    });
    expect_cases_match(conv1d_cases());
  }
}

TEST(Conv, RejectsBadArguments) {
  const Tensor x = random_tensor({1, 4, 5, 5}, 1), w = random_tensor({6, 4, 3, 3}, 2);
  EXPECT_ERROR_HAS(ops::conv2d(x, random_tensor({6, 3, 3, 3}, 3)), "expects 3 x 1 groups = 3");
  EXPECT_ERROR_HAS(ops::conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 3), "not divisible by groups");
  EXPECT_ERROR_HAS(ops::conv2d(x, random_tensor({5, 2, 3, 3}, 3), {}, {1, 1}, {0, 0}, {1, 1}, 2),
                   "output channels");
  EXPECT_ERROR_HAS(ops::conv2d(x, w, random_tensor({5}, 4)), "must have 6 entries");
  EXPECT_ERROR_HAS(ops::conv2d(x, w, {}, {0, 1}), "stride");
  EXPECT_ERROR_HAS(ops::conv2d(x, w, {}, {1, 1}, {-1, 0}), "padding");
  EXPECT_ERROR_HAS(ops::conv2d(x, w, {}, {1, 1}, {0, 0}, {0, 1}), "dilation");
  EXPECT_ERROR_HAS(ops::conv2d(x, w, {}, {1, 1}, {0, 0}, {3, 1}),
                   "smaller than the dilated kernel");
  EXPECT_ERROR_HAS(ops::conv3d(x, w), "must have 5 dims");
  EXPECT_ERROR_HAS(ops::conv2d(x.to(DType::BF16), w), "must be f32");
  EXPECT_ERROR_HAS(ops::conv2d(x, Tensor()), "undefined");
}

// ---------------------------------------------------------------- transposed

TEST(ConvTranspose1d, MatchesDirectReference) {
  struct Case {
    int64_t N, C, L, Og, K, s, p, op, g, d;
    bool bias;
  };
  const std::vector<Case> cases = {
      {2, 6, 7, 4, 4, 2, 1, 0, 1, 1, true},    // vocoder ups: K = 2 s, padding (K - s) / 2
      {1, 4, 5, 3, 15, 5, 5, 0, 1, 1, true},   // rate 5, kernel 15
      {1, 4, 9, 2, 5, 3, 1, 2, 2, 1, false},   // groups 2, output_padding
      {1, 5, 6, 1, 12, 2, 0, 0, 5, 1, false},  // depthwise anti-alias UpSample1d
      {1, 3, 4, 1, 3, 1, 0, 0, 3, 2, true},    // depthwise with dilation
      {2, 3, 1, 2, 3, 2, 1, 1, 1, 2, true},    // length 1, dilation 2, output_padding 1
      {1, 2, 6, 70, 3, 2, 1, 1, 1, 1, true},   // many output channels: threaded scatter
  };
  uint64_t seed = 50;
  for (int pass = 0; pass < 2; ++pass) {
    TileLimits limits(pass == 0 ? 0 : 2, pass == 0 ? 0 : 64);  // pass 1: tiny GEMM tiles
    for (const Case& c : cases) {
      const Tensor x = random_tensor({c.N, c.C, c.L}, seed++);
      const Tensor w = random_tensor({c.C, c.Og, c.K}, seed++);
      const Tensor b = c.bias ? random_tensor({c.Og * c.g}, seed++) : Tensor();
      const Tensor ref = conv_transpose1d_ref(x, w, b, c.s, c.p, c.op, c.g, c.d);
      for (bool nc : {false, true}) {
        const Tensor y =
            ops::conv_transpose1d(nc ? non_contiguous_copy(x) : x, nc ? non_contiguous_copy(w) : w,
                                  b, {c.s}, {c.p}, {c.op}, c.g, {c.d});
        ASSERT_EQ(y.shape(), ref.shape()) << "C " << c.C << " K " << c.K;
        EXPECT_LE(max_abs_diff(y, ref), 2e-5) << "C " << c.C << " K " << c.K << " pass " << pass;
      }
    }
  }
}

TEST(ConvTranspose1d, RejectsBadArguments) {
  const Tensor x = random_tensor({1, 4, 5}, 1), w = random_tensor({4, 3, 4}, 2);
  EXPECT_ERROR_HAS(ops::conv_transpose1d(x, random_tensor({3, 3, 4}, 3)),
                   "expects 3 input channels");
  EXPECT_ERROR_HAS(ops::conv_transpose1d(x, w, {}, {2}, {0}, {2}), "output_padding 2");
  EXPECT_ERROR_HAS(ops::conv_transpose1d(x, w, random_tensor({4}, 3)), "must have 3 entries");
  EXPECT_ERROR_HAS(ops::conv_transpose1d(x, w, {}, {1}, {5}), "not positive");
  EXPECT_ERROR_HAS(ops::conv_transpose1d(x, w, {}, {1}, {0}, {0}, 3), "not divisible by groups");
}

TEST(ConvTransposeNd, MatchesConvTranspose1dAlongAnyAxis) {
  // x [N, C, L] as [N, C, L] (rank 1), [N, C, 1, L] and [N, C, L, 1] (rank 2): the same values.
  const int64_t s = 2, p = 1, op = 1, d = 1, g = 2, K = 3;
  const Tensor x = random_tensor({2, 4, 5}, 61), w = random_tensor({4, 3, K}, 62);
  const Tensor b = random_tensor({6}, 63);
  const Tensor want = ops::conv_transpose1d(x, w, b, {s}, {p}, {op}, g, {d});
  ops::ConvSpec spec;
  spec.rank = 1;
  spec.groups = g;
  spec.stride[0] = s;
  spec.padding[0] = p;
  spec.output_padding[0] = op;
  spec.dilation[0] = d;
  EXPECT_EQ(max_abs_diff(ops::conv_transpose_nd(x, w, b, spec), want), 0.0);
  for (int axis = 0; axis < 2; ++axis) {
    ops::ConvSpec spec2;
    spec2.rank = 2;
    spec2.groups = g;
    spec2.stride[axis] = s;
    spec2.padding[axis] = p;
    spec2.output_padding[axis] = op;
    const Tensor y = ops::conv_transpose_nd(x.unsqueeze(3 - axis), w.unsqueeze(3 - axis), b, spec2);
    EXPECT_LE(max_abs_diff(y.squeeze(3 - axis), want), 1e-6) << "axis " << axis;
  }
}

TEST(ConvTransposeNd, RejectsBadArguments) {
  const Tensor x = random_tensor({1, 4, 5, 6}, 1), w = random_tensor({4, 3, 2, 2}, 2);
  ops::ConvSpec spec;
  EXPECT_ERROR_HAS(ops::conv_transpose_nd(x, w, {}, spec), "spec.rank must be 1, 2 or 3");
  spec.rank = 2;
  spec.output_padding[1] = 1;  // not smaller than stride 1 or dilation 1
  EXPECT_ERROR_HAS(ops::conv_transpose_nd(x, w, {}, spec), "output_padding 1");
  spec.output_padding[1] = 0;
  spec.padding[0] = 3;
  EXPECT_ERROR_HAS(ops::conv_transpose_nd(x, w, {}, spec), "not positive");
  spec.rank = 3;
  EXPECT_ERROR_HAS(ops::conv_transpose_nd(x, w, {}, spec), "must have 5 dims");
}

// ---------------------------------------------------------------- causal compositions

// Reference for a conv whose input index along each axis goes through `src` (returning -1 for a
// zero); kernel taps are offset by `shift` on each axis, no stride.
Tensor conv_remap_ref(const Tensor& x, const Tensor& w, const Tensor& b, const A3& out_size,
                      const A3& dil, const std::function<int64_t(int, int64_t)>& src) {
  const Vol X = vol_of(x), W = vol_of(w);
  const std::vector<double> bv = b.to_double_vector();
  const int64_t O = w.size(0);
  std::vector<double> y;
  for (int64_t n = 0; n < X.n; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t z = 0; z < out_size[0]; ++z)
        for (int64_t yy = 0; yy < out_size[1]; ++yy)
          for (int64_t xx = 0; xx < out_size[2]; ++xx) {
            double acc = bv[o];
            for (int64_t c = 0; c < X.c; ++c)
              for (int64_t kz = 0; kz < W.d; ++kz)
                for (int64_t ky = 0; ky < W.h; ++ky)
                  for (int64_t kx = 0; kx < W.w; ++kx) {
                    const int64_t iz = src(0, z + kz * dil[0]), iy = src(1, yy + ky * dil[1]),
                                  ix = src(2, xx + kx * dil[2]);
                    if (iz < 0 || iy < 0 || ix < 0) continue;
                    acc += W.at(o, c, kz, ky, kx) * X.at(n, c, iz, iy, ix);
                  }
            y.push_back(acc);
          }
  Shape shape = {X.n, O};
  const int R = x.dim() - 2;
  for (int a = 3 - R; a < 3; ++a) shape.push_back(out_size[a]);
  return Tensor::from_vector(y, shape);
}

TEST(CausalConv, VideoCausalConv3dIsReplicatePadPlusConv) {
  // CausalConv3d, kernel 3: causal repeats the first frame k - 1 times in front, non-causal
  // repeats first/last (k - 1) / 2 times; space is zero-padded by k / 2 (or reflect-padded).
  const int64_t k = 3, T = 4, H = 5, Wd = 6;
  const Tensor x = random_tensor({1, 3, T, H, Wd}, 60), w = random_tensor({4, 3, k, k, k}, 61);
  const Tensor b = random_tensor({4}, 62);
  for (bool causal : {true, false}) {
    for (bool reflect : {false, true}) {
      const int64_t front = causal ? k - 1 : (k - 1) / 2, back = causal ? 0 : (k - 1) / 2;
      Tensor padded =
          ops::pad(non_contiguous_copy(x), {0, 0, 0, 0, front, back}, PadMode::Replicate);
      Tensor y;
      if (reflect) {
        padded = ops::pad(padded, {1, 1, 1, 1}, PadMode::Reflect);
        y = ops::conv3d(padded, w, b);
      } else {
        y = ops::conv3d(padded, w, b, {1, 1, 1}, {0, k / 2, k / 2});
      }
      const Tensor ref = conv_remap_ref(x, w, b, {T, H, Wd}, {1, 1, 1}, [&](int axis, int64_t i) {
        if (axis == 0) return std::clamp<int64_t>(i - front, 0, T - 1);
        const int64_t n = axis == 1 ? H : Wd;
        int64_t j = i - k / 2;
        if (reflect) return j < 0 ? -j : (j >= n ? 2 * n - 2 - j : j);
        return (j < 0 || j >= n) ? int64_t{-1} : j;
      });
      ASSERT_EQ(y.shape(), ref.shape());
      EXPECT_LE(max_abs_diff(y, ref), 2e-5) << "causal " << causal << " reflect " << reflect;
    }
  }
}

TEST(CausalConv, AudioCausalConv2dIsOneSidedPadPlusConv) {
  // CausalConv2d, causality on height (time): pad (w_pad / 2, w_pad - w_pad / 2, h_pad, 0) where
  // h_pad = (kh - 1) * dh, w_pad = (kw - 1) * dw; then an unpadded conv.
  const Tensor x = random_tensor({2, 3, 7, 5}, 70), w = random_tensor({4, 3, 3, 3}, 71);
  const Tensor b = random_tensor({4}, 72);
  for (const A3 dil : {A3{1, 1, 1}, A3{1, 2, 1}, A3{1, 1, 2}}) {
    const int64_t hp = 2 * dil[1], wp = 2 * dil[2];
    const Tensor y = ops::conv2d(ops::pad(x, {wp / 2, wp - wp / 2, hp, 0}), w, b, {1, 1}, {0, 0},
                                 {dil[1], dil[2]});
    const Tensor ref = conv_remap_ref(x, w, b, {1, 7, 5}, dil, [&](int axis, int64_t i) {
      if (axis == 0) return i;
      const int64_t n = axis == 1 ? 7 : 5, j = i - (axis == 1 ? hp : wp / 2);
      return (j < 0 || j >= n) ? int64_t{-1} : j;
    });
    ASSERT_EQ(y.shape(), ref.shape());
    EXPECT_LE(max_abs_diff(y, ref), 2e-5) << "dilation " << dil[1] << "," << dil[2];
  }
}

}  // namespace
}  // namespace ltx
