#include "pipelines/hdr_ic_lora.h"

#include <algorithm>

#include "core/error.h"
#include "io/safetensors.h"
#include "media/preprocess.h"
#include "ops/shape.h"
#include "pipelines/ic_lora.h"

namespace ltx::pipelines::hdr_ic_lora {

namespace {
constexpr int64_t kAlignment = 64;  // two stages: a x2 upsample of a 32-aligned latent size
}  // namespace

HdrLoraConfig read_hdr_lora_config(const std::string& lora_path, const std::string& flag) {
  const auto file = io::SafetensorsFile::open(lora_path);
  const auto& meta = file->metadata();
  const auto value = [&](const char* key) {
    const auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  const std::string transform = value("hdr_transform");
  LTX_CHECK(!transform.empty() || !value("use_hdr_transform").empty(), flag, " '", lora_path,
            "': the LoRA has no HDR metadata (hdr_transform or use_hdr_transform), so it is not an "
            "HDR IC-LoRA; pass the HDR IC-LoRA file, or use --pipeline ic-lora for other IC-LoRAs");
  HdrLoraConfig config;
  if (!transform.empty() && transform != "true")
    config.transfer =
        media::parse_hdr_transfer(transform, str(flag, " '", lora_path, "': metadata hdr_transform"));
  config.reference_downscale_factor =
      ic_lora::read_lora_factor(lora_path, "reference_downscale_factor", 1);
  return config;
}

HdrResolution align_resolution(int64_t height, int64_t width) {
  LTX_CHECK(height >= 1 && width >= 1, "HDR IC-LoRA: the size must be positive; got ", width, "x",
            height);
  HdrResolution r;
  r.gen_height = (height + kAlignment - 1) / kAlignment * kAlignment;
  r.gen_width = (width + kAlignment - 1) / kAlignment * kAlignment;
  r.crop_height = height;
  r.crop_width = width;
  return r;
}

int64_t generated_frames(int64_t num_frames, bool high_quality) {
  return high_quality ? 2 * num_frames - 1 : num_frames;
}

Tensor reference_video(const Tensor& frames, int64_t height, int64_t width, int64_t num_frames,
                       int64_t downscale, bool high_quality, DType dtype) {
  const char* who = "HDR IC-LoRA reference video";
  LTX_CHECK(frames.defined() && frames.dim() == 4 && frames.size(3) == 3 &&
                frames.dtype() == DType::U8 && frames.size(0) >= 1,
            who, ": expected u8 frames [F, H, W, 3] with F >= 1; got ",
            frames.defined() ? frames.describe() : std::string("an undefined tensor"));
  LTX_CHECK(num_frames >= 1 && downscale >= 1, who, ": num_frames and the downscale factor must "
            "be positive; got ", num_frames, " and ", downscale);
  LTX_CHECK(height % downscale == 0 && width % downscale == 0, who, ": the output size ", height,
            "x", width, " must be divisible by the LoRA's reference_downscale_factor ", downscale);
  const int64_t ref_h = height / downscale, ref_w = width / downscale;
  const int64_t cap = high_quality ? (num_frames + 1) / 2 : num_frames;
  const int64_t n = std::min(cap, frames.size(0));
  // [1, 3, n, h, w] on the 0..255 scale; then / 255, clamp, * 2 - 1 per element in f32.
  const Tensor fitted = media::resize_and_reflect_pad(frames.narrow(0, 0, n), ref_h, ref_w);
  Tensor out = Tensor::empty(fitted.shape(), DType::F32);
  const float* s = fitted.data<float>();
  float* d = out.data<float>();
  for (int64_t i = 0; i < fitted.numel(); ++i)
    d[i] = std::clamp(s[i] / 255.0f, 0.0f, 1.0f) * 2.0f - 1.0f;
  if (high_quality) {
    // repeat_interleave(2) along frames, then the first num_frames.
    std::vector<Tensor> twice;
    for (int64_t f = 0; f < n; ++f) {
      twice.push_back(out.narrow(2, f, 1));
      twice.push_back(out.narrow(2, f, 1));
    }
    out = ops::concat(twice, 2);
    out = out.narrow(2, 0, std::min(num_frames, out.size(2))).contiguous();
  }
  return out.to(dtype);
}

}  // namespace ltx::pipelines::hdr_ic_lora
