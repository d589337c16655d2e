#pragma once
// Linear RGB gamuts of HDR frames and the conversions between them (the reference's
// ltx_core/color/primaries.py): Rec.709 / sRGB (D65) and ACEScg (AP1, D60), and each one's map to
// Rec.2020 for the HLG master. Matrices as the reference holds them (f32).
#include <array>
#include <string>

namespace ltx::media {

enum class Primaries { Rec709, ACEScg };

std::string primaries_name(Primaries p);  // "rec709", "acescg" (the reference's values)

using Matrix3 = std::array<std::array<float, 3>, 3>;
// out = M @ in for a linear RGB pixel; identity when from == to.
Matrix3 primaries_matrix(Primaries from, Primaries to);
Matrix3 primaries_to_rec2020(Primaries from);

}  // namespace ltx::media
