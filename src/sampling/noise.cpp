#include "sampling/noise.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "core/parallel.h"

namespace ltx::sampling {
namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Natural log with the Cephes polynomial of torch's AVX2 Box-Muller kernel, one lane at a time.
// The fused multiply-adds sit where the reference build's compiler fused the vector code; the
// order of every other operation follows that kernel, so results are bit-identical to it.
float cephes_logf(float x) {
  const bool invalid = !(x > 0.0f);
  const float min_normal = bits_float(0x00800000u);
  if (x < min_normal) x = min_normal;
  int32_t exponent = static_cast<int32_t>(float_bits(x) >> 23);
  x = bits_float((float_bits(x) & ~0x7f800000u) | float_bits(0.5f));  // mantissa in [0.5, 1)
  exponent -= 0x7f;
  float e = static_cast<float>(exponent) + 1.0f;
  const bool below = x < 0.707106781186547524f;
  const float tmp = below ? x : 0.0f;
  x = x - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  x = x + tmp;
  const float z = x * x;
  static constexpr float kP[] = {-1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f,
                                 1.4249322787E-1f,  -1.6668057665E-1f, 2.0000714765E-1f,
                                 -2.4999993993E-1f, 3.3333331174E-1f};
  float y = 7.0376836292E-2f;
  for (float c : kP) y = std::fma(y, x, c);
  y = y * x;
  y = std::fma(y, z, e * -2.12194440e-4f);
  y = y - z * 0.5f;
  x = x + y;
  x = x + e * 0.693359375f;
  return invalid ? std::numeric_limits<float>::quiet_NaN() : x;
}

// sin and cos with the Cephes range reduction and polynomials of the same kernel.
void cephes_sincosf(float x, float* s, float* c) {
  uint32_t sign_sin = float_bits(x) & 0x80000000u;
  x = bits_float(float_bits(x) & 0x7fffffffu);
  float y = x * 1.27323954473516f;  // 4 / pi
  int32_t j = static_cast<int32_t>(y);
  j = (j + 1) & ~1;
  y = static_cast<float>(j);
  const uint32_t swap_sin = static_cast<uint32_t>(j & 4) << 29;
  const bool sin_poly_first = (j & 2) == 0;
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const uint32_t sign_cos = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  sign_sin ^= swap_sin;
  const float z = x * x;
  float yc = std::fma(2.443315711809948E-005f, z, -1.388731625493765E-003f);
  yc = std::fma(yc, z, 4.166664568298827E-002f);
  yc = yc * z;
  yc = std::fma(yc, z, -(z * 0.5f));
  yc = yc + 1.0f;
  float ys = std::fma(-1.9515295891E-4f, z, 8.3321608736E-3f);
  ys = std::fma(ys, z, -1.6666654611E-1f);
  ys = ys * z;
  ys = std::fma(ys, x, x);
  const float sin_part_b = sin_poly_first ? ys : 0.0f;
  const float sin_part_a = sin_poly_first ? 0.0f : yc;
  ys = ys - sin_part_b;
  yc = yc - sin_part_a;
  *s = bits_float(float_bits(sin_part_a + sin_part_b) ^ sign_sin);
  *c = bits_float(float_bits(yc + ys) ^ sign_cos);
}

// Box-Muller on a block of 16 uniforms: pairs (j, j + 8).
void box_muller16_f32(float* d) {
  const float two_pi = static_cast<float>(2.0f * std::numbers::pi);
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - d[j];
    const float u2 = d[j + 8];
    const float radius = std::sqrt(-2.0f * cephes_logf(u1));
    const float theta = two_pi * u2;
    float s, c;
    cephes_sincosf(theta, &s, &c);
    // The kernel ends with fma(n, std=1, mean=0): the same value, except that -0 becomes +0.
    d[j] = radius * c + 0.0f;
    d[j + 8] = radius * s + 0.0f;
  }
}

void box_muller16_f64(double* d) {
  for (int j = 0; j < 8; ++j) {
    const double u1 = 1.0 - d[j];
    const double u2 = d[j + 8];
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    d[j] = radius * std::cos(theta) + 0.0;  // `* std + mean` with std 1, mean 0
    d[j + 8] = radius * std::sin(theta) + 0.0;
  }
}

template <typename T, typename Fn>
void transform_blocks(T* data, int64_t n, Fn fn) {
  const int64_t blocks = n / 16;
  parallel_for(0, blocks, 256, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) fn(data + b * 16);
  });
}

}  // namespace

void TorchCpuGenerator::manual_seed(int64_t seed) {
  seed_ = seed;
  // torch keeps the seed as uint64 and its MT19937 uses the low 32 bits.
  engine_.seed(static_cast<uint32_t>(static_cast<uint64_t>(seed) & 0xffffffffu));
  cached_normal_.reset();
}

