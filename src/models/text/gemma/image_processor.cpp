#include "models/text/gemma/image_processor.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace ltx::text {

using nlohmann::json;

namespace {

// One axis of a separable fixed-point resampler: for output i, taps at first[i] ..
// first[i] + count[i] - 1 with integer weights w[i * taps + j], the sum rounded by adding
// 2^(precision - 1) and shifting right by `precision`, then clamped to [0, 255].
struct AxisTaps {
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;
  int64_t taps = 0;
  int precision = 0;
};

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// PIL's precompute_coeffs + normalize_coeffs_8bpc for the bilinear filter (support 1).
AxisTaps pil_bilinear_taps(int64_t in, int64_t out) {
  constexpr int kPrecisionBits = 32 - 8 - 2;
  AxisTaps a;
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  a.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.precision = kPrecisionBits;
  a.first.resize(static_cast<size_t>(out));
  a.count.resize(static_cast<size_t>(out));
  a.weights.assign(static_cast<size_t>(out * a.taps), 0);
  std::vector<double> k(static_cast<size_t>(a.taps));
  for (int64_t xx = 0; xx < out; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // C casts truncate toward zero, as PIL's do.
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int64_t xmax = static_cast<int64_t>(center + support + 0.5);
    if (xmax > in) xmax = in;
    xmax -= xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = triangle((static_cast<double>(x + xmin) - center + 0.5) * ss);
      k[static_cast<size_t>(x)] = w;
      ww += w;
    }
    for (int64_t x = 0; x < xmax; ++x) {
      double v = k[static_cast<size_t>(x)];
      if (ww != 0.0) v /= ww;
      const double s = v * static_cast<double>(1 << kPrecisionBits);
      a.weights[static_cast<size_t>(xx * a.taps + x)] =
          static_cast<int32_t>(v < 0 ? -0.5 + s : 0.5 + s);
    }
    a.first[static_cast<size_t>(xx)] = xmin;
    a.count[static_cast<size_t>(xx)] = xmax;
  }
  return a;
}

// torch's uint8 bilinear without antialias (align_corners false): two taps at the source index
// max(scale * (i + 0.5) - 0.5, 0), weights (1 - lambda, lambda) folded onto the valid indices at
// the borders, then int16 weights with the precision the largest weight allows.
AxisTaps torch_bilinear_taps(int64_t in, int64_t out) {
  AxisTaps a;
  a.taps = 2;
  a.first.resize(static_cast<size_t>(out));
  a.count.resize(static_cast<size_t>(out));
  std::vector<double> w(static_cast<size_t>(out * 2), 0.0);
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  double wt_max = 0.0;
  for (int64_t i = 0; i < out; ++i) {
    const double real = std::max(scale * (static_cast<double>(i) + 0.5) - 0.5, 0.0);
    const int64_t index = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    const double lambda = std::min(std::max(real - static_cast<double>(index), 0.0), 1.0);
    const int64_t lo = index, hi = index + 2;  // unbounded [index, index + 2)
    const int64_t first = std::max<int64_t>(lo, 0);
    const int64_t count = std::clamp<int64_t>(std::min(hi, in) - first, 0, 2);
    a.first[static_cast<size_t>(i)] = first;
    a.count[static_cast<size_t>(i)] = count;
    double* wi = w.data() + i * 2;
    int64_t slot = 0;
    for (int64_t j = 0; j < 2; ++j) {
      const double v = triangle(static_cast<double>(j) - lambda);
      if (lo + j <= 0)
        slot = 0;
      else if (lo + j >= in - 1)
        slot = count - 1;
      wi[slot] += v;
      wt_max = std::max(wt_max, wi[slot]);
      ++slot;
    }
  }
  int precision = 0;
  for (precision = 0; precision < 22; ++precision) {
    const int next = static_cast<int>(0.5 + wt_max * static_cast<double>(1 << (precision + 1)));
    if (next >= (1 << 15)) break;
  }
  a.precision = precision;
  a.weights.resize(w.size());
  for (size_t j = 0; j < w.size(); ++j) {
    const double v = w[j] * static_cast<double>(1 << precision);
    a.weights[j] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return a;
}

uint8_t round_shift_clamp(int64_t acc, int precision) {
  const int64_t v = acc >> precision;
  return static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
}

// Columns, then rows (both libraries' order); an axis whose size does not change is skipped.
Tensor resample_separable(const Tensor& image, int64_t out_h, int64_t out_w,
                          AxisTaps (*make)(int64_t, int64_t), const char* who) {
  LTX_CHECK(image.dim() == 3 && image.dtype() == DType::U8,
            who, ": expected a u8 image [H, W, C], got ", image.describe());
  LTX_CHECK(out_h >= 1 && out_w >= 1, who, ": the output size must be positive, got ", out_h, "x",
            out_w);
  const Tensor src = image.to(Device::cpu()).contiguous();
  const int64_t H = src.size(0), W = src.size(1), C = src.size(2);
  LTX_CHECK(H >= 1 && W >= 1 && C >= 1, who, ": the image is empty: ", image.describe());
  std::vector<uint8_t> cur(src.data<uint8_t>(), src.data<uint8_t>() + H * W * C);
  int64_t h = H, w = W;
  if (out_w != W) {
    const AxisTaps t = make(W, out_w);
    std::vector<uint8_t> next(static_cast<size_t>(h * out_w * C));
    const int64_t round = int64_t{1} << (t.precision - 1);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        const int32_t* k = t.weights.data() + x * t.taps;
        const int64_t x0 = t.first[static_cast<size_t>(x)], n = t.count[static_cast<size_t>(x)];
        for (int64_t c = 0; c < C; ++c) {
          int64_t acc = round;
          for (int64_t j = 0; j < n; ++j)
            acc += static_cast<int64_t>(cur[static_cast<size_t>((y * w + x0 + j) * C + c)]) * k[j];
          next[static_cast<size_t>((y * out_w + x) * C + c)] = round_shift_clamp(acc, t.precision);
        }
      }
    cur.swap(next);
    w = out_w;
  }
  if (out_h != H) {
    const AxisTaps t = make(H, out_h);
    std::vector<uint8_t> next(static_cast<size_t>(out_h * w * C));
    const int64_t round = int64_t{1} << (t.precision - 1);
    for (int64_t y = 0; y < out_h; ++y) {
      const int32_t* k = t.weights.data() + y * t.taps;
      const int64_t y0 = t.first[static_cast<size_t>(y)], n = t.count[static_cast<size_t>(y)];
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < C; ++c) {
          int64_t acc = round;
          for (int64_t j = 0; j < n; ++j)
            acc += static_cast<int64_t>(cur[static_cast<size_t>(((y0 + j) * w + x) * C + c)]) * k[j];
          next[static_cast<size_t>((y * w + x) * C + c)] = round_shift_clamp(acc, t.precision);
        }
    }
    cur.swap(next);
    h = out_h;
  }
  return Tensor::from_vector(cur, {h, w, C});
}

