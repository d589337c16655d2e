#include "media/hdr.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace ltx::media {
namespace {

// ARRI LogC3 (EI 800).
constexpr float kLogcA = 5.555556f, kLogcB = 0.052272f, kLogcC = 0.247190f, kLogcD = 0.385537f,
                kLogcE = 5.367655f, kLogcF = 0.092809f, kLogcCut = 0.010591f;
// The reference computes the decode threshold E * cut + F in f64 and compares in f32.
const float kLogcCutLog = static_cast<float>(5.367655 * 0.010591 + 0.092809);
// ACEScct (S-2016-001).
constexpr float kCctALin = static_cast<float>(10.5402377416545);
constexpr float kCctBLin = static_cast<float>(0.0729055341958355);
constexpr float kCctXBrk = 0.0078125f;
constexpr float kCctYBrk = static_cast<float>(0.155251141552511);
constexpr float kCctLogM = 17.52f, kCctLogB = 9.72f;

// ARIB STD-B67 (HLG) OETF.
constexpr double kHlgA = 0.17883277, kHlgB = 0.28466892, kHlgC = 0.55991073;

// [..., 3] f32 contiguous on the host.
Tensor rgb_f32(const Tensor& t, const char* who) {
  LTX_CHECK(t.defined() && t.dim() >= 1 && t.size(-1) == 3 && dtype_is_floating(t.dtype()), who,
            ": expected floating RGB values [..., 3]; got ",
            t.defined() ? t.describe() : std::string("an undefined tensor"));
  return t.to(Device::cpu(), DType::F32).contiguous();
}

// out[d] = sum_c m[d][c] * in[c] (the reference's einsum / matmul in f32).
inline void apply(const Matrix3& m, const float* in, float* out) {
  float r[3];
  for (int d = 0; d < 3; ++d) r[d] = m[d][0] * in[0] + m[d][1] * in[1] + m[d][2] * in[2];
  out[0] = r[0];
  out[1] = r[1];
  out[2] = r[2];
}

bool is_identity(const Matrix3& m) {
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      if (m[r][c] != (r == c ? 1.f : 0.f)) return false;
  return true;
}

template <typename Fn>
Tensor map_pixels(const Tensor& in, Fn fn) {
  Tensor out = Tensor::empty(in.shape(), DType::F32);
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  parallel_for(0, in.numel() / 3, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(src + 3 * i, dst + 3 * i);
  });
  return out;
}

}  // namespace

HdrTransfer parse_hdr_transfer(const std::string& name, const std::string& who) {
  if (name == "logc3") return HdrTransfer::LogC3;
  if (name == "acescct") return HdrTransfer::ACEScct;
  fail(who, ": unknown HDR transfer '", name, "'; expected logc3 or acescct");
}

std::string hdr_transfer_name(HdrTransfer t) {
  return t == HdrTransfer::LogC3 ? "logc3" : "acescct";
}
std::string hdr_transfer_display_name(HdrTransfer t) {
  return t == HdrTransfer::LogC3 ? "LogC3" : "ACEScct";
}
Primaries hdr_native_primaries(HdrTransfer t) {
  return t == HdrTransfer::LogC3 ? Primaries::Rec709 : Primaries::ACEScg;
}

float hdr_compress(HdrTransfer t, float linear) {
  const float x = std::max(linear, 0.0f);
  float y = 0;
  if (t == HdrTransfer::LogC3) {
    y = x >= kLogcCut ? kLogcC * std::log10(kLogcA * x + kLogcB) + kLogcD : kLogcE * x + kLogcF;
  } else {
    y = x > kCctXBrk ? (std::log2(std::max(x, 1e-12f)) + kCctLogB) / kCctLogM
                     : kCctALin * x + kCctBLin;
  }
  return std::clamp(y, 0.0f, 1.0f);
}

float hdr_decompress(HdrTransfer t, float working) {
  const float v = std::clamp(working, 0.0f, 1.0f);
  if (t == HdrTransfer::LogC3)
    return v >= kLogcCutLog ? (std::pow(10.0f, (v - kLogcD) / kLogcC) - kLogcB) / kLogcA
                            : (v - kLogcF) / kLogcE;
  return v > kCctYBrk ? std::pow(2.0f, v * kCctLogM - kCctLogB) : (v - kCctBLin) / kCctALin;
}

Tensor hdr_to_linear(const Tensor& working, HdrTransfer t, Primaries out) {
  const Tensor in = rgb_f32(working, "hdr_to_linear");
  const Matrix3 m = primaries_matrix(hdr_native_primaries(t), out);
  const bool same = is_identity(m);
  return map_pixels(in, [&](const float* p, float* o) {
    float lin[3] = {hdr_decompress(t, p[0]), hdr_decompress(t, p[1]), hdr_decompress(t, p[2])};
    if (!same) apply(m, lin, lin);
    for (int c = 0; c < 3; ++c) o[c] = std::max(lin[c], 0.0f);
  });
}

Tensor hdr_to_working_space(const Tensor& linear, HdrTransfer t, Primaries source) {
  const Tensor in = rgb_f32(linear, "hdr_to_working_space");
  const Matrix3 m = primaries_matrix(source, hdr_native_primaries(t));
  const bool same = is_identity(m);
  return map_pixels(in, [&](const float* p, float* o) {
    float lin[3] = {p[0], p[1], p[2]};
    if (!same) apply(m, lin, lin);
    for (int c = 0; c < 3; ++c) o[c] = hdr_compress(t, std::max(lin[c], 0.0f));
  });
}