uint64_t TorchCpuGenerator::random64() {
  const uint64_t hi = engine_();
  const uint64_t lo = engine_();
  return (hi << 32) | lo;
}

void TorchCpuGenerator::fill_f32(float* out, int64_t n) {
  constexpr float kScale = 1.0f / 16777216.0f;
  auto uniform = [&] { return static_cast<float>(engine_() & 0xffffffu) * kScale; };
  for (int64_t i = 0; i < n; ++i) out[i] = uniform();
  transform_blocks(out, n, box_muller16_f32);
  if (n % 16 != 0) {
    float* tail = out + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform();
    box_muller16_f32(tail);
  }
}

void TorchCpuGenerator::fill_f64(double* out, int64_t n) {
  constexpr double kScale = 1.0 / 9007199254740992.0;  // 2^-53
  auto uniform = [&] { return static_cast<double>(random64() & ((1ull << 53) - 1)) * kScale; };
  for (int64_t i = 0; i < n; ++i) out[i] = uniform();
  transform_blocks(out, n, box_muller16_f64);
  if (n % 16 != 0) {
    double* tail = out + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform();
    box_muller16_f64(tail);
  }
}

double TorchCpuGenerator::next_normal_double() {
  if (cached_normal_) {
    const double v = *cached_normal_;
    cached_normal_.reset();
    return v;
  }
  constexpr double kScale = 1.0 / 9007199254740992.0;
  const double u1 = static_cast<double>(random64() & ((1ull << 53) - 1)) * kScale;
  const double u2 = static_cast<double>(random64() & ((1ull << 53) - 1)) * kScale;
  const double r = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  cached_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

Tensor TorchCpuGenerator::randn(const Shape& shape, DType dtype) {
  LTX_CHECK(dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16,
            "TorchCpuGenerator::randn: dtype ", dtype_name(dtype),
            " is not supported; use f32, f64 or bf16");
  const int64_t n = shape.numel();
  const DType draw = dtype == DType::F64 ? DType::F64 : DType::F32;
  Tensor out = Tensor::empty(shape, draw);
  if (n >= 16) {
    if (draw == DType::F32) {
      fill_f32(out.data<float>(), n);
    } else {
      fill_f64(out.data<double>(), n);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const double v = next_normal_double();
      if (draw == DType::F32) {
        out.data<float>()[i] = static_cast<float>(v);
      } else {
        out.data<double>()[i] = v;
      }
    }
  }
  return dtype == draw ? out : out.to(dtype);
}

Tensor RecordedNoise::next(const Shape& shape) {
  LTX_CHECK(!queue_.empty(), "RecordedNoise: asked for noise of shape ", shape.str(), " after all ",
            consumed_, " recorded tensors were used; record more draws");
  Tensor t = queue_.front();
  LTX_CHECK(t.shape() == shape, "RecordedNoise: draw #", consumed_, " was recorded with shape ",
            t.shape().str(), " but the sampler asks for ", shape.str(),
            "; the recording does not match this run");
  queue_.pop_front();
  ++consumed_;
  return t;
}

Tensor RecordedNoise::randn(const Shape& shape, DType dtype) { return next(shape).to(dtype); }

Tensor plain_noise(const Shape& shape, DType dtype, NoiseSource& generator) {
  return generator.randn(shape, dtype);
}

Tensor normalize_res2s_noise(const Tensor& noise) {
  Tensor x = noise.to(Device::cpu(), DType::F64).contiguous().clone();
  const int64_t n = x.numel();
  LTX_CHECK(n >= 2 && x.dim() >= 2, "normalize_res2s_noise: need at least 2 dims and 2 elements, got ",
            x.describe());
  double* d = x.data<double>();
  auto normalize = [](double* p, int64_t count) {
    double mean = 0;
    for (int64_t i = 0; i < count; ++i) mean += p[i];
    mean /= static_cast<double>(count);
    double ss = 0;
    for (int64_t i = 0; i < count; ++i) ss += (p[i] - mean) * (p[i] - mean);
    const double stdev = std::sqrt(ss / static_cast<double>(count - 1));
    for (int64_t i = 0; i < count; ++i) p[i] = (p[i] - mean) / stdev;
  };
  normalize(d, n);
  const int64_t inner = x.size(-1) * x.size(-2);
  for (int64_t off = 0; off < n; off += inner) normalize(d + off, inner);
  return x;
}

Tensor res2s_noise(const Shape& shape, DType /*dtype*/, NoiseSource& generator) {
  return normalize_res2s_noise(generator.randn(shape, DType::F64));
}

}  // namespace ltx::sampling