std::array<double, 3> triple(const json& j, const char* key, std::array<double, 3> def,
                             const std::string& source) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  const json& v = j.at(key);
  if (v.is_number()) {
    const double x = v.get<double>();
    return {x, x, x};
  }
  LTX_CHECK(v.is_array() && v.size() == 3 && v[0].is_number() && v[1].is_number() &&
                v[2].is_number(),
            source, ": '", key, "' must be a number or 3 numbers, got ", v.dump());
  return {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
}

bool flag(const json& j, const char* key, bool def, const std::string& source) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  LTX_CHECK(j.at(key).is_boolean(), source, ": '", key, "' must be true, false or null, got ",
            j.at(key).dump());
  return j.at(key).get<bool>();
}

}  // namespace

GemmaImageProcessorConfig GemmaImageProcessorConfig::from_json(const json& j,
                                                               const std::string& source) {
  LTX_CHECK(j.is_object(), source, ": the image processor config must be a JSON object");
  GemmaImageProcessorConfig c;
  const std::string type = j.contains("image_processor_type") && j.at("image_processor_type").is_string()
                               ? j.at("image_processor_type").get<std::string>()
                               : "Gemma3ImageProcessor";
  LTX_CHECK(type.rfind("Gemma3ImageProcessor", 0) == 0, source, ": image_processor_type '", type,
            "' is not supported (image-aware enhancement runs Gemma3ImageProcessor)");
  if (j.contains("size") && !j.at("size").is_null()) {
    const json& s = j.at("size");
    LTX_CHECK(s.is_object() && s.contains("height") && s.contains("width") &&
                  s.at("height").is_number_integer() && s.at("width").is_number_integer(),
              source, ": 'size' must be {\"height\": N, \"width\": N}, got ", s.dump());
    c.height = s.at("height").get<int64_t>();
    c.width = s.at("width").get<int64_t>();
    LTX_CHECK(c.height > 0 && c.width > 0, source, ": 'size' must be positive, got ", s.dump());
  }
  if (j.contains("resample") && !j.at("resample").is_null()) {
    LTX_CHECK(j.at("resample").is_number_integer(), source,
              ": 'resample' must be a PIL filter number, got ", j.at("resample").dump());
    c.resample = j.at("resample").get<int>();
  }
  LTX_CHECK(c.resample == 2, source, ": resample ", c.resample,
            " is not supported; image-aware enhancement implements PIL's bilinear filter (2), "
            "which Gemma 3's preprocessor_config.json uses");
  c.do_resize = flag(j, "do_resize", true, source);
  c.do_rescale = flag(j, "do_rescale", true, source);
  c.do_normalize = flag(j, "do_normalize", true, source);
  LTX_CHECK(!flag(j, "do_pan_and_scan", false, source), source,
            ": do_pan_and_scan is not supported (the reference's enhancement does not crop the "
            "image into pan-and-scan views); set it to null or false");
  if (j.contains("rescale_factor") && !j.at("rescale_factor").is_null()) {
    LTX_CHECK(j.at("rescale_factor").is_number(), source, ": 'rescale_factor' must be a number");
    c.rescale_factor = j.at("rescale_factor").get<double>();
  }
  c.image_mean = triple(j, "image_mean", c.image_mean, source);
  c.image_std = triple(j, "image_std", c.image_std, source);
  for (const double s : c.image_std)
    LTX_CHECK(s != 0.0, source, ": 'image_std' must not contain 0");
  return c;
}

