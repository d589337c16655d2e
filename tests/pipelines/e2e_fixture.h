#pragma once
// The tiny LTX-2.3 model set of the end-to-end parity tests (tests/fixtures/e2e/, made by
// tools/parity/gen_e2e.py with the reference's pipelines' io files beside it): the models, the
// shared text contexts and the fixtures' request, with the comparisons of support/e2e_compare.h
// (relative L2, PSNR of decoded frames). Shared by the pipelines' e2e tests.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype_bits.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_decoder.h"
#include "models/video_vae/video_vae.h"
#include "ops/shape.h"
#include "pipelines/pipeline.h"
#include "support/e2e_compare.h"
#include "support/test_support.h"

namespace ltx::e2e_fixture {

namespace mt = models::transformer;
using pipelines::PipelineKind;

constexpr double kLatentTol = 1e-4;  // issue 6 item 7: final latents relative L2

// Changes a checkpoint's transformer before it is built (e.g. the DFR case's keyframe embedding).
using ModelEdit = std::function<void(mt::LTXModelConfig&, io::WeightMap&)>;

// The transformer with a LoRA fused the reference's way (bf16 stored weights):
// W' = bf16(W + bf16((B * strength) @ A)); no LoRA when `lora` is empty. Test-local: the LoRA
// loader lives elsewhere.
inline mt::LTXModel load_with_lora(const std::string& ckpt, const std::string& lora, double strength,
                            const ModelEdit& edit = {}) {
  auto file = io::SafetensorsFile::open(ckpt);
  mt::LTXModelConfig config = mt::LTXModelConfig::from_file(*file, mt::LTXModelType::AudioVideo);
  io::WeightMap w({file}, mt::transformer_key_map(mt::LTXModelType::AudioVideo));
  if (edit) edit(config, w);
  if (lora.empty()) return mt::LTXModel::load(w, config);
  io::WeightMap l = io::WeightMap::open({lora});
  const std::string pre = "diffusion_model.", suf = ".lora_A.weight";
  for (const std::string& name : l.names()) {
    if (name.size() < suf.size() || name.compare(name.size() - suf.size(), suf.size(), suf) != 0) continue;
    const std::string module = name.substr(pre.size(), name.size() - pre.size() - suf.size());
    const Tensor a = l.take_any_shape(name, DType::F32);
    const Tensor b = l.take_any_shape(pre + module + ".lora_B.weight", DType::F32);
    const Tensor base = file->tensor("model.diffusion_model." + module + ".weight").to(DType::F32);
    const int64_t out = b.size(0), rank = b.size(1), in = a.size(1);
    const std::vector<float> av = a.to_float_vector(), bv = b.to_float_vector(), wv = base.to_float_vector();
    std::vector<float> fused(wv.size());
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double d = 0;
        for (int64_t r = 0; r < rank; ++r) d += double(bv[o * rank + r] * float(strength)) * av[r * in + i];
        const float delta = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(static_cast<float>(d)));
        fused[o * in + i] = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(wv[o * in + i] + delta));
      }
    w.add(module + ".weight", Tensor::from_vector(fused, base.shape()));
  }
  return mt::LTXModel::load(w, config);
}

struct Models {
  mt::LTXModel transformer = mt::LTXModel::from_files({e2e("ltx23_tiny.safetensors")}, mt::LTXModelType::AudioVideo);
  mt::LTXModel transformer_lora =
      load_with_lora(e2e("ltx23_tiny.safetensors"), e2e("ltx23_tiny_distilled_lora.safetensors"), 1.0);
  models::video_vae::VideoEncoder encoder = models::video_vae::VideoEncoder::from_file(e2e("ltx23_tiny.safetensors"));
  models::upsampler::LatentUpsampler upsampler =
      models::upsampler::LatentUpsampler::from_file(e2e("ltx23_tiny_upsampler_x2.safetensors"));
  pipelines::TextContexts contexts;

  Models() {
    auto text = io::SafetensorsFile::open(test::fixture("e2e_text.io.safetensors"));
    contexts.video_positive = text->tensor("out.text.positive.video_encoding").contiguous();
    contexts.audio_positive = text->tensor("out.text.positive.audio_encoding").contiguous();
    contexts.video_negative = text->tensor("out.text.negative.video_encoding").contiguous();
    contexts.audio_negative = text->tensor("out.text.negative.audio_encoding").contiguous();
  }
  pipelines::Components components(bool lora_in_stage_2 = false) const {
    pipelines::Components c;
    c.transformer = &transformer;
    c.video_encoder = &encoder;
    c.spatial_upsampler = &upsampler;
    c.model_version = "2.3.0";
    if (lora_in_stage_2)
      c.stage_transformer = [this](pipelines::Stage s) -> const mt::LTXModel& {
        return s == pipelines::Stage::Two ? transformer_lora : transformer;
      };
    return c;
  }
};

inline const Models& models_() {
  static const Models m;
  return m;
}

// The e2e fixtures' request (DEVELOPERS.md "End-to-end parity").
inline pipelines::GenerationRequest e2e_request(PipelineKind kind) {
  pipelines::GenerationRequest r = pipelines::default_request(kind, "2.3.0");
  r.seed = 42;
  r.num_frames = 9;
  r.frame_rate = 24.0;
  r.height = kind == PipelineKind::OneStage ? 64 : 128;
  r.width = 64;
  r.num_inference_steps = 4;
  r.video_guider.stg_blocks = {1};
  r.audio_guider.stg_blocks = {1};
  r.dtype = DType::F32;
  return r;
}

}  // namespace ltx::e2e_fixture