HdrColorSpace parse_hdr_color_space(const std::string& name, const std::string& who) {
  std::string key = name;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const HdrColorSpace cs : {HdrColorSpace::SrgbLinear, HdrColorSpace::ACEScg, HdrColorSpace::ACEScct})
    if (key == hdr_color_space_name(cs)) return cs;
  fail("invalid ", who, " '", name, "'; choose from SRGB_LINEAR, ACESCG, ACESCCT");
}

std::string hdr_color_space_name(HdrColorSpace cs) {
  switch (cs) {
    case HdrColorSpace::SrgbLinear: return "SRGB_LINEAR";
    case HdrColorSpace::ACEScg: return "ACESCG";
    case HdrColorSpace::ACEScct: return "ACESCCT";
  }
  fail("hdr_color_space_name: unknown colour space");
}

std::string hdr_color_space_choices() { return "{SRGB_LINEAR,ACESCG,ACESCCT}"; }

Primaries hdr_source_primaries(HdrColorSpace cs) {
  return cs == HdrColorSpace::SrgbLinear ? Primaries::Rec709 : Primaries::ACEScg;
}

bool hdr_is_log_working(HdrColorSpace cs) { return cs == HdrColorSpace::ACEScct; }

Tensor hdr_exr_frames(const Tensor& working, HdrColorSpace cs) {
  if (hdr_is_log_working(cs)) return rgb_f32(working, "hdr_exr_frames");
  return hdr_to_linear(working, kHdrWorkingTransfer, hdr_source_primaries(cs));
}

Tensor to_vae_range(const Tensor& x, const std::string& who) {
  LTX_CHECK(x.defined() && dtype_is_floating(x.dtype()), who,
            ": expected floating values in [0, 1]; got ",
            x.defined() ? x.describe() : std::string("an undefined tensor"));
  const Tensor in = x.to(Device::cpu(), DType::F32).contiguous();
  Tensor out = Tensor::empty(in.shape(), DType::F32);
  const float* s = in.data<float>();
  float* d = out.data<float>();
  float lo = 0, hi = 1;
  for (int64_t i = 0; i < in.numel(); ++i) {
    if (!(s[i] >= 0.0f && s[i] <= 1.0f)) {
      lo = std::min(lo, s[i]);
      hi = std::max(hi, s[i]);
      if (std::isnan(s[i])) fail(who, ": values must be in [0, 1]; found NaN");
    }
    d[i] = s[i] * 2.0f - 1.0f;
  }
  LTX_CHECK(lo >= 0.0f && hi <= 1.0f, who, ": values must be in [0, 1]; got min ", lo, ", max ",
            hi);
  return out;
}

Tensor from_vae_range(const Tensor& z) {
  LTX_CHECK(z.defined() && dtype_is_floating(z.dtype()),
            "from_vae_range: expected floating values");
  const Tensor in = z.to(Device::cpu(), DType::F32).contiguous();
  Tensor out = Tensor::empty(in.shape(), DType::F32);
  const float* s = in.data<float>();
  float* d = out.data<float>();
  for (int64_t i = 0; i < in.numel(); ++i) d[i] = std::clamp((s[i] + 1.0f) / 2.0f, 0.0f, 1.0f);
  return out;
}

HlgMapping hlg_mapping(Primaries primaries, double white_signal, std::optional<double> rolloff_k) {
  LTX_CHECK(white_signal > 0.0 && white_signal < 1.0,
            "hlg_mapping: the white signal must be in (0, 1); got ", white_signal);
  // The inverse OETF of the white signal, in f64 as the reference's scalar helper.
  const double white_x = white_signal <= 0.5
                             ? white_signal * white_signal / 3.0
                             : (std::exp((white_signal - kHlgC) / kHlgA) + kHlgB) / 12.0;
  HlgMapping m;
  m.to_rec2020 = primaries_to_rec2020(primaries);
  m.white_x = static_cast<float>(white_x);
  m.roll_k = static_cast<float>(rolloff_k.value_or(white_x / (1.0 - white_x)));
  return m;
}

Tensor hlg_signal(const Tensor& linear, const HlgMapping& mapping) {
  const Tensor in = rgb_f32(linear, "hlg_signal");
  const float one_minus_white = static_cast<float>(1.0 - static_cast<double>(mapping.white_x));
  const float neg_k = -mapping.roll_k;
  const float a = static_cast<float>(kHlgA), b = static_cast<float>(kHlgB),
              c = static_cast<float>(kHlgC);
  const float twelfth = static_cast<float>(1.0 / 12.0);
  return map_pixels(in, [&](const float* p, float* o) {
    float lin[3];
    apply(mapping.to_rec2020, p, lin);
    for (int ch = 0; ch < 3; ++ch) {
      float l = std::max(lin[ch], 0.0f);  // clamp(min=0) keeps NaN; nan_to_num maps it to 0
      if (std::isnan(l)) l = 0.0f;
      const float x =
          l <= 1.0f ? l * mapping.white_x : 1.0f - one_minus_white * std::exp(neg_k * (l - 1.0f));
      const float s = x <= twelfth ? std::sqrt(std::max(3.0f * x, 0.0f))
                                   : a * std::log(std::max(12.0f * x - b, 1e-12f)) + c;
      o[ch] = std::clamp(s, 0.0f, 1.0f);
    }
  });
}

}  // namespace ltx::media