Tensor resize_u8_torch_bilinear(const Tensor& image, int64_t out_h, int64_t out_w) {
  return resample_separable(image, out_h, out_w, torch_bilinear_taps, "resize (torch bilinear, u8)");
}

Tensor resize_u8_pil_bilinear(const Tensor& image, int64_t out_h, int64_t out_w) {
  return resample_separable(image, out_h, out_w, pil_bilinear_taps, "resize (PIL bilinear)");
}

Tensor resize_aspect_ratio_preserving_u8(const Tensor& image, int64_t long_side) {
  LTX_CHECK(image.dim() == 3 && image.size(2) == 3 && image.dtype() == DType::U8,
            "image-aware enhancement: expected a u8 RGB image [H, W, 3], got ", image.describe());
  LTX_CHECK(long_side > 0, "resize_aspect_ratio_preserving: the long side must be positive");
  const int64_t H = image.size(0), W = image.size(1);
  const double s = static_cast<double>(long_side) / static_cast<double>(std::max(H, W));
  const auto target_h = static_cast<int64_t>(static_cast<double>(H) * s);
  const auto target_w = static_cast<int64_t>(static_cast<double>(W) * s);
  LTX_CHECK(target_h >= 1 && target_w >= 1, "image-aware enhancement: the image ", W, "x", H,
            " is too thin to scale to a long side of ", long_side);
  // resize_and_center_crop: scale to cover, then crop the middle.
  const double cover = std::max(static_cast<double>(target_h) / static_cast<double>(H),
                                static_cast<double>(target_w) / static_cast<double>(W));
  const auto new_h = static_cast<int64_t>(std::ceil(static_cast<double>(H) * cover));
  const auto new_w = static_cast<int64_t>(std::ceil(static_cast<double>(W) * cover));
  const Tensor resized = resize_u8_torch_bilinear(image, new_h, new_w);
  const int64_t top = (new_h - target_h) / 2, left = (new_w - target_w) / 2;
  return resized.narrow(0, top, target_h).narrow(1, left, target_w).contiguous();
}

Tensor gemma3_pixel_values(const Tensor& image, const GemmaImageProcessorConfig& config) {
  LTX_CHECK(image.dim() == 3 && image.size(2) == 3 && image.dtype() == DType::U8,
            "Gemma3ImageProcessor: expected a u8 RGB image [H, W, 3], got ", image.describe());
  const Tensor sized = config.do_resize
                           ? resize_u8_pil_bilinear(image, config.height, config.width)
                           : image.to(Device::cpu()).contiguous();
  const int64_t H = sized.size(0), W = sized.size(1);
  const uint8_t* p = sized.data<uint8_t>();
  Tensor out = Tensor::empty({1, 3, H, W}, DType::F32);
  float* o = out.data<float>();
  for (int64_t c = 0; c < 3; ++c) {
    // numpy: (u8 as float64 * factor) stored as float32; then (x - mean) / std in float32.
    const auto mean = static_cast<float>(config.image_mean[static_cast<size_t>(c)]);
    const auto stdv = static_cast<float>(config.image_std[static_cast<size_t>(c)]);
    for (int64_t i = 0; i < H * W; ++i) {
      float x = static_cast<float>(p[i * 3 + c]);
      if (config.do_rescale)
        x = static_cast<float>(static_cast<double>(p[i * 3 + c]) * config.rescale_factor);
      if (config.do_normalize) x = (x - mean) / stdv;
      o[c * H * W + i] = x;
    }
  }
  return out;
}

}  // namespace ltx::text
