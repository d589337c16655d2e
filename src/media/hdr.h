#pragma once
// HDR working spaces and the HLG signal, host-side f32 arithmetic on channels-last RGB as the
// reference computes it (ltx_core/hdr.py, ltx_core/color/hlg.py,
// ltx_pipelines/utils/media_io/range_map.py):
//  - the VAE's HDR working space is a log curve mapping scene-linear [0, inf) to [0, 1]: LogC3
//    (ARRI EI 800, the HDR IC-LoRA's) or ACEScct; decoding an HDR latent is the VAE decode in
//    [0, 1] followed by the curve's inverse (to_linear);
//  - the HLG master maps scene-linear Rec.709 / ACEScg to Rec.2020, puts diffuse white (1.0) at
//    signal 0.75, rolls highlights toward 1.0 and applies the ARIB STD-B67 OETF.
// Every function takes any floating dtype on any device and returns f32 on the CPU.
#include <optional>
#include <string>

#include "core/tensor.h"
#include "media/primaries.h"

namespace ltx::media {

enum class HdrTransfer { LogC3, ACEScct };

// "logc3" / "acescct" (the reference's enum values, as LoRA metadata stores them); throws
// ltx::Error naming `who` for any other name.
HdrTransfer parse_hdr_transfer(const std::string& name, const std::string& who);
std::string hdr_transfer_name(HdrTransfer t);          // "logc3", "acescct"
std::string hdr_transfer_display_name(HdrTransfer t);  // "LogC3", "ACEScct" (EXR colorSpace tags)
// The gamut the curve is defined on: LogC3 Rec.709, ACEScct ACEScg.
Primaries hdr_native_primaries(HdrTransfer t);

// One value through the curve, f32 as the reference: compress clamps to [0, inf) first and the
// result to [0, 1]; decompress clamps its input to [0, 1].
float hdr_compress(HdrTransfer t, float linear);
float hdr_decompress(HdrTransfer t, float working);

// The colour spaces of `--hdr` (the reference's HDRColorSpace, ltx_pipelines/utils/media_io/
// color_config.py): what EXR inputs hold and what the HDR outputs are written in. The VAE's
// working space is ACEScct for all three: SRGB_LINEAR (scene-linear Rec.709) and ACESCG
// (scene-linear ACEScg) are compressed by the curve when loaded; ACESCCT inputs already hold its
// codes.
enum class HdrColorSpace { SrgbLinear, ACEScg, ACEScct };
// The reference's names, any case ("srgb_linear", "ACESCG", ...); throws ltx::Error naming `who`
// and the choices for anything else.
HdrColorSpace parse_hdr_color_space(const std::string& name, const std::string& who);
std::string hdr_color_space_name(HdrColorSpace cs);  // "SRGB_LINEAR", "ACESCG", "ACESCCT"
// "{SRGB_LINEAR,ACESCG,ACESCCT}", as the reference's messages list them.
std::string hdr_color_space_choices();
// The gamut of the space's linear values: Rec.709 for SRGB_LINEAR, ACEScg for the other two.
Primaries hdr_source_primaries(HdrColorSpace cs);
// The VAE working-space curve (ACEScct for every space).
constexpr HdrTransfer kHdrWorkingTransfer = HdrTransfer::ACEScct;
// ACESCCT: the values are already working-space codes (no transfer on load or for the EXR output).
bool hdr_is_log_working(HdrColorSpace cs);
// Working-space codes [..., 3] in [0, 1] (the VAE decode of an --hdr run) -> what its EXR frames
// hold: the codes themselves for ACESCCT, else scene-linear in the space's primaries (the
// reference's _encode_hdr_video_outputs).
Tensor hdr_exr_frames(const Tensor& working, HdrColorSpace cs);

// Working-space codes [..., 3] -> scene-linear in `out` primaries, clamped to >= 0
// (HDRTransfer.to_linear / to_hdr_linear).
Tensor hdr_to_linear(const Tensor& working, HdrTransfer t, Primaries out = Primaries::Rec709);
// Scene-linear [..., 3] in `source` primaries -> working-space codes in [0, 1]
// (HDRTransfer.to_working_space).
Tensor hdr_to_working_space(const Tensor& linear, HdrTransfer t,
                            Primaries source = Primaries::Rec709);

// [0, 1] -> [-1, 1] (x * 2 - 1); values outside [0, 1] are an error naming `who`, as the reference
// raises (it does not clamp).
Tensor to_vae_range(const Tensor& x, const std::string& who);
// [-1, 1] -> [0, 1]: clamp((z + 1) / 2, 0, 1).
Tensor from_vae_range(const Tensor& z);

// The HLG master's signal mapping.
struct HlgMapping {
  Matrix3 to_rec2020{};
  float white_x = 0;  // scene-linear value of the diffuse-white signal
  float roll_k = 0;   // highlight roll-off rate above 1.0
};
// The reference's defaults: white at signal 0.75, roll-off white_x / (1 - white_x).
HlgMapping hlg_mapping(Primaries primaries = Primaries::Rec709, double white_signal = 0.75,
                       std::optional<double> rolloff_k = std::nullopt);
// Scene-linear [..., 3] -> HLG signal [..., 3] in [0, 1] (Rec.2020 primaries). NaN and -inf -> 0.
Tensor hlg_signal(const Tensor& linear, const HlgMapping& mapping);

}  // namespace ltx::media
